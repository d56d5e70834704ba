"""Posterior summaries in one shape for importance sampling and NUTS: from a weighted log-space histogram
(the engine's sums) or from draws.

Each quantity: mean, sd, p5..p95, the 90% highest-density interval (HDI: the shortest interval holding
90%, as arviz's hdi), and Monte Carlo standard errors. For independent draws (importance weights, a
resample) they come from the effective sample size: sd / sqrt(ESS) for the mean, sd / sqrt(2 ESS) for
the sd (normal theory), and sqrt(p (1 - p) / ESS) / f(q_p) for a quantile q_p (the asymptotic variance
of a sample quantile; Serfling 1980, Sec. 2.3.3), with the density f from the spacing of neighbouring
quantiles. For Markov chains (NUTS) each statistic gets its own ESS from the chains' autocorrelation
(mcse.py; Vehtari et al. 2021): a tail quantile of a slowly mixing chain has far fewer effective draws
than its bulk, so one bulk ESS for every statistic would understate the tails' errors.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from mcflops.engine import summary
from mcflops.inference import mcse

HDI_PROB = 0.9
MCSE_QUANTILES = (("p5", 0.05), ("p50", 0.5), ("p95", 0.95))  # the quantiles given a Monte Carlo error


def _hdi_from_quantile(qf, prob: float = HDI_PROB, grid: int = 400) -> tuple[float, float]:
    """Shortest interval [Q(p), Q(p + prob)] over p in [0, 1 - prob] for a quantile function Q (linear units)."""
    p = np.linspace(0.0, 1.0 - prob, grid + 1)
    p = np.clip(p, 1e-6, 1 - prob - 1e-6)
    a, b = qf(p), qf(p + prob)
    ok = np.isfinite(a) & np.isfinite(b)
    if not ok.any():
        return math.nan, math.nan
    i = int(np.argmin(np.where(ok, b - a, np.inf)))
    return float(a[i]), float(b[i])


def hist_stats(s: Mapping[str, np.ndarray], i: int, center: float, lo: float, width: float,
               n_eff: float) -> dict[str, Any]:
    """summary.quantity_stats plus the 90% HDI and MCSEs, from weighted sums (one quantity)."""
    out = summary.quantity_stats(s, i, center, lo, width, n_eff)
    edges, cdf = summary.hist_cdf(np.asarray(s["hist"][i], np.float64), lo, width)

    def qf(p):  # quantiles in linear units; NaN where they fall into the under/overflow bins
        q = np.exp(center + np.interp(p, cdf, edges))
        return np.where((np.asarray(p) < cdf[0]) | (np.asarray(p) > cdf[-1]), np.nan, q)

    out["hdi90"] = list(_hdi_from_quantile(qf))
    out.update(_mcse(out, qf, n_eff))
    out["ess"] = float(n_eff)
    return out


def sample_stats(d: np.ndarray, center: float, ess: float, chains: bool = False) -> dict[str, Any]:
    """The same summary from draws of a centred log (any shape), with the draws' effective sample size.

    ``chains``: ``d`` is [chains, draws] of a Markov chain, and the MCSEs are Vehtari et al. (2021)'s, each
    from its own statistic's autocorrelation (mcse.py); otherwise from ``ess`` as for independent draws."""
    x = np.exp(center + np.asarray(d, np.float64).ravel())
    ld = center + np.asarray(d, np.float64).ravel()
    out: dict[str, Any] = {"mean": float(np.mean(x)), "sd": float(np.std(x))}
    for k, p in summary.QUANTILES.items():
        out[k] = float(np.quantile(x, p))
    xs = np.sort(x)
    k = int(math.ceil(HDI_PROB * len(xs)))  # shortest window holding 90% of the sorted draws (arviz.hdi)
    j = int(np.argmin(xs[k - 1:] - xs[: len(xs) - k + 1]))
    out["hdi90"] = [float(xs[j]), float(xs[j + k - 1])]
    if chains:
        xc = np.exp(center + np.asarray(d, np.float64))
        out.update({"mcse_mean": mcse.mcse_mean(xc), "mcse_sd": mcse.mcse_sd(xc),
                    **{f"mcse_{k}": mcse.mcse_quantile(xc, p) for k, p in MCSE_QUANTILES}})
        out["ess_tail"] = min(mcse.ess_quantile(xc, 0.05), mcse.ess_quantile(xc, 0.95))  # Vehtari et al. 2021, Sec. 4.3
    else:
        out.update(_mcse(out, lambda p: np.quantile(x, p), ess))
    out["log_mean"], out["log_sd"] = float(np.mean(ld)), float(np.std(ld))
    out["ess"] = float(ess)
    return out


def _mcse(st: Mapping[str, Any], qf, n_eff: float) -> dict[str, float]:
    """Monte Carlo standard errors of mean, sd, p5, p50, p95 from the effective sample size (module doc)."""
    n = max(float(n_eff), 1.0)
    out = {"mcse_mean": st["sd"] / math.sqrt(n), "mcse_sd": st["sd"] / math.sqrt(2.0 * n)}
    for key, p in MCSE_QUANTILES:
        dp = min(0.02, p / 2)
        a, b = (float(v) for v in qf(np.asarray([p - dp, p + dp])))
        inv_f = (b - a) / (2 * dp)  # 1 / density at q_p (linear units)
        out[f"mcse_{key}"] = math.sqrt(p * (1 - p) / n) * inv_f if math.isfinite(inv_f) else math.nan
    return out


def prob_between(s: Mapping[str, np.ndarray], i: int, center: float, lo: float, width: float,
                 a: float, b: float) -> float:
    """P(a <= x <= b) of quantity i under weighted sums (interpolated histogram CDF); a may be 0."""
    edges, cdf = summary.hist_cdf(np.asarray(s["hist"][i], np.float64), lo, width)
    la = math.log(a) - center if a > 0 else -math.inf
    fa, fb = np.interp([la, math.log(b) - center], edges, cdf, left=0.0, right=1.0)
    return float(fb - fa)
