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

No JAX here: the goodput prior form ``{failures: {...}}`` is resolved when a prior file is loaded, at
its count, and again by the planning questions at every count they ask about (:class:`Failures`).

Optimum interval: Daly (2006), the higher-order estimate of its title,
``tau_opt = sqrt(2 delta M) [1 + sqrt(delta / (2M)) / 3 + delta / (18 M)] - delta`` for ``delta < 2M``,
else ``tau_opt = M``; it reduces to the first-order ``sqrt(2 delta M) - delta`` for ``delta << M``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

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


def daly_interval_higher_order(write_h: float, mtbf_h: float) -> float:
    """Daly's (2006) higher-order optimum of the complete model: sqrt(2 delta M) [1 + sqrt(delta /
    (2M)) / 3 + delta / (18 M)] - delta for delta < 2M, M otherwise (0 when delta = 0: checkpoint as
    often as possible)."""
    d, m = float(write_h), float(mtbf_h)
    if d >= 2.0 * m:
        return m
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(d / (2.0 * m)) / 3.0 + d / (18.0 * m)) - d


# Goodput below this at the file's own count is refused: more than 99% of the machine time lost to failures
# means an expected wall-clock time over 100x the failure-free compute, a job nobody runs; it is a mistake
# in the inputs (the rate is per accelerator-hour, the interval in hours).
IMPOSSIBLE = 0.01
# Degenerate but possible: a note. Goodput under a half, or an interval a factor this far from the optimum.
LOW_GOODPUT = 0.5
FAR_FROM_OPTIMUM = 3.0


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


def failures_prior(values: dict, uncertain, user_source: str | None, strict: bool = True) -> Dist:
    """The goodput prior of Daly's model at ``values`` (rate_per_gpu_hour, count, checkpoint_interval_h,
    checkpoint_write_h, restart_h), with at most one of them ``uncertain`` as ``(name, Dist)`` (lognormal or
    uniform). Goodput decreases in each input, so its quantile at p is G(input quantile at 1 - p): exact at the
    knots of a quantile table. Raises ValueError if the formula leaves (0, 1] over the prior, or
    (``strict``) if the median goodput is under :data:`IMPOSSIBLE`; not ``strict`` (a count the planning
    questions try), goodput is floored at 1e-30 instead: a count at which the job cannot finish."""
    if uncertain is None:
        g = float(goodput(values["rate_per_gpu_hour"], values["count"], values["checkpoint_interval_h"],
                          values["checkpoint_write_h"], values["restart_h"]))
        if strict:
            _check_possible(values, g)
        g = max(g, 1e-30)
        return Dist("point", {"value": g}, source=_describe(values, None, user_source, g))
    k, d = uncertain
    p = KNOT_PROBS
    args = {**values, k: _input_quantiles(d, 1.0 - p)}  # goodput decreases in the input: G_p = G(x_{1-p})
    gq = goodput(args["rate_per_gpu_hour"], args["count"], args["checkpoint_interval_h"],
                 args["checkpoint_write_h"], args["restart_h"])
    if strict:
        if not np.all(gq > 0):
            raise ValueError("the goodput formula gives values <= 0 over this prior")
        _check_possible(median_values(values, uncertain), float(gq[int(np.argmin(abs(p - 0.5)))]))
    gq = np.maximum(gq, 1e-30)
    return table_dist(p, gq, source=_describe(values, uncertain, user_source, gq))


def median_values(values: Mapping[str, float], uncertain) -> dict[str, float]:
    """The inputs with the uncertain one at its median (goodput is monotone in it: the median goodput)."""
    if uncertain is None:
        return dict(values)
    return {**values, uncertain[0]: float(_input_quantiles(uncertain[1], np.asarray([0.5]))[0])}


def optimum(values: Mapping[str, float]) -> tuple[float, float]:
    """Daly's higher-order optimum interval at ``values`` and the goodput there."""
    m = float(mtbf_hours(values["rate_per_gpu_hour"], values["count"]))
    tau = daly_interval_higher_order(values["checkpoint_write_h"], m)
    g = float(goodput(values["rate_per_gpu_hour"], values["count"], tau, values["checkpoint_write_h"],
                      values["restart_h"])) if tau > 0 else math.exp(-values["restart_h"] / m)
    return tau, g


def _optimum_words(values: Mapping[str, float]) -> str:
    tau, g = optimum(values)
    if values["checkpoint_write_h"] <= 0:
        return (f"with no checkpoint write time (checkpoint_write_h) the model's optimum is to checkpoint as "
                f"often as possible (goodput up to {g:.3f})")
    return (f"Daly's optimum interval is {tau:.3g} h for this write time and failure rate (Daly 2006, higher order; "
            f"first order sqrt(2 delta M) - delta), goodput {g:.3f} there")


def _check_possible(values: Mapping[str, float], g: float) -> None:
    if not g >= IMPOSSIBLE:
        m = float(mtbf_hours(values["rate_per_gpu_hour"], values["count"]))
        # a goodput that underflowed to 0 has no finite slowdown: say "forever" rather than quote 1e+300x
        slower = f"{1 / g:.3g}x its failure-free time" if g > 0 else "forever (goodput underflows to 0)"
        raise ValueError(f"goodput {g:.3g} on {values['count']:,.0f} accelerators (the job fails every {m:.3g} h, "
                         f"checkpoints every {values['checkpoint_interval_h']:g} h): training would take "
                         f"{slower}; {_optimum_words(values)}; check the units (rate per accelerator-hour, hours)")


def regime_notes(values: Mapping[str, float], g: float) -> list[str]:
    """Notes for a degenerate regime at ``values`` (median inputs) with median goodput ``g``: goodput under
    :data:`LOW_GOODPUT`, or a checkpoint interval more than :data:`FAR_FROM_OPTIMUM` x from Daly's optimum."""
    tau_opt, _ = optimum(values)
    tau = values["checkpoint_interval_h"]
    far = tau_opt > 0 and max(tau / tau_opt, tau_opt / tau) > FAR_FROM_OPTIMUM
    if not (g < LOW_GOODPUT or far):
        return []
    what = f"goodput {g:.3f}" + (" (under 0.5)" if g < LOW_GOODPUT else "")
    where = f"on {values['count']:,.0f} accelerators with checkpoints every {tau:.3g} h"
    ratio = f" ({tau / tau_opt:.2g}x the optimum)" if far else ""
    return [f"failures model: {what} {where}{ratio}; {_optimum_words(values)}"]


@dataclass(frozen=True)
class Failures:
    """A ``goodput: {failures: ...}`` prior as the file wrote it, re-solvable at any accelerator count: the
    job's mean time between failures is 1 / (rate x count), so goodput depends on the count."""

    values: Mapping[str, Any]  # the point inputs (count: the file's, or hardware.count)
    uncertain: tuple[str, Dist] | None = None
    source: str | None = None

    @property
    def count(self) -> int:
        return int(self.values["count"])

    def at(self, count: int | None = None, strict: bool = False) -> Dist:
        """The goodput prior on ``count`` accelerators (default: the file's count)."""
        v = dict(self.values) if count is None else {**self.values, "count": float(count)}
        return failures_prior(v, self.uncertain, self.source, strict=strict)

    def notes(self, count: int | None = None) -> list[str]:
        """:func:`regime_notes` on ``count`` accelerators (default: the file's count)."""
        v = median_values(self.values if count is None else {**self.values, "count": float(count)}, self.uncertain)
        g = float(goodput(v["rate_per_gpu_hour"], v["count"], v["checkpoint_interval_h"], v["checkpoint_write_h"],
                          v["restart_h"]))
        return regime_notes(v, g)
