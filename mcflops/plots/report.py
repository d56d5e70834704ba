"""The report's headline figure: GPU-hours before and after the published figure, in millions."""

from __future__ import annotations

import math
from typing import Any, Mapping

from mcflops.plots import style


def headline(path, data: Mapping[str, Any], count: int | None = None) -> str:
    """Draw the prior predictive (and posterior) of GPU-hours with the napkin value and the published
    figure, and, given the accelerator ``count``, wall-clock days on top; the title states the finding.
    ``data`` is plotdata.headline."""
    grid, value, sigma, napkin = data["grid"], data["published"], data["sigma"], data["napkin"]
    m = 1e6  # plot in millions of GPU-hours

    fig, ax = style.figure(3.6)
    d0 = data["prior"]
    ax.fill_between(grid / m, d0 * m, color=style.PRIOR, alpha=0.35, lw=0)
    ax.plot(grid / m, d0 * m, color=style.PRIOR, lw=1.8, label="prior predictive (before the figure)")
    if data["posterior"] is not None:
        d1 = data["posterior"]
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
    prior = data["prior_stats"]
    if prior.get("p50"):
        title = (f"Priors: {prior['p50'] / m:.3g}M GPU-hours (90%: {prior['p5'] / m:.3g}–{prior['p95'] / m:.3g}M)")
    pct = data["percentile"]
    if value and pct is not None:
        n = int(round(pct))
        nth = f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
        title += f"\nthe published {value / m:.4g}M sits at the {nth} percentile of the priors"
    ax.set_title(title, loc="left")
    ax.legend(loc="upper right", fontsize=8)
    return style.save(fig, path)
