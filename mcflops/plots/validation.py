"""The calibration page's figures: each held-out run's predictive interval against its published hours, one
panel per validation split, and the PIT histogram of every split (a calibrated predictive gives a flat one)."""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.calibration.splits import SHORT
from mcflops.plots import style

BASELINE_COLOUR = style.PRIOR


def _made(validation: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in validation["splits"] if not s.get("skipped")]


def intervals(validation: Mapping[str, Any], path) -> str:
    """Per split: predicted / published for every held-out run, the model's 50% (thick) and 90% (thin)
    intervals and median, and the constant baseline's 90% interval (grey, below); log scale."""
    import numpy as np
    from matplotlib.ticker import NullFormatter, NullLocator

    splits = _made(validation)
    n_runs = max(len(s["rows"]["model"]) for s in splits)
    fig, axes = style.figure(height=1.2 + 0.2 * n_runs, ncols=len(splits), sharey=False, squeeze=False)
    order_ids = None
    for ax, s in zip(axes[0], splits):
        rows = {r["id"]: r for r in s["rows"]["model"]}
        base = {r["id"]: r for r in s["rows"]["constant"]}
        if order_ids is None:
            order_ids = sorted(rows, key=lambda k: rows[k]["published"])
        ids = [k for k in order_ids if k in rows] + sorted(k for k in rows if k not in order_ids)
        ax.axvspan(1 / 1.2, 1.2, color="#e6e6e6", lw=0, zorder=0)
        ax.axvline(1.0, color=style.OBSERVED, lw=0.8, zorder=1)
        for y, k in enumerate(ids):
            r, b, p = rows[k], base[k], rows[k]["published"]
            c = style.POSTERIOR if r["covered_90"] else style.OBSERVED
            ax.plot([r["p5"] / p, r["p95"] / p], [y, y], color=c, lw=1.0, zorder=3)
            ax.plot([r["p25"] / p, r["p75"] / p], [y, y], color=c, lw=3.0, zorder=3, solid_capstyle="butt")
            ax.plot([r["p50"] / p], [y], "o", ms=3.5, color=c, mfc="white" if not r["covered_90"] else c, zorder=4)
            ax.plot([b["p5"] / p, b["p95"] / p], [y - 0.3, y - 0.3], color=BASELINE_COLOUR, lw=0.9, zorder=2)
        ax.set_xscale("log")
        ax.set_xlim(1 / 6, 6)
        ax.set_xticks([1 / 5, 1 / 2, 1, 2, 5])
        ax.set_xticklabels(["1/5", "1/2", "1", "2", "5"])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_yticks(np.arange(len(ids)))
        ax.set_yticklabels(ids if ax is axes[0][0] else [], fontsize=6.5)
        ax.set_ylim(-0.8, len(ids) - 0.4)
        ax.set_title(SHORT.get(s["name"], s["name"]), fontsize=8)
        ax.set_xlabel("predicted / published", fontsize=8)
    fig.suptitle("Held-out runs: the model's 50% and 90% intervals (red: the 90% covers the published figure;\n"
                 "black: it misses); the constant baseline's 90% in grey", fontsize=8)
    return style.save(fig, path)


def pit_histogram(validation: Mapping[str, Any], path, bins: int = 5) -> str:
    """Per split, the histogram of the probability integral transform F(published) of the model and of the
    constant baseline: flat when the intervals are calibrated, U-shaped when too narrow, hump-shaped when too wide."""
    import numpy as np

    splits = _made(validation)
    fig, axes = style.figure(height=2.4, ncols=len(splits), squeeze=False)
    edges = np.linspace(0, 1, bins + 1)
    for ax, s in zip(axes[0], splits):
        pm = np.array([r["pit"] for r in s["rows"]["model"]])
        pb = np.array([r["pit"] for r in s["rows"]["constant"]])
        w = 0.4 / bins
        hm = np.histogram(pm, edges)[0] / max(1, pm.size) * bins
        hb = np.histogram(pb, edges)[0] / max(1, pb.size) * bins
        mid = 0.5 * (edges[1:] + edges[:-1])
        ax.bar(mid - w / 2, hm, width=w, color=style.POSTERIOR, label="model")
        ax.bar(mid + w / 2, hb, width=w, color=BASELINE_COLOUR, label="constant")
        ax.axhline(1.0, color=style.OBSERVED, lw=0.8)
        ax.set_xlim(0, 1)
        ax.set_title(SHORT.get(s["name"], s["name"]), fontsize=8)
        ax.set_xlabel("PIT = F(published)", fontsize=8)
    axes[0][0].set_ylabel("density")
    axes[0][0].legend(fontsize=7, loc="upper center")
    return style.save(fig, path)
