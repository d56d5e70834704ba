"""The compute time's terms beside the FLOPs at peak: GEMM efficiency by the matrices' size (Calculon's curve, and a
slope past it), and the memory-bound operations' time against the GEMMs' (:func:`elementwise_share`). NumPy only."""

from __future__ import annotations

import numpy as np

# Calculon's (Isaev et al. 2023) A100/H100 matrix-unit efficiency by GEMM size (systems/a100_80g.json,
# "matrix" table: >= 128 GFLOP 0.95, >= 16 GFLOP 0.90, >= 1 GFLOP 0.60, below 0.10), read as points of a
# curve in log size (log-linear between them) and taken relative to its top: the shape's share ``g``.
_GEMM_POINTS = ((0.0625e9, 0.10), (1e9, 0.60), (16e9, 0.90), (128e9, 0.95))


# the GEMM size the efficiency prior ``gemm`` refers to: Calculon's top bin, where its curve stops rising
GEMM_REF = 128e9


def gemm_efficiency(xp, gemm, kappa, log_op):
    """eta beside Calculon's curve: logit eta = logit gemm + kappa log(op / GEMM_REF), ``log_op`` the largest
    GEMM's log size over :data:`GEMM_REF` (on both sides of it: above, eta keeps rising where Calculon's table
    stops; below, it falls on top of ``g``). Why it keeps rising past 128 GFLOP: a GEMM's arithmetic intensity
    grows with its smallest dimension (the roofline, Williams et al. 2009, "Roofline", CACM 52(4)) and the last
    wave of thread blocks on the SMs is a smaller share of a larger GEMM (NVIDIA, "Matrix Multiplication
    Background User's Guide", 2023: tile and wave quantization), so the model width, the tokens per micro-batch
    and the tp split all move it. The slope kappa (>= 0, ``gemm_shape``) is a prior fitted on the benchmark
    rows (mcflops.layoutfit); at kappa 0 the shape enters through ``g`` alone. ``xp``: numpy or jax.numpy."""
    logit = xp.log(gemm) - xp.log1p(-gemm) + kappa * log_op
    return 1.0 / (1.0 + xp.exp(-logit))


def gemm_shape_share(op_flops) -> np.ndarray:
    """``g``: a GEMM of ``op_flops`` FLOPs relative to a large one (1 at >= 128 GFLOP)."""
    x = np.log(np.maximum(np.asarray(op_flops, float), 1.0))
    xs = np.log([p[0] for p in _GEMM_POINTS])
    ys = np.asarray([p[1] for p in _GEMM_POINTS]) / _GEMM_POINTS[-1][1]
    return np.interp(x, xs, ys)


def elementwise_share(shape, lo, flops_per_token: float, peak: float, hbm_bytes_s: float) -> float:
    """E: the memory-bound (elementwise) operations' time at full HBM bandwidth over the GEMMs' at peak, per token.

    The bytes those operations move scale with the activations they read and write, b s h per tensor, while the
    GEMMs' FLOPs scale with b s h^2: E falls as 1/h and rises with peak / bandwidth (Ivanov et al. 2021, "Data
    Movement Is All You Need", MLSys: normalisation and elementwise operators take about 37% of BERT-large's
    training time for 0.2% of its FLOPs). The bytes per token per layer are Korthikanti et al. 2022's activation
    count (Sec. 4.1, Table 2: 34 s b h for a GPT layer with a 4h MLP, 10 of it outside the tensor-parallel split and
    24 inside, 16 of those the MLP's 4h-wide tensors), with the MLP width f for 4h (4 f; 6 f with a gated unit's
    second projection) and taken as the traffic's unit: how many bytes a stack moves per byte counted (kernel
    fusion, the backward's reads) is the ``elementwise`` multiplier, a prior fitted on the benchmark rows. With
    sequence parallelism all of it is split over tp; without, the 10 h part is repeated on every rank (Table 2).
    E x multiplier is added to the GEMMs' time 1 / (eta g), and the recompute repeats it as it repeats them."""
    h, t = shape.d_model, lo.tp
    f = shape.ff
    if shape.moe:  # the MLP tensors a token meets: its routed and shared experts' on the MoE layers, the dense rest
        f_moe = (shape.moe_ffn or shape.ff) * ((shape.experts_active or 1) + shape.shared_experts)
        f = (f_moe * shape.moe_layers + shape.ff * shape.dense_layers) / shape.layers
    inside = 8.0 * h + (6.0 if shape.glu else 4.0) * f
    per_rank = (10.0 * h + inside) / t if (lo.sequence_parallel or t == 1) else 10.0 * h + inside / t
    # per token and stage: the rank moves per_rank bytes per layer while it does flops_per_token / t of the FLOPs
    return per_rank * t * shape.layers * peak / (hbm_bytes_s * flops_per_token)


def attention_share(counts) -> float:
    """A: the causal attention core's share of the training FLOPs per token (Q K^T and the weighted sum of V,
    mcflops.arch's ``attention_scores_causal`` over the causal total): 6 l d s against about 6 N, so it grows with
    the sequence and matters for small models at long context (MPT-350M at 65,536 tokens: 0.82)."""
    return float(counts.flops.get("attention_scores_causal", 0.0) / counts.flops_per_token)


def attention_slowdown(share, g, attention=None):
    """K: the compute time over the time at the GEMMs' efficiency, when the attention core (``share`` A of the
    FLOPs) runs at a fraction ``attention`` (a) of the large GEMMs' efficiency eta / g while the rest runs at eta:
    K = 1 - A + A g / a. Why a < 1: the fused attention kernels run two small GEMMs (inner dimension the head
    size, 64-192) with a softmax between them on chip, and reach 25-40% of the A100's peak (FlashAttention-1, as Dao
    2023, "FlashAttention-2", abstract, measures it), 50-73% forward, less backward (FlashAttention-2, ibid., Sec.
    4.1) and up to 75% of the H100's forward (Shah et al. 2024, "FlashAttention-3", abstract), against the large
    GEMMs' 80-90% (Calculon's table above). ``attention`` is a prior fitted on the benchmark rows
    (mcflops.layoutfit.mix.STARTING_ATT), where a sweep of sequence lengths measures it; None
    (priors without it) is the model before the term, K = 1. Arithmetic only: floats, NumPy or JAX arrays."""
    if attention is None:
        return 1.0
    return 1.0 - share + share * g / attention
