"""A Hugging Face ``config.json`` read into the keys of :class:`~mcflops.arch.Shape`; the shipped presets.
Plain JSON: no download and no ``transformers`` import.

Each family names the same quantities differently (``num_local_experts`` in Mixtral, ``n_routed_experts``
in DeepSeek, ``num_experts`` in Qwen-MoE); the tables below say which config field gives which key. The
sequence length is not read: ``max_position_embeddings`` is the longest context the model accepts, not the
length it was trained at, so the prior file (or a preset) states ``seq_len``.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import Any, Mapping

from mcflops import reading
from mcflops.errors import ReadError, SpecError, closest

# Fields every supported family has: key -> config field.
_COMMON = {"layers": "num_hidden_layers", "d_model": "hidden_size", "heads": "num_attention_heads",
           "vocab": "vocab_size", "ffn": "intermediate_size"}
# Optional fields: key -> config field (absent or null: the Shape's default).
_OPTIONAL = {"kv_heads": "num_key_value_heads", "head_dim": "head_dim",
             "tied_embeddings": "tie_word_embeddings"}
_DEEPSEEK = {"experts": "n_routed_experts", "experts_active": "num_experts_per_tok",
             "shared_experts": "n_shared_experts", "moe_ffn": "moe_intermediate_size",
             "dense_layers": "first_k_dense_replace", "q_lora_rank": "q_lora_rank",
             "kv_lora_rank": "kv_lora_rank", "qk_rope_head_dim": "qk_rope_head_dim",
             "qk_nope_head_dim": "qk_nope_head_dim", "v_head_dim": "v_head_dim"}
# model_type -> (required extra fields, optional extra fields, tie_word_embeddings default in transformers)
FAMILIES: dict[str, tuple[dict[str, str], dict[str, str], bool]] = {
    "llama": ({}, {}, False),
    "mistral": ({}, {}, False),
    "mixtral": ({"experts": "num_local_experts", "experts_active": "num_experts_per_tok"}, {}, False),
    "qwen2": ({}, {}, False),
    "qwen3": ({}, {}, False),
    "qwen2_moe": ({"experts": "num_experts", "experts_active": "num_experts_per_tok",
                   "moe_ffn": "moe_intermediate_size"}, {}, False),
    "qwen3_moe": ({"experts": "num_experts", "experts_active": "num_experts_per_tok",
                   "moe_ffn": "moe_intermediate_size"}, {}, False),
    "gemma": ({}, {}, True),
    "gemma2": ({}, {}, True),
    "deepseek_v2": ({k: v for k, v in _DEEPSEEK.items() if k != "q_lora_rank"}, {"q_lora_rank": "q_lora_rank"},
                    False),
    "deepseek_v3": ({k: v for k, v in _DEEPSEEK.items() if k != "q_lora_rank"}, {"q_lora_rank": "q_lora_rank"},
                    False),
}
_PRESETS = "architectures.json"
CONFIG_BYTES = 1 << 22  # a config.json is a few KB; the cap is read before anything is parsed


def from_config(cfg: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The Shape keys a config states (no ``seq_len``). ``path`` names the file in messages."""
    if not isinstance(cfg, Mapping):
        raise ReadError("expected a JSON object (a Hugging Face config.json)", path=path)
    cfg = cfg.get("text_config") or cfg  # a multimodal wrapper keeps the language model's fields here
    mt = cfg.get("model_type")
    if mt not in FAMILIES:
        raise ReadError(f"unknown model_type '{mt}'{closest(mt, FAMILIES)} (expected one of: {', '.join(FAMILIES)})",
                        path=path, field="model_type")
    required, optional, tied = FAMILIES[mt]
    out: dict[str, Any] = {"tied_embeddings": tied}
    for key, name in {**_COMMON, **required}.items():
        if cfg.get(name) is None:
            raise ReadError(f"missing '{name}' (a {mt} config.json gives it: the architecture's {key})",
                            path=path, field=name)
        out[key] = _value(cfg, name, path)
    for key, name in {**_OPTIONAL, **optional}.items():
        if cfg.get(name) is not None:
            out[key] = _value(cfg, name, path)
    if mt == "qwen2_moe" and cfg.get("shared_expert_intermediate_size"):
        # one shared expert of its own width: counted as that many experts of moe_ffn
        width, moe = _value(cfg, "shared_expert_intermediate_size", path), out["moe_ffn"]
        if width % moe:
            raise ReadError(f"expected shared_expert_intermediate_size a multiple of moe_intermediate_size ({moe}), "
                            f"got {width}", path=path, field="shared_expert_intermediate_size")
        out["shared_experts"] = width // moe
    _consistent(out, {**_COMMON, **required, **_OPTIONAL, **optional}, path)
    return out


# Shape keys a zero cannot mean (a zero would be taken as "unset" downstream and counted as the default);
# shared_experts, dense_layers and q_lora_rank may be 0
_POSITIVE = ("layers", "d_model", "heads", "vocab", "ffn", "experts", "experts_active", "moe_ffn", "kv_heads",
             "head_dim", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _consistent(out: Mapping[str, Any], names: Mapping[str, str], path: str) -> None:
    """Refuse a config whose values cannot describe a model, naming the config's own field."""
    for key in _POSITIVE:
        if out.get(key) == 0:
            raise ReadError(f"expected a positive integer (the architecture's {key}), got 0", path=path,
                            field=names[key])
    if "experts" in out and out.get("experts_active", 0) > out["experts"]:
        raise ReadError(f"expected at most {names['experts']} = {out['experts']} experts per token, got "
                        f"{out['experts_active']}", path=path, field=names["experts_active"])
    if out.get("dense_layers", 0) > out["layers"]:
        raise ReadError(f"expected at most {names['layers']} = {out['layers']} dense layers, got "
                        f"{out['dense_layers']}", path=path, field=names["dense_layers"])
    if out.get("kv_heads") and out["heads"] % out["kv_heads"]:
        raise ReadError(f"{names['heads']} = {out['heads']} does not split into groups of {names['kv_heads']} = "
                        f"{out['kv_heads']} key-value heads", path=path, field=names["kv_heads"])


def _value(cfg: Mapping, name: str, path: str):
    x = cfg[name]
    if name == "tie_word_embeddings":
        if not isinstance(x, bool):
            raise ReadError(f"expected true or false, got {x!r}", path=path, field=name)
        return x
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise ReadError(f"expected a non-negative integer, got {x!r}", path=path, field=name)
    return x


def read_config(path: str | Path, shown: str | None = None) -> dict[str, Any]:
    """A config.json file read into Shape keys (``shown``: the path messages name)."""
    shown = shown or str(path)
    cfg = reading.read_json(path, shown, kind="the Hugging Face config", limit=CONFIG_BYTES,
                            why="a config.json is a page of JSON")
    return from_config(cfg, shown)


def presets() -> dict[str, dict[str, Any]]:
    """The shipped presets: name -> {"source", "seq_len", "seq_len_source", "config"}."""
    text = importlib.resources.files("mcflops").joinpath("data", _PRESETS).read_text("utf-8")
    return {k: v for k, v in json.loads(text).items() if not k.startswith("_")}


def preset(name: str) -> dict[str, Any]:
    """A preset's Shape keys (its config.json fields read as a config, and its training sequence length)."""
    table = presets()
    if name not in table:
        raise SpecError(f"unknown preset '{name}'{closest(name, table)} (expected one of: {', '.join(table)})",
                        field="architecture.preset")
    entry = table[name]
    return {**from_config(entry["config"], f"{_PRESETS}:{name}"), "seq_len": entry["seq_len"]}
