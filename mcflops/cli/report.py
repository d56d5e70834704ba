"""`mcflops report DIR`: re-render a run folder's report.md and report.html from its saved files,
without sampling again (no JAX, no matplotlib)."""

from __future__ import annotations

from pathlib import Path

from mcflops import output
from mcflops.errors import SpecError


def command(args) -> int:
    d = Path(args.dir)
    if not d.is_dir():
        raise SpecError("no such folder (expected a run folder written by `mcflops run`)", path=args.dir)
    output.rerender_report(d, where=args.dir)
    print(f"wrote {d / 'report.md'} and {d / 'report.html'}")
    return 0
