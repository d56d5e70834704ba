"""`mcflops compare`: two prior files on common random numbers (B / A) through analysis.compare,
printed as a table or --json; with --out, compare.json and compare.png (the histogram of B / A)."""

from __future__ import annotations

from typing import Any

from mcflops.output import figures
from mcflops.cli.session import analysis_command, plain, samples
from mcflops.cli.tables import table
from mcflops.numbers import format_number as fmt


def command(args) -> int:
    return analysis_command(args, compute, "compare.json", figures.compare, show_compare)


def compute(args, progress) -> dict[str, Any]:
    from mcflops.analysis import compare as compare_mod
    from mcflops.spec import load_spec

    a, b = load_spec(args.file_a), load_spec(args.file_b)
    return plain(compare_mod.compare(a, b, output=args.output, samples=samples(args.samples), seed=args.seed,
                              progress=progress))


def show_compare(con, d: dict[str, Any]) -> None:
    from rich.markup import escape

    out = d["output"]
    con.print(f"[bold]compare[/bold] {out}: B = {d['b']['name']} ({escape(str(d['b']['path']))}) against "
              f"A = {d['a']['name']} ({escape(str(d['a']['path']))})  [dim](seed {d['seed']}, {d['samples']:,} draws, the same z "
              f"for shared inputs: {', '.join(d['shared_inputs']) or 'none'})[/dim]\n")
    t = table(f"{out}", ["", "p5", "p25", "p50", "p75", "p95"])
    for tag in ("a", "b"):
        t.add_row(f"{tag.upper()} {d[tag]['name']}", *(fmt(d[tag][k]) for k in ("p5", "p25", "p50", "p75", "p95")))
    r = d["ratio"]
    t.add_row("B / A", *(f"{r[k]:.4g}" for k in ("p5", "p25", "p50", "p75", "p95")))
    con.print(t)
    con.print(f"  P(B > A) = {r['prob_b_greater']:.3f}, P(B < A) = {r['prob_b_less']:.3f}")
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {note}")
