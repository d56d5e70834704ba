"""mcflops command line: parse, call the layers, print, write files (the only layer that writes).

The parser is ``cli_args``; the output folder and file writing are ``outputs``. Their names are
re-exported here (``cli._OUTPUT_HOOKS``, ``cli._swap``, ...), so callers and tests keep using ``cli``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from mcflops.cli.args import EXIT_BAD_INPUT, EXIT_INTERRUPTED, build_parser
from mcflops.errors import SpecError
from mcflops.cli import write
from mcflops.cli.write import _WRITTEN, _check_out, _label, _replace_file


def _primary() -> bool:
    """Multi-host runs (engine.setup joins them): every process runs the same command and computes the
    same result; process 0 alone writes the files and prints, the others finish silently with exit 0."""
    import jax

    return jax.process_count() <= 1 or jax.process_index() == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _WRITTEN.clear()  # this call's writes only (main may be called again in one process)
    if args.version:
        from mcflops._version import version

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
        from mcflops.spec.schema import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    if args.command == "report":
        return _report_command(args.dir)
    if args.command == "calibrate":
        return _calibrate_command(args)
    if args.command in ("sensitivity", "plan", "compare"):
        return _sens_command(args)
    from mcflops.spec.load import load_spec

    if args.command == "validate":
        from mcflops.cli.sens import validate_extras

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
    from mcflops import api

    with _progress(args.quiet or args.json) as progress:
        res = api.run(spec, samples=args.samples, seed=args.seed, progress=progress,
                      posterior=args.command == "run", method=getattr(args, "method", "auto"),
                      sensitivity=args.command == "run")
    data = res.to_dict()
    if not _primary():
        return 0
    if args.command == "run":
        out = Path(args.out) if args.out else Path("reports") / spec.name
        write.write_run(out, res, data)
        data["out"] = str(out)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        from mcflops.cli.terminal import print_result

        print_result(res, data)
    return 0


def _setup_jax() -> None:
    """Before any computation: the engine's devices and hosts (engine.setup), and a persistent compilation
    cache in the user's cache folder (second runs skip XLA compiles)."""
    import jax

    from mcflops import engine

    engine.setup()

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



def _sens_command(args) -> int:
    """`mcflops sensitivity | plan | compare`: compute, optionally write JSON + figures, print."""
    _setup_jax()
    from mcflops.cli import sens as terminal_sens

    with _progress(args.quiet or args.json) as progress:
        data, figures = terminal_sens.compute(args, progress)
    if not _primary():
        return 0
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
    from mcflops.cli import calibrate as terminal_calibrate

    data, figures, export = terminal_calibrate.compute(args)
    if not _primary():
        return 0
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


def _report_command(folder: str) -> int:
    """`mcflops report DIR`: re-render the report from the saved files (each file replaced atomically)."""
    from mcflops.report import render

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
