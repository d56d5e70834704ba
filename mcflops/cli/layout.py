"""The terminal's lines for a layout MFU prior (summary.json's ``layout``): the sentence, each factor prior and
posterior, what the prior's width is made of, the memory per accelerator."""

from __future__ import annotations

from typing import Any, Mapping

# every factor of mcflops.layout.model.FACTORS, in its order (the memory-bound and attention ones were missing)
NAMES = {"gemm": "GEMM efficiency", "attention": "attention core", "memory": "memory-bound", "experts": "experts",
         "recompute": "recompute", "pipeline": "pipeline", "communication": "communication", "stragglers": "stragglers",
         "mfu": "MFU"}


def _q(q: Mapping[str, float] | None) -> str:
    if not q:
        return "-"
    if abs(q["p95"] - q["p5"]) < 5e-4:
        return f"{q['p50']:.3f}"
    return f"{q['p50']:.3f} [{q['p5']:.3f}, {q['p95']:.3f}]"


def layout_lines(lay: Mapping[str, Any]) -> list[str]:
    wf = lay["waterfall"]
    post = any("posterior" in v for v in wf["factors"].values())
    out = ["Where the FLOP/s go (the layout's factors, median [90%]" + (": prior -> posterior)" if post else ")")]
    for k, label in NAMES.items():
        f = wf["factors"].get(k)
        if f:
            out.append(f"  {label:<16} {_q(f.get('prior'))}" + (f" -> {_q(f.get('posterior'))}" if post else ""))
    out.append(f"  {lay['sentence']}")
    parts = lay.get("width_parts") or {}
    if parts.get("fixed"):  # mcflops.layout.explain.width_parts: the prior whose median narrows it most
        top = min(parts["fixed"], key=parts["fixed"].get)
        name = parts.get("names", {}).get(top, top)
        out.append(f"  the MFU prior spans {parts['all']:.2f}x (p95/p5); {name} at its median "
                   f"would leave {parts['fixed'][top]:.2f}x: state it (efficiency:, stack:) or measure it (pilot:)")
    mem = lay.get("memory")
    if mem:
        out.append(f"  memory per accelerator: {mem['total_gb']:.1f} of {mem['capacity_gb']:.0f} GB (states "
                   f"{mem['weights_gb'] + mem['gradients_gb'] + mem['optimizer_gb']:.1f}, activations "
                   f"{mem['activations_gb']:.1f})")
    if lay.get("identified"):
        out.append(f"  {lay['identified']}")
    return out
