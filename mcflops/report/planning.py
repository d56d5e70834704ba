"""The report's planning section: the answers to the prior file's ``plan:`` block (summary.json's ``plan``,
computed by ``mcflops run`` through analysis.plan) and the plan curve (plan.png).

Reads only summary.json and the figure; does no statistics. Absent when the file has no ``plan:`` block.
"""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.numbers import format_number
from mcflops.report.blocks import B, Box, C, Fig, P, Section, Table, fmt, interval, num

FIGURE = "plan.png"  # drawn by plots.sensitivity.plan_curve (the figure of `mcflops plan --out`)


def _days(x: Any) -> str:
    return f"{x:,.1f} days" if num(x) else "n/a"


def _g(x: Any) -> str:
    return f"{x:g}" if num(x) else "n/a"


def planning(run) -> Section | None:
    """The section, or None when summary.json has no plan (the file asked nothing)."""
    plan = run.summary.get("plan")
    if not isinstance(plan, Mapping):
        return None
    sec = Section("planning", "Planning: the file's plan: block")
    p = plan.get("prob")
    dist = str(plan.get("distribution", "prior"))
    n = f"{plan['samples']:,}" if isinstance(plan.get("samples"), int) else "?"
    sec.blocks.append(P([f"The estimate run backwards on the {dist} predictive ({n} draws, "
                         f"seed {plan.get('seed', '?')}); every answer holds with probability {_g(p)}. The same "
                         "answers in a terminal: ", C("mcflops plan FILE"), "."]))
    box: list = []
    dl = plan.get("deadline")
    if isinstance(dl, Mapping):
        box.append(P(_deadline(dl, p, plan.get("count_dependent"))))
    cl = plan.get("cluster")
    if isinstance(cl, Mapping) and num(cl.get("gpus")):
        line = [f"On {int(cl['gpus']):,} accelerators: ", B(_days(cl.get("days_p50"))),
                f" at the median, {_days(cl.get('days_p90'))} at p90"]
        if num(cl.get("prob_within_deadline")) and isinstance(dl, Mapping):
            line.append(f"; P(done within {_g(dl.get('days'))} days) = {cl['prob_within_deadline']:.3f}")
        box.append(P(line + ["."]))
    for key, unit, per in (("budget_hours", "GPU-hours", "hours_per_token_p50"), ("budget_usd", "USD",
                                                                                  "usd_per_token_p50")):
        b = plan.get(key)
        if isinstance(b, Mapping) and num(b.get("tokens")):
            box.append(P([f"A budget of {format_number(b.get('budget'))} {unit} fits ",
                          B(f"{format_number(b['tokens'])} tokens"), f" with probability {_g(b.get('prob'))} "
                          f"({format_number(b.get('tokens_p50'))} at even odds; {format_number(b.get(per))} {unit} "
                          "per token at the median)."]))
    if box:
        sec.blocks.append(Box(box))
    h = plan.get("gpu_hours")
    if isinstance(h, Mapping) and num(h.get("p50")):
        where = f" on {int(cl['gpus']):,} accelerators" if plan.get("count_dependent") and isinstance(cl, Mapping) \
            and num(cl.get("gpus")) else ""
        sec.blocks.append(Table(["quantity", "p50", "p90", "90% interval"],
                                [[f"GPU-hours{where}", fmt("gpu_hours", h["p50"]), fmt("gpu_hours", h.get("p90")),
                                  interval("gpu_hours", h.get("p5"), h.get("p95"))]], num=frozenset({1, 2, 3})))
    for note in plan.get("notes") or ():
        sec.blocks.append(P([f"Note: {note}"], "note"))
    if FIGURE in run.figures:
        sec.blocks.append(Fig(FIGURE, run.figures[FIGURE], "Plan: the probability of finishing within the deadline "
                              "against the accelerator count" + (" (count-dependent inputs re-solved at each count)"
                                                                 if plan.get("count_dependent") else "")))
    return sec


def _deadline(dl: Mapping, p: Any, dep: Any) -> list:
    days = _g(dl.get("days"))
    if dl.get("gpus") is None:
        best = (f"the best count tried, {int(dl['best_gpus']):,}, gives {dl['best_prob']:.3f}"
                if num(dl.get("best_gpus")) and num(dl.get("best_prob")) else "no count tried gives any chance")
        return [f"To finish within {days} days with probability {_g(p)}: ", B("no accelerator count"), f" ({best})."]
    out: list = [f"To finish within {days} days with probability {_g(p)}: ", B(f"{int(dl['gpus']):,} accelerators")]
    if num(dl.get("gpus_p50")):
        out.append(f" ({int(dl['gpus_p50']):,} for an even chance)")
    if dep:
        words = ", ".join(str(d) for d in dep)
        mc = f", P there {dl['prob_at_gpus']:.4f} ± {dl['mcse']:.4f} (MCSE)" if num(dl.get("prob_at_gpus")) and \
            num(dl.get("mcse")) else ""
        out.append(f": the fixed point, the smallest count whose own {words} (re-solved at that count) gives "
                   f"P(done within {days} days) ≥ {_g(p)}{mc}")
    return out + ["."]
