"""The scenarios figure: every scenario's distribution of GPU-hours (or days) on one log axis, labelled with
its letter, name and median; the axis fitted to the draws (the histogram bins that hold draws), every label
wrapped to fit the figure. Plain data in (analysis.scenarios's ``hist`` and ``table``), one PNG out."""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

import numpy as np

from mcflops.numbers import format_number as fmt
from mcflops.plots import style

COLOURS = (style.PRIOR, style.POSTERIOR, style.ACCENT, "#e9a23b", "#6a4c93", "#222222", "#8ab17d", "#b56576")
DASHES = ("-", "--", "-.", (0, (1, 1.5)))  # two scenarios with the same distribution stay both visible
LABELS = {"gpu_hours": "GPU-hours", "wall_days": "wall-clock days"}
LEGEND_COLUMNS = 3
LEGEND_SHARE = 0.3  # of the figure's width: a legend column under the axes, each name wrapped to fit it


def _tick(x) -> str:
    """A tick or legend value in 2-3 significant digits without padding zeros: 2M, 1.5M, 37.2."""
    if not isinstance(x, (int, float)):
        return "n/a"
    text = fmt(x, 3)
    return re.sub(r"\.0+(?=[KMBT]?$)", "", text) if "." in text else text


def data_range(hist: Mapping[str, Any]) -> tuple[float, float]:
    """The smallest and largest value the figure draws (linear units): the bins that hold draws, and each
    scenario's exact extremes."""
    lo, hi = math.inf, -math.inf
    for s in hist["scenarios"]:
        edges = s["log_edges"]
        lo = min(lo, s["log_min"], *(edges[:1] or [s["log_min"]]))
        hi = max(hi, s["log_max"], *(edges[-1:] or [s["log_max"]]))
    return math.exp(lo), math.exp(hi)


def scenarios(path, cmp: Mapping[str, Any]) -> str:
    """Each scenario's density per unit of log value, on one log x-axis; a scenario that is one value for
    every draw is a vertical line. The legend gives each one's median and 90% interval."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    sc = cmp["scenarios"]
    hist, quantity = sc["hist"], sc["hist"]["quantity"]
    rows = math.ceil(len(sc["table"]) / LEGEND_COLUMNS)
    fig, ax = style.figure(2.8 + 0.5 * rows)  # room for the legend's rows under the axes
    for k, (s, e) in enumerate(zip(hist["scenarios"], sc["table"])):
        colour, dash = COLOURS[k % len(COLOURS)], DASHES[k % len(DASHES)]
        q = e.get(quantity) or {}
        label = (style.wrap(f"{e['tag']}: {e['name']}", 8, share=LEGEND_SHARE)
                 + f"\n{_tick(q.get('p50'))} ({_tick(q.get('p5'))}–{_tick(q.get('p95'))})")
        edges, w = np.asarray(s["log_edges"]), np.asarray(s["weights"])
        if s["log_max"] > s["log_min"] and w.size:
            dens = w / np.diff(edges)  # per unit of log value: scenarios of different widths compare
            ax.stairs(dens, np.exp(edges), color=colour, lw=1.6, ls=dash, label=label)
            ax.stairs(dens, np.exp(edges), color=colour, fill=True, alpha=0.12)
        else:
            ax.axvline(math.exp(s["log_min"]), color=colour, lw=2.0, ls=dash, label=label)
        if q.get("p50"):
            ax.axvline(q["p50"], color=colour, lw=0.9, ls=":")
    lo, hi = data_range(hist)
    ax.set_xscale("log")
    ax.set_xlim(*style.fitted_limits(lo, hi, log=True))
    narrow = hi / lo < 4
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=tuple(range(1, 10)) if narrow else (1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: _tick(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(bottom=0)
    ax.set_yticks([])
    ax.set_ylabel("density (per log unit)")
    ax.set_xlabel(f"{LABELS.get(quantity, quantity)} (log scale)")
    # under the axes (below the x label): a legend inside them would cover some scenario's curve or tail
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), borderaxespad=0.0, fontsize=8,
              ncol=min(len(sc["table"]), LEGEND_COLUMNS))
    dist = "posteriors" if cmp.get("distribution") == "posterior" else "priors"
    ax.set_title(style.wrap(f"{len(sc['table'])} scenarios, {LABELS.get(quantity, quantity)} ({dist}): median "
                            "(90% interval) in the legend, dotted lines at the medians", style.RC["axes.titlesize"]))
    return style.save(fig, path)
