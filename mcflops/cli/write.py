"""mcflops command line, part two: the output folder of `run` and the files of the other commands.

A run's files go to a temporary folder that is swapped into place (never half-written); single files
are written beside their target and renamed. ``cli`` calls these; no other layer writes files.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from mcflops.errors import SpecError

_WRITTEN: list[str] = []  # folders swapped into place by this process (for the Ctrl-C message)
REPORT_MARKER = "summary.json"  # a folder holding this is a report that `run` may replace


def _check_out(out: Path) -> None:
    """Refuse an output folder that `run` must not replace: a file, or a folder that is not a report.

    `run` replaces its output folder as a whole, so `--out .` or `--out ~/data` would delete what is
    there: only an empty folder or a previous report (it holds summary.json) may be replaced.
    """
    where = str(out)
    if out.is_symlink():
        raise SpecError("is a symbolic link; give the folder itself", path=where, field="--out")
    if out.exists() and not out.is_dir():
        raise SpecError("exists and is not a folder; give a new folder or a previous report folder",
                        path=where, field="--out")
    if out.is_dir() and any(out.iterdir()) and not (out / REPORT_MARKER).is_file():
        raise SpecError(f"exists and is not an mcflops report (no {REPORT_MARKER}); it would be replaced as a "
                        "whole, so give a new folder", path=where, field="--out")
    parent = out.resolve().parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise SpecError(f"{p} is not a folder", path=where, field="--out")
            break


def write_run(out: Path, res, data: dict[str, Any], hooks: list | None = None) -> None:
    """Write the run's files into a temporary folder, then swap it into place: never half-written.

    ``hooks`` (default ``_OUTPUT_HOOKS``) add files after summary.json and spec.resolved.yaml."""
    from mcflops.spec import resolved_dict

    _check_out(out)
    out = out.resolve()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as e:
        raise SpecError(f"cannot write here: {e.strerror}", path=str(out), field="--out") from None
    try:
        (tmp / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
        _write_yaml(tmp / "spec.resolved.yaml", resolved_dict(res.spec), provenance=data)
        for hook in _OUTPUT_HOOKS if hooks is None else hooks:
            hook(tmp, res, data)
        _write_report(tmp, res, out)  # last: it embeds the figures the hooks wrote
        _swap(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SpecError(f"cannot write {e.filename or 'the report'}: {e.strerror}", path=str(out),
                        field="--out") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


_OUTPUT_HOOKS: list = []  # callables (folder, result, summary) -> None that add files (plots, posterior.nc)


def _replace_file(path: Path, write) -> None:
    """Write via a temporary file in the same folder, then rename: a file is never half-written."""
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _sensitivity_figures(folder: Path, res, data) -> None:
    """tornado.png, sobol.png and sweep_<input>.png in a run folder (issue 4); skipped without matplotlib."""
    if res.sensitivity:
        try:
            from mcflops.plots.sensitivity import run_figures

            run_figures(folder, res.sensitivity, spec_hash=res.spec.digest())
        except ImportError:
            pass


_OUTPUT_HOOKS.append(_sensitivity_figures)


def _posterior_files(folder: Path, res, data) -> None:
    """posterior.nc (ArviZ) and the posterior figures (issue 3); each skipped with a note when its library is missing."""
    if res.posterior:
        from mcflops.plots.posterior import output_hook as figures
        from mcflops.inference.netcdf import output_hook as netcdf

        netcdf(folder, res, data)
        figures(folder, res, data)


_OUTPUT_HOOKS.append(_posterior_files)


def _write_report(folder: Path, res, out: Path) -> None:
    """The headline figure (when matplotlib is there), then report.md and report.html from the folder's files."""
    from mcflops.report import HEADLINE_FIGURE, render

    draws = (res.draws or {}).get("gpu_hours")
    if draws is not None:
        try:
            from mcflops.plots.report import headline
            from mcflops.plots.style import provenance

            summary = json.loads((folder / "summary.json").read_text())
            with provenance(res.spec.digest()):  # the PNG's metadata names the run's spec hash
                headline(folder / HEADLINE_FIGURE, summary, draws, (res.posterior_draws or {}).get("gpu_hours"),
                         res.spec.hardware.count)
        except ImportError:  # no matplotlib: the report goes without its headline figure
            pass
    for name, text in render(folder, label=_label(out)).items():
        (folder / name).write_text(text, encoding="utf-8")


def _label(folder: Path) -> str:
    """How the report names its folder in the regenerate command: relative to the working folder if inside it."""
    p = Path(folder).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)



def _swap(tmp: Path, out: Path) -> None:
    """Put the finished folder in place with two renames, Ctrl-C held off until both are done.

    If the second rename fails the previous report is moved back: the folder is always either the
    old report or the new one, never a mixture and never missing.
    """
    old = None
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
    try:
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
        try:
            os.replace(tmp, out)
        except BaseException:
            if old is not None:
                os.replace(old, out)
            raise
        _WRITTEN.append(str(out))
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
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
