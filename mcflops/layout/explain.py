"""The layout's account of one run, for summary.json and the report: the layout, the step's seconds by term,
the memory per accelerator, the waterfall (prior and posterior) and a sentence to quote. NumPy only."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mcflops.layout.model import FACTORS
from mcflops.layout.prior import LayoutPrior
from mcflops.layout.waterfall import waterfall

LABELS = {"gemm": "GEMM efficiency", "attention": "the attention core", "memory": "memory-bound operations",
          "experts": "expert load imbalance and token permutation", "recompute": "recomputation",
          "pipeline": "the pipeline bubble", "communication": "exposed communication", "stragglers": "stragglers",
          "counting": "FLOPs not counted", "goodput": "downtime"}
# the efficiency priors by name (mcflops.layout.PARAMS and the optional ones), for the width's parts
PRIOR_LABELS = {"gemm": "GEMM efficiency", "tp_comm": "tensor-parallel communication",
                "dp_comm": "data-parallel communication", "ep_comm": "expert-parallel all-to-all",
                "straggler_cv": "stragglers", "elementwise": "memory-bound operations (bytes moved)",
                "attention": "attention core's efficiency", "moe_mem": "expert GEMMs' memory-bound time",
                "moe_imbalance": "expert load imbalance"}
IDENTIFIED = ("a GPU-hours figure constrains the factors only through their product (MFU): their posteriors move "
              "together along it, and the split between them is the prior's")


def explain(prior: LayoutPrior, posterior_mfu=None, goodput: float | None = None) -> dict[str, Any]:
    """Plain data: what the report and summary.json show of a layout prior at the file's count."""
    tm = prior.terms()
    wf = waterfall(prior, posterior_mfu=posterior_mfu, goodput=goodput)
    mem = prior.memory()
    out: dict[str, Any] = {
        # a field the file left unstated is "unknown" here, as in the resolved file; what it kept is under mixed
        "layout": prior.layout_fields() | {"dp": tm.dp} | {k: "unknown" for k in prior.mixed},
        "accelerator": prior.accelerator, "count": prior.count,
        "micro_batches": tm.micro_batches, "bubble": tm.bubble, "recompute_ratio": tm.rho, "gemm_shape_share": tm.g,
        "step_seconds": {k: float(v) for k, v in tm.detail.items() if k.endswith("_s")},
        "efficiency": {p: d.describe() for p, d in prior.efficiency.items()},
        "counting": prior.counting,
        "waterfall": wf.to_dict(),
        "sentence": sentence(wf),
        "identified": IDENTIFIED if posterior_mfu is not None else None,
        "notes": prior.notes(),
        # a prior conditioned on pilots: its width is the pilots' posterior predictive's, which the parts (each on
        # the unweighted draws) do not describe, and the pilot has measured what they would name
        "width_parts": None if getattr(prior, "pilots", ()) else width_parts(prior),
    }
    if prior.mixed:
        out["mixed"] = {k: list(dict.fromkeys(c[j] for c in prior.combos)) for j, k in enumerate(prior.mixed)}
    if mem is not None:
        out["memory"] = mem.to_dict()
    return out


def width_parts(prior: LayoutPrior) -> dict[str, Any]:
    """What the MFU prior's width is made of: its p95/p5 with every efficiency prior drawn, and with each one in turn
    at its own median (a point prior, the other draws as they were). The prior whose fixing narrows it most is the
    one to state (``efficiency:``, a fitted ``stack:``) or measure (``pilot:``). A one-at-a-time reading, not a
    variance decomposition: the parts need not multiply to the whole. Over the layout table's Latin-hypercube draws
    (mcflops.layout.prior), so it is the same in every run of the file; a prior that does not enter the layout is
    left out."""
    from mcflops.priors.dist import Dist
    from mcflops.priors.quantiles import ppf

    def width(lp: LayoutPrior) -> float:
        lo, hi = np.quantile(lp.factor_draws()["mfu"], [0.05, 0.95])
        return float(hi / lo)

    whole, draws, fixed = width(prior), prior.draws(), {}
    for p, d in prior.efficiency.items():
        if d.family == "point" or p not in draws:
            continue
        med = float(ppf(d, 0.5))
        point = Dist("point", {"value": med}, source="its median")
        # the other columns as drawn (the same Latin-hypercube table), this one at its median
        one = dataclasses.replace(prior, efficiency={**prior.efficiency, p: point},
                                  _cache={"draws": {**draws, p: np.full_like(draws[p], med)}})
        w = width(one)
        if abs(w - whole) > 1e-9 * whole:  # a prior that does not enter this layout (ep_comm of a dense model): left out
            fixed[p] = w
    return {"all": whole, "fixed": fixed, "names": {p: PRIOR_LABELS.get(p, p) for p in fixed}}


def sentence(wf) -> str:
    """"Of 989 TFLOP/s, 35% went to GEMM efficiency, ...": the waterfall's steps at their medians."""
    tf = 1e12
    parts = [f"{(before - after) / wf.peak:.0%} to {LABELS[name]}" for name, before, after in wf.steps
             if before - after > 0.005 * wf.peak]
    achieved = next((after for n, _, after in wf.steps if n == FACTORS[-1]), wf.peak)
    text = f"Of {wf.peak / tf:,.0f} TFLOP/s per accelerator, " + (", ".join(parts) if parts else "almost nothing was lost")
    text += f": {achieved / tf:,.0f} TFLOP/s achieved while training"
    last = wf.steps[-1]
    if last[0] == "goodput":
        text += f", {last[2] / tf:,.0f} TFLOP/s delivered over the wall-clock time"
    return text + " (medians of each factor; the factors' medians do not multiply to the MFU's median exactly)."


