"""`mcflops watch FILE`: one warm process that re-runs a prior file on each save.

The files are polled (their modification time and size, every ``--poll`` seconds): no file-watching
library, and it works the same on every system and on network folders. Each change: the prior file is
loaded again (a bad edit prints its one line and the loop waits for the next save), the estimate is
computed in this process (JAX's compiled programs stay warm, so a re-run costs the sampling alone),
the tables are printed, and then the run folder (figures, report) is written again. Watched: the prior
file and every file it names that exists beside it (an ``architecture: {hf_config: ...}``). The first Ctrl-C
ends it (exit 130), SIGTERM too (exit 143), through cli.main: while it waits for a save (the poll checks the
flag cli.signals sets), while it samples (the engine's blocks call the same check) and while it writes (the run
folder is swapped in whole or not at all, so the previous run's stays as it was).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

DEFAULT_POLL_S = 0.05


def add_parser(sub, whole: Callable[[str], int], seed: Callable[[str], int]) -> None:
    """The `watch` subparser; ``whole`` and ``seed`` parse --samples and --seed as the other commands do."""
    w = sub.add_parser("watch", help="re-run a prior file on each save: tables reprinted, report re-rendered",
                       description="Keep one process warm and re-run FILE each time it (or a file it names, such "
                       "as an architecture's hf_config) is saved: the tables are printed again, then the run folder "
                       "(summary.json, figures, report) is rewritten. A bad edit prints its one-line error and waits "
                       "for the next save. Ctrl-C to stop.")
    w.add_argument("file", help="prior file (YAML), e.g. priors/llama405b.yaml")
    w.add_argument("--samples", type=whole, help="Monte Carlo draws (default: the file's samples:)")
    w.add_argument("--seed", type=seed, help="random seed (default: the file's seed:)")
    w.add_argument("--out", help="output folder (default: reports/<name>/), rewritten after each run")
    w.add_argument("--no-report", action="store_true", help="print the tables only; write no run folder")
    w.add_argument("--open", action="store_true", help="open report.html in the browser after the first run")
    w.add_argument("--poll", type=float, default=DEFAULT_POLL_S,
                   help=f"seconds between looks at the files (default {DEFAULT_POLL_S})")


def named_files(path: Path) -> list[Path]:
    """The prior file and the files it names: every string in it that is the path of an existing file,
    relative to the prior file's folder (or absolute). A file that does not parse names nothing."""
    from mcflops.errors import SpecError
    from mcflops.spec.reader import parse_yaml, read_text

    found = [path]
    try:  # the prior files' reader: its size cap, its alias and nesting guards (a saved alias bomb names nothing)
        data = parse_yaml(read_text(path, str(path)), str(path))
    except SpecError:  # load_spec reports what is wrong with the file
        return found
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and 0 < len(node) < 4096 and "\n" not in node:
            p = path.parent / node
            try:
                if p.is_file() and p.resolve() != path.resolve() and p not in found:
                    found.append(p)
            except OSError:
                pass
    return found


def stamp(files: list[Path]) -> tuple:
    """What changes when a file is saved: modification time (ns) and size; None for a missing file."""
    out = []
    for f in files:
        try:
            st = f.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def loop(path: Path, once: Callable[[], Any], *, poll_s: float = DEFAULT_POLL_S,
         after: Callable[[Any], bool] | None = None, sleep: Callable[[float], None] = time.sleep) -> int:
    """Call ``once()`` now and after every change of ``path`` or the files it names, until ``after(outcome)``
    returns False (tests) or a signal (cli.signals' Interrupted, raised at the next poll). ``once`` returns its
    outcome: a result, or the SpecError of a bad edit, which it has printed. Returns the number of runs."""
    from mcflops.cli.signals import check_interrupt

    runs = 0
    files = named_files(path)
    seen = stamp(files)
    while True:
        outcome = once()
        runs += 1
        files = named_files(path)  # the edit may name another file
        if after is not None and not after(outcome):
            return runs
        while True:  # wait for a save
            sleep(poll_s)
            check_interrupt()  # the handler only sets a flag: an idle loop that never looked would never stop
            now = stamp(files)
            if now != seen:
                seen = now
                break


def run_once(args, out_of: Callable[[Any], Path], show: Callable[[str], None] = print) -> Callable[[], Any]:
    """One re-run as ``loop`` calls it: load the file, compute, print the tables, write the run folder."""
    from mcflops import api
    from mcflops import output
    from mcflops.cli.progress import Bar
    from mcflops.cli.signals import check_interrupt
    from mcflops.cli.run import print_result
    from mcflops.errors import SpecError
    from mcflops.spec import load_spec

    opened = [False]
    path = Path(args.file)

    def once():
        t0 = time.perf_counter()
        started = stamp(named_files(path))
        try:
            spec = load_spec(args.file)
            # a Bar that draws nothing: the engine calls it between blocks, and it stops the run on a signal
            bar = Bar()
            res = api.run(spec, samples=args.samples, seed=args.seed, posterior=True, sensitivity=False,
                          progress=bar, phase=bar.phase)
            data = res.to_dict()
            show(f"\n[{time.strftime('%H:%M:%S')}] {args.file}: re-run in {time.perf_counter() - t0:.2f} s")
            if args.no_report:
                print_result(res, data)
                sys.stdout.flush()
                return res
            out = out_of(spec)
            output.check_out(out)
            print_result(res, data)
            sys.stdout.flush()
            if stamp(named_files(path)) != started:  # saved again meanwhile: that run writes the folder
                return res
            output.write_run(out, res.record, data, check=check_interrupt)
            show(f"wrote {out}/ ({time.perf_counter() - t0:.2f} s after the save was seen)")
        except SpecError as e:
            print(f"mcflops: {e}", file=sys.stderr, flush=True)
            show(f"[{time.strftime('%H:%M:%S')}] waiting for the next save of {args.file}")
            return e
        if args.open and not opened[0]:
            import webbrowser

            opened[0] = webbrowser.open((out / "report.html").resolve().as_uri())
        return res

    return once


def command(args, after: Callable[[Any], bool] | None = None) -> int:
    from mcflops.cli.session import setup_jax
    from mcflops.errors import SpecError, UsageError

    path = Path(args.file)
    if not path.is_file():
        raise SpecError("no such file", path=str(path))
    if not 0 < args.poll <= 60:  # written so that a NaN (float("nan") parses) is refused too
        raise UsageError(f"expected a number of seconds in (0, 60], got {args.poll:g}", arg="poll")
    setup_jax()

    def out_of(spec) -> Path:
        return Path(args.out) if args.out else Path("reports") / spec.name

    def show(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    show(f"watching {path} (Ctrl-C to stop)")
    loop(path, run_once(args, out_of, show), poll_s=args.poll, after=after)
    return 0


