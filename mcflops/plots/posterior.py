"""Posterior figures: prior vs posterior of each uncertain input, the MFU-goodput ridge, and the prior
predictive of each observed quantity against the published figure and its noise band.

Densities come from the engine's log-space histograms when they exist (every prior draw; every
weighted draw under importance sampling): the histogram CDF read at a linear grid and differenced,
f(x) = dF/dx. NUTS posteriors use a histogram of the draws (no kernel smearing past a bounded prior's edge).
Titles state the finding. matplotlib is imported inside style.figure (a Figure on an Agg canvas).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from mcflops.plots import style

PRIOR_POSTERIOR = "posterior_inputs.png"
RIDGE = "mfu_goodput_ridge.png"
_PCT = {"mfu", "goodput"}  # fractions shown in %
_Z90 = 1.6448536269514722  # Phi^-1(0.95): a 90% band


def _scale(name: str) -> tuple[float, str]:
    return (100.0, "%") if name in _PCT else (1.0, "")


def _hist_density(s: Mapping[str, np.ndarray], i: int, center: float, lo: float, width: float,
                  grid: np.ndarray) -> np.ndarray:
    """Density of quantity i on a linear grid from weighted log-space histogram sums."""
    h = np.asarray(s["hist"][i], np.float64)
    edges = lo + width * np.arange(len(h) - 1)
    cdf = np.concatenate([[h[0]], h[0] + np.cumsum(h[1:-1])]) / h.sum()
    mid = 0.5 * (grid[1:] + grid[:-1])
    step = np.diff(grid)
    f = np.diff(np.interp(np.log(grid) - center, edges, cdf)) / step
    return np.interp(grid, mid, f)


def _draws_density(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
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


def _densities(res, name: str, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sums, c = res.sums, res.model.centers[name]
    i = list(sums.names).index(name)
    prior = _hist_density(sums.prior, i, c, sums.lo[i], sums.width[i], grid)
    if res.posterior.get("method") == "importance" and sums.post is not None:
        post = _hist_density(sums.post, i, c, sums.lo[i], sums.width[i], grid)
    else:
        post = _draws_density(res.posterior_draws[name], grid)
    return prior, post


def _grid(res, name: str, n: int = 160) -> np.ndarray:
    pr, po = res.prior[name], res.posterior[name]
    lo = min(pr["p5"], po["p5"])
    hi = max(pr["p95"], po["p95"])
    span = hi - lo
    lo, hi = max(lo - 0.6 * span, 1e-300), hi + 0.6 * span
    if name in _PCT:
        hi = min(hi, 1.0)
    return np.linspace(lo, hi, n)


def _fmt(name: str, v: float) -> str:
    from mcflops.numbers import format_number

    k, unit = _scale(name)
    return f"{v * k:.1f}{unit}" if unit else format_number(v)


def prior_posterior(path, res) -> str:
    """One panel per uncertain input: prior and posterior densities (MFU and goodput in %)."""
    names = [n for n in res.spec.uncertain if n in res.posterior]
    ncols = min(3, max(len(names), 1))
    nrows = max(1, math.ceil(len(names) / ncols))
    fig, axes = style.figure(2.4 * nrows + 0.6, ncols=ncols, nrows=nrows, squeeze=False)
    spare = axes.ravel()[len(names):]
    for ax in spare:
        ax.set_visible(False)
    for ax, name in zip(axes.ravel(), names):
        k, unit = _scale(name)
        grid = _grid(res, name)
        f0, f1 = _densities(res, name, grid)
        ax.fill_between(grid * k, f0, color=style.PRIOR, alpha=0.35, lw=0)
        ax.plot(grid * k, f0, color=style.PRIOR, lw=1.5, label="prior")
        ax.fill_between(grid * k, f1, color=style.POSTERIOR, alpha=0.25, lw=0)
        ax.plot(grid * k, f1, color=style.POSTERIOR, lw=1.5, label="posterior")
        a, b = res.posterior[name]["hdi90"]
        if np.isfinite(a) and np.isfinite(b):
            ax.axvspan(a * k, b * k, color=style.POSTERIOR, alpha=0.06, lw=0)
        ax.set_title(f"{name}: {_fmt(name, res.prior[name]['p50'])} -> {_fmt(name, res.posterior[name]['p50'])}",
                     fontsize=9.5)
        ax.set_xlabel(f"{name} ({unit})" if unit else name)
        _big_ticks(ax, grid)
        ax.set_yticks([])
        ax.set_ylim(bottom=0)
    if len(spare):  # the legend in the first empty panel, else in the first panel
        spare[0].set_visible(True)
        spare[0].axis("off")
        spare[0].legend(*axes.ravel()[0].get_legend_handles_labels(), loc="center", fontsize=9)
    else:
        axes.ravel()[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(_headline(res), fontsize=10.5, fontweight="bold")
    return style.save(fig, path)


def _big_ticks(ax, grid: np.ndarray) -> None:
    if grid.max() >= 1e4:
        from matplotlib.ticker import FuncFormatter

        from mcflops.numbers import format_number

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_number(v)))


def _headline(res) -> str:
    """The finding in one line: MFU given the data, or (MFU observed) the input the data moved most."""
    post, prior = res.posterior, res.prior
    names = [n for n in res.spec.uncertain if n in post and n not in res.spec.observe]
    if not names:
        return "Prior and posterior"
    shift = {n: abs(post[n]["log_mean"] - prior[n]["log_mean"]) / max(prior[n]["log_sd"], 1e-12) for n in names}
    n = "mfu" if "mfu" in names else max(shift, key=shift.get)
    a, b = post[n]["hdi90"]
    obs = ", ".join(res.spec.observe)
    return (f"Given {obs}, {n} is {_fmt(n, post[n]['p50'])} (90% HDI {_fmt(n, a)}-{_fmt(n, b)}), "
            f"prior {_fmt(n, prior[n]['p50'])}")


def ridge(path, res) -> str:
    """MFU against goodput, prior and posterior draws, with the curve MFU x goodput = c the data imply."""
    fig, ax = style.figure(4.2)
    pm, pg = res.draws["mfu"], res.draws["goodput"]
    qm, qg = res.posterior_draws["mfu"], res.posterior_draws["goodput"]
    ax.scatter(pm * 100, pg * 100, s=3, color=style.PRIOR, alpha=0.25, lw=0, label="prior draws")
    ax.scatter(qm * 100, qg * 100, s=3, color=style.POSTERIOR, alpha=0.35, lw=0, label="posterior draws")
    prod = res.posterior.get("mfu_x_goodput") or {}
    c = prod.get("p50", float(np.median(qm * qg)))
    ch = res.chain
    if "implied_mfu_x_goodput" in ch:  # the observed hours at every other input's median (model.chain)
        c = ch["implied_mfu_x_goodput"]
    g = np.linspace(max(min(pg.min(), qg.min()), 1e-3), min(max(pg.max(), qg.max()), 1.0), 200)
    ax.plot(c / g * 100, g * 100, color=style.OBSERVED, lw=1.4, label=f"MFU x goodput = {c:.3f}")
    o = res.spec.observe.get("gpu_hours")
    if o is not None and o.noise == "lognormal":
        for sgn in (-1, 1):
            ax.plot(c * math.exp(sgn * _Z90 * o.scale) / g * 100, g * 100, color=style.OBSERVED, lw=0.8, ls="--")
        ax.plot([], [], color=style.OBSERVED, lw=0.8, ls="--", label="90% band of the published figure")
    xs = np.concatenate([pm, qm]) * 100
    ax.set_xlim(np.quantile(xs, 0.001) * 0.97, np.quantile(xs, 0.999) * 1.03)
    ys = np.concatenate([pg, qg]) * 100
    ax.set_ylim(np.quantile(ys, 0.001) * 0.99, min(np.quantile(ys, 0.999) * 1.01, 100.5))
    ax.set_xlabel("MFU (%)")
    ax.set_ylabel("goodput (%)")
    corr = res.posterior.get("corr_mfu_goodput_log", float("nan"))
    ax.set_title(f"The data fix MFU x goodput near {c:.3f}, not each (log-correlation {corr:+.2f})")
    ax.legend(loc="best", fontsize=8, markerscale=4)
    return style.save(fig, path)


def predictive(path, res, name: str) -> str:
    """The prior predictive (and posterior) of an observed quantity, the published value and its 90% band."""
    o = res.spec.observe[name]
    sums, c = res.sums, res.model.centers[name]
    i = list(sums.names).index(name)
    k, unit = _scale(name)
    big = name not in _PCT and res.prior[name]["p50"] > 1e5
    k = 1e-6 if big else k
    pr = res.prior[name]
    span = pr["p95"] - pr["p5"]
    lo, hi = pr["p5"] - 0.8 * span, pr["p95"] + 0.8 * span
    if o.noise == "between":
        band, mark = (o.low, o.high), None
    elif o.noise == "lognormal":
        band, mark = (o.value * math.exp(-_Z90 * o.scale), o.value * math.exp(_Z90 * o.scale)), o.value
    else:
        band, mark = (o.value - _Z90 * o.scale, o.value + _Z90 * o.scale), o.value
    lo, hi = max(min(lo, band[0]), 1e-300), max(hi, band[1])
    grid = np.linspace(lo, hi, 300)
    f0 = _hist_density(sums.prior, i, c, sums.lo[i], sums.width[i], grid)
    _, f1 = _densities(res, name, grid)
    fig, ax = style.figure(3.4)
    ax.fill_between(grid * k, f0, color=style.PRIOR, alpha=0.35, lw=0)
    ax.plot(grid * k, f0, color=style.PRIOR, lw=1.6, label="prior predictive")
    ax.plot(grid * k, f1, color=style.POSTERIOR, lw=1.4, label="posterior")
    ax.axvspan(band[0] * k, band[1] * k, color=style.OBSERVED, alpha=0.08, lw=0,
               label="observed interval" if mark is None else "90% band of the observation noise")
    if mark is not None:
        ax.axvline(mark * k, color=style.OBSERVED, lw=1.5, label=f"published {_fmt(name, mark)}")
    ax.set_xlabel(f"{name} ({'millions' if big else unit or 'value'})")
    ax.set_yticks([])
    ax.set_ylim(bottom=0)
    ob = res.observed.get(name, {})
    if ob.get("prior_percentile") is not None:
        title = (f"The published {name} {_fmt(name, mark)} sits at the {ob['prior_percentile']:.0f}th percentile "
                 "of the prior predictive")
    else:
        title = (f"The prior puts {ob.get('prior_probability_inside', float('nan')):.0%} of {name} in the "
                 "observed interval")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    return style.save(fig, path)


def figures(folder, res) -> list[str]:
    """Every posterior figure of a run, written into ``folder``; returns the paths."""
    folder = Path(folder)
    out: list[str] = []
    if not res.posterior or res.sums is None:
        return out
    with style.provenance(res.spec.digest()):  # each PNG records the spec hash of its run
        if any(n in res.posterior for n in res.spec.uncertain):
            out.append(prior_posterior(folder / PRIOR_POSTERIOR, res))
        if {"mfu", "goodput"} <= set(res.posterior_draws or {}):
            out.append(ridge(folder / RIDGE, res))
        for name in res.spec.observe:
            if name in res.sums.names:
                out.append(predictive(folder / f"predictive_{name}.png", res, name))
    return out


def output_hook(folder, res, summary: dict[str, Any]) -> None:
    """cli._OUTPUT_HOOKS entry: the posterior figures; a note instead when matplotlib is missing."""
    if not res.posterior:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        note = "posterior figures not drawn: install matplotlib (pip install 'mcflops[full]')"
        res.notes.append(note)
        summary.setdefault("notes", []).append(note)
        return
    figures(folder, res)
