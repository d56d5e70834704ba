"""The report's headline figure: GPU-hours before and after the published figure, in millions; for a new run
(nothing observed), the prior predictive alone."""

from __future__ import annotations

import math
from typing import Any, Mapping

from mcflops.plots import style


def headline(path, data: Mapping[str, Any], count: int | None = None, summary: Mapping[str, Any] | None = None) -> str:
    """Draw the prior predictive (and posterior) of GPU-hours with the napkin value and the published
    figure, and, given the accelerator ``count``, wall-clock days on top; the title states the finding
    (:func:`headline_title`). ``data`` is plotdata.headline; ``summary`` (summary.json's content) gives the title the
    posterior's numbers and its checks, and a new run's days and cost."""
    grid, value, sigma, napkin = data["grid"], data["published"], data["sigma"], data["napkin"]
    m = 1e6  # plot in millions of GPU-hours

    fig, ax = style.figure(3.6)
    d0 = data["prior"]
    conditioned = bool(value) or data["posterior"] is not None
    what = "the figure" if value else "the observation"
    ax.fill_between(grid / m, d0 * m, color=style.PRIOR, alpha=0.35, lw=0)
    ax.plot(grid / m, d0 * m, color=style.PRIOR, lw=1.8,
            label=f"prior predictive (before {what})" if conditioned else "prior predictive (the priors alone)")
    if data["posterior"] is not None:
        d1 = data["posterior"]
        ax.fill_between(grid / m, d1 * m, color=style.POSTERIOR, alpha=0.25, lw=0)
        ax.plot(grid / m, d1 * m, color=style.POSTERIOR, lw=1.8, label=f"posterior (given {what})")
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
    title = headline_title(data, count, summary)
    ax.set_title(title, loc="left")
    ax.legend(loc="upper right", fontsize=8)
    return style.save(fig, path)


def _q(stats: Mapping[str, Any], m: float, unit: str = "M", word: str = "") -> str:
    """'32.9M GPU-hours (90%: 27.1-40.8M)': the median, what it counts, the 90% interval."""
    return f"{stats['p50'] / m:.3g}{unit}{word} (90%: {stats['p5'] / m:.3g}\u2013{stats['p95'] / m:.3g}{unit})"


def _stats(block: Any, name: str) -> Mapping[str, Any] | None:
    st = block.get(name) if isinstance(block, Mapping) else None
    ok = isinstance(st, Mapping) and all(isinstance(st.get(k), (int, float)) for k in ("p5", "p50", "p95"))
    return st if ok else None


def headline_title(data: Mapping[str, Any], count: int | None = None,
                   summary: Mapping[str, Any] | None = None) -> str:
    """What the headline figure shows, in words: the posterior's GPU-hours when the run is conditioned and
    its checks passed; else the prior predictive, named as such (for a new run with its days and cost)."""
    m, value, pct = 1e6, data["published"], data["percentile"]
    prior = data["prior_stats"] if _stats({"g": data["prior_stats"]}, "g") else None
    summary = summary or {}
    post = summary.get("posterior") if isinstance(summary.get("posterior"), Mapping) else {}
    failed = isinstance(post.get("checks"), Mapping) and post["checks"].get("passed") is False
    g1 = _stats(post, "gpu_hours")
    nth = ""
    if value and pct is not None:
        n = int(round(pct))
        nth = f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
    if g1 and not failed and data["posterior"] is not None:
        given = f"given the published {value / m:.4g}M" if value else "given the observation"
        title = f"Posterior: {_q(g1, m, word=' GPU-hours')}, {given}"
        if prior:
            title += f"\nbefore it: {_q(prior, m)}" + (f", the figure at its {nth} percentile" if nth else "")
        return title
    if not prior:
        return "GPU-hours"
    title = f"Prior predictive: {_q(prior, m, word=' GPU-hours')}"
    if value and nth:
        title += f"\nthe published {value / m:.4g}M sits at the {nth} percentile of the prior predictive"
    if failed:
        title += "\nthe posterior failed its checks: not shown as the answer"
    if not (value or data["posterior"] is not None or summary.get("observed")):  # a new run: days and cost too
        block = summary.get("prior") if isinstance(summary.get("prior"), Mapping) else {}
        more = []
        days = _stats(block, "wall_days")
        if days and count:
            more.append(f"{_q(days, 1.0, '', ' days')} on {count:,} accelerators")
        cost = _stats(block, "cost")
        if cost:
            more.append(f"${_q(cost, 1e6)}")
        if more:
            title += "\n" + "; ".join(more)
    return title
