"""Sensitivity and planning figures: tornado, Sobol bars, sweep fan chart, plan curve, compare ratio.

Each function takes plain data (the dicts of analysis.sensitivity, analysis.plan and analysis.compare, as in summary.json), draws
one PNG at ``path`` and returns the path; titles state the finding.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from mcflops.numbers import format_number as fmt
from mcflops.plots import style

LABELS = {"mfu": "MFU", "goodput": "goodput", "tokens": "tokens (D)", "params": "parameters (N)",
          "peak_flops": "peak FLOP/s", "price": "price", "power": "power", "pue": "PUE",
          "gpu_hours": "GPU-hours", "wall_days": "wall-clock days", "cost": "cost (USD)", "flops": "FLOPs",
          "energy_mwh": "energy (MWh)"}


def _label(name: str) -> str:
    return LABELS.get(name, name)


def _g(x: float) -> str:
    """A value the user chose, without padding zeros (90, 0.3)."""
    return f"{x:g}" if 1e-3 <= abs(x) < 1e4 else fmt(x, 3)


def _ticks(ax, axis: str = "x") -> None:
    from matplotlib.ticker import FuncFormatter

    f = FuncFormatter(lambda x, _pos: fmt(x, 3))
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(f)


def tornado(path, sens: Mapping[str, Any]) -> str:
    """Bars from the output at each input's p5 to its p95 (others at medians), largest swing on top."""
    t = sens["tornado"]
    bars = [b for b in t["inputs"] if b["swing"] > 0][:12]
    fig, ax = style.figure(max(1.6, 0.45 * len(bars) + 1.2))
    base = t["base"]
    for i, b in enumerate(reversed(bars)):
        lo, hi = b["at_p5"], b["at_p95"]
        ax.barh(i, lo - base, left=base, color=style.PRIOR, height=0.6)
        ax.barh(i, hi - base, left=base, color=style.ACCENT, height=0.6)
        ax.text(min(lo, hi), i, f"{fmt(b['input_p5' if lo < hi else 'input_p95'], 3)} ", va="center", ha="right",
                fontsize=8)
        ax.text(max(lo, hi), i, f" {fmt(b['input_p95' if lo < hi else 'input_p5'], 3)}", va="center", ha="left",
                fontsize=8)
    ax.set_yticks(range(len(bars)), [_label(b["input"]) for b in reversed(bars)])
    ax.axvline(base, color=style.OBSERVED, lw=1)
    _ticks(ax)
    out = _label(t["output"])
    ax.set_xlabel(f"{out}: input at its p5 (grey) and p95 (green), others at their medians")
    if bars:
        top = bars[0]
        ax.set_title(f"{_label(top['input'])} moves {out} most: {fmt(min(top['at_p5'], top['at_p95']), 3)} to "
                     f"{fmt(max(top['at_p5'], top['at_p95']), 3)} ({100 * top['swing_rel']:.0f}% of {fmt(base, 3)})")
    ax.margins(x=0.15)
    return style.save(fig, path)


def sobol_bars(path, sens: Mapping[str, Any]) -> str:
    """First-order and total indices on log output with +-2 SE error bars."""
    s = sens["sobol"]
    names = sorted(s, key=lambda n: -s[n]["total"])
    x = np.arange(len(names))
    fig, ax = style.figure(3.0)
    clip = lambda v: min(max(float(v), 0.0), 1.0)  # noqa: E731 - a share in [0, 1]; past it is Monte Carlo error
    first = [clip(s[n]["first"]) for n in names]
    total = [clip(s[n]["total"]) for n in names]
    ax.bar(x - 0.2, first, 0.38, yerr=[2 * s[n]["first_se"] for n in names], color=style.PRIOR, capsize=3,
           label="first-order (alone)")
    ax.bar(x + 0.2, total, 0.38, yerr=[2 * s[n]["total_se"] for n in names], color=style.ACCENT, capsize=3,
           label="total (with interactions)")
    ax.set_xticks(x, [_label(n) for n in names])
    ax.set_ylabel("share of the variance (0 to 1)")
    ax.set_ylim(0, 1.1)
    ax.legend(loc="best")
    info = sens.get("sobol_info", {})
    if len(names) == 1:
        ax.set_title(f"{_label(names[0])} is the only uncertain input: all of the variance of "
                     f"log {_label(sens['output'])}")
    elif names:
        ax.set_title(f"{_label(names[0])} explains {100 * first[0]:.0f}% of the variance of "
                     f"log {_label(sens['output'])}")
    ax.text(0.0, -0.28, f"Sobol indices, {info.get('base_samples', 0):,} base draws; bars: ±2 standard errors",
            transform=ax.transAxes, fontsize=7.5, color="#666666")
    return style.save(fig, path)


def sweep_fan(path, sw: Mapping[str, Any]) -> str:
    """Fan chart: the output's p5-p95 and p25-p75 bands and median along the swept input."""
    x = np.asarray(sw["values"])
    order = np.argsort(x)
    x = x[order]
    q = {k: np.asarray(sw[k])[order] for k in ("p5", "p25", "p50", "p75", "p95")}
    fig, ax = style.figure(3.4)
    ax.fill_between(x, q["p5"], q["p95"], color=style.PRIOR, alpha=0.3, lw=0, label="90% interval")
    ax.fill_between(x, q["p25"], q["p75"], color=style.PRIOR, alpha=0.55, lw=0, label="50% interval")
    ax.plot(x, q["p50"], color=style.POSTERIOR, lw=1.8, marker="o", ms=3, label="median")
    pct = sw["input"] in ("mfu", "goodput")  # a fraction: shown in %, as the report states it
    if pct:
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{100 * v:g}"))
    ax.set_xlabel(f"{_label(sw['input'])} (%)" if pct else _label(sw["input"]))
    ax.set_ylabel(_label(sw["output"]))
    _ticks(ax, "y")
    ax.legend(loc="best")
    v0, v1 = sw["values"][0], sw["values"][-1]
    r = sw["p50_vs_first"][-1]
    ax.set_title(f"{_label(sw['input'])} {_g(v0)} -> {_g(v1)}: median {_label(sw['output'])} "
                 f"{fmt(sw['p50'][0], 3)} -> {fmt(sw['p50'][-1], 3)} (x{r:.3g})")
    return style.save(fig, path)


def plan_curve(path, plan: Mapping[str, Any]) -> str:
    """Probability of finishing within the deadline against the accelerator count."""
    c = plan["curve"]
    g, p = np.asarray(c["gpus"]), np.asarray(c["prob"])
    fig, ax = style.figure(3.2)
    ax.plot(g, p, color=style.ACCENT, lw=2)
    d = plan["deadline"]
    ax.axhline(d["prob"], color=style.OBSERVED, lw=0.8, ls=":")
    if d["gpus"] is not None:  # None: no count reaches the probability (inputs that fall with the count)
        ax.axvline(d["gpus"], color=style.POSTERIOR, lw=1.2, ls="--", label=f"{d['gpus']:,} accelerators")
    cl = plan.get("cluster")
    if cl and "prob_within_deadline" in cl:
        ax.plot([cl["gpus"]], [cl["prob_within_deadline"]], "o", color=style.OBSERVED,
                label=f"{cl['gpus']:,} (the file's cluster): {100 * cl['prob_within_deadline']:.0f}%")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if g.max() > 5 * g.min():
        ax.set_xscale("log")
        # 1, 2 and 5 of each decade labelled: a count between powers of ten can be read off the axis
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:,.0f}"))  # whole accelerators: 2,000, 10,000
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("accelerators")
    ax.set_ylabel(f"P(done within {_g(c['days'])} days)")
    ax.legend(loc="lower right")
    needs = f"needs {d['gpus']:,} accelerators" if d["gpus"] is not None else "is out of reach"
    ax.set_title(f"{100 * d['prob']:.0f}% chance to finish in {_g(c['days'])} days {needs} ({plan['distribution']})")
    return style.save(fig, path)


def _draws(cmp: Mapping[str, Any]) -> str:
    """Which inputs share, couple or draw independently (analysis.compare's lists)."""
    parts = [f"shared: {', '.join(cmp.get('shared_inputs') or []) or 'none'}"]
    if cmp.get("coupled_inputs"):
        parts.append("coupled: " + ", ".join(f"{k} ({v:g})" for k, v in cmp["coupled_inputs"].items()))
    if cmp.get("independent_inputs"):
        parts.append(f"independent: {', '.join(cmp['independent_inputs'])}")
    if cmp.get("ratio_inputs"):
        parts.append("ratio to A: " + ", ".join(f"{k} (x {v})" for k, v in cmp["ratio_inputs"].items()))
    return "; ".join(parts)


def compare_ratio(path, cmp: Mapping[str, Any]) -> str:
    """Histogram of B / A over the paired draws, the x-axis fitted to the draws' range (the bins that hold
    draws; 1 marked when it falls inside); the label says which inputs share their draws, wrapped to fit."""
    h = cmp["ratio_hist"]
    e = np.exp(np.asarray(h["log_edges"]))
    w = np.asarray(h["weights"])
    held = np.flatnonzero(w > 0)
    if held.size:  # the histogram spans twice the pilot's range: only the bins with draws are the data
        e, w = e[held[0]:held[-1] + 2], w[held[0]:held[-1] + 1]
    fig, ax = style.figure(3.0)
    r = cmp["ratio"]
    if r["max"] > r["min"]:
        ax.stairs(w, e, fill=True, color=style.PRIOR, alpha=0.7)
        lo, hi = min(e[0], r["min"]), max(e[-1], r["max"])
    else:
        ax.axvline(r["p50"], color=style.PRIOR, lw=3)
        lo = hi = r["p50"]
    ax.set_xlim(*style.fitted_limits(lo, hi))
    if lo <= 1.0 <= hi:
        ax.axvline(1.0, color=style.OBSERVED, lw=0.8, ls=":", label="B = A")
    ax.axvline(r["p50"], color=style.POSTERIOR, lw=1.5, label=f"median {r['p50']:.3g}")
    ax.set_xlabel(style.wrap(f"{cmp['b']['name']} / {cmp['a']['name']} ({_label(cmp['output'])}); {_draws(cmp)}",
                             share=0.9))  # the y label takes a tenth of the width
    ax.set_yticks([])
    ax.set_ylabel("share of the draws")
    ax.legend(loc="best")
    if r["max"] > r["min"]:
        title = (f"B / A: median x{r['p50']:.3g} (90%: {r['p5']:.3g} to {r['p95']:.3g}); "
                 f"P(B > A) = {r['prob_b_greater']:.2f}")
    else:
        title = f"B / A = {r['p50']:.4g} for every draw (the files differ only by a constant factor)"
    ax.set_title(style.wrap(title, style.RC["axes.titlesize"]))
    return style.save(fig, path)
