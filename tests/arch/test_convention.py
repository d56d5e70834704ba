"""`flops: architecture`: FLOPs per token counted from the shape (3 x forward), against Megatron-LM's formula."""

from __future__ import annotations

import pytest

import mcflops
from mcflops import chain
from mcflops.errors import SpecError
from tests.arch.test_counts import megatron_num_floating_point_operations

SPEC = {"name": "arch-conv", "samples": 5000, "hardware": {"accelerator": "h100-sxm", "count": 1024},
        "flops": "architecture", "architecture": {"preset": "llama3.1-8b"},
        "priors": {"tokens": 15e12, "mfu": 0.4}}


def test_per_token_is_megatrons_count_for_llama_8b():
    """Llama 3.1 8B (GQA, SwiGLU, untied logits) at 8K: Megatron-LM's causal formula per token (batch 1)."""
    spec = mcflops.load_spec(SPEC)
    per_token = chain.chain(spec)["flops_per_token"]
    megatron = megatron_num_floating_point_operations(
        batch_size=1, seq_length=8192, num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
        padded_vocab_size=128256, num_attention_heads=32, kv_channels=128, num_query_groups=8, swiglu=True,
        causal=True) / 8192
    assert per_token == pytest.approx(megatron, rel=1e-12)
    assert per_token == pytest.approx(3 * spec.architecture.counts().flops_per_token, rel=1e-15)
    assert "params" not in spec.priors  # the count alone sets FLOPs per token, as for megatron


def test_the_model_agrees_with_the_float_chain():
    """Every input fixed: the engine's GPU-hours are the float chain's, to float32 rounding of a few sums."""
    res = mcflops.run(SPEC, posterior=False)
    assert res.prior["gpu_hours"]["p50"] == pytest.approx(res.chain["gpu_hours"], rel=1e-6)


def test_an_architecture_that_cannot_be_counted_is_refused():
    bad = {**SPEC, "architecture": {"layers": 32, "d_model": 4096, "heads": 32, "seq_len": 8192, "vocab": 128256}}
    with pytest.raises(SpecError, match=r"flops: flops: architecture counts FLOPs from the architecture"):
        mcflops.load_spec(bad)


def test_params_far_from_the_count_is_still_refused():
    with pytest.raises(SpecError, match="differs by more than 2%"):
        mcflops.load_spec({**SPEC, "priors": {**SPEC["priors"], "params": 70e9}})
