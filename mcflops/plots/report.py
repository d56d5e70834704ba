"""The report's headline figure: GPU-hours before and after the published figure, in millions."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from mcflops.plots import style


def gaussian_kde(data: np.ndarray, points: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """1-D Gaussian kernel density estimate of ``data`` at ``points``, as scipy.stats.gaussian_kde(data)(points).

    Bandwidth by Scott's rule (Scott 1992, "Multivariate Density Estimation"), scipy's default: factor
    n^(-1/(d+4)) = n^(-1/5) in 1-D, so kernel variance h^2 = sample variance (ddof 1) x n^(-2/5);
    f(x) = mean_i N(x; x_i, h^2).
    NumPy only: importing scipy.stats costs ~1 s of the run's start-up.
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


def _density(draws: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Density of positive draws on ``grid`` (a Gaussian KDE in log space, mapped back: f(x) = g(log x) / x)."""
    logs = np.log(draws[np.isfinite(draws) & (draws > 0)])
    if logs.size < 10 or np.ptp(logs) == 0:
        return np.zeros_like(grid)
    return gaussian_kde(logs, np.log(grid)) / grid


def headline(path, summary: Mapping[str, Any], prior_draws: np.ndarray,
             posterior_draws: np.ndarray | None = None, count: int | None = None) -> str:
    """Draw the prior predictive (and posterior) of GPU-hours with the napkin value and the published
    figure; the title states the finding. ``summary`` is summary.json's content."""
    prior = (summary.get("prior") or {}).get("gpu_hours") or {}
    obs = (summary.get("observed") or {}).get("gpu_hours") or {}
    napkin = (summary.get("chain") or {}).get("gpu_hours")
    value, sigma = obs.get("value"), obs.get("sigma")
    draws = [np.asarray(prior_draws, np.float64)]
    if posterior_draws is not None:
        draws.append(np.asarray(posterior_draws, np.float64))
    pooled = np.concatenate(draws)
    lo, hi = np.quantile(pooled, [0.002, 0.998])
    if value:
        lo, hi = min(lo, value * 0.97), max(hi, value * 1.03)
    grid = np.linspace(lo * 0.97, hi * 1.03, 400)
    m = 1e6  # plot in millions of GPU-hours

    fig, ax = style.figure(3.6)
    d0 = _density(draws[0], grid)
    ax.fill_between(grid / m, d0 * m, color=style.PRIOR, alpha=0.35, lw=0)
    ax.plot(grid / m, d0 * m, color=style.PRIOR, lw=1.8, label="prior predictive (before the figure)")
    if posterior_draws is not None:
        d1 = _density(draws[1], grid)
        ax.fill_between(grid / m, d1 * m, color=style.POSTERIOR, alpha=0.25, lw=0)
        ax.plot(grid / m, d1 * m, color=style.POSTERIOR, lw=1.8, label="posterior (given the figure)")
    if value:
        if sigma:
            ax.axvspan(value * math.exp(-sigma) / m, value * math.exp(sigma) / m, color=style.OBSERVED, alpha=0.08,
                       lw=0, label=f"published ±1σ ({100 * sigma:.0f}%)")
        ax.axvline(value / m, color=style.OBSERVED, lw=1.6, label=f"published {value / m:.4g}M")
    if napkin:
        ax.axvline(napkin / m, color=style.ACCENT, lw=1.4, ls="--", label=f"napkin (medians) {napkin / m:.3g}M")
    ax.set_xlabel("GPU-hours (millions)")
    ax.set_ylabel("probability density")
    ax.set_yticks([])
    ax.set_ylim(bottom=0)
    if count:
        top = ax.secondary_xaxis("top", functions=(lambda x: x * m / count / 24.0, lambda d: d * count * 24.0 / m))
        top.set_xlabel(f"wall-clock days on {count:,} accelerators", fontsize=8.5)
    title = "GPU-hours"
    if prior.get("p50"):
        title = (f"Priors: {prior['p50'] / m:.3g}M GPU-hours (90%: {prior['p5'] / m:.3g}–{prior['p95'] / m:.3g}M)")
    pct = obs.get("prior_percentile")
    if value and pct is not None:
        n = int(round(pct))
        nth = f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
        title += f"\nthe published {value / m:.4g}M sits at the {nth} percentile of the priors"
    ax.set_title(title, loc="left")
    ax.legend(loc="upper right", fontsize=8)
    return style.save(fig, path)
