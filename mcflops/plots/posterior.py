"""Posterior figures: prior vs posterior of each uncertain input, the MFU-goodput ridge, and the prior
predictive of each observed quantity against the published figure and its noise band.

Each function draws the plain data of ``inference.plotdata`` (densities on grids, draws, bands) into
``path``. Titles state the finding. matplotlib is imported inside style.figure (a Figure on an Agg canvas).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from mcflops.plots import style


def _scale(percent: bool) -> tuple[float, str]:
    return (100.0, "%") if percent else (1.0, "")


def _fmt(percent: bool, v: float) -> str:
    from mcflops.numbers import format_number

    k, unit = _scale(percent)
    return f"{v * k:.1f}{unit}" if unit else format_number(v)


def prior_posterior(path, data: Mapping[str, Any]) -> str:
    """One panel per uncertain input: prior and posterior densities (fractions, MFU and goodput, in %:
    each panel's and the finding's ``percent``); ``data`` is plotdata.posterior_inputs."""
    panels = moved(data["panels"], (data.get("finding") or {}).get("given") or ())
    ncols = min(3, max(len(panels), 1))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig, axes = style.figure(2.4 * nrows + 0.6, ncols=ncols, nrows=nrows, squeeze=False)
    spare = axes.ravel()[len(panels):]
    for ax in spare:
        ax.set_visible(False)
    for ax, p in zip(axes.ravel(), panels):
        name, grid, f0, f1 = p["name"], p["grid"], p["prior"], p["posterior"]
        pct = p["percent"]
        k, unit = _scale(pct)
        ax.fill_between(grid * k, f0, color=style.PRIOR, alpha=0.35, lw=0)
        ax.plot(grid * k, f0, color=style.PRIOR, lw=1.5, label="prior")
        ax.fill_between(grid * k, f1, color=style.POSTERIOR, alpha=0.25, lw=0)
        ax.plot(grid * k, f1, color=style.POSTERIOR, lw=1.5, label="posterior")
        a, b = p["hdi90"]
        if np.isfinite(a) and np.isfinite(b):
            ax.axvspan(a * k, b * k, color=style.POSTERIOR, alpha=0.06, lw=0)
        ax.set_title(f"{name}: {_fmt(pct, p['prior_p50'])} -> {_fmt(pct, p['posterior_p50'])}", fontsize=9.5)
        ax.set_xlabel(f"{name} ({unit or _unit(name)})" if unit or _unit(name) else name)
        _big_ticks(ax, grid)
        ax.set_yticks([])
        ax.set_ylim(bottom=0)
    if len(spare):  # the legend in the first empty panel, else in the first panel
        spare[0].set_visible(True)
        spare[0].axis("off")
        spare[0].legend(*axes.ravel()[0].get_legend_handles_labels(), loc="center", fontsize=9)
    else:  # in the first panel, above its curves: head room of 40% of the panel's height (no y ticks to move)
        first = axes.ravel()[0]
        first.set_ylim(0, 1.4 * max(float(np.max(panels[0]["prior"])), float(np.max(panels[0]["posterior"]))))
        first.legend(loc="upper left", fontsize=8)
    fig.suptitle(_headline(data["finding"]), fontsize=10.5, fontweight="bold")
    return style.save(fig, path)


VISIBLE = 0.05  # a posterior curve within 5% of the panel's height of its prior's everywhere looks the same


def moved(panels: list, given) -> list:
    """The panels worth drawing: an input none of the observed quantities depends on (price or PUE under a
    GPU-hours figure; chain.depends, under any FLOPs convention) whose posterior looks like its prior (within
    VISIBLE of the panel's height everywhere) says nothing the reader needs; the rest, or every panel when
    that would leave none."""
    from mcflops import chain

    if not given:
        return list(panels)
    upstream = {x for o in given for c in chain.CONVENTIONS for x in chain.depends(str(o), c)} | set(given)
    keep = []
    for p in panels:
        f0, f1 = np.asarray(p["prior"], float), np.asarray(p["posterior"], float)
        top = max(float(np.max(f0, initial=0.0)), float(np.max(f1, initial=0.0)))
        same = top > 0 and float(np.max(np.abs(f1 - f0), initial=0.0)) <= VISIBLE * top
        if p["name"] in upstream or not same:
            keep.append(p)
    return keep or list(panels)


def _unit(name: str) -> str:
    """The axis unit of an input (mcflops.spec.INPUTS), short; '' for a count of things (tokens, parameters)."""
    from mcflops.spec import INPUTS

    unit = INPUTS.get(name, ("", "", "", ""))[2]
    return {"USD/accelerator-hour": "$ per accelerator-hour", "ratio": "ratio", "W": "W",
            "FLOP/s": "FLOP/s"}.get(unit, "")


def _big_ticks(ax, grid: np.ndarray) -> None:
    if grid.max() >= 1e4:
        from matplotlib.ticker import FuncFormatter

        from mcflops.numbers import format_number

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_number(v)))


def _headline(finding: Mapping[str, Any] | None) -> str:
    """The finding in one line: MFU given the data, or (MFU observed) the input the data moved most."""
    if not finding:
        return "Prior and posterior"
    n, pct = finding["input"], finding["percent"]
    a, b = finding["hdi90"]
    return (f"Given {', '.join(finding['given'])}, {n} is {_fmt(pct, finding['posterior_p50'])} (90% HDI "
            f"{_fmt(pct, a)}-{_fmt(pct, b)}), prior {_fmt(pct, finding['prior_p50'])}")


def ridge(path, data: Mapping[str, Any]) -> str:
    """MFU against goodput, prior and posterior draws, with the curve MFU x goodput = c the data imply;
    ``data`` is plotdata.ridge."""
    fig, ax = style.figure(4.2)
    pm, pg = data["prior"]["mfu"], data["prior"]["goodput"]
    qm, qg = data["posterior"]["mfu"], data["posterior"]["goodput"]
    ax.scatter(pm * 100, pg * 100, s=3, color=style.PRIOR, alpha=0.25, lw=0, label="prior draws")
    ax.scatter(qm * 100, qg * 100, s=3, color=style.POSTERIOR, alpha=0.35, lw=0, label="posterior draws")
    c, g = data["product"], data["goodput_grid"]
    ax.plot(data["mfu_curve"] * 100, g * 100, color=style.OBSERVED, lw=1.4, label=f"MFU x goodput = {c:.3f}")
    if data["mfu_band"] is not None:
        for curve in data["mfu_band"]:
            ax.plot(curve * 100, g * 100, color=style.OBSERVED, lw=0.8, ls="--")
        ax.plot([], [], color=style.OBSERVED, lw=0.8, ls="--", label="90% band of the published figure")
    xs = np.concatenate([pm, qm]) * 100
    ax.set_xlim(np.quantile(xs, 0.001) * 0.97, np.quantile(xs, 0.999) * 1.03)
    ys = np.concatenate([pg, qg]) * 100
    ax.set_ylim(np.quantile(ys, 0.001) * 0.99, min(np.quantile(ys, 0.999) * 1.01, 100.5))
    ax.set_xlabel("MFU (%)")
    ax.set_ylabel("goodput (%)")
    ax.set_title(f"The data fix MFU x goodput near {c:.3f}, not each (log-correlation {data['correlation']:+.2f})")
    ax.legend(loc="best", fontsize=8, markerscale=4)
    return style.save(fig, path)


def predictive(path, data: Mapping[str, Any]) -> str:
    """The prior predictive (and posterior) of an observed quantity, the published value and its 90% band;
    ``data`` is plotdata.predictive."""
    name, grid, f0, f1 = data["name"], data["grid"], data["prior"], data["posterior"]
    band, mark, pct = data["band"], data["published"], data["percent"]
    k, unit = _scale(pct)
    big = not pct and data["prior_p50"] > 1e5
    k = 1e-6 if big else k
    fig, ax = style.figure(3.4)
    ax.fill_between(grid * k, f0, color=style.PRIOR, alpha=0.35, lw=0)
    ax.plot(grid * k, f0, color=style.PRIOR, lw=1.6, label="prior predictive")
    ax.plot(grid * k, f1, color=style.POSTERIOR, lw=1.4, label="posterior")
    ax.axvspan(band[0] * k, band[1] * k, color=style.OBSERVED, alpha=0.08, lw=0,
               label="observed interval" if mark is None else "90% band of the observation noise")
    if mark is not None:
        ax.axvline(mark * k, color=style.OBSERVED, lw=1.5, label=f"published {_fmt(pct, mark)}")
    ax.set_xlabel(f"{name} ({'millions' if big else unit or 'value'})")
    ax.set_yticks([])
    ax.set_ylim(bottom=0)
    ob = data["observed"]
    if ob.get("prior_percentile") is not None:
        title = (f"The published {name} {_fmt(pct, mark)} sits at the {ob['prior_percentile']:.0f}th percentile "
                 "of the prior predictive")
    else:
        title = (f"The prior puts {ob.get('prior_probability_inside', float('nan')):.0%} of {name} in the "
                 "observed interval")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    return style.save(fig, path)
