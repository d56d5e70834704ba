"""`mcflops plan`: the estimate run backwards through analysis.plan (accelerators for a deadline, days
on a cluster, tokens in a budget), printed as tables or --json; with --out, plan.json and plan.png
(the chance to finish in time against the accelerator count)."""

from __future__ import annotations

from typing import Any

from mcflops.output import figures
from mcflops.cli.session import analysis_command, plain, samples
from mcflops.cli.tables import unpadded
from mcflops.numbers import format_number as fmt


def command(args) -> int:
    return analysis_command(args, compute, "plan.json", figures.plan, show_plan)


def compute(args, progress) -> dict[str, Any]:
    from mcflops import api  # the notebook's path: one plan for both

    return plain(api.plan(args.file, deadline_days=args.deadline_days, prob=args.prob, gpus=args.gpus,
                          budget_hours=args.budget_hours, budget_usd=args.budget_usd, posterior=args.posterior,
                          samples=samples(args.samples), seed=args.seed, progress=progress))


def show_plan(con, d: dict[str, Any]) -> None:
    from rich.markup import escape

    con.print(f"[bold]{escape(d['name'])}[/bold]  planning on the {d['distribution']} "
              f"[dim](seed {d['seed']}, {d['samples']:,} draws)[/dim]\n")
    answers(con, d)


def answers(con, d: dict[str, Any]) -> None:
    """The answers and their notes (also under `mcflops run` for a file with a plan: block)."""
    from rich.markup import escape

    p = d["prob"]
    h = d["gpu_hours"]
    con.print(f"  GPU-hours: p50 {fmt(h['p50'])}, p90 {fmt(h['p90'])} (90% interval {fmt(h['p5'])} to {fmt(h['p95'])})")
    if "deadline" in d:
        dl = d["deadline"]
        half = f"{dl['gpus_p50']:,}" if dl.get("gpus_p50") is not None else "no count"
        if dl["gpus"] is None:
            best = f"the best, {dl['best_gpus']:,}, gives {dl['best_prob']:.3f}" if dl.get("best_gpus") else "none gives more than 0"
            con.print(f"  to finish within {unpadded(dl['days'])} days with probability {p:g}: [bold]no accelerator "
                      f"count[/bold] ({best})")
        else:
            con.print(f"  to finish within {unpadded(dl['days'])} days with probability {p:g}: [bold]{dl['gpus']:,}"
                      f"[/bold] accelerators ({half} for an even chance)"
                      + (f" [dim](fixed point: {', '.join(d['count_dependent'])} re-solved at each count)[/dim]"
                         if "count_dependent" in d else ""))
    if "cluster" in d:
        c = d["cluster"]
        line = (f"  on {c['gpus']:,} accelerators: {c['days_p50']:.1f} days at p50, {c['days_p90']:.1f} at p90"
                + (f", {c['days_at_prob']:.1f} at p{100 * p:g}" if p not in (0.5, 0.9) else ""))
        if "prob_within_deadline" in c:
            line += f"; P(done within {unpadded(d['deadline']['days'])} days) = {c['prob_within_deadline']:.3f}"
        con.print(line)
    for key, unit in (("budget_hours", "GPU-hours"), ("budget_usd", "USD")):
        if key in d:
            b = d[key]
            con.print(f"  a budget of {unpadded(b['budget'])} {unit} fits [bold]{fmt(b['tokens'])}[/bold] tokens with "
                      f"probability {p:g} ({fmt(b['tokens_p50'])} at even odds)")
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {escape(note)}")
    if not any(k in d for k in ("deadline", "cluster", "budget_hours", "budget_usd")):
        con.print("  [dim]ask a question: --deadline-days D, --gpus N, --budget-hours H or --budget-usd B[/dim]")
