"""Parameters and forward FLOPs per token from a transformer's shape. Plain Python: no JAX here.

A decoder-only transformer: ``layers`` blocks of attention (multi-head, grouped-query, or DeepSeek's
multi-head latent attention) and an MLP (dense, or a mixture of experts after ``dense_layers`` dense
blocks), an input embedding and an output projection (tied or not). RMSNorm weights are counted; biases
are not (Llama, Mistral, Mixtral, DeepSeek and Gemma have none; Qwen2's q/k/v biases are under 0.01%).

FLOPs are forward FLOPs per token, 2 per multiply-accumulate: a matrix-vector product with a weight of
``n`` entries costs ``2 n`` (Kaplan et al. 2020, Table 1; PaLM App. B counts 6N for training, i.e. 2N
forward and 4N backward). Training is 3x forward (Narayanan et al. 2021, App.: forward, weight gradient,
data gradient).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Shape:
    """A transformer's shape, the keys of ``architecture:``. Widths left out take their usual value
    (head_dim = d_model / heads, kv_heads = heads, ffn = 4 d_model, moe_ffn = ffn)."""

    layers: int
    d_model: int
    heads: int
    vocab: int
    seq_len: int = 2048
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn: int | None = None
    tied_embeddings: bool = False
    glu: bool = True
    experts: int | None = None  # routed experts per MoE layer
    experts_active: int | None = None  # routed experts each token visits
    shared_experts: int = 0  # experts every token visits (DeepSeek), each of width moe_ffn
    moe_ffn: int | None = None
    dense_layers: int = 0  # the first dense_layers blocks have a dense MLP of width ffn (DeepSeek)
    q_lora_rank: int | None = None  # MLA (DeepSeek-V2/V3): None with kv_lora_rank means full-rank queries
    kv_lora_rank: int | None = None  # set: multi-head latent attention
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None

    @property
    def hd(self) -> int:
        return self.head_dim or self.d_model // self.heads

    @property
    def kvh(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ff(self) -> int:
        return self.ffn or 4 * self.d_model

    @property
    def moe(self) -> bool:
        return bool(self.experts)

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.moe else 0


SHAPE_KEYS = tuple(f.name for f in fields(Shape))


@dataclass(frozen=True)
class Counts:
    """Total and active parameters, and forward FLOPs per token by component (``flops``, in order)."""

    params_total: int
    params_active: int  # what one token's forward pass reads, the input embedding's row counted
    embedding: int  # the input embedding (vocab x d_model): a lookup, no FLOPs
    flops: dict[str, float]  # forward FLOPs per token, one entry per component

    @property
    def flops_per_token(self) -> float:
        """Forward FLOPs per token, causal attention (what a decoder trained with a causal mask does)."""
        return sum(v for k, v in self.flops.items() if k != "attention_scores_noncausal")

    @property
    def training_flops_per_token(self) -> float:
        return 3.0 * self.flops_per_token  # forward + backward (2x), Narayanan et al. 2021, App.

    def to_dict(self) -> dict:
        """Plain data: the counts, forward and training FLOPs per token, and the forward components."""
        return {"params_total": self.params_total, "params_active": self.params_active,
                "embedding": self.embedding, "flops_per_token": self.flops_per_token,
                "training_flops_per_token": self.training_flops_per_token,
                "six_n": 6.0 * self.params_active, "components": dict(self.flops)}


def attention_params(s: Shape) -> int:
    """Weights of one attention block (no norm)."""
    d, h = s.d_model, s.heads
    if s.mla:
        # DeepSeek-V2 report, Sec. 2.1.2-2.1.3 (Eqs. 9-10, 12-14): a latent c^KV = W^DKV h of rank d_c plus
        # the shared RoPE key W^KR (d_h^R); keys and values up-projected per head (W^UK, W^UV); queries through
        # a latent of rank d_c' (W^DQ, W^UQ, W^QR) or full rank; the output W^O from heads x v_head_dim.
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        if s.q_lora_rank:
            q = d * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * h * qk  # the latent's RMSNorm counted
        else:
            q = d * h * qk
        kv = d * (s.kv_lora_rank + s.qk_rope_head_dim) + s.kv_lora_rank \
            + s.kv_lora_rank * h * (s.qk_nope_head_dim + s.v_head_dim)
        return q + kv + h * s.v_head_dim * d
    # W_Q, W_O: d x heads x head_dim; W_K, W_V: d x kv_heads x head_dim (grouped-query attention,
    # Ainslie et al. 2023)
    return 2 * d * h * s.hd + 2 * d * s.kvh * s.hd


def mlp_params(d: int, width: int, glu: bool) -> int:
    """One MLP: up and down (2 d f), plus the gate of a GLU (3 d f; Shazeer 2020)."""
    return (3 if glu else 2) * d * width


def counts(s: Shape) -> Counts:
    """Total parameters, active parameters per token and forward FLOPs per token by component."""
    d, L, V = s.d_model, s.layers, s.vocab
    attn = attention_params(s)
    dense_mlp = mlp_params(d, s.ff, s.glu)
    expert = mlp_params(d, s.moe_ffn or s.ff, s.glu)
    n_dense = L - s.moe_layers
    router = d * s.experts if s.moe else 0  # a linear d -> experts per MoE layer (Shazeer et al. 2017)
    embed = V * d
    unembed = 0 if s.tied_embeddings else V * d
    norms = 2 * d * L + d  # RMSNorm before attention and MLP, and a final one

    total = (L * attn + n_dense * dense_mlp + s.moe_layers * (((s.experts or 0) + s.shared_experts) * expert + router)
             + embed + unembed + norms)
    active_experts = (s.experts_active or 1) if s.moe else 0
    active = (L * attn + n_dense * dense_mlp
              + s.moe_layers * ((active_experts + s.shared_experts) * expert + router)
              + embed + unembed + norms)

    # Forward FLOPs per token: 2 per weight a token multiplies by (Kaplan et al. 2020; PaLM App. B),
    # the input embedding a lookup (no FLOPs); the output projection 2 d V even when tied.
    if s.mla:
        qk, v = s.qk_nope_head_dim + s.qk_rope_head_dim, s.v_head_dim
    else:
        qk = v = s.hd
    # Scores: Q K^T and the weighted sum of V, 2 T heads (qk + v) per token per layer over all T keys
    # (PaLM App. B's 12 L H Q T for training is 3 x 4 L H Q T forward); a causal mask halves the work
    # (Korthikanti et al. 2022, Sec. 3.2; Megatron-LM's num_floating_point_operations: "Only half of the
    # attention matrix is non-zero").
    scores = 2.0 * L * s.heads * (qk + v) * s.seq_len
    flops = {
        "attention_projections": 2.0 * L * attn,
        "attention_scores_causal": scores / 2,
        "attention_scores_noncausal": scores,
        "mlp": 2.0 * n_dense * dense_mlp,
        "routed_experts": 2.0 * s.moe_layers * active_experts * expert,
        "router": 2.0 * s.moe_layers * router,
        "shared_experts": 2.0 * s.moe_layers * s.shared_experts * expert,
        "logits": 2.0 * d * V,
    }
    return Counts(params_total=int(total), params_active=int(active), embedding=int(embed), flops=flops)
