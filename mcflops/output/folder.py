"""A run folder (summary.json, spec.resolved.yaml, posterior.nc, the figures, report.md and report.html)
and the JSON-and-figures outputs of plan, compare, sensitivity and calibrate.

What a run folder holds is decided here, before anything is written: a file whose library is missing
is left out, and the note that says so goes into summary.json. The folder is built beside its target
under the folder's lock and swapped into place (files.swap): never half-written, never a mixture.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

from mcflops import reading
from mcflops.errors import SpecError
from mcflops.output import files, lock
from mcflops.output.files import Writer
from mcflops.output.record import RunRecord

REPORT_MARKER = "summary.json"  # a report that `run` may replace holds this, written by mcflops
REPORT_KEYS = frozenset({"name", "seed", "samples", "spec_hash", "version"})  # in every summary.json written
REPORT_FILES = frozenset({REPORT_MARKER, "spec.resolved.yaml", "report.md", "report.html", "posterior.nc"})
NETCDF_MISSING = "posterior.nc not written: install h5netcdf (pip install 'mcflops[full]')"
FIGURES_MISSING = "posterior figures not drawn: install matplotlib (pip install 'mcflops[full]')"

Check = Callable[[], None] | None  # raises to stop between stages (the CLI's signal flag)


def check_out(out: Path, field: str | None = "--out") -> None:
    """Refuse an output folder that `run` must not replace: a file, or a folder that is not a report.

    `run` replaces its output folder as a whole, so `--out .` or `--out ~/data` would delete what is
    there: only an empty folder or a previous report may be replaced (``not_a_report``).
    """
    where = str(out)
    if out.is_symlink():
        raise SpecError("is a symbolic link; give the folder itself", path=where, field=field)
    if out.exists() and not out.is_dir():
        raise SpecError("exists and is not a folder; give a new folder or a previous report folder",
                        path=where, field=field)
    if out.is_dir() and any(out.iterdir()):
        why = not_a_report(out)
        if why:
            raise SpecError(f"exists and is not an mcflops report ({why}); it would be replaced as a whole, so "
                            "give a new folder", path=where, field=field)
    parent = out.resolve().parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise SpecError(f"{p} is not a folder", path=where, field=field)
            break


def not_a_report(folder: Path) -> str | None:
    """Why ``folder`` is not a report `run` wrote (None when it is one): its summary.json must be a JSON
    object with mcflops' own keys, and it must hold nothing but the files a report holds (plain files,
    no subfolders), so that replacing it loses nothing else."""
    if not (folder / REPORT_MARKER).exists():
        return f"no {REPORT_MARKER}"
    try:
        data = reading.read_summary(folder)
    except SpecError:
        return f"its {REPORT_MARKER} is not mcflops' JSON"
    if not REPORT_KEYS <= data.keys():
        return f"its {REPORT_MARKER} lacks mcflops' keys {', '.join(sorted(REPORT_KEYS))}"
    for p in sorted(folder.iterdir()):
        if files.stale(p) and p.is_file() and not p.is_symlink():
            continue  # a killed writer's staging file: the next writer removes it (lock.clean_stale)
        if p.is_symlink() or not p.is_file() or not (p.name in REPORT_FILES or p.suffix == ".png"):
            return f"it holds {p.name!r}, which a report does not"
    return None


def run_files(record: RunRecord) -> tuple[list[Writer], list[str]]:
    """What a run folder holds beyond summary.json, spec.resolved.yaml and the report: posterior.nc and
    the posterior figures when there is a posterior, the sensitivity figures when there is an analysis.
    Returns the writers and a note for each file left out because its library is missing (the
    sensitivity figures go silently: the tables in summary.json and the report carry the same numbers)."""
    from mcflops.inference import netcdf
    from mcflops.output import figures

    writers: list[Writer] = []
    notes: list[str] = []
    digest = record.spec.digest()
    if record.posterior:
        if netcdf.available():
            writers.append(lambda folder: netcdf.write_netcdf(record.groups, folder / "posterior.nc"))
        else:
            notes.append(NETCDF_MISSING)
        if figures.can_draw():
            writers.append(figures.Batch(figures.posterior(record.plots), digest))
        else:
            notes.append(FIGURES_MISSING)
    if record.sensitivity and figures.can_draw():
        writers.append(figures.Batch(figures.sensitivity(record.sensitivity), digest))
    if record.layout and figures.can_draw():  # waterfall.png, the layout section's figure
        writers.append(figures.Batch(figures.layout(record.layout), digest))
    if record.plan and figures.can_draw():  # plan.png, the planning section's curve (with a deadline)
        writers.append(figures.Batch(figures.plan(record.plan), digest))
    return writers, notes


def write_run(out: Path, record: RunRecord, data: dict[str, Any] | None = None, *, check: Check = None,
              field: str | None = "--out") -> dict[str, Any]:
    """Write a run's folder: its files into a temporary folder beside ``out``, then swapped into place.

    ``data``: summary.json's content (default a copy of ``record.summary``), to which the notes of files left
    out (``run_files``) are added; it is returned. The report is rendered from ``data``, the record's spec and
    the figures just drawn (nothing written is read back but the figures' PNG bytes). ``check`` is called
    between files and before the swap (it raises to stop: nothing is then left behind). FolderBusy when
    another process writes the same folder."""
    data = dict(record.summary) if data is None else data
    check_out(out, field)
    writers, notes = run_files(record)
    if notes:
        data["notes"] = [*data.get("notes", []), *notes]
    where, out = str(out), Path(os.path.abspath(out))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(out, where)
    except OSError as e:
        raise SpecError(f"cannot write here: {e.strerror}", path=where, field=field) from None
    try:
        check_out(out, field)  # again under the lock: another writer may have put something there meanwhile
        try:
            tmp = files.make_temp_folder(out)
        except OSError as e:
            raise SpecError(f"cannot write here: {e.strerror}", path=where, field=field) from None
        try:
            _fill(tmp, record, data, out, writers, check or (lambda: None))
            files.swap(tmp, out)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise SpecError(f"cannot write {_target(e.filename, tmp, where)}: {e.strerror}", path=where,
                            field=field) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        lock.release(out)
    return data


def _target(filename, tmp: Path, where: str) -> str:
    """The file a failed write was for, as the user named the folder: a path inside the staging folder
    ``tmp`` is that file in ``where`` (its name in the staging folder means nothing to the user)."""
    if not filename:
        return "the report"
    try:
        inside = Path(os.fsdecode(filename)).relative_to(tmp)
    except ValueError:
        return os.fsdecode(filename)
    return str(Path(where) / inside) if inside.parts else where


def _fill(tmp: Path, record: RunRecord, data: dict[str, Any], out: Path, writers: list[Writer],
          check: Callable[[], None]) -> None:
    from mcflops.spec import resolved_document

    check()
    (tmp / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    files.write_yaml(tmp / "spec.resolved.yaml", resolved_document(record.spec), provenance=data)
    for write in [*writers, _headline(record, data)]:
        check()
        write(tmp)
    check()
    _write_report(tmp, record, data, out)  # last: it embeds the figures written before it
    check()


def _headline(record: RunRecord, data: dict[str, Any]):
    """The report's headline figure (when matplotlib is there: else the report goes without it)."""
    from mcflops.output import figures

    shown = figures.headline(record.plots, record.spec.hardware.count, data) if figures.can_draw() else {}
    return figures.Batch(shown, record.spec.digest())


def _write_report(folder: Path, record: RunRecord, data: dict[str, Any], out: Path) -> None:
    """report.md and report.html, rendered in process from summary.json's content and the record's spec, with
    the figures drawn into ``folder``."""
    from mcflops import report

    run = report.Run(data, record.spec, report.figures_in(folder), files.label(out))
    for name, text in report.pages(run).items():
        (folder / name).write_text(text, encoding="utf-8")


def write_outputs(out: Path, name: str, data: Mapping[str, Any], figures: Mapping[str, Writer],
                  where: str | None = None, pages: Callable[[Path], Mapping[str, str]] | None = None) -> None:
    """The --out files of sensitivity, plan, compare and calibrate: ``name`` (``data`` as JSON), then the
    figures (left out without matplotlib), then ``pages(out)`` (report pages rendered from those files);
    the folder is created if missing and each file replaced atomically, under the folder's lock (as `run`
    writes: one writer at a time). Each file replaced is recorded (files.WRITTEN), so an interrupted command
    says what it wrote. An error names the file it could not write, not its staging copy."""
    label = where or str(out)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock.acquire(out, label)
    except OSError as e:
        raise _cannot_write(e, label) from None
    try:
        _put(out / name, lambda: files.replace_text(out / name, json.dumps(data, indent=2) + "\n"))
        for fig, draw in figures.items():
            try:
                _put(out / fig, lambda: files.replace_file(out / fig, draw))
            except ImportError:  # no matplotlib: JSON only
                break
        for page, text in (pages(out) if pages is not None else {}).items():
            _put(out / page, lambda: files.replace_text(out / page, text))
    except BaseException:
        if made:  # a folder this call created and could not write its first file into is not left behind
            try:
                out.rmdir()
            except OSError:
                pass  # it holds what was written (listed in files.WRITTEN)
        raise
    finally:
        lock.release(out)


def _put(path: Path, write: Callable[[], None]) -> None:
    try:
        write()
    except OSError as e:
        raise _cannot_write(e, str(path)) from None
    files.WRITTEN.append(str(path))


def write_compare(out: Path, data: Mapping[str, Any], figures: Mapping[str, Writer]) -> None:
    """`compare --out`: compare.json and its figure (``write_outputs``), then report.md and report.html
    rendered from them (report.comparison), each replaced atomically."""
    from mcflops.report.comparison import render

    write_outputs(out, "compare.json", data, figures, where=str(out), pages=render)


# what each analysis writes: its JSON file's name and its figures (output.figures)
ANALYSES = {"plan": "plan.json", "compare": "compare.json", "sensitivity": "sensitivity.json",
            "calibrate": "calibration.json"}


def write_analysis(kind: str, data: Mapping[str, Any], out: Path, where: str | None = None) -> None:
    """``mcflops KIND --out OUT``'s files from the dict api.KIND returned (``kind``: plan, compare,
    sensitivity or calibrate): the JSON file and its figures."""
    from mcflops.output import figures

    if kind not in ANALYSES:
        raise ValueError(f"kind: expected one of {', '.join(ANALYSES)}, got {kind!r}")
    draw = {"plan": figures.plan, "compare": figures.compare, "sensitivity": figures.sensitivity,
            "calibrate": figures.calibration}[kind]
    write_outputs(Path(out), ANALYSES[kind], data, draw(data), where=where)


def write_fit(path: Path, fit: Mapping[str, Any], where: Path, indent: int | None = None) -> None:
    """A calibration fit (`calibrate --write`, `calibrate --layout --write`) as JSON, replaced atomically:
    compact unless ``indent`` is given."""
    text = json.dumps(fit, indent=indent) if indent is not None else json.dumps(fit, separators=(",", ":"))
    try:
        files.replace_text(path, text + "\n")
    except OSError as e:  # the file --write names (the package's copy), not the --out folder
        raise SpecError(f"cannot write: {e.strerror}", path=str(e.filename or where), field="--write") from None


def _cannot_write(e: OSError, where: str) -> SpecError:
    return SpecError(f"cannot write: {e.strerror}", path=where, field="--out")


def rerender_report(folder: Path, where: str) -> None:
    """report.md and report.html of a run folder again, from its files (each replaced atomically), under the
    folder's lock: a `run --out` swapping the folder meanwhile would otherwise get the previous run's report
    written into its new folder (summary.json of seed 2 beside report.md of seed 1), so while
    another process writes it this refuses with FolderBusy. A summary.json mcflops could not have written
    (not JSON, nested too deep, fields of the wrong type) is refused in one line naming it."""
    try:
        lock.acquire(folder, where)
    except OSError as e:  # the lock file lives beside the folder: its parent must be writable
        raise SpecError(f"cannot take the folder's lock: {e.strerror}", path=where) from None
    try:
        _rerender(folder, where)
    finally:
        lock.release(folder)


def _rerender(folder: Path, where: str) -> None:
    from mcflops.report import render

    path = str(Path(where) / REPORT_MARKER)
    data = reading.read_summary(folder, where)
    if not REPORT_KEYS <= data.keys():
        raise SpecError(f"not a summary mcflops wrote (expected a JSON object with {', '.join(sorted(REPORT_KEYS))})",
                        path=path)
    try:
        pages = render(folder, label=files.label(folder))
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as e:
        if isinstance(e, SpecError):
            raise
        raise SpecError(f"a field of the wrong kind (not as mcflops writes it: {type(e).__name__} {e})",
                        path=path) from None
    for name, text in pages.items():
        try:
            files.replace_text(folder / name, text)
        except OSError as e:
            raise SpecError(f"cannot write {name}: {e.strerror}", path=where) from None
        files.WRITTEN.append(str(folder / name))  # an interrupt after this says which file it replaced
