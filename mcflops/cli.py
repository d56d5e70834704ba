"""mcflops command line: parse, call the layers, print, write files (the only layer that writes)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .errors import SpecError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        self.exit(EXIT_BAD_INPUT, f"mcflops: {message} (see mcflops {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"mcflops: {message} (see mcflops --help)\n")


def _positive_int(text: str) -> int:
    from .numbers import parse_number

    x = parse_number(text)
    if x is None or x != int(x) or x < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number like 1e6 or 1_000_000, got '{text}'")
    return int(x)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mcflops", description="Training-compute estimates as distributions: prior files in, "
                "GPU-hour distributions, posteriors and reports out.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    def common(sp, out=True):
        sp.add_argument("file", help="prior file (YAML), e.g. priors/llama405b.yaml")
        sp.add_argument("--samples", type=_positive_int, help="Monte Carlo draws (default: the file's samples:)")
        sp.add_argument("--seed", type=_positive_int, help="random seed (default: the file's seed:)")
        sp.add_argument("--json", action="store_true", help="print the summary as JSON on stdout instead of tables")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")
        if out:
            sp.add_argument("--out", help="output folder (default: reports/<name>/); replaced as a whole, atomically")

    r = sub.add_parser("run", help="prior predictive, posterior (if the file observes something), files in reports/",
                       description="Run a prior file end to end: the napkin chain, the Monte Carlo distribution of "
                       "every output, the update on observed figures; writes summary.json and the resolved prior "
                       "file to the output folder.")
    common(r)
    r.add_argument("--method", choices=("auto", "is", "nuts"), default="auto",
                   help="posterior method: importance sampling (is), NUTS, or auto (IS, NUTS when IS is poor)")
    s = sub.add_parser("sample", help="prior predictive only (no update, no files): quick looks and timing",
                       description="Draw the prior predictive and print the summary; writes nothing.")
    common(s, out=False)
    v = sub.add_parser("validate", help="check a prior file and print what it resolves to",
                       description="Validate a prior file: exit 0 and a one-line summary if it is good, exit 2 and "
                       "one line naming file, line and field if not.")
    v.add_argument("file", nargs="+", help="prior file(s)")
    sub.add_parser("schema", help="print the JSON Schema of prior files (for editors)",
                   description="Print a JSON Schema of the prior-file format, for editor completion and checks.")
    rp = sub.add_parser("report", help="re-render report.md and report.html of a run folder (no sampling)",
                        description="Re-render DIR/report.md and DIR/report.html from DIR/summary.json, the resolved "
                        "prior file and the figures in DIR, without sampling again (fast; no JAX).")
    rp.add_argument("dir", help="a run folder written by `mcflops run`, e.g. reports/llama405b")
    _sens_parsers(sub, common)
    ca = sub.add_parser("calibrate", help="fit effective utilization (MFU x goodput) to the published runs; "
                        "leave-one-out check",
                        description="Fit the hierarchical model of effective utilization u = MFU x goodput to the "
                        "published runs in mcflops/data/published_runs.yaml (NUTS), print the posterior and the "
                        "calibrated prior that `mfu: {calibrated: true}` uses, and predict each run's hours from "
                        "the others (leave-one-out: coverage of 90% intervals, median error, interval width). "
                        "Writes calibration.json and calibration.png to --out.")
    ca.add_argument("--seed", type=_positive_int, default=0, help="random seed (default 0)")
    ca.add_argument("--chains", type=_positive_int, default=4, help="NUTS chains (default 4)")
    ca.add_argument("--draws", type=_positive_int, default=300, help="warm-up and kept draws per chain (default 300)")
    ca.add_argument("--no-loo", action="store_true", help="skip the leave-one-out check (one fit only)")
    ca.add_argument("--write", action="store_true",
                    help="also regenerate the shipped fit, mcflops/data/calibration_fit.json (what calibrated "
                    "priors read)")
    ca.add_argument("--out", default="reports/calibration", help="folder for calibration.json and calibration.png "
                    "(default reports/calibration; created if missing)")
    ca.add_argument("--json", action="store_true", help="print the result as JSON on stdout instead of tables")
    ca.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def _sens_parsers(sub, common) -> None:
    """`sensitivity`, `plan` and `compare` (issue 4)."""
    out_help = "also write <command>.json and the figures (PNG) into this folder (created if missing)"
    se = sub.add_parser("sensitivity", help="what moves the estimate: tornado, Sobol indices, correlations, sweeps",
                        description="Which input moves the output most: a tornado (each input at its p5 and p95, the "
                        "others at their medians), Sobol first-order and total indices (Saltelli sampling, Jansen "
                        "estimators, with standard errors) on log output and on the output, rank correlations (under "
                        "the posterior too when the file observes something), and sweeps of one input.")
    common(se, out=False)
    se.add_argument("--out", help=out_help)
    se.add_argument("--output", help="the output to analyse (default: the file's sensitivity.output, else gpu_hours)")
    se.add_argument("--sweep", action="append", metavar="INPUT=LO:HI|INPUT=V1,V2",
                    help="sweep one input: a grid from LO to HI (--points values) or the listed values, e.g. "
                    "mfu=0.40,0.30 answers 'what if MFU falls from 40%% to 30%%'; repeatable")
    se.add_argument("--points", type=_positive_int, help="grid points of a LO:HI sweep (default 16)")
    se.add_argument("--sobol-samples", type=_positive_int,
                    help="Saltelli base draws N (default 65536; the model is evaluated N x (inputs + 2) times)")
    pl = sub.add_parser("plan", help="accelerators for a deadline, days on a cluster, tokens in a budget",
                        description="Run the estimate backwards, each answer with a probability: how many "
                        "accelerators finish within --deadline-days with probability --prob, how many days --gpus "
                        "accelerators need, how many tokens fit in --budget-hours or --budget-usd. Defaults come "
                        "from the file's plan: block; uses the prior predictive unless --posterior.")
    common(pl, out=False)
    pl.add_argument("--out", help=out_help)
    pl.add_argument("--deadline-days", metavar="D", help="finish within D days of wall-clock time")
    pl.add_argument("--prob", metavar="P", help="probability each answer must hold with (default 0.9)")
    pl.add_argument("--gpus", metavar="N", help="cluster size for the days question (default: hardware.count)")
    pl.add_argument("--budget-hours", metavar="H", help="accelerator-hour budget: tokens that fit (e.g. 2M)")
    pl.add_argument("--budget-usd", metavar="B", help="dollar budget: tokens that fit (needs a price prior)")
    pl.add_argument("--posterior", action="store_true",
                    help="plan on the posterior (importance-weighted by the file's observe: block)")
    cp = sub.add_parser("compare", help="two prior files on the same random draws: B / A",
                        description="Compare two scenarios (e.g. H100 vs H200 for the same run) on common random "
                        "numbers: inputs with the same name get the same draws, so the ratio B / A shows only what "
                        "differs. Seed and sample count come from file A unless given.")
    cp.add_argument("file_a", help="prior file A (the reference)")
    cp.add_argument("file_b", help="prior file B")
    cp.add_argument("--output", default="gpu_hours", help="the output to compare (default gpu_hours)")
    cp.add_argument("--samples", type=_positive_int, help="Monte Carlo draws (default: A's samples:)")
    cp.add_argument("--seed", type=_positive_int, help="random seed (default: A's seed:)")
    cp.add_argument("--json", action="store_true", help="print the result as JSON on stdout instead of tables")
    cp.add_argument("--quiet", action="store_true", help="no progress bar")
    cp.add_argument("--out", help=out_help)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _WRITTEN.clear()  # this call's writes only (main may be called again in one process)
    if args.version:
        from .api import version

        print(f"mcflops {version()}")
        return 0
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return _dispatch(args)
    except SpecError as e:
        print(f"mcflops: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        done = f"after writing {_WRITTEN[-1]}" if _WRITTEN else "; nothing was written"
        print(f"mcflops: interrupted{' ' if _WRITTEN else ''}{done}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _dispatch(args) -> int:
    if args.command == "schema":
        from .schema import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    if args.command == "report":
        return _report_command(args.dir)
    if args.command == "calibrate":
        return _calibrate_command(args)
    if args.command in ("sensitivity", "plan", "compare"):
        return _sens_command(args)
    from .spec import load_spec

    if args.command == "validate":
        from .terminal_sens import validate_extras

        for f in args.file:
            spec = load_spec(f)
            validate_extras(spec)
            print(f"{f}: ok: {spec.name}, {len(spec.uncertain)} uncertain inputs "
                  f"({', '.join(spec.uncertain)}), observes {', '.join(spec.observe) or 'nothing'}")
        return 0
    spec = load_spec(args.file)
    if args.command == "run":  # refuse a bad --out before sampling, not after
        _check_out(Path(args.out) if args.out else Path("reports") / spec.name)
    _setup_jax()
    from . import api

    with _progress(args.quiet or args.json) as progress:
        res = api.run(spec, samples=args.samples, seed=args.seed, progress=progress,
                      posterior=args.command == "run", method=getattr(args, "method", "auto"),
                      sensitivity=args.command == "run")
    data = res.to_dict()
    if args.command == "run":
        out = Path(args.out) if args.out else Path("reports") / spec.name
        _write_outputs(out, res, data)
        data["out"] = str(out)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        from .terminal import print_result

        print_result(res, data)
    return 0


def _setup_jax() -> None:
    """Persistent compilation cache in the user's cache folder (second runs skip XLA compiles)."""
    import jax

    cache = os.environ.get("MCFLOPS_JAX_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "mcflops", "jax")
    try:
        os.makedirs(cache, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except OSError:
        pass  # no writable cache folder: compile every time


class _progress:
    """A rich progress bar on stderr for runs with several blocks (silent otherwise)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet or not sys.stderr.isatty()
        self.bar = None
        self.task = None

    def __enter__(self):
        if self.quiet:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("sampling"), BarColumn(), MofNCompleteColumn(), TextColumn("blocks"),
                            TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self.bar.start()

        def update(done: int, total: int) -> None:
            if self.task is None:
                self.task = self.bar.add_task("sampling", total=total)
            self.bar.update(self.task, completed=done)

        return update

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


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


def _write_outputs(out: Path, res, data: dict[str, Any]) -> None:
    """Write the run's files into a temporary folder, then swap it into place: never half-written."""
    from .spec import resolved_dict

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
        for hook in _OUTPUT_HOOKS:
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


def _sens_command(args) -> int:
    """`mcflops sensitivity | plan | compare`: compute, optionally write JSON + figures, print."""
    _setup_jax()
    from . import terminal_sens

    with _progress(args.quiet or args.json) as progress:
        data, figures = terminal_sens.compute(args, progress)
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            _replace_file(out / f"{args.command}.json", lambda p: p.write_text(json.dumps(data, indent=2) + "\n"))
            for name, draw in figures.items():
                try:
                    _replace_file(out / name, draw)
                except ImportError:  # no matplotlib: JSON only
                    break
        except OSError as e:
            raise SpecError(f"cannot write: {e.strerror}", path=str(args.out), field="--out") from None
        data["out"] = str(out)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        terminal_sens.show(args.command, data)
    return 0


def _calibrate_command(args) -> int:
    """`mcflops calibrate` (issue 7): fit + leave-one-out, then calibration.json/.png and, with --write, the fit."""
    if args.chains < 1 or args.draws < 50:
        raise SpecError("expected --chains >= 1 and --draws >= 50", field="--draws")
    _setup_jax()
    from . import terminal_calibrate

    data, figures, export = terminal_calibrate.compute(args)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        _replace_file(out / "calibration.json", lambda p: p.write_text(json.dumps(data, indent=2) + "\n"))
        for name, draw in figures.items():
            try:
                _replace_file(out / name, draw)
            except ImportError:  # no matplotlib: JSON only
                break
        if export is not None:
            target = terminal_calibrate.fit_path()
            _replace_file(target, lambda p: p.write_text(json.dumps(export, separators=(",", ":")) + "\n"))
            data["wrote_fit"] = str(target)
    except OSError as e:
        raise SpecError(f"cannot write: {e.strerror}", path=str(e.filename or out), field="--out") from None
    data["out"] = str(out)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        terminal_calibrate.show(data)
    return 0


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
            from .plots.sensitivity import run_figures

            run_figures(folder, res.sensitivity)
        except ImportError:
            pass


_OUTPUT_HOOKS.append(_sensitivity_figures)


def _posterior_files(folder: Path, res, data) -> None:
    """posterior.nc (ArviZ) and the posterior figures (issue 3); each skipped with a note when its library is missing."""
    if res.posterior:
        from .plots.posterior import output_hook as figures
        from .posterior_io import output_hook as netcdf

        netcdf(folder, res, data)
        figures(folder, res, data)


_OUTPUT_HOOKS.append(_posterior_files)


def _write_report(folder: Path, res, out: Path) -> None:
    """The headline figure (when matplotlib is there), then report.md and report.html from the folder's files."""
    from .report import HEADLINE_FIGURE, render

    draws = (res.draws or {}).get("gpu_hours")
    if draws is not None:
        try:
            from .plots.report import headline

            summary = json.loads((folder / "summary.json").read_text())
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


def _report_command(folder: str) -> int:
    """`mcflops report DIR`: re-render the report from the saved files (each file replaced atomically)."""
    from .report import render

    d = Path(folder)
    if not d.is_dir():
        raise SpecError("no such folder (expected a run folder written by `mcflops run`)", path=folder)
    for name, text in render(d, label=_label(d)).items():
        tmp = d / f".{name}.tmp-{os.getpid()}"
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, d / name)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise SpecError(f"cannot write {name}: {e.strerror}", path=folder) from None
    print(f"wrote {d / 'report.md'} and {d / 'report.html'}")
    return 0


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
