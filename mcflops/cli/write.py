"""Every file mcflops writes, and the only place that writes them.

A run's folder is built in a temporary folder that is swapped into place (never half-written); a
single file (a command's JSON, a figure, the shipped fit, a re-rendered report) is written beside its
target and renamed. What a run folder holds is decided here, before anything is written: a file whose
library is missing is left out, and the note that says so goes into summary.json.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from mcflops.errors import SpecError

WRITTEN: list[str] = []  # folders swapped into place by this process (for the Ctrl-C message)
REPORT_MARKER = "summary.json"  # a report that `run` may replace holds this, written by mcflops
REPORT_KEYS = frozenset({"name", "seed", "samples", "spec_hash", "version"})  # in every summary.json written
REPORT_FILES = frozenset({REPORT_MARKER, "spec.resolved.yaml", "report.md", "report.html", "posterior.nc"})
NETCDF_MISSING = "posterior.nc not written: install h5netcdf (pip install 'mcflops[full]')"
FIGURES_MISSING = "posterior figures not drawn: install matplotlib (pip install 'mcflops[full]')"

Writer = Callable[[Path], Any]  # writes its file(s) into the folder it is given


def check_out(out: Path) -> None:
    """Refuse an output folder that `run` must not replace: a file, or a folder that is not a report.

    `run` replaces its output folder as a whole, so `--out .` or `--out ~/data` would delete what is
    there: only an empty folder or a previous report may be replaced (``is_report``).
    """
    where = str(out)
    if out.is_symlink():
        raise SpecError("is a symbolic link; give the folder itself", path=where, field="--out")
    if out.exists() and not out.is_dir():
        raise SpecError("exists and is not a folder; give a new folder or a previous report folder",
                        path=where, field="--out")
    if out.is_dir() and any(out.iterdir()):
        why = not_a_report(out)
        if why:
            raise SpecError(f"exists and is not an mcflops report ({why}); it would be replaced as a whole, so "
                            "give a new folder", path=where, field="--out")
    parent = out.resolve().parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise SpecError(f"{p} is not a folder", path=where, field="--out")
            break


def not_a_report(folder: Path) -> str | None:
    """Why ``folder`` is not a report `run` wrote (None when it is one): its summary.json must be a JSON
    object with mcflops' own keys, and it must hold nothing but the files a report holds (plain files,
    no subfolders), so that replacing it loses nothing else."""
    try:
        with (folder / REPORT_MARKER).open("rb") as f:
            data = json.loads(f.read(1 << 26))
    except FileNotFoundError:
        return f"no {REPORT_MARKER}"
    except (OSError, ValueError, RecursionError):
        return f"its {REPORT_MARKER} is not mcflops' JSON"
    if not isinstance(data, dict) or not REPORT_KEYS <= data.keys():
        return f"its {REPORT_MARKER} lacks mcflops' keys {', '.join(sorted(REPORT_KEYS))}"
    for p in sorted(folder.iterdir()):
        if p.is_symlink() or not p.is_file() or not (p.name in REPORT_FILES or p.suffix == ".png"):
            return f"it holds {p.name!r}, which a report does not"
    return None


def run_files(res) -> tuple[list[Writer], list[str]]:
    """What a run folder holds beyond summary.json, spec.resolved.yaml and the report: posterior.nc and
    the posterior figures when there is a posterior, the sensitivity figures when there is an analysis.
    Returns the writers and a note for each file left out because its library is missing (the
    sensitivity figures go silently: the tables in summary.json and the report carry the same numbers)."""
    from mcflops.cli import figures
    from mcflops.inference import netcdf

    writers: list[Writer] = []
    notes: list[str] = []
    digest = res.spec.digest()
    if res.posterior:
        if netcdf.available():
            writers.append(lambda folder: netcdf.write_netcdf(res, folder / "posterior.nc"))
        else:
            notes.append(NETCDF_MISSING)
        if figures.can_draw():
            writers.append(lambda folder: figures.draw(folder, figures.posterior(res), digest))
        else:
            notes.append(FIGURES_MISSING)
    if res.sensitivity and figures.can_draw():
        writers.append(lambda folder: figures.draw(folder, figures.sensitivity(res.sensitivity), digest))
    if res.plan and figures.can_draw():  # plan.png, the planning section's curve (with a deadline)
        writers.append(lambda folder: figures.draw(folder, figures.plan(res.plan), digest))
    return writers, notes


def write_run(out: Path, res, data: dict[str, Any]) -> None:
    """Write the run's files into a temporary folder, then swap it into place: never half-written.

    ``data`` is summary.json's content; the notes of files left out (``run_files``) are added to it."""
    from mcflops.spec import resolved_dict

    check_out(out)
    writers, notes = run_files(res)
    if notes:
        data["notes"] = [*data.get("notes", []), *notes]
    out = out.resolve()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 would outlive the swap: a report is shared like any folder
    except OSError as e:
        raise SpecError(f"cannot write here: {e.strerror}", path=str(out), field="--out") from None
    try:
        (tmp / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
        _write_yaml(tmp / "spec.resolved.yaml", resolved_dict(res.spec), provenance=data)
        for write in writers:
            write(tmp)
        _write_report(tmp, res, data, out)  # last: it embeds the figures written before it
        swap(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SpecError(f"cannot write {e.filename or 'the report'}: {e.strerror}", path=str(out),
                        field="--out") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_report(folder: Path, res, data: dict[str, Any], out: Path) -> None:
    """The headline figure (when matplotlib is there), then report.md and report.html from the folder's files."""
    from mcflops.cli import figures
    from mcflops.report import render

    if figures.can_draw():  # without matplotlib the report goes without its headline figure
        figures.draw(folder, figures.headline(res, data), res.spec.digest())
    for name, text in render(folder, label=label(out)).items():
        (folder / name).write_text(text, encoding="utf-8")


def write_outputs(out: Path, name: str, data: Mapping[str, Any], figures: Mapping[str, Writer],
                  where: str | None = None) -> None:
    """The --out files of sensitivity, plan, compare and calibrate: ``name`` (``data`` as JSON), then the
    figures (left out without matplotlib); the folder is created if missing and each file replaced
    atomically. An error names ``where`` (default: the file that failed, else the folder)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        replace_text(out / name, json.dumps(data, indent=2) + "\n")
        for fig, draw in figures.items():
            try:
                replace_file(out / fig, draw)
            except ImportError:  # no matplotlib: JSON only
                break
    except OSError as e:
        raise _cannot_write(e, where or str(e.filename or out)) from None


def write_compare(out: Path, data: Mapping[str, Any], figures: Mapping[str, Writer]) -> None:
    """`compare --out`: compare.json and its figure (``write_outputs``), then report.md and report.html
    rendered from them (report.comparison), each replaced atomically."""
    from mcflops.report.comparison import render

    write_outputs(out, "compare.json", data, figures, where=str(out))
    for name, text in render(out).items():
        try:
            replace_text(out / name, text)
        except OSError as e:
            raise _cannot_write(e, str(out / name)) from None


def write_fit(path: Path, fit: Mapping[str, Any], where: Path) -> None:
    """The calibration fit as compact JSON (`calibrate --write`), replaced atomically."""
    try:
        replace_text(path, json.dumps(fit, separators=(",", ":")) + "\n")
    except OSError as e:
        raise _cannot_write(e, str(e.filename or where)) from None


def _cannot_write(e: OSError, where: str) -> SpecError:
    return SpecError(f"cannot write: {e.strerror}", path=where, field="--out")


def rerender_report(folder: Path, where: str) -> None:
    """report.md and report.html of a run folder again, from its files (each replaced atomically)."""
    from mcflops.report import render

    for name, text in render(folder, label=label(folder)).items():
        try:
            replace_text(folder / name, text)
        except OSError as e:
            raise SpecError(f"cannot write {name}: {e.strerror}", path=where) from None


def replace_file(path: Path, write: Writer) -> None:
    """Write via a temporary file in the same folder, then rename: a file is never half-written.

    The temporary file is created exclusively under a random name (never a name someone could have
    planted a symbolic link at), with the permissions the umask gives a new file."""
    tmp = _exclusive_file(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def replace_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) into ``path`` via an exclusively created temporary file written through its own
    descriptor (the path is not opened again), then renamed into place."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _exclusive_file(path: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)  # O_CREAT | O_EXCL
    try:
        os.fchmod(fd, _new_file_mode())
    finally:
        os.close(fd)
    return Path(name)


def _new_file_mode() -> int:
    return 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def label(folder: Path) -> str:
    """How the report names its folder in the regenerate command: relative to the working folder if inside it."""
    p = Path(folder).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def swap(tmp: Path, out: Path) -> None:
    """Put the finished folder in place with two renames, Ctrl-C held off until both are done.

    The previous report is first moved into a folder created exclusively for it (a random name, so
    nothing planted beside the report can stand in its way or receive it). If the second rename fails
    the previous report is moved back: the folder is always either the old report or the new one,
    never a mixture.
    """
    holder = None
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
    try:
        if out.exists():
            holder = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, holder / out.name)
        try:
            os.replace(tmp, out)
        except BaseException:
            if holder is not None:
                os.replace(holder / out.name, out)
                holder.rmdir()
            raise
        WRITTEN.append(str(out))
        if holder is not None:
            shutil.rmtree(holder, ignore_errors=True)
    finally:
        if blocked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _write_yaml(path: Path, data: dict, provenance: dict | None = None) -> None:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")  # keeps the file's key order
    with path.open("w") as f:
        f.write("# resolved prior file: every default filled in; `mcflops run` on it repeats the run exactly\n")
        if provenance:  # what made the run (the same fields as summary.json)
            f.write("# " + ", ".join(f"{k} {provenance.get(k)}" for k in ("version", "seed", "samples", "device",
                                                                         "spec_hash")) + "\n")
        y.dump(data, f)
