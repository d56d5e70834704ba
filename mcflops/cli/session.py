"""What every computing command shares: JAX set up before it computes, which process prints and
writes, results as plain JSON types, the --samples check of the commands that sample outside api.run, and
the session that holds what one command has claimed (its output folders' locks)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def setup_jax() -> None:
    """Before any computation: the engine's devices and hosts (engine.setup), and the persistent caches in
    the user's cache folder (engine.use_cache: a second run loads its compiled programs)."""
    from mcflops import engine

    if distributed():
        library_chatter_to_stderr()
    engine.setup()
    engine.use_cache()  # no folder to be had: every run compiles


def distributed() -> bool:
    """Whether this process is one of several hosts of one run (engine.init_distributed joins them)."""
    return bool(os.environ.get("JAX_COORDINATOR_ADDRESS")) or os.environ.get("MCFLOPS_DISTRIBUTED") == "1"


def library_chatter_to_stderr() -> None:
    """What C++ libraries print on file descriptor 1 (Gloo's "Rank N is connected to 1 peer ranks" when the
    hosts join) goes to stderr, and Python's own output keeps the real stdout: `--json` stays one JSON
    document for the program that reads it. Done once, before the hosts join."""
    import sys

    if getattr(sys.stdout, "mcflops_own", False) or not hasattr(sys.stdout, "fileno"):
        return
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (captured): nothing below Python writes to it
        return
    sys.stdout.flush()
    real = os.dup(fd)
    os.dup2(sys.stderr.fileno(), fd)
    out = open(real, "w", encoding=sys.stdout.encoding or "utf-8", errors=sys.stdout.errors or "strict",
               buffering=1 if sys.stdout.line_buffering else -1)
    out.mcflops_own = True
    sys.stdout = out


def primary() -> bool:
    """Multi-host runs (engine.init_distributed): every process runs the same command and computes the
    same result; process 0 alone writes the files and prints, the others finish silently with exit 0."""
    import jax

    return jax.process_count() <= 1 or jax.process_index() == 0


def plain(d: dict[str, Any]) -> dict[str, Any]:
    """JSON types only (NaN and inf become null), as summary.json."""
    from mcflops.api import jsonable

    return jsonable(d)


def samples(n):
    """--samples of plan and compare, held to the bounds of a prior file's samples (api.run checks its own)."""
    from mcflops.errors import UsageError
    from mcflops.spec import check_samples

    if n is not None:
        check_samples(n, lambda m, *a: UsageError(m, arg="samples"))
    return n


def analysis_command(args, compute, json_name: str, figures_of, show, write=None) -> int:
    """The shape of `sensitivity`, `plan` and `compare`: compute (with a progress bar), then on process 0
    write ``json_name`` and the figures ``figures_of(data)`` to --out (or ``write(out, data)``, for an
    output with more files, e.g. compare's report), then print (--json or ``show``)."""
    import json
    from pathlib import Path

    from mcflops import output
    from mcflops.cli.progress import progress
    from mcflops.cli.signals import check_interrupt

    setup_jax()
    with progress(args.quiet or args.json) as bar:
        data = compute(args, bar)
    if not primary():
        return 0
    check_interrupt()  # a signal during the last stage: nothing written
    if args.out:
        if write is None:
            output.write_outputs(Path(args.out), json_name, data, figures_of(data), where=str(args.out))
        else:
            write(Path(args.out), data)
        data["out"] = str(args.out)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    from rich.console import Console

    con = Console()
    show(con, data)
    if "out" in data:
        con.print(f"\n[dim]wrote {data['out']}/[/dim]")
    return 0


class Session:
    """What one command holds until it ends: the output folders it claimed (locked), each with the parent
    folders it created for it. main makes one per call and hands it to the command as ``args.session``, and
    lets go of everything at the end (``close``): two calls in one process (a notebook, the tests) share
    nothing."""

    def __init__(self) -> None:
        self.claimed: list[tuple[Path, list[Path]]] = []  # (folder, the parents created for it)

    def claim_out(self, out: Path) -> None:
        """A run's output folder, before it samples: refused if it must not be replaced (output.check_out),
        then locked for the rest of the command (another `mcflops run` to the same folder is refused at once,
        not after its sampling); ``close`` lets go of it, and removes the folders created for it if nothing
        was written into them."""
        from mcflops import output
        from mcflops.errors import SpecError

        output.check_out(out)
        parent = out.resolve().parent
        made = [p for p in (parent, *parent.parents) if not p.exists()]
        try:
            parent.mkdir(parents=True, exist_ok=True)
            output.acquire(out, str(out))
        except OSError as e:
            _remove_empty(made)
            raise SpecError(f"cannot write here: {e.strerror}", path=str(out), field="--out") from None
        self.claimed.append((out, made))

    def close(self) -> None:
        """Every claimed folder released, the last claimed first."""
        from mcflops import output

        while self.claimed:
            out, made = self.claimed.pop()
            output.release(out)
            _remove_empty(made)


def _remove_empty(folders) -> None:
    for p in folders:  # innermost first
        try:
            p.rmdir()
        except OSError:
            break  # not empty (the run was written), or not ours to remove


def write_json(out: Path, name: str, data: dict[str, Any]) -> str:
    """``data`` as ``out/name`` (the folder made if missing), atomically; where it went. A folder that cannot
    be written is the --out flag's one-line error."""
    import json

    from mcflops import output
    from mcflops.errors import SpecError

    try:
        out.mkdir(parents=True, exist_ok=True)
        output.replace_text(out / name, json.dumps(data, indent=2) + "\n")
    except OSError as e:
        raise SpecError(f"cannot write: {e.strerror}", path=str(e.filename or out), field="--out") from None
    return str(out / name)
