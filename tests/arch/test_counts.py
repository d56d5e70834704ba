"""Parameter and FLOPs counts against published figures, Megatron-LM's formula and a hand computation."""

from __future__ import annotations

import pytest

from mcflops.arch import Shape, counts

LLAMA31_8B = Shape(layers=32, d_model=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq_len=8192)
LLAMA31_70B = Shape(layers=80, d_model=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256, seq_len=8192)
LLAMA31_405B = Shape(layers=126, d_model=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256, seq_len=8192)
MIXTRAL_8X7B = Shape(layers=32, d_model=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000, seq_len=32768,
                     experts=8, experts_active=2)
DEEPSEEK_V3 = Shape(layers=61, d_model=7168, heads=128, kv_heads=128, ffn=18432, vocab=129280, seq_len=4096,
                    experts=256, experts_active=8, shared_experts=1, moe_ffn=2048, dense_layers=3,
                    q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)


def rel(a: float, b: float) -> float:
    return abs(a - b) / b


@pytest.mark.parametrize("shape, published", [
    (LLAMA31_8B, 8.03e9),  # Llama 3.1 model card, "8B"; the released safetensors hold 8,030,261,248
    (LLAMA31_70B, 70.6e9),  # 70,553,706,496 in the released safetensors
    (LLAMA31_405B, 405.9e9),  # 405,853,388,800 in the released safetensors
])
def test_dense_llama_totals_match_the_published_counts(shape, published):
    c = counts(shape)
    assert rel(c.params_total, published) < 0.01
    assert c.params_active == c.params_total  # dense: every weight is active


def test_llama_8b_is_exact_to_the_released_safetensors():
    # RMSNorm weights counted, no biases: the count is the checkpoint's to the parameter
    assert counts(LLAMA31_8B).params_total == 8_030_261_248
    assert counts(LLAMA31_70B).params_total == 70_553_706_496
    assert counts(LLAMA31_405B).params_total == 405_853_388_800


def test_mixtral_total_and_active():
    # Jiang et al. 2024 'Mixtral of Experts' (arXiv 2401.04088) Sec. 2: 47B total, 13B active; the
    # Mistral AI announcement: 46.7B total, 12.9B per token
    c = counts(MIXTRAL_8X7B)
    assert rel(c.params_total, 46.7e9) < 0.01
    assert rel(c.params_active, 12.9e9) < 0.01


def test_deepseek_v3_total_and_active():
    # DeepSeek-V3 report (arXiv 2412.19437) abstract: 671B total, 37B activated per token, without the
    # MTP module. The repository's README_WEIGHTS.md gives the activated figure as 36.6B: the output
    # head counted, the input embedding (a lookup) not; "37B" is that figure rounded.
    c = counts(DEEPSEEK_V3)
    assert rel(c.params_total, 671e9) < 0.01
    assert rel(c.params_active - c.embedding, 36.6e9) < 0.01
    assert abs(c.params_active - c.embedding - 37e9) < 0.5e9  # rounds to 37B


def test_moe_active_counts_the_routed_and_shared_experts_only():
    c = counts(DEEPSEEK_V3)
    per_expert = 3 * 7168 * 2048
    assert c.params_total - c.params_active == 58 * (256 - 8) * per_expert


def megatron_num_floating_point_operations(*, batch_size, seq_length, num_layers, hidden_size, ffn_hidden_size,
                                           padded_vocab_size, num_attention_heads, kv_channels, num_query_groups,
                                           swiglu, causal):
    """Megatron-LM ``megatron/training/training.py`` ``num_floating_point_operations`` (the GPT branch, no
    MoE), written out from its published form: expansion 3 x 2 x 2 (forward, wgrad and dgrad; two stacked
    GEMMs; 2 FLOPs per multiply-accumulate; Narayanan et al. 2021, App.), times b s l h^2 times the attention,
    MLP and logit terms. Older releases use s/h in the attention term; later ones s/(2h) ("Only half of the
    attention matrix is non-zero and needs to be multiplied with V"): ``causal`` picks the later."""
    query_projection_to_hidden_size_ratio = kv_channels * num_attention_heads / hidden_size
    gated_linear_multiplier = 3 / 2 if swiglu else 1
    expansion_factor = 3 * 2 * 2
    scores = seq_length / hidden_size / (2 if causal else 1)
    return (expansion_factor * batch_size * seq_length * num_layers * hidden_size * hidden_size * (
        (1 + num_query_groups / num_attention_heads + scores) * query_projection_to_hidden_size_ratio
        + (ffn_hidden_size / hidden_size) * gated_linear_multiplier
        + padded_vocab_size / (2 * num_layers * hidden_size)))


@pytest.mark.parametrize("glu, kv", [(False, 96), (True, 8)])
def test_training_flops_match_megatron(glu, kv):
    s = Shape(layers=96, d_model=12288, heads=96, kv_heads=kv, head_dim=128, ffn=4 * 12288, vocab=50304,
              seq_len=2048, glu=glu)
    c = counts(s)
    common = dict(batch_size=1, seq_length=2048, num_layers=96, hidden_size=12288, ffn_hidden_size=4 * 12288,
                  padded_vocab_size=50304, num_attention_heads=96, kv_channels=128, num_query_groups=kv, swiglu=glu)
    causal = megatron_num_floating_point_operations(**common, causal=True) / 2048
    noncausal = megatron_num_floating_point_operations(**common, causal=False) / 2048
    assert rel(c.training_flops_per_token, causal) < 1e-12
    nc = 3 * (c.flops_per_token - c.flops["attention_scores_causal"] + c.flops["attention_scores_noncausal"])
    assert rel(nc, noncausal) < 1e-12


def test_flops_by_hand_for_a_small_gpt():
    # 2 layers, d 8, 2 heads of 4, ffn 32, vocab 10, T 6, no GLU, tied embeddings
    s = Shape(layers=2, d_model=8, heads=2, ffn=32, vocab=10, seq_len=6, glu=False, tied_embeddings=True)
    c = counts(s)
    # per layer: q, k, v, o 4 x 64 = 256; MLP 2 x 8 x 32 = 512; norms 2 x 8; final norm 8; embedding 80
    assert c.params_total == 2 * (256 + 512 + 16) + 8 + 80
    assert c.flops == {
        "attention_projections": 2 * 2 * 256,
        "attention_scores_causal": 2 * 2 * 2 * (4 + 4) * 6 / 2,  # QK^T and AV over half of 6 keys
        "attention_scores_noncausal": 2 * 2 * 2 * (4 + 4) * 6,
        "mlp": 2 * 2 * 512,
        "routed_experts": 0,
        "router": 0,
        "shared_experts": 0,
        "logits": 2 * 8 * 10,
    }
    assert c.flops_per_token == 1024 + 192 + 2048 + 160


def test_palm_attention_term():
    # PaLM App. B: training FLOPs per token 6N + 12 L H Q T, non-causal, N the non-embedding weights
    s = LLAMA31_70B
    c = counts(s)
    assert 3 * c.flops["attention_scores_noncausal"] == 12 * 80 * 64 * 128 * 8192


def test_mla_attention_weights_by_hand():
    # DeepSeek-V3: W^DQ 7168x1536, q norm, W^UQ+W^QR 1536 x 128 x 192, W^DKV+W^KR 7168 x 576, kv norm,
    # W^UK+W^UV 512 x 128 x 256, W^O 128 x 128 x 7168
    from mcflops.arch import attention_params
    want = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    assert attention_params(DEEPSEEK_V3) == want
