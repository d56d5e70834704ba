"""The ``hardware:`` and ``architecture:`` blocks: the accelerator (its catalogue peak and TDP) and the model's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from mcflops import hardware as hw
from mcflops.arch import hf
from mcflops.errors import SpecError, closest, kind
from mcflops.numbers import format_number
from mcflops.priors.dist import Dist
from mcflops.spec.fields import Fields
from mcflops.spec.types import Architecture, Hardware

HARDWARE_KEYS = ("accelerator", "precision", "count")
# The keys the palm and megatron conventions read, then the ones only the architecture counts read.
_CONVENTION_KEYS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "seq_len", "vocab", "ffn")
_COUNT_KEYS = ("tied_embeddings", "glu", "experts", "experts_active", "shared_experts", "moe_ffn", "dense_layers",
               "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_FLAGS = ("tied_embeddings", "glu")
ARCH_KEYS = _CONVENTION_KEYS + _COUNT_KEYS + ("preset", "hf_config", "source")
PARAMS_TOLERANCE = 0.02  # a params prior further than this from the architecture's active count is refused
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
    """The model's shape: inline keys over a ``preset:`` or an ``hf_config:`` (a Hugging Face config.json,
    relative to the prior file). Without the MLP width (``ffn``) the block only serves the FLOPs conventions:
    its ``experts`` keys are documentation and nothing is counted."""
    node = where.mapping(data, "architecture", "architecture")
    where.keys(node, ARCH_KEYS, "architecture")
    vals: dict[str, int | bool | str] = {}
    if "preset" in node and "hf_config" in node:
        raise where.error("give a preset or an hf_config, not both", node, "hf_config", "architecture.hf_config")
    if "preset" in node:
        vals = {**_from_file(where, node, "preset"), "preset": str(node["preset"])}
    if "hf_config" in node:
        vals = {**_from_file(where, node, "hf_config"), "hf_config": str(node["hf_config"])}
    for k in _CONVENTION_KEYS + _COUNT_KEYS:
        if k not in node:
            continue
        if k in _FLAGS:
            if not isinstance(node[k], bool):
                raise where.error(f"expected true or false, got {kind(node[k])}", node, k, f"architecture.{k}")
            vals[k] = node[k]
            continue
        minimum = 0 if k in ("shared_experts", "dense_layers") else None
        x = where.number(node, k, f"architecture.{k}", positive=minimum is None, integer=True, minimum=minimum)
        if x > MAX_ARCH:
            raise where.error(f"expected at most {MAX_ARCH:.0e}, got {node[k]}", node, k, f"architecture.{k}")
        vals[k] = int(x)
    for k in ("layers", "d_model", "heads", "seq_len", "vocab"):
        if k not in vals:
            hint = " (the training sequence length: config.json's max_position_embeddings is the longest context " \
                   "the model accepts, not it)" if k == "seq_len" and "hf_config" in node else ""
            raise where.error(f"missing architecture.{k}{hint}", node, None, f"architecture.{k}")
    if "ffn" not in vals:
        # documentation only, as the block has always been read: nothing here is counted
        for k in _COUNT_KEYS:
            if k in vals and k not in ("experts", "experts_active"):
                raise where.error(f"architecture.{k} needs architecture.ffn (the MLP width) to count the parameters",
                                  node, k, f"architecture.{k}")
        vals = {k: v for k, v in vals.items() if k in _CONVENTION_KEYS}
    arch = Architecture(**vals)
    _check_shape(where, node, arch)
    return arch


def _from_file(where: Fields, node: Mapping, key: str) -> dict:
    """The keys a preset or a config.json gives (a config's messages name the config file and its field)."""
    name = where.text(node, key, f"architecture.{key}")
    if not name:
        raise where.error(f"expected a {'preset name' if key == 'preset' else 'path to a config.json'}",
                          node, key, f"architecture.{key}")
    try:
        if key == "preset":
            return hf.preset(name)
        base = Path(where.path).parent if where.path and not where.path.startswith("<") else Path.cwd()
        return hf.read_config(base / name, shown=str(base / name))
    except SpecError as e:
        if key == "preset":
            raise where.error(e.message, node, key, f"architecture.{key}") from None
        raise


def _check_shape(where: Fields, node: Mapping, arch: Architecture) -> None:
    """The keys that must come together do: the MoE widths and the MLA ranks."""
    s = arch.shape()
    if s is None:
        return
    if (s.experts_active or s.shared_experts or s.moe_ffn or s.dense_layers) and not s.experts:
        raise where.error("expected architecture.experts (routed experts per layer) with experts_active, "
                          "shared_experts, moe_ffn or dense_layers", node, None, "architecture.experts")
    if s.experts and (s.experts_active or 1) > s.experts:
        raise where.error(f"expected experts_active at most experts ({s.experts}), got {s.experts_active}",
                          node, "experts_active", "architecture.experts_active")
    if s.dense_layers > s.layers:
        raise where.error(f"expected dense_layers at most layers ({s.layers}), got {s.dense_layers}",
                          node, "dense_layers", "architecture.dense_layers")
    mla = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    given = [k for k in mla if getattr(s, k) is not None]
    if (given or s.q_lora_rank) and len(given) < len(mla):
        missing = ", ".join(k for k in mla if k not in given)
        raise where.error(f"multi-head latent attention needs {', '.join(mla)}; missing {missing}", node, None,
                          "architecture")


def params_from_architecture(where: Fields, data: Mapping, arch: Architecture | None,
                             priors: dict[str, Dist]) -> None:
    """The ``params`` prior from the architecture, in place: its active count (a point) when the file gives
    none; when it gives one, refused if its median is more than 2% from that count."""
    c = arch.counts() if arch is not None else None
    if c is None:
        return
    active, total = c.params_active, c.params_total
    what = f"preset {arch.preset}" if arch.preset else f"hf_config {arch.hf_config}" if arch.hf_config \
        else "the architecture block"
    if priors.get("params", 0) is None:
        return  # a recipe: checked once resolved, by its own rules
    if "params" not in priors:
        priors["params"] = Dist("point", {"value": float(active)},
                                source=f"architecture ({what}): active parameters per token, mcflops.arch count")
        return
    from mcflops.priors.quantiles import ppf

    given = float(ppf(priors["params"], 0.5))
    if abs(given - active) > PARAMS_TOLERANCE * active:
        moe = f", of {format_number(total)} in total" if total != active else ""
        raise where.error(f"params {format_number(given)} differs by more than 2% from the architecture's "
                          f"{format_number(active)} active parameters per token{moe}: params is N, the active count "
                          f"(give {format_number(active)}, or leave params out)",
                          data["priors"], "params", "priors.params")
