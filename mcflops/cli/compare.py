"""`mcflops compare`: two prior files, B / A, through mcflops.api.compare, printed as a table or --json;
with --out, compare.json, compare.png (the histogram of B / A) and a report (report.md, report.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcflops.output import figures
from mcflops.cli.tables import table
from mcflops.numbers import format_number as fmt


def command(args) -> int:
    import json

    from mcflops import api
    from mcflops import output
    from mcflops.cli.progress import progress
    from mcflops.cli.session import primary, setup_jax
    from mcflops.cli.signals import check_interrupt

    setup_jax()
    with progress(args.quiet or args.json) as bar:
        data = api.compare(args.file_a, args.file_b, output=args.output, samples=args.samples, seed=args.seed,
                           couple=args.couple, posterior=args.posterior, progress=bar)
    if not primary():
        return 0
    check_interrupt()  # a signal during the last stage: nothing written
    if args.out:
        output.write_compare(Path(args.out), data, figures.compare(data))
        data["out"] = str(args.out)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    from rich.console import Console

    con = Console()
    show_compare(con, data)
    if "out" in data:
        con.print(f"\n[dim]wrote {data['out']}/ (compare.json, report.md, report.html)[/dim]")
    return 0


def show_compare(con, d: dict[str, Any]) -> None:
    from rich.markup import escape

    out = d["output"]
    which = "posteriors" if d.get("distribution") == "posterior" else "priors"
    con.print(f"[bold]compare[/bold] {out}: B = {escape(d['b']['name'])} ({escape(str(d['b']['path']))}) against "
              f"A = {escape(d['a']['name'])} ({escape(str(d['a']['path']))})  [dim](seed {d['seed']}, "
              f"{d['samples']:,} draws, the {which})[/dim]\n")
    t = table(f"{out}", ["", "p5", "p25", "p50", "p75", "p95"])
    for tag in ("a", "b"):
        t.add_row(f"{tag.upper()} {escape(d[tag]['name'])}",
                  *(fmt(d[tag][k]) for k in ("p5", "p25", "p50", "p75", "p95")))
    r = d["ratio"]
    t.add_row("B / A", *(f"{r[k]:.4g}" for k in ("p5", "p25", "p50", "p75", "p95")))
    con.print(t)
    con.print(f"  P(B > A) = {r['prob_b_greater']:.3f}, P(B < A) = {r['prob_b_less']:.3f}")
    if d.get("ess") is not None:
        con.print(f"  effective sample size {d['ess']:,.0f}")
    coupled = ", ".join(f"{k} (rank correlation {v:g})" for k, v in (d.get("coupled_inputs") or {}).items())
    con.print(f"  draws: shared {', '.join(d.get('shared_inputs') or []) or 'none'}; coupled {coupled or 'none'}; "
              f"independent {', '.join(d.get('independent_inputs') or []) or 'none'}")
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {escape(note)}")
