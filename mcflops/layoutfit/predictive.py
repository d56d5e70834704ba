"""What the layout fit exports: the posterior predictive of the efficiency parameters for a new run (a new stack or a
fitted one, a new series either way) and their marginals in the prior-file grammar (mcflops.layoutfit.validate
writes them into ``layout_fit.json``)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from mcflops.hostrng import generator
from mcflops.layoutfit.fit import DF, Fit, series_effect, stack_sigma
from mcflops.layoutfit.mix import attention_draws, attention_group, attention_scale


def predictive(f: Fit, fam: str | None, seed: int = 0, row_sigma: float = 0.0,
               stack: str | None = None) -> dict[str, np.ndarray]:
    """Draws of the efficiency parameters for a NEW run on family ``fam`` (None: a new family) and a NEW stack, or
    on the fitted stack ``stack`` (its effects and residual scale as fitted).

    The run's residual (Student-t) is carried into the GEMM efficiency, to first order
    (d log eta = (1 - eta) d logit eta), so the MFU prior's width holds what the terms do not explain: its part
    shared by one model's configurations on one stack (rowres), sqrt(sigma_obs^2 - row_sigma^2) (all of sigma_obs at ``row_sigma`` 0), which every
    layout drawn from these draws shares; the row's own part (``row_sigma``, :mod:`mcflops.layoutfit.rowres`) the
    layout prior draws afresh for each run (mcflops.layout.LayoutPrior.row_sigma)."""
    from mcflops.layoutfit.rowres import shared_scale

    s, rng = f.samples, generator(seed)
    n = len(s["mu_gemm"])
    known = stack in f.data.stacks
    if stack is not None and not known:
        raise ValueError(f"the fit has no stack {stack!r} (it has {', '.join(f.data.stacks)})")
    k = f.data.stacks.index(stack) if known else None
    # a new family's and stack's effects are drawn in the order they always were (family, gemm, the residual, tp,
    # dp; the stack's scale from a stream of its own), so that a fit without per-stack scales exports as before
    fz = s["z_family"][:, f.data.families.index(fam)] if fam in f.data.families else rng.standard_normal(n)
    zg = s["z_stack_gemm"][:, k] if known else rng.standard_normal(n)
    # a new run is a new series, of a fitted stack or a new one (its effect from a stream of its own)
    logit = s["mu_gemm"] + s["tau_family"] * fz + s["tau_stack_gemm"] * zg + series_effect(f, None, generator(seed + 2))
    eta = 1 / (1 + np.exp(-logit))
    sig = stack_sigma(f, stack, generator(seed + 1))
    shared = sig if row_sigma == 0 else shared_scale(sig, row_sigma)
    logit = logit + shared * rng.standard_t(DF, n) / (1 - eta)
    z = {p: s[f"z_stack_{p}"][:, k] if known else rng.standard_normal(n) for p in ("tp_comm", "dp_comm")}
    return {"gemm": 1 / (1 + np.exp(-logit)),
            "tp_comm": np.exp(s["mu_log_tp_comm"] + s["tau_stack_tp_comm"] * z["tp_comm"]),
            "dp_comm": np.exp(s["mu_log_dp_comm"] + s["tau_stack_dp_comm"] * z["dp_comm"]),
            "straggler_cv": np.exp(s["mu_log_straggler_cv"]),
            **({"elementwise": np.exp(s["mu_log_elementwise"])} if "mu_log_elementwise" in s else {}),
            # the attention kernels of the stack on the family where the fit measured them, else the kernels' prior
            # (a new stack's, a new family's), from a stream of their own so that the draws above are as before
            **({"attention": attention_draws(s, f.data.attention_groups, attention_group(stack or "", fam),
                                             attention_scale(fam), generator(seed + 3))} if f.attention else {})}


def marginals(draws: Mapping[str, np.ndarray], source: str) -> dict[str, dict[str, Any]]:
    """Each parameter's marginal as the grammar reads it: beta {mean, sd} for gemm and attention (shares of their
    peak), lognormal [p5, p95] else."""
    out = {p: {"beta": {"mean": round(float(np.mean(draws[p])), 4), "sd": round(float(np.std(draws[p])), 4)},
               "source": source} for p in ("gemm", "attention") if p in draws}
    for p in ("tp_comm", "dp_comm", "straggler_cv", "elementwise"):
        if p not in draws:
            continue
        lo, hi = np.quantile(draws[p], [0.05, 0.95])
        out[p] = {"lognormal": [float(f"{lo:.4g}"), float(f"{hi:.4g}")], "source": source}
    return out
