"""The report's layout section: where the accelerator's peak FLOP/s go, by the layout MFU model's factors
(summary.json's ``layout``, computed by mcflops.layout.explain), and the memory per accelerator.

Reads only summary.json and the figure; does no statistics. Absent when the MFU prior is not a layout's.
"""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.report.blocks import B, Box, C, Fig, P, Section, Table, num

FIGURE = "waterfall.png"  # drawn by plots.layout.waterfall
NAMES = {"gemm": "GEMM efficiency (η × shape share)", "attention": "attention core (below the GEMMs' efficiency)",
         "memory": "memory-bound operations (normalisation, activations)",
         "experts": "experts (load imbalance, token permutation)", "recompute": "recomputation (model / hardware FLOPs)",
         "pipeline": "pipeline (1 / (1 + bubble))", "communication": "communication not overlapped",
         "stragglers": "stragglers (slowest rank)", "mfu": "MFU (their product)"}


def _width_parts(parts: Any) -> list:
    """The width's parts (mcflops.layout.explain.width_parts): a sentence, the table, and what to do about the
    largest; nothing for a summary without them."""
    if not isinstance(parts, Mapping) or not num(parts.get("all")) or not isinstance(parts.get("fixed"), Mapping):
        return []
    fixed = sorted(((k, v) for k, v in parts["fixed"].items() if num(v)), key=lambda kv: kv[1])
    if not fixed:
        return []
    names = parts.get("names") if isinstance(parts.get("names"), Mapping) else {}
    rows = [[str(names.get(k, k)), f"{v:.2f}x"] for k, v in fixed]
    top, w = fixed[0]
    return [P([f"What the width is made of: the MFU prior spans {parts['all']:.2f}x (p95/p5). With one efficiency "
               f"prior at its median and the others drawn, it spans:"]),
            Table(["prior at its median", "p95/p5"], rows, num=frozenset({1})),
            P([f"Note: {names.get(top, top)} narrows it most ({parts['all']:.2f}x to {w:.2f}x): state it "
               "(", C("efficiency:"), ", or a fitted ", C("stack:"), ") or measure it with a pilot run (", C("pilot:"),
               "). One prior at a time, not a decomposition: the parts need not multiply to the whole."], "note")]


def _pct(q: Any) -> str:
    if not isinstance(q, Mapping) or not all(num(q.get(k)) for k in ("p5", "p50", "p95")):
        return "n/a"
    if abs(q["p95"] - q["p5"]) < 5e-4:
        return f"{100 * q['p50']:.1f}%"
    return f"{100 * q['p50']:.1f}% [{100 * q['p5']:.1f}, {100 * q['p95']:.1f}]"


def layout(run) -> Section | None:
    lay = run.summary.get("layout")
    if not isinstance(lay, Mapping) or not isinstance(lay.get("waterfall"), Mapping):
        return None
    sec = Section("layout", "Where the FLOP/s go: the parallel layout")
    lo = lay.get("layout", {})
    desc = ", ".join(f"{k} {lo[k]:g}" if isinstance(lo.get(k), (int, float)) else f"{k} {lo.get(k)}"
                     for k in ("tp", "pp", "vpp", "dp", "cp", "ep", "micro_batch", "global_batch") if lo.get(k) not in
                     (None, 1) or k in ("tp", "pp", "dp"))
    sec.blocks.append(P([f"The MFU prior comes from the layout ({desc}; recompute {lo.get('recompute')}, "
                         f"{lo.get('schedule')} schedule, ZeRO {lo.get('zero')}) through a step-time model whose "
                         "factors each cite their formula (", C("mcflops/layout/model.py"), ")."]))
    if lay.get("sentence"):
        sec.blocks.append(Box([P([B(str(lay["sentence"]))])]))
    wf = lay["waterfall"]
    rows = []
    for k in (*NAMES,):
        q = wf["factors"].get(k)
        if isinstance(q, Mapping):
            rows.append([NAMES[k], _pct(q.get("prior")), _pct(q.get("posterior")) if "posterior" in q else "–"])
    sec.blocks.append(Table(["factor", "prior median [90%]", "posterior median [90%]"], rows, num=frozenset({1, 2})))
    sec.blocks.extend(_width_parts(lay.get("width_parts")))
    if lay.get("identified"):
        sec.blocks.append(P([f"Note: {lay['identified']}."], "note"))
    mem = lay.get("memory")
    if isinstance(mem, Mapping) and num(mem.get("total_gb")):
        sec.blocks.append(P([f"Memory per accelerator (first pipeline stage): weights {mem['weights_gb']:.1f} GB, "
                             f"gradients {mem['gradients_gb']:.1f} GB, optimizer {mem['optimizer_gb']:.1f} GB, "
                             f"activations {mem['activations_gb']:.1f} GB: ", B(f"{mem['total_gb']:.1f} GB"),
                             f" of {mem['capacity_gb']:.0f} GB (headroom {mem['headroom_gb']:.1f} GB, before "
                             "workspace and fragmentation; the activation estimate is good to about 30%)."]))
    for note in lay.get("notes") or ():
        sec.blocks.append(P([f"Note: {note}"], "note"))
    if FIGURE in run.figures:
        sec.blocks.append(Fig(FIGURE, run.figures[FIGURE], "From peak to achieved to delivered FLOP/s: each bar a factor "
                              "at its median, each level's 90% interval (prior grey, posterior red)"))
    return sec
