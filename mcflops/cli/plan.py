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
    from mcflops.analysis import plan
    from mcflops.spec import load_spec, plan_options

    spec = load_spec(args.file)
    opts = plan_options(spec, deadline_days=args.deadline_days, prob=args.prob, gpus=args.gpus,
                        budget_hours=args.budget_hours, budget_usd=args.budget_usd)
    return plain(plan.plan(spec, opts, samples=samples(args.samples), seed=args.seed,
                           posterior=args.posterior, progress=progress))


def show_plan(con, d: dict[str, Any]) -> None:
    p = d["prob"]
    con.print(f"[bold]{d['name']}[/bold]  planning on the {d['distribution']} "
              f"[dim](seed {d['seed']}, {d['samples']:,} draws)[/dim]\n")
    h = d["gpu_hours"]
    con.print(f"  GPU-hours: p50 {fmt(h['p50'])}, p90 {fmt(h['p90'])} (90% interval {fmt(h['p5'])} to {fmt(h['p95'])})")
    if "deadline" in d:
        dl = d["deadline"]
        con.print(f"  to finish within {unpadded(dl['days'])} days with probability {p:g}: [bold]{dl['gpus']:,}[/bold] "
                  f"accelerators ({dl['gpus_p50']:,} for an even chance)")
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
    if not any(k in d for k in ("deadline", "cluster", "budget_hours", "budget_usd")):
        con.print("  [dim]ask a question: --deadline-days D, --gpus N, --budget-hours H or --budget-usd B[/dim]")
