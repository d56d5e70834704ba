"""Hugging Face config.json files and the shipped presets, read into shapes and counted."""

from __future__ import annotations

import json

import pytest

from mcflops.arch import Shape, counts
from mcflops.arch.hf import from_config, preset, presets, read_config
from mcflops.errors import SpecError


def shape_of(cfg, seq_len=4096):
    return Shape(**from_config(cfg, "config.json"), seq_len=seq_len)


# Published totals (and active counts) of each family's models, from their model cards and reports.
CASES = [
    ({"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
      "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064, "tie_word_embeddings": False},
     7.62e9, None),  # Qwen2-7B: 7.62B (q/k/v biases, 0.13M, are not counted)
    ({"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32,
      "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
      "tie_word_embeddings": False}, 8.2e9, None),  # Qwen3-8B: 8.2B
    ({"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
      "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
      "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "tie_word_embeddings": False},
     30.5e9, 3.3e9),  # Qwen3-30B-A3B: 30.5B total, 3.3B activated (the input embedding counted)
    ({"model_type": "gemma", "num_hidden_layers": 28, "hidden_size": 3072, "num_attention_heads": 16,
      "num_key_value_heads": 16, "head_dim": 256, "intermediate_size": 24576, "vocab_size": 256000},
     8.54e9, None),  # Gemma 7B: 8.54B with its tied 256K embedding (Gemma report Table 2: 7,751M + 786M)
    ({"model_type": "deepseek_v2", "num_hidden_layers": 60, "hidden_size": 5120, "num_attention_heads": 128,
      "num_key_value_heads": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
      "n_routed_experts": 160, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
      "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "vocab_size": 102400}, 236e9, 21e9),  # DeepSeek-V2: 236B total, 21B activated
    # (DeepSeek counts the activated parameters without the input embedding, a lookup)
]


@pytest.mark.parametrize("cfg, total, active", CASES, ids=[c[0]["model_type"] for c in CASES])
def test_family_configs_count_to_the_published_figures(cfg, total, active):
    c = counts(shape_of(cfg))
    assert abs(c.params_total - total) / total < 0.01
    if active is not None:
        got = c.params_active - (c.embedding if cfg["model_type"].startswith("deepseek") else 0)
        assert abs(got - active) / active < 0.02  # published to two figures


def test_presets_count_to_the_published_figures():
    want = {"llama3.1-8b": (8.03e9, None), "llama3.1-70b": (70.6e9, None), "llama3.1-405b": (405.9e9, None),
            "mixtral-8x7b": (46.7e9, 12.9e9), "mixtral-8x22b": (141e9, 39e9), "deepseek-v3": (671e9, None)}
    assert set(presets()) == set(want)
    for name, (total, active) in want.items():
        c = counts(Shape(**preset(name)))
        assert abs(c.params_total - total) / total < 0.01, name
        if active is not None:
            assert abs(c.params_active - active) / active < 0.01, name
    ds = counts(Shape(**preset("deepseek-v3")))
    assert abs(ds.params_active - ds.embedding - 36.6e9) / 36.6e9 < 0.01


def test_every_preset_cites_its_sources():
    for name, entry in presets().items():
        assert entry["source"].startswith("huggingface.co/") and "config.json" in entry["source"]
        assert entry["checked"] and entry["seq_len_source"], name


def test_mixtral_experts_take_the_mlp_width():
    s = Shape(**preset("mixtral-8x7b"))
    assert s.experts == 8 and s.experts_active == 2 and s.moe_ffn is None and s.ff == 14336


def test_a_multimodal_wrapper_reads_its_text_config():
    cfg = {"model_type": "llava", "text_config": CASES[1][0]}
    assert from_config(cfg, "c.json") == from_config(CASES[1][0], "c.json")


def test_unknown_model_type_is_one_line():
    with pytest.raises(SpecError) as e:
        from_config({"model_type": "lama", "hidden_size": 8}, "m/config.json")
    msg = str(e.value)
    assert msg.startswith("m/config.json: model_type: unknown model_type 'lama'; did you mean 'llama'?")
    assert "\n" not in msg


def test_missing_field_is_one_line_naming_it():
    cfg = {k: v for k, v in CASES[0][0].items() if k != "intermediate_size"}
    with pytest.raises(SpecError, match=r"^c.json: intermediate_size: missing 'intermediate_size' \(a qwen2 "
                                        r"config.json gives it: the architecture's ffn\)$"):
        from_config(cfg, "c.json")
    cfg = {**CASES[4][0]}
    del cfg["n_routed_experts"]
    with pytest.raises(SpecError, match="n_routed_experts: missing"):
        from_config(cfg, "c.json")


def test_a_bad_value_is_one_line():
    with pytest.raises(SpecError, match="hidden_size: expected a non-negative integer, got '4096'"):
        from_config({**CASES[0][0], "hidden_size": "4096"}, "c.json")


def test_read_config_reads_a_file(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(CASES[1][0]))
    assert read_config(p)["head_dim"] == 128
    p.write_text("{not json")
    with pytest.raises(SpecError, match="not JSON"):
        read_config(p)
    with pytest.raises(SpecError, match="no such file"):
        read_config(tmp_path / "absent.json")


def test_unknown_preset():
    with pytest.raises(SpecError, match="unknown preset 'llama3.1-7b'; did you mean"):
        preset("llama3.1-7b")


_MIXTRAL = json.loads((__import__("pathlib").Path(__file__).resolve().parents[2] / "priors" / "examples"
                       / "mixtral-8x7b" / "config.json").read_text())
_DS = presets().get("deepseek-v3", {}).get("config")


@pytest.mark.parametrize("change, field, words", [
    ({"num_experts_per_tok": 9}, "num_experts_per_tok", "at most num_local_experts = 8 experts per token, got 9"),
    ({"intermediate_size": 0}, "intermediate_size", "expected a positive integer (the architecture's ffn), got 0"),
    ({"num_attention_heads": 0}, "num_attention_heads", "positive integer"),
    ({"num_key_value_heads": 3}, "num_key_value_heads", "does not split into groups"),
], ids=["active-above-experts", "zero-ffn", "zero-heads", "kv-groups"])
def test_a_config_that_cannot_describe_a_model_is_one_line(change, field, words):
    """Values that used to count silently ("53.13B active of 47.49B total", a zero FFN taken as 4 x d_model)."""
    with pytest.raises(SpecError, match=rf"c.json: {field}: .*{__import__('re').escape(words)}"):
        from_config({**_MIXTRAL, **change}, "c.json")


@pytest.mark.skipif(_DS is None, reason="no deepseek-v3 preset")
def test_more_dense_layers_than_layers_is_one_line():
    """first_k_dense_replace 100 of 61 layers printed "-388.6B parameters"."""
    with pytest.raises(SpecError, match=r"first_k_dense_replace: expected at most num_hidden_layers = 61 dense layers"):
        from_config({**_DS, "first_k_dense_replace": 100}, "c.json")
