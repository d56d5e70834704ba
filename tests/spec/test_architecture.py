"""The ``architecture:`` block: inline keys, presets, Hugging Face configs, and the params prior they set
or check."""

from __future__ import annotations

import json

import pytest

from mcflops.errors import SpecError
from mcflops.spec import load_spec, resolved_dict

BASE = {"name": "a", "hardware": {"accelerator": "h100-sxm", "count": 1024},
        "priors": {"tokens": 15e12, "mfu": {"beta": [0.3, 0.5]}}}


def spec(arch, **priors):
    return load_spec({**BASE, "architecture": arch, "priors": {**BASE["priors"], **priors}}, path="p.yaml")


def test_a_preset_sets_params_to_its_active_count():
    s = spec({"preset": "llama3.1-70b"})
    p = s.priors["params"]
    assert p.family == "point" and p.params["value"] == 70_553_706_496
    assert "preset llama3.1-70b" in p.source and "active parameters" in p.source
    assert s.architecture.seq_len == 8192 and s.architecture.kv_heads == 8


def test_moe_params_is_the_active_count():
    s = spec({"preset": "mixtral-8x7b"})
    assert abs(s.priors["params"].params["value"] - 12.9e9) / 12.9e9 < 0.01


def test_inline_keys_override_the_preset():
    s = spec({"preset": "llama3.1-8b", "seq_len": 4096, "vocab": 32000})
    assert s.architecture.seq_len == 4096
    assert s.priors["params"].params["value"] == 8_030_261_248 - 2 * (128256 - 32000) * 4096


def test_params_far_from_the_architecture_is_one_line():
    # the example: the 8x22B total written as params
    with pytest.raises(SpecError) as e:
        spec({"preset": "mixtral-8x22b"}, params=141e9)
    msg = str(e.value)
    assert msg.startswith("p.yaml: priors.params: params 141.0B differs by more than 2% from the architecture's ")
    assert "39.16B active parameters per token, of 140.6B in total" in msg and "\n" not in msg
    with pytest.raises(SpecError, match="params 7.000B differs"):  # a Llama-70B shape with params 7B
        spec({"preset": "llama3.1-70b"}, params=7e9)


def test_params_within_two_percent_is_kept():
    s = spec({"preset": "llama3.1-70b"}, params={"point": 70e9, "source": "model card"})
    assert s.priors["params"].params["value"] == 70e9
    s = spec({"preset": "llama3.1-70b"}, params={"lognormal": [69e9, 71.5e9]})
    assert s.priors["params"].family == "lognormal"


def test_hf_config_is_read_relative_to_the_prior_file(tmp_path):
    cfg = {"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
           "max_position_embeddings": 40960, "tie_word_embeddings": False}
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(cfg))
    prior = tmp_path / "p.yaml"
    prior.write_text("name: q\nhardware: {accelerator: h100-sxm}\n"
                     "architecture: {hf_config: cfg/config.json, seq_len: 4096}\n"
                     "priors: {tokens: 36e12, mfu: {beta: [0.3, 0.5]}}\n")
    s = load_spec(prior)
    assert s.architecture.head_dim == 128 and s.architecture.hf_config == "cfg/config.json"
    assert abs(s.priors["params"].params["value"] - 8.19e9) / 8.19e9 < 0.01
    assert resolved_dict(s)["architecture"]["ffn"] == 12288


def test_hf_config_without_seq_len_says_why(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2,
                                                      "hidden_size": 8, "num_attention_heads": 2,
                                                      "intermediate_size": 16, "vocab_size": 10}))
    prior = tmp_path / "p.yaml"
    prior.write_text("name: q\nhardware: {accelerator: h100-sxm}\narchitecture: {hf_config: config.json}\n"
                     "priors: {tokens: 1e9, mfu: 0.4}\n")
    with pytest.raises(SpecError, match=r"p.yaml:3: architecture.seq_len: missing architecture.seq_len \(the "
                                        r"training sequence length: config.json's max_position_embeddings"):
        load_spec(prior)


def test_a_bad_config_names_the_config_file_and_field(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 12}))
    prior = tmp_path / "p.yaml"
    prior.write_text("name: q\narchitecture: {hf_config: config.json, seq_len: 1024}\n"
                     "hardware: {accelerator: h100-sxm}\npriors: {tokens: 1e9, mfu: 0.4}\n")
    with pytest.raises(SpecError, match=r"config.json: model_type: unknown model_type 'gpt2'"):
        load_spec(prior)
    with pytest.raises(SpecError, match=r"absent.json: no such file \(expected the Hugging Face config\)"):
        spec({"hf_config": "absent.json", "seq_len": 1024})


def test_an_architecture_without_ffn_counts_nothing_and_needs_params():
    arch = {"layers": 80, "d_model": 8192, "heads": 64, "seq_len": 2048, "vocab": 32000, "experts": 8}
    assert spec(arch, params=65e9).architecture.counts() is None
    with pytest.raises(SpecError, match="missing required prior 'params'"):
        spec(arch)
    with pytest.raises(SpecError, match="architecture.moe_ffn needs architecture.ffn"):
        spec({**arch, "moe_ffn": 1024}, params=65e9)


@pytest.mark.parametrize("arch, match", [
    ({"preset": "llama3.1-8b", "hf_config": "c.json"}, "a preset or an hf_config, not both"),
    ({"preset": "llama3.1-8b", "glu": "yes"}, "architecture.glu: expected true or false"),
    ({"preset": "llama3.1-8b", "experts_active": 2}, "expected architecture.experts"),
    ({"preset": "mixtral-8x7b", "experts_active": 9}, "expected experts_active at most experts"),
    ({"preset": "deepseek-v3", "dense_layers": 62}, "expected dense_layers at most layers"),
    ({"preset": "llama3.1-8b", "kv_lora_rank": 512}, "multi-head latent attention needs"),
    ({"preset": ""}, "expected a preset name"),
])
def test_bad_architecture_keys(arch, match):
    with pytest.raises(SpecError, match=match):
        spec(arch)


def test_existing_conventions_keep_their_numbers():
    # palm reads layers, heads, head_dim and seq_len; megatron d_model, layers, seq_len and vocab: the new
    # keys leave them alone
    from mcflops.chain import flops_per_token

    a = {"layers": 80, "d_model": 8192, "heads": 64, "kv_heads": 8, "seq_len": 8192, "vocab": 128256, "ffn": 28672}
    for conv in ("palm", "megatron"):
        plain = load_spec({**BASE, "flops": conv, "architecture": a,
                           "priors": {**BASE["priors"], "params": 70.55e9}}, path="p.yaml")
        full = load_spec({**BASE, "flops": conv, "architecture": {**a, "glu": True, "tied_embeddings": False},
                          "priors": {**BASE["priors"], "params": 70.55e9}}, path="p.yaml")
        n = 70.55e9 if conv == "palm" else None
        assert flops_per_token(plain, n) == flops_per_token(full, n)


def test_every_shipped_prior_file_states_a_countable_architecture():
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parents[2] / "priors").glob("*.yaml"))
    assert len(files) >= 10
    for f in files:
        s = load_spec(f)
        c = s.architecture.counts()
        assert c is not None, f.name
        n = s.priors["params"].params["value"] if "params" in s.priors else c.params_active
        assert abs(n - c.params_active) <= 0.02 * c.params_active, f.name
