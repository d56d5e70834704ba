"""The leave-one-out calibration plot: each published run's hours against its prediction from the others."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mcflops.plots import style

KIND_COLOURS = {"reported": style.POSTERIOR, "derived": style.ACCENT, "third_party": style.PRIOR,
                "throughput": "#e9c46a", "reported_rounded": "#6d597a", "reported_informal": "#6d597a",
                "upper_bound": "#264653"}


def loo_plot(rows: Sequence[Mapping[str, Any]], path, metrics: Mapping[str, float] | None = None) -> str:
    """Left: predicted (median, 90% interval) vs published accelerator-hours, log-log. Right: the same as
    the ratio predicted / published, one row per run, so that every run can be read by name.

    ``rows``: dicts with id, kind, published, p5, p50, p95, covered (calibrate.LooRow.__dict__).
    """
    import numpy as np

    fig, (ax, bx) = style.figure(height=5.2, ncols=2, gridspec_kw={"width_ratios": [1.05, 1.0]})
    pub = np.array([r["published"] for r in rows])
    lo = min(pub.min(), min(r["p5"] for r in rows)) / 1.6
    hi = max(pub.max(), max(r["p95"] for r in rows)) * 1.6
    line = np.geomspace(lo, hi, 50)
    ax.fill_between(line, line / 3, line * 3, color="#eeeeee", lw=0, zorder=0, label="within 3x (Epoch AI's 'confident')")
    ax.fill_between(line, line / 1.3, line * 1.3, color="#d9d9d9", lw=0, zorder=0, label="within 30%")
    ax.plot(line, line, color=style.OBSERVED, lw=0.8, zorder=1)
    seen = set()
    for r in rows:
        c = KIND_COLOURS.get(r["kind"], style.OBSERVED)
        label = r["kind"].replace("_", " ") if r["kind"] not in seen else None
        seen.add(r["kind"])
        ax.errorbar([r["published"]], [r["p50"]], yerr=[[r["p50"] - r["p5"]], [r["p95"] - r["p50"]]], fmt="o",
                    ms=4, color=c, ecolor=c, elinewidth=1.1, capsize=2, label=label, zorder=3,
                    mfc=c if r["covered"] else "white")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published accelerator-hours")
    ax.set_ylabel("predicted from the other runs")
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title("Predicted vs published (log-log)")

    order = sorted(range(len(rows)), key=lambda i: rows[i]["published"])
    y = np.arange(len(order))
    bx.axvspan(1 / 3, 3, color="#eeeeee", lw=0, zorder=0)
    bx.axvspan(1 / 1.3, 1.3, color="#d9d9d9", lw=0, zorder=0)
    bx.axvline(1.0, color=style.OBSERVED, lw=0.8, zorder=1)
    for yi, i in zip(y, order):
        r = rows[i]
        c = KIND_COLOURS.get(r["kind"], style.OBSERVED)
        p = r["published"]
        bx.errorbar([r["p50"] / p], [yi], xerr=[[(r["p50"] - r["p5"]) / p], [(r["p95"] - r["p50"]) / p]], fmt="o",
                    ms=4, color=c, ecolor=c, elinewidth=1.1, capsize=2, zorder=3, mfc=c if r["covered"] else "white")
    from matplotlib.ticker import NullFormatter, NullLocator

    bx.set_xscale("log")
    bx.set_xlim(1 / 5.5, 5.5)
    bx.set_xticks([0.2, 1 / 3, 0.5, 1, 2, 3, 5])
    bx.set_xticklabels(["1/5", "1/3", "1/2", "1", "2", "3", "5"])
    bx.xaxis.set_minor_locator(NullLocator())
    bx.xaxis.set_minor_formatter(NullFormatter())
    bx.set_yticks(y)
    bx.set_yticklabels([rows[i]["id"] for i in order], fontsize=7)
    bx.set_xlabel("predicted / published")
    bx.set_title("Ratio per run (hollow: outside)")
    if metrics:
        fig.suptitle(f"Leave-one-out over {len(rows)} published runs\n{100 * metrics['coverage_90']:.0f}% inside "
                     f"their 90% interval, median error {metrics['median_error_pct']:.0f}%, median p95/p5 "
                     f"{metrics['median_p95_over_p5']:.2f}", fontsize=10, fontweight="bold")
    return style.save(fig, path)
