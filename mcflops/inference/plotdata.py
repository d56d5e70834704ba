"""What the figures show, as plain arrays and numbers: densities on grids, the implied MFU x goodput
curve, the observation's band. plots/ draws these and computes nothing of its own (the split of
arviz-stats, which computes plot data, from arviz-plots, which draws it).

Densities come from the engine's log-space histograms when they exist (every prior draw; every
weighted draw under importance sampling): the histogram CDF read at a linear grid and differenced,
f(x) = dF/dx. NUTS posteriors use a histogram of the draws (no kernel smearing past a bounded
prior's edge). The headline's GPU-hours use a Gaussian KDE in log space. NumPy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

FRACTIONS = frozenset({"mfu", "goodput"})  # at most 1: their grids stop there (figures show them in %)
Z90 = 1.6448536269514722  # Phi^-1(0.95): a 90% band


def gaussian_kde(data: np.ndarray, points: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """1-D Gaussian kernel density estimate of ``data`` at ``points``, as scipy.stats.gaussian_kde(data)(points).

    Bandwidth by Scott's rule (Scott 1992, "Multivariate Density Estimation"), scipy's default: factor
    n^(-1/(d+4)) = n^(-1/5) in 1-D, so kernel variance h^2 = sample variance (ddof 1) x n^(-2/5);
    f(x) = mean_i N(x; x_i, h^2).
    NumPy only: a run's start-up does not pay for importing scipy.stats.
    """
    data = np.asarray(data, np.float64).ravel()
    points = np.asarray(points, np.float64)
    n = data.size
    var = np.var(data, ddof=1) * n ** (-2.0 / 5.0)
    flat = points.ravel()
    out = np.empty(flat.size)
    step = max(1, chunk // max(n, 1))  # points per block: at most ``chunk`` kernel values in memory
    for i in range(0, flat.size, step):
        diff = flat[i:i + step, None] - data[None, :]
        out[i:i + step] = np.exp(-0.5 * diff * diff / var).sum(axis=1)
    return (out / (n * math.sqrt(2.0 * math.pi * var))).reshape(points.shape)


def log_kde_density(draws: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Density of positive draws on ``grid`` (a Gaussian KDE in log space, mapped back: f(x) = g(log x) / x)."""
    logs = np.log(draws[np.isfinite(draws) & (draws > 0)])
    if logs.size < 10 or np.ptp(logs) == 0:
        return np.zeros_like(grid)
    return gaussian_kde(logs, np.log(grid)) / grid


def hist_density(hist: np.ndarray, center: float, lo: float, width: float, grid: np.ndarray) -> np.ndarray:
    """Density on a linear grid from one quantity's weighted log-space histogram sums (edges lo + width k
    around ``center``; the first and last bins hold the tails)."""
    h = np.asarray(hist, np.float64)
    edges = lo + width * np.arange(len(h) - 1)
    cdf = np.concatenate([[h[0]], h[0] + np.cumsum(h[1:-1])]) / h.sum()
    mid = 0.5 * (grid[1:] + grid[:-1])
    step = np.diff(grid)
    f = np.diff(np.interp(np.log(grid) - center, edges, cdf)) / step
    return np.interp(grid, mid, f)


def draws_density(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Density of draws on a grid: a histogram (no kernel smearing past a bounded prior's edge) with
    2 n^(1/3) bins (Rice's rule)."""
    x = x[np.isfinite(x)]
    if x.size < 10 or np.ptp(x) == 0:
        return np.zeros_like(grid)
    bins = int(np.clip(2 * x.size ** (1 / 3), 10, 60))
    lo, hi = np.quantile(x, [0.0005, 0.9995])
    h, e = np.histogram(x, bins=np.linspace(lo, hi, bins + 1), density=True)
    h = h * np.mean((x >= lo) & (x <= hi))
    i = np.searchsorted(e, grid, side="right") - 1
    return np.where((i >= 0) & (i < bins), h[np.clip(i, 0, bins - 1)], 0.0)


@dataclass(frozen=True)
class Source:
    """Where a run's densities are read from: the engine's sums (``names``, ``prior``/``post`` histograms,
    ``lo``, ``width``) and log-space centres, or, for a posterior that is not importance-weighted
    (NUTS), its kept draws."""

    sums: Any
    centers: Mapping[str, float]
    method: str | None  # the posterior's method ("importance", "nuts"); None without a posterior
    posterior_draws: Mapping[str, np.ndarray]

    def prior(self, name: str, grid: np.ndarray) -> np.ndarray:
        s, i = self.sums, list(self.sums.names).index(name)
        return hist_density(s.prior["hist"][i], self.centers[name], s.lo[i], s.width[i], grid)

    def posterior(self, name: str, grid: np.ndarray) -> np.ndarray:
        s = self.sums
        if self.method == "importance" and s.post is not None:
            i = list(s.names).index(name)
            return hist_density(s.post["hist"][i], self.centers[name], s.lo[i], s.width[i], grid)
        return draws_density(self.posterior_draws[name], grid)


def _grid(name: str, prior: Mapping[str, float], posterior: Mapping[str, float], n: int = 160) -> np.ndarray:
    lo = min(prior["p5"], posterior["p5"])
    hi = max(prior["p95"], posterior["p95"])
    span = hi - lo
    lo, hi = max(lo - 0.6 * span, 1e-300), hi + 0.6 * span
    if name in FRACTIONS:
        hi = min(hi, 1.0)
    return np.linspace(lo, hi, n)


def posterior_inputs(src: Source, prior: Mapping[str, Any], posterior: Mapping[str, Any],
                     uncertain: Sequence[str], observed: Sequence[str]) -> dict[str, Any]:
    """One panel per uncertain input in the posterior (grid, prior and posterior densities, 90% HDI,
    medians, ``percent``: a fraction, shown in %), and the finding: the input the data say most about (MFU when it is not observed, else the
    one whose log mean moved most, in prior sds), with its posterior median and HDI; None when every
    input is observed."""
    panels = []
    for name in (n for n in uncertain if n in posterior):
        grid = _grid(name, prior[name], posterior[name])
        panels.append({"name": name, "grid": grid, "prior": src.prior(name, grid),
                       "posterior": src.posterior(name, grid), "hdi90": tuple(posterior[name]["hdi90"]),
                       "prior_p50": prior[name]["p50"], "posterior_p50": posterior[name]["p50"],
                       "percent": name in FRACTIONS})
    names = [n for n in uncertain if n in posterior and n not in observed]
    finding = None
    if names:
        shift = {n: abs(posterior[n]["log_mean"] - prior[n]["log_mean"]) / max(prior[n]["log_sd"], 1e-12)
                 for n in names}
        n = "mfu" if "mfu" in names else max(shift, key=shift.get)
        finding = {"input": n, "given": list(observed), "posterior_p50": posterior[n]["p50"],
                   "hdi90": tuple(posterior[n]["hdi90"]), "prior_p50": prior[n]["p50"], "percent": n in FRACTIONS}
    return {"panels": panels, "finding": finding}


def ridge(prior_draws: Mapping[str, np.ndarray], posterior_draws: Mapping[str, np.ndarray],
          posterior: Mapping[str, Any], chain: Mapping[str, float], observation: Any = None) -> dict[str, Any]:
    """MFU and goodput draws (prior and posterior), and the curve MFU x goodput = c the data imply: c is
    the published hours at every other input's median (model.chain) when there are such, else the
    posterior median of the product; with a lognormal observation of GPU-hours, its 90% band."""
    pm, pg = prior_draws["mfu"], prior_draws["goodput"]
    qm, qg = posterior_draws["mfu"], posterior_draws["goodput"]
    prod = posterior.get("mfu_x_goodput") or {}
    c = prod.get("p50", float(np.median(qm * qg)))
    if "implied_mfu_x_goodput" in chain:
        c = chain["implied_mfu_x_goodput"]
    g = np.linspace(max(min(pg.min(), qg.min()), 1e-3), min(max(pg.max(), qg.max()), 1.0), 200)
    band = None
    if observation is not None and observation.noise == "lognormal":
        band = tuple(c * math.exp(sgn * Z90 * observation.scale) / g for sgn in (-1, 1))
    return {"prior": {"mfu": pm, "goodput": pg}, "posterior": {"mfu": qm, "goodput": qg}, "product": c,
            "goodput_grid": g, "mfu_curve": c / g, "mfu_band": band,
            "correlation": posterior.get("corr_mfu_goodput_log", float("nan"))}


def predictive(src: Source, name: str, prior: Mapping[str, float], observation: Any,
               observed: Mapping[str, Any]) -> dict[str, Any]:
    """An observed quantity's prior predictive and posterior densities on a grid wide enough for the
    observation's 90% band (an interval observation: the interval, and no single published value);
    ``percent``: a fraction, shown in %."""
    o = observation
    span = prior["p95"] - prior["p5"]
    lo, hi = prior["p5"] - 0.8 * span, prior["p95"] + 0.8 * span
    if o.noise == "between":
        band, mark = (o.low, o.high), None
    elif o.noise == "lognormal":
        band, mark = (o.value * math.exp(-Z90 * o.scale), o.value * math.exp(Z90 * o.scale)), o.value
    else:
        band, mark = (o.value - Z90 * o.scale, o.value + Z90 * o.scale), o.value
    lo, hi = max(min(lo, band[0]), 1e-300), max(hi, band[1])
    grid = np.linspace(lo, hi, 300)
    return {"name": name, "grid": grid, "prior": src.prior(name, grid), "posterior": src.posterior(name, grid),
            "band": band, "published": mark, "prior_p50": prior["p50"], "observed": dict(observed),
            "percent": name in FRACTIONS}


def headline(summary: Mapping[str, Any], prior_draws: np.ndarray,
             posterior_draws: np.ndarray | None = None) -> dict[str, Any]:
    """GPU-hours before and after the published figure: densities on a grid that holds 99.6% of the
    draws and the figure, with what the title and markers need from ``summary`` (summary.json's content)."""
    prior = (summary.get("prior") or {}).get("gpu_hours") or {}
    obs = (summary.get("observed") or {}).get("gpu_hours") or {}
    value = obs.get("value")
    draws = [np.asarray(prior_draws, np.float64)]
    if posterior_draws is not None:
        draws.append(np.asarray(posterior_draws, np.float64))
    pooled = np.concatenate(draws)
    lo, hi = np.quantile(pooled, [0.002, 0.998])
    if value:
        lo, hi = min(lo, value * 0.97), max(hi, value * 1.03)
    grid = np.linspace(lo * 0.97, hi * 1.03, 400)
    return {"grid": grid, "prior": log_kde_density(draws[0], grid),
            "posterior": log_kde_density(draws[1], grid) if posterior_draws is not None else None,
            "published": value, "sigma": obs.get("sigma"), "percentile": obs.get("prior_percentile"),
            "napkin": (summary.get("chain") or {}).get("gpu_hours"),
            "prior_stats": {k: prior[k] for k in ("p5", "p50", "p95") if k in prior}}
