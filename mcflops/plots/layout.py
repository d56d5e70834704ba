"""The layout waterfall: from the accelerator's peak to the FLOP/s achieved while training, one bar per factor
of the layout MFU model (mcflops.layout), then downtime; each level with its 90% interval, prior and posterior.
Draws summary.json's ``layout.waterfall`` only."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from mcflops.plots import style

LABELS = {"gemm": "GEMM\nefficiency", "memory": "memory-\nbound ops", "experts": "expert\nimbalance", "recompute": "recompute", "pipeline": "pipeline\nbubble",
          "communication": "exposed\ncomm.", "stragglers": "stragglers", "counting": "FLOPs not\ncounted",
          "goodput": "downtime"}


def waterfall(path, layout: Mapping[str, Any]) -> str:
    wf = layout["waterfall"]
    tf = 1e12
    steps = wf["steps"]
    fig, ax = style.figure(3.6)
    x = np.arange(len(steps) + 2)
    ax.bar([0], [wf["peak_flops"] / tf], color=style.PRIOR, width=0.6)
    for i, st in enumerate(steps, start=1):
        lo, hi = st["after"] / tf, st["before"] / tf
        ax.bar([i], [hi - lo], bottom=[lo], color=style.POSTERIOR if st["label"] != "goodput" else style.OBSERVED,
               width=0.6, alpha=0.85)
        lev = wf["levels"].get(st["label"])
        if lev:
            for which, dx, colour in (("prior", -0.12, style.PRIOR), ("posterior", 0.12, style.POSTERIOR)):
                q = lev.get(which)
                if q:
                    ax.errorbar([i + dx], [q["p50"] / tf], yerr=[[(q["p50"] - q["p5"]) / tf], [(q["p95"] - q["p50"]) / tf]],
                                fmt="o", ms=3, color=colour, capsize=2, lw=1,
                                label=f"{which} 90% interval" if i == 1 else None)
    final = steps[-1]["after"] / tf
    ax.bar([len(steps) + 1], [final], color=style.ACCENT, width=0.6)
    ax.set_xticks(x)
    ax.set_xticklabels(["peak", *[LABELS.get(s["label"], s["label"]) for s in steps],
                        "delivered" if steps[-1]["label"] == "goodput" else "achieved"], fontsize=7)
    ax.set_ylabel("TFLOP/s per accelerator")
    mfu = wf["factors"]["mfu"].get("posterior") or wf["factors"]["mfu"]["prior"]
    ax.set_title(f"Where the peak goes: {wf['peak_flops'] / tf:,.0f} TFLOP/s to {final:,.0f} "
                 f"(MFU median {100 * mfu['p50']:.0f}%)")
    if any(st["label"] in wf["levels"] for st in steps):
        ax.legend(loc="upper right", fontsize=7)
    return style.save(fig, path)
