"""The ``hardware:`` and ``architecture:`` blocks: the accelerator (its catalogue peak and TDP) and the model's shape."""

from __future__ import annotations

from typing import Mapping

from mcflops import hardware as hw
from mcflops.errors import closest
from mcflops.priors.dist import Dist
from mcflops.spec.fields import Fields
from mcflops.spec.types import Architecture, Hardware

HARDWARE_KEYS = ("accelerator", "precision", "count")
ARCH_KEYS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "seq_len", "vocab", "ffn", "experts",
             "experts_active", "source")
MAX_ARCH = 10**9  # layers, widths, heads, sequence length, vocabulary: generous, and keeps FLOPs/token finite


def parse_hardware(where: Fields, data: Mapping, priors: Mapping[str, Dist]) -> Hardware:
    """The accelerator, its precision and count; its dense peak and TDP from the catalogue unless the
    file gives a ``peak_flops`` prior."""
    node = data.get("hardware")
    if node is None:
        if "peak_flops" not in priors:
            raise where.error("missing `hardware:` (accelerator and precision), or give a `peak_flops` prior",
                              data, None, "hardware")
        return Hardware(None, "bf16", None, None, None)
    node = where.mapping(data, "hardware", "hardware")
    where.keys(node, HARDWARE_KEYS, "hardware")
    count = None
    if "count" in node:
        count = int(where.number(node, "count", "hardware.count", positive=True, integer=True))
    precision = node.get("precision", "bf16")
    if precision not in hw.PRECISIONS:
        raise where.error(f"unknown precision '{precision}'{closest(precision, hw.PRECISIONS)} "
                          f"(expected one of: {', '.join(hw.PRECISIONS)})", node, "precision", "hardware.precision")
    if "accelerator" not in node:
        if "peak_flops" not in priors:
            raise where.error("missing hardware.accelerator (or a peak_flops prior)", node, None,
                              "hardware.accelerator")
        return Hardware(None, precision, count, None, None)
    acc_id = node["accelerator"]
    try:
        acc = hw.get(str(acc_id))
    except hw.HardwareError as e:
        raise where.error(str(e), node, "accelerator", "hardware.accelerator") from None
    peak = None
    if "peak_flops" not in priors:
        try:
            peak = acc.peak(precision)
        except hw.HardwareError as e:
            raise where.error(str(e), node, "precision", "hardware.precision") from None
    return Hardware(acc.id, precision, count, peak, acc.tdp_w)


def parse_architecture(where: Fields, data: Mapping) -> Architecture:
    """Layers, widths, heads, sequence length and vocabulary (what the PaLM and Megatron counts need)."""
    node = where.mapping(data, "architecture", "architecture")
    where.keys(node, ARCH_KEYS, "architecture")
    vals: dict[str, int] = {}
    for k in ARCH_KEYS:
        if k in node and k not in ("source", "experts", "experts_active"):
            x = where.number(node, k, f"architecture.{k}", positive=True, integer=True)
            if x > MAX_ARCH:
                raise where.error(f"expected at most {MAX_ARCH:.0e}, got {node[k]}", node, k, f"architecture.{k}")
            vals[k] = int(x)
    for k in ("layers", "d_model", "heads", "seq_len", "vocab"):
        if k not in vals:
            raise where.error(f"missing architecture.{k}", node, None, f"architecture.{k}")
    return Architecture(**vals)
