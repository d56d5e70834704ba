"""`mcflops compare`: scenarios side by side through mcflops.api.compare, printed as tables or --json; with
--out, compare.json, scenarios.png (every scenario's distribution on one axis), with two files compare.png
(the histogram of B / A), and a report (report.md, report.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcflops.output import figures
from mcflops.cli.session import analysis_command
from mcflops.cli.tables import QUARTILES, Fitted, table
from mcflops.numbers import format_number as fmt


def command(args) -> int:
    return analysis_command(args, compute, "compare.json", figures.compare, show_compare, write=write)


def compute(args, bar) -> dict[str, Any]:
    from mcflops import api
    from mcflops.errors import UsageError

    if len(args.files) < 2:
        raise UsageError(f"expected two or more prior files (A, then the scenarios compared with it), got one: "
                         f"{args.files[0]}", arg="files", flag="FILE")
    return api.compare(*args.files, output=args.output, samples=args.samples, seed=args.seed, couple=args.couple,
                       posterior=args.posterior, deadline_days=args.deadline_days, prob=args.prob, progress=bar)


def write(out: Path, data: dict[str, Any]) -> None:
    """compare.json and the figures, then the comparison report rendered from them."""
    from mcflops import output

    output.write_compare(out, data, figures.compare(data))


def show_compare(con, d: dict[str, Any]) -> None:
    from rich.markup import escape

    from mcflops.cli.scenarios import show_draws, show_scenarios

    which = "posteriors" if d.get("distribution") == "posterior" else "priors"
    if "ratio" not in d:  # three or more scenarios: the table is the answer
        show_scenarios(con, d, which)
        show_draws(con, d)
        for note in d.get("notes", []):
            con.print(f"[yellow]note:[/yellow] {escape(note)}")
        return
    out = d["output"]
    con.print(f"[bold]compare[/bold] {out}: B = {escape(d['b']['name'])} ({escape(str(d['b']['path']))}) against "
              f"A = {escape(d['a']['name'])} ({escape(str(d['a']['path']))})  [dim](seed {d['seed']}, "
              f"{d['samples']:,} draws, the {which})[/dim]\n")
    t = table(f"{out}", ["", "p5", "p25", "p50", "p75", "p95"])
    for tag in ("a", "b"):
        t.add_row(f"{tag.upper()} {escape(d[tag]['name'])}",
                  *(fmt(d[tag][k]) for k in ("p5", "p25", "p50", "p75", "p95")))
    r = d["ratio"]
    t.add_row("B / A", *(f"{r[k]:.4g}" for k in ("p5", "p25", "p50", "p75", "p95")))
    con.print(Fitted(t, QUARTILES))  # a narrow terminal keeps the median and the 90% interval
    con.print(f"  P(B > A) = {r['prob_b_greater']:.3f}, P(B < A) = {r['prob_b_less']:.3f}")
    if d.get("ess") is not None:
        con.print(f"  effective sample size {d['ess']:,.0f}")
    coupled = ", ".join(f"{k} (rank correlation {v:g})" for k, v in (d.get("coupled_inputs") or {}).items())
    ratios = "".join(f"; ratio to A {k} (x {v})" for k, v in (d.get("ratio_inputs") or {}).items())
    con.print(f"  draws: shared {', '.join(d.get('shared_inputs') or []) or 'none'}; coupled {coupled or 'none'}; "
              f"independent {', '.join(d.get('independent_inputs') or []) or 'none'}{escape(ratios)}")
    if d.get("scenarios"):
        con.print()
        show_scenarios(con, d, which, header=False)
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {escape(note)}")
