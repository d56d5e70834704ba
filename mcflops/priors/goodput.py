"""Goodput from failures: the share of wall-clock time that moves training forward.

Inputs: a failure rate per accelerator-hour ``r``, the accelerator count ``n`` (the job's mean time
between failures is ``M = 1 / (r n)`` hours: one failed part stops a synchronous job), the compute
time between checkpoints ``tau``, the time a checkpoint blocks training ``delta`` and the time to
restart after a failure ``R`` (reschedule, re-initialise, load the checkpoint).

The model is Daly's "complete" cost function for Poisson failures (J. T. Daly 2006, "A higher order
estimate of the optimum checkpoint interval for restart dumps", Future Generation Computer Systems
22(3):303-312, Sec. 3), which extends Young's first-order model (J. W. Young 1974, "A first order
approximation to the optimum checkpoint interval", CACM 17(9):530-531):

    wall time  T_w = M e^{R/M} (e^{(tau + delta)/M} - 1) T_s / tau        (T_s: failure-free compute)
    goodput    G   = T_s / T_w = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1))

Renewal argument (what the tests simulate): a segment of ``s = tau + delta`` hours succeeds with
probability ``q = e^{-s/M}``; a failed attempt costs ``E[min(X, s)] = M (1 - q)`` plus a restart,
and a restart that is itself interrupted starts over, so it takes ``M (e^{R/M} - 1)`` on average.
Attempts are geometric (``1/q`` of them), so a segment takes ``M (1 - q)/q + (1/q - 1) M (e^{R/M} - 1)
= M e^{R/M} (e^{s/M} - 1)`` hours, and ``T_s / tau`` segments give ``T_w``.

To first order in ``(tau, delta, R) / M`` (Young 1974; the rule of thumb "waste per failure = restart +
interval/2, plus checkpoint overhead write/interval"): ``G ~ (1 - (R + (tau + delta)/2) / M) / (1 + delta/tau)``.

No JAX here: the goodput prior form ``{failures: {...}}`` is resolved when a prior file is loaded.
"""

from __future__ import annotations

import math

import numpy as np

from mcflops.priors.dist import Dist
from mcflops.priors.table import KNOT_PROBS, table_dist

FAILURE_KEYS = ("rate_per_gpu_hour", "count", "checkpoint_interval_h", "checkpoint_write_h", "restart_h")
# inputs that may carry a prior (goodput decreases in each, so their quantiles map exactly)
UNCERTAIN_OK = ("rate_per_gpu_hour", "checkpoint_write_h", "restart_h")


def mtbf_hours(rate_per_gpu_hour, count):
    """Mean time between failures of a synchronous job on ``count`` accelerators: 1 / (r n)."""
    return 1.0 / (np.asarray(rate_per_gpu_hour, float) * count)


def goodput(rate_per_gpu_hour, count, interval_h, write_h=0.0, restart_h=0.0):
    """Daly (2006) complete model: tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)) (vectorised)."""
    m = mtbf_hours(rate_per_gpu_hour, count)
    tau, delta, r = (np.asarray(v, float) for v in (interval_h, write_h, restart_h))
    # log G = log tau - log M - R/M - log(expm1((tau + delta)/M)); expm1 keeps small (tau+delta)/M exact
    return np.exp(np.log(tau) - np.log(m) - r / m - np.log(np.expm1((tau + delta) / m)))


def goodput_first_order(rate_per_gpu_hour, count, interval_h, write_h=0.0, restart_h=0.0):
    """Young (1974) to first order: (1 - (R + (tau + delta)/2) / M) / (1 + delta / tau)."""
    m = mtbf_hours(rate_per_gpu_hour, count)
    tau, delta, r = (np.asarray(v, float) for v in (interval_h, write_h, restart_h))
    return (1.0 - (r + (tau + delta) / 2.0) / m) / (1.0 + delta / tau)


def young_interval(write_h: float, mtbf_h: float) -> float:
    """Young's (1974) optimum compute time between checkpoints: sqrt(2 delta M)."""
    return math.sqrt(2.0 * write_h * mtbf_h)


def daly_interval(write_h: float, mtbf_h: float) -> float:
    """Daly's (2006) first-order optimum: sqrt(2 delta M) - delta, the maximiser of the first-order
    goodput above when R = 0 (its derivative vanishes at (tau + delta)^2 = 2 delta (M - R))."""
    return math.sqrt(2.0 * write_h * mtbf_h) - write_h


def rate_from_counts(failures: float, days: float, count: float) -> float:
    """Failures per accelerator-hour from a published count: failures / (days x 24 x count)."""
    return failures / (days * 24.0 * count)


def _input_quantiles(d, probs: np.ndarray) -> np.ndarray:
    from scipy.special import ndtri

    if d.family == "lognormal":
        return np.exp(d.params["mu"] + d.params["sigma"] * ndtri(probs))
    return d.params["low"] + (d.params["high"] - d.params["low"]) * probs


def _describe(values, uncertain, user_source, g) -> str:
    parts = {k: values[k] for k in FAILURE_KEYS if k in values}
    if uncertain is not None:
        parts[uncertain[0]] = uncertain[1].describe()
    desc = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in parts.items())
    if np.ndim(g):
        i5, i50, i95 = (int(np.argmin(abs(KNOT_PROBS - q))) for q in (0.05, 0.5, 0.95))
        val = f"p5/p50/p95 {g[i5]:.4f}/{g[i50]:.4f}/{g[i95]:.4f}"
    else:
        val = f"{g:.4f}"
    s = f"failures model (Daly 2006, complete; mcflops.goodput): {desc} -> goodput {val}"
    return f"{user_source} | {s}" if user_source else s


def failures_prior(values: dict, uncertain, user_source: str | None) -> Dist:
    """The goodput prior of Daly's model at ``values`` (rate_per_gpu_hour, count, checkpoint_interval_h,
    checkpoint_write_h, restart_h), with at most one of them ``uncertain`` as ``(name, Dist)`` (lognormal or
    uniform). Goodput decreases in each input, so its quantile at p is G(input quantile at 1 - p): exact at the
    knots of a quantile table. Raises ValueError if the formula leaves (0, 1] over the prior."""
    if uncertain is None:
        g = float(goodput(values["rate_per_gpu_hour"], values["count"], values["checkpoint_interval_h"],
                          values["checkpoint_write_h"], values["restart_h"]))
        return Dist("point", {"value": g}, source=_describe(values, None, user_source, g))
    k, d = uncertain
    p = KNOT_PROBS
    args = {**values, k: _input_quantiles(d, 1.0 - p)}  # goodput decreases in the input: G_p = G(x_{1-p})
    gq = goodput(args["rate_per_gpu_hour"], args["count"], args["checkpoint_interval_h"],
                 args["checkpoint_write_h"], args["restart_h"])
    if not np.all(gq > 0):
        raise ValueError("the goodput formula gives values <= 0 over this prior")
    return table_dist(p, gq, source=_describe(values, uncertain, user_source, gq))
