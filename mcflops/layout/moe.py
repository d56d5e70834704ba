"""The mixture-of-experts terms of the layout model (:mod:`mcflops.layout.model`). NumPy only: no JAX here.

A dense model takes none of this (``Terms.moe`` is None and the model's arithmetic is the dense one). For a
mixture of experts (``shape.experts``) with ``E`` routed experts of width ``F`` (``moe_ffn``), ``k`` per token, on
``e`` expert-parallel ranks of ``etp``-way expert tensor parallelism, per MoE layer and micro-batch, with
``n_r = b s / (cp t)`` the tokens a rank dispatches (sequence parallelism shards them over tp; Megatron-Core's
MoEAlltoAllTokenDispatcher sends the sequence-parallel shard and gathers over the expert-tensor group after the
all-to-all; Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960, Sec. 3):

1. Expert GEMMs (``g_x``). Each of a rank's E / e experts computes ``op_x = 2 (b s / cp) k h F e / (E t)``
   FLOPs per GEMM for any etp (n_r k e / E tokens of width F with etp 1; etp times as many of width F / etp
   after the expert-tensor gather). Sequential per-expert GEMMs run each at Calculon's share of ``op_x``
   (Isaev et al. 2023; the model's ``gemm_shape_share``); a grouped GEMM (CUTLASS grouped GEMM in Megatron-Core's ``moe_grouped_gemm``;
   MegaBlocks' block-sparse kernels, Gale et al. 2023, "MegaBlocks", MLSys, Sec. 5, whose point is that one
   kernel over all of a rank's experts runs at the efficiency of the combined problem) at the share of the
   E / e experts together, ``op_x E / e``. The other GEMMs (attention, shared experts, dense layers) take the
   share of the largest of them, ``g_d``. With ``f`` the routed experts' share of the FLOPs (mcflops.arch), the
   compute's share is the harmonic mix ``g = 1 / ((1 - f) / g_d + f / g_x)``. ``grouped_gemm`` unstated is
   unknown: both settings mixed 1:1, as an unstated overlap flag is.
2. Routing and token permutation: memory-bound copies, their bytes over the HBM bandwidth (the catalogue's
   ``hbm_gb_s``) times the multiplier ``moe_mem`` (a prior). The least a dropless dispatcher moves: the permute
   reads a rank's n_r tokens and writes their n_r k copies in expert order, the unpermute reads the n_r k expert
   outputs and writes n_r weighted sums (MegaBlocks Sec. 5.1's gather and scatter; Megatron-Core's
   ``moe_permute_fusion``), ``2 (k + 1) n_r h`` bf16 elements; the router's softmax and top-k read and write
   ``n_r E`` fp32 scores. Forward once, backward once (a gather's gradient is a scatter of the same bytes),
   full recompute once more. Any further pass (a receiver-side sort, unfused kernels) is in ``moe_mem`` > 1.
3. Load imbalance: each MoE layer's all-to-all waits for the most-loaded expert rank. A rank's load (token-expert
   assignments), mean ``n_r k``, is taken as iid normal across the e ranks less their mean (a multinomial's
   counts are Poisson counts conditioned on their sum); its expected maximum is ``mean + sd z_e`` with
   ``z_e = E[max of e standard normals]`` (exact, by quadrature; Cramer 1946, Sec. 28.6, the asymptote
   sqrt(2 ln e) the stragglers use), so the expert time and the all-to-all grow by ``1 + I``,
   ``I = z_e sqrt(r^2 + c^2 e / E)``:
   - routing noise, uniform top-k (k distinct of E; the rank's E / e experts drawn hypergeometrically):
     ``r^2 = (E - k) / ((E - 1) n_r k)`` (the iid-equivalent variance N k (E - k) / (e (E - 1)) over mean^2);
   - popularity: experts' shares of the traffic spread with coefficient of variation ``c`` (``moe_imbalance``, a
     prior) around 1 / E even with an auxiliary balancing loss (Fedus et al. 2022, "Switch Transformers", Sec.
     2.2; Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing", arXiv 2408.15664, whose MaxVio measures the
     excess of the most-loaded expert), averaged over a rank's E / e experts: ``c^2 e / E``. A benchmark router
     that routes at random (``router: uniform``, Megatron-Core's benchmarking option
     ``--moe-router-force-load-balancing``) has c = 0.
   A stated ``capacity_factor`` C pads every expert to C times its mean load (GShard, Lepikhin et al. 2021, Sec.
   2.2; Switch Sec. 2.2: expert capacity = tokens / E x C): I = C - 1, certain.
4. The EP all-to-all: dispatch and combine, forward and backward (GShard Sec. 3.2; DeepSeek-V3 Sec. 3.2), the
   recompute's forward once more, each moving ``n_r k h`` bf16 elements of which (e - 1) / e leave the rank.
   The EP group's consecutive ranks sit etp apart (the folding's order: etp innermost), so ``g = min(e,
   domain / etp)`` of them share an NVLink domain: (g - 1) / e of the copies go over NVLink and (e - g) / e over
   the network, at once (point-to-point sends on both fabrics; DeepSeek-V3 Sec. 3.2.2 overlaps them), so the
   slower sets the time. ``ep_comm_overlap`` (Megatron-Core's 1F1B all-to-all overlap, DeepSeek-V3's DualPipe,
   Sec. 3.2.1) hides it behind the other micro-batch's compute (window: the whole compute); unstated it is
   unknown (mixed 1:1), on by design under ``schedule: dualpipe``.
5. ``recompute_moe`` (Megatron-Core's ``--recompute-modules moe``, "recompute the MoE layer" with normal
   checkpointing: TransformerConfig.recompute_modules): the MoE layer's forward reruns in the backward, adding
   the routed experts' forward FLOPs (f / 3 of the model FLOPs) to the recompute ratio and a third pass of
   permutation and all-to-alls. (Its ``layernorm`` and ``moe_act`` modules, output-discarding checkpoints of
   elementwise work, recompute no GEMM FLOPs: taken as no recompute. Its default module, ``core_attn``, is
   Korthikanti's selective recompute, the model's ``recompute: selective``.)

The two priors (:data:`PRIORS`) are first-principles choices, not fitted: the MoE rows of layout_runs.yaml are
their check (:mod:`mcflops.layoutfit.moecheck`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MOE_PARAMS = ("moe_mem", "moe_imbalance")
MOE_FLAGS = ("grouped_gemm", "ep_comm_overlap")
ROUTERS = ("learned", "uniform")
# the layout's other expert-only fields (a dense model's prior file may not give them; its summary leaves them out)
MOE_KEYS = ("etp", "capacity_factor", "router", "recompute_moe")
ACT_BYTES = 2.0  # bf16 activations
SCORE_BYTES = 4.0  # fp32 router scores
PRIORS = {
    # 90% of the time 1.1x to 3x the datasheet time: a streaming copy reaches ~90% of the printed HBM bandwidth
    # at best (the roofline's attainable bandwidth, Williams et al. 2009, "Roofline", CACM 52(4): a STREAM-like
    # measurement below the datasheet), row gathers and scatters of a few KB each less, and any extra pass
    # (a receiver-side sort, an unfused kernel) doubles it: a prior choice on those grounds, not fitted
    "moe_mem": {"lognormal": [1.1, 3.0],
                "source": "prior choice (not fitted): the permutation's bytes over the datasheet HBM bandwidth, 1.1x "
                          "(a streaming copy near the roofline's attainable bandwidth, Williams et al. 2009) to 3x "
                          "(row gathers/scatters and an extra pass: MegaBlocks, Gale et al. 2023, Sec. 5.1; "
                          "Megatron-Core moe_permute_fusion)"},
    # the traffic's coefficient of variation across experts within a micro-batch under auxiliary-loss balancing:
    # 0.05 (near-uniform) to 0.6 (the most-loaded of 64 experts some 2x the mean, z_64 ~ 2.4): Switch
    # Transformers' balancing loss makes the shares equal in expectation only, and the loss-free paper's MaxVio
    # (max load / mean - 1) is the quantity this spreads; a prior choice on those grounds, not fitted
    "moe_imbalance": {"lognormal": [0.05, 0.6],
                      "source": "prior choice (not fitted): expert traffic's coefficient of variation within a "
                                "micro-batch under auxiliary-loss balancing, 0.05 to 0.6 (Fedus et al. 2022 Sec. 2.2; "
                                "Wang et al. 2024 arXiv 2408.15664, MaxVio)"},
}


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n iid standard normals] = int x n phi(x) Phi(x)^(n-1) dx (Cramer 1946, Sec. 28.6), by the
    trapezoid rule on [-12, 12] (step 1e-3: error far below 1e-9 for n <= 1e6); 0 for n <= 1."""
    if n <= 1:
        return 0.0
    from scipy.special import ndtr

    x = np.linspace(-12.0, 12.0, 24001)
    phi = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    f = x * n * phi * ndtr(x) ** (n - 1)
    return float(np.sum((f[1:] + f[:-1]) * 0.5) * (x[1] - x[0]))


def routing_cv(n_r: float, k: int, experts: int) -> float:
    """r: the iid-equivalent sd of a rank's load over its mean n_r k under uniform top-k routing (module doc)."""
    if experts <= 1:
        return 0.0
    return math.sqrt((experts - k) / ((experts - 1.0) * n_r * k))


def imbalance(mt: "MoETerms", c) -> np.ndarray:
    """I, the most-loaded rank's excess over the mean (array over the draws of ``moe_imbalance`` c)."""
    c = np.asarray(c, float)
    if mt.capacity_factor is not None:
        return np.full(c.shape, mt.capacity_factor - 1.0)
    pop = c * c * (0.0 if mt.router == "uniform" else mt.ep / mt.experts)
    return mt.z * np.sqrt(mt.r * mt.r + pop)


@dataclass(frozen=True)
class MoETerms:
    """The deterministic parts of the MoE terms at one layout (seconds per step per accelerator, shares)."""

    g: float  # the compute's GEMM share, expert and other GEMMs mixed (module doc, 1)
    expert_share: float  # of the GEMM-limited compute time, the routed experts' part
    perm_s: float  # routing and permutation at the datasheet HBM bandwidth (2)
    ep: int
    experts: int
    z: float  # E[max of ep standard normals]
    r: float  # routing noise's cv of a rank's load
    capacity_factor: float | None
    router: str
    op_expert: float  # FLOPs of one expert's GEMM (sequential)
    op_other: float  # FLOPs of the largest other GEMM
    rho_extra: float = 0.0  # the MoE module's recompute: hardware / model FLOPs added


def ep_alltoall_time(n_r: float, k: int, h: int, e: int, etp: int, nv: float, net: float, domain: int) -> float:
    """Seconds of one all-to-all of a rank's n_r k token copies over e ranks (module doc, 4)."""
    if e <= 1:
        return 0.0
    g = max(1.0, min(float(e), domain / max(etp, 1)))
    copies = n_r * k * h * ACT_BYTES
    return max(copies * (g - 1.0) / e / nv, copies * (e - g) / e / net if e > g else 0.0)


def moe_terms(lo, shape, counts, share, m: float, hbm: float) -> tuple[MoETerms, float]:
    """The MoE terms of layout ``lo`` and its EP all-to-all's time per step at full link bandwidth (module doc);
    ``share``: the model's GEMM shape share (FLOPs -> share)."""
    t, c, e, b = lo.tp, lo.cp, lo.ep, lo.micro_batch
    etp = lo.etp or t
    s, h, F = shape.seq_len, shape.d_model, shape.moe_ffn or shape.ff
    E, k = shape.experts, shape.experts_active or 1
    n_r = b * s / c / (t if lo.sequence_parallel and t > 1 else 1)
    per_rank = shape.moe_layers / lo.pp * m  # MoE layers x micro-batches a rank runs per step
    # forward, backward (+ the recompute's forward: full, or the MoE layer's own, Megatron-Core's
    # --recompute-modules moe, which reruns the router, dispatch, experts and combine in the backward)
    again = lo.recompute == "full" or lo.recompute_moe
    passes = 3.0 if again else 2.0

    op_x = 2.0 * (b * s / c) * k * h * F * e / (E * t)
    g_x = float(share(op_x * E / e if lo.grouped_gemm else op_x))
    attn = 2.0 * (b * s / c) * h * shape.heads * shape.hd / t
    others = [attn, 2.0 * (b * s / c) * h * F * shape.shared_experts / t]
    if shape.dense_layers:
        others.append(2.0 * (b * s / c) * h * shape.ff / t)
    op_d = max(others)
    g_d = float(share(op_d))
    f = counts.flops.get("routed_experts", 0.0) / counts.flops_per_token
    inv = (1.0 - f) / g_d + f / g_x
    moved = 2.0 * (k + 1.0) * n_r * h * ACT_BYTES + 2.0 * n_r * E * SCORE_BYTES
    perm = per_rank * passes * moved / hbm
    n_a2a = 2.0 * passes  # dispatch and combine per pass
    a2a = per_rank * n_a2a * ep_alltoall_time(n_r, k, h, e, etp, lo.nvlink_gb_s * 1e9, lo.network_gb_s * 1e9,
                                              lo.nvlink_domain)
    # the MoE module's recompute alone: its routed experts' forward again, f / 3 of the model FLOPs (forward 1,
    # backward 2: Narayanan et al. 2021), on top of the recompute mode's ratio; full already reruns everything
    rho_extra = f / 3.0 if lo.recompute_moe and lo.recompute != "full" else 0.0
    mt = MoETerms(g=1.0 / inv, rho_extra=rho_extra, expert_share=(f / g_x) / inv, perm_s=perm, ep=e, experts=E,
                  z=expected_max_normal(e), r=routing_cv(n_r, k, E), capacity_factor=lo.capacity_factor,
                  router=lo.router, op_expert=op_x, op_other=op_d)
    return mt, a2a


def extra_time(mt: MoETerms, t_c, draws) -> tuple[np.ndarray, np.ndarray]:
    """The experts' time beyond the GEMM-limited compute ``t_c`` (imbalance and permutation) and 1 + I, the
    all-to-all's multiplier (arrays over the draws)."""
    i = imbalance(mt, draws["moe_imbalance"])
    return t_c * mt.expert_share * i + mt.perm_s * np.asarray(draws["moe_mem"], float), 1.0 + i


def dense_and_expert(counts, shape) -> tuple[float, float]:
    """Parameters every expert-parallel rank holds, and the routed experts' (split over ep)."""
    if not shape.moe:
        return float(counts.params_total), 0.0
    from mcflops.arch import mlp_params

    routed = shape.moe_layers * shape.experts * mlp_params(shape.d_model, shape.moe_ffn or shape.ff, shape.glu)
    return float(counts.params_total - routed), float(routed)
