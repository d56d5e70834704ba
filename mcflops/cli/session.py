"""What every computing command shares: JAX set up before it computes, which process prints and
writes, results as plain JSON types, and the --samples check of the commands that sample outside api.run."""

from __future__ import annotations

import os
from typing import Any


def setup_jax() -> None:
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
    from mcflops.errors import SpecError
    from mcflops.spec import check_samples

    if n is not None:
        check_samples(n, lambda m, *a: SpecError(m, field="--samples"))
    return n


def analysis_command(args, compute, json_name: str, figures_of, show) -> int:
    """The shape of `sensitivity`, `plan` and `compare`: compute (with a progress bar), then on process 0
    write ``json_name`` and the figures ``figures_of(data)`` to --out, then print (--json or ``show``)."""
    import json
    from pathlib import Path

    from mcflops.cli import write
    from mcflops.cli.progress import progress

    setup_jax()
    with progress(args.quiet or args.json) as bar:
        data = compute(args, bar)
    if not primary():
        return 0
    if args.out:
        write.write_outputs(Path(args.out), json_name, data, figures_of(data), where=str(args.out))
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
