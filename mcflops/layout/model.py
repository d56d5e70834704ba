"""MFU from the parallel layout: a step-time model, each term a cited formula. NumPy only: no JAX here.

One training step of a data-parallel replica of ``tp x pp x cp`` accelerators (``dp`` replicas, ``n`` in all)
processes the global batch ``B`` sequences of ``s`` tokens in ``m = B / (dp b)`` micro-batches of ``b``:

    T0      = F B s / (n P)                           model FLOPs at peak (F: training FLOPs per token, causal
                                                      attention, counted from the architecture: mcflops.arch)
    T_c     = T0 rho (1 / (eta g) + lambda E) / u      compute: rho the recompute's hardware/model FLOPs,
                                                      eta the GEMM efficiency (a prior at 128 GFLOP, its
                                                      logit rising with the largest GEMM's log size at the
                                                      slope gemm_shape: gemm_efficiency), g the small
                                                      GEMMs' share, lambda E the memory-bound operations
                                                      (elementwise_share, the multiplier a prior), u =
                                                      min(1, m) the replicas with a micro-batch
    T_step  = (T_c (1 + beta) + X) (1 + q)             bubble beta, exposed communication X, stragglers q
    X       = sum_k  x_k C_k                 (class k on the critical path: not overlapped)
                   | h(x_k C_k - w_k T_c)    (overlapped with a window of compute w_k T_c: the hinge h below)
    MFU     = T0 / T_step

so MFU is the product of the factors, the waterfall from peak to achieved FLOP/s:

    gemm = eta g,   memory = 1 / (1 + eta g lambda E),   recompute = 1 / rho,   pipeline = u / (1 + beta),
    communication = T_c (1 + beta) / (T_c (1 + beta) + X),   stragglers = 1 / (1 + q).

Sources of each term, beside its formula below: the bubble (Narayanan et al. 2021, "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", Sec. 2.2; Llama 3 Sec. 3.3.2; Qi et al. 2024
zero-bubble and DeepSeek-V3 Table 2 for DualPipe), the tensor-parallel all-reduces per layer (Shoeybi et al.
2019 Sec. 3, Narayanan Sec. 3.2, Korthikanti et al. 2022 Sec. 4.2 for sequence parallelism), the ring
all-reduce time 2 (k-1)/k x bytes / bandwidth (Patarasuk & Yuan 2009; NCCL's bus bandwidth), ZeRO's
volumes (Rajbhandari et al. 2020 Sec. 7), recompute (Korthikanti Sec. 5: full recompute adds a forward,
4/3 of the FLOPs), the largest of n step times (the expected maximum of n normals, ~ sigma sqrt(2 ln n):
Cramer 1946 Sec. 28.6, the Gumbel limit).

The efficiency parameters are the uncertain inputs (each a prior, :data:`PARAMS`); the layout, the shape and
the hardware fix everything else. Each communication class's multiplier x (``tp_comm``, ``dp_comm``,
``ep_comm``) scales its time at full link bandwidth: 1 is the link's rate, above 1 is below it (NCCL's bus
bandwidth is some 70-90% of the link's), below 1 is overlap the flags do not state.

Overlap (the layout's flags, each defaulting to Megatron-Core's: off, its DistributedDataParallelConfig and
TransformerConfig; the data-parallel ones on under ``fsdp``, which prefetches and reduces asynchronously by
design: Zhao et al. 2023, "PyTorch FSDP", Sec. 3.3): an overlapped collective costs only what outlasts the
compute it hides behind, max(0, x C - w T_c), taken smooth so that the fit stays differentiable
(:func:`exposed`). The windows:
- ``overlap_grad_reduce``: the gradient reduce-scatter (all-reduce without ZeRO) is issued bucket by bucket as
  the LAST micro-batch's backward produces each bucket's gradients (Megatron-Core's DistributedDataParallel;
  MegaScale, Jiang et al. 2024, Sec. 3.2): w = the backward share of one micro-batch, (3 rho - 1)/(3 rho m).
- ``overlap_param_gather``: the updated weights' all-gather (ZeRO >= 1) runs under the FIRST micro-batch's
  forward (Megatron-Core's distributed optimizer; MegaScale Sec. 3.2): w = 1 / (3 rho m); ZeRO-3's second
  all-gather, before the backward, shares the backward's window (FSDP's backward prefetch, Zhao et al. Sec. 3.3).
- ``tp_comm_overlap``: the tensor-parallel all-gather / reduce-scatter split into chunks pipelined with the
  GEMMs that consume them (Wang et al. 2023, "Overlap Communication with Dependent Computation via
  Decomposition", ASPLOS; MegaScale Sec. 3.2): w = the whole compute. Only inside one NVLink domain: Transformer
  Engine's userbuffers, which Megatron-Core's ``tp_comm_overlap`` uses, need CUDA IPC / multicast handles over
  NVLink (GitHub NVIDIA/TransformerEngine#1071, 2024: "only possible with single-node tensor-parallelism";
  NVIDIA/TransformerEngine#1470, 2025: multi-node NVLink), so past the domain the flag does nothing.
At a fixed global batch, more data-parallel ranks means fewer micro-batches m each: the DP windows shrink with
the step (both ~ 1/dp) while the collective's time does not, so the exposed share grows with dp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from mcflops.layout.compute import GEMM_REF, attention_share, attention_slowdown, elementwise_share, gemm_efficiency, \
    gemm_shape_share
from mcflops.layout.moe import dense_and_expert, extra_time, moe_terms

# The uncertain efficiency parameters, in the order the factors use them.
PARAMS = ("gemm", "tp_comm", "dp_comm", "ep_comm", "straggler_cv")
# the memory-bound operations' multiplier (elementwise_share): drawn where the priors have it (the shipped fit's do),
# from a hypercube of its own, so that priors without it keep their draws and their model
ELEMENTWISE = "elementwise"
# the attention core's efficiency relative to the large GEMMs' (attention_slowdown): drawn where the priors have it,
# from a column of its own, as the elementwise multiplier is
ATTENTION = "attention"
OPTIONAL = (ELEMENTWISE, ATTENTION)  # the terms a prior may leave out (the model is then the one before them)
FRACTIONS = ("gemm", ATTENTION)  # efficiencies: priors on (0, 1]; the other parameters are positive multipliers
FACTORS = ("gemm", "recompute", "pipeline", "communication", "stragglers")
SCHEDULES = ("1f1b", "interleaved", "zero_bubble", "dualpipe")
RECOMPUTE = ("none", "selective", "full")
# layout fields a sensitivity sweep may vary (the rest are the cluster's or follow from these)
SWEEPABLE = ("tp", "pp", "vpp", "cp", "ep", "micro_batch", "global_batch", "zero", "recompute", "schedule",
             "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
OVERLAP_FLAGS = ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
# each communication class's efficiency parameter: scale-up collectives tp_comm, scale-out dp_comm, experts ep_comm
CLASS_PARAM = {"tp": "tp_comm", "cp": "tp_comm", "dp_fwd": "dp_comm", "dp_bwd": "dp_comm", "pp": "dp_comm",
               "ep": "ep_comm"}
# the hinge's width, as a share of the collective's time: a collective exactly as long as its window is still
# about SOFT / 2 exposed (the last bucket, which no compute follows; Megatron-Core's buckets are >= 40M elements)
SOFT = 0.1
# the weights all-gathered are the bf16 compute copy (Megatron-Core's distributed optimizer; FSDP's param_dtype)
PARAM_BYTES = 2

@dataclass(frozen=True)
class Layout:
    """The parallel layout as a prior file gives it (``mfu: {layout: {...}}``); ``dp`` None follows the count."""

    tp: int = 1
    pp: int = 1
    dp: int | None = None
    cp: int = 1
    ep: int = 1
    vpp: int = 1  # virtual stages per pipeline rank (interleaved 1F1B)
    micro_batch: int = 1  # sequences
    global_batch: int = 1  # sequences per optimizer step
    recompute: str = "none"
    schedule: str = "1f1b"
    zero: int = 1  # ZeRO stage over the data-parallel ranks: 0 none, 1 optimizer, 2 + gradients, 3 + weights
    sequence_parallel: bool = True  # with tp > 1 (Korthikanti et al. 2022)
    grad_bytes: int = 4  # bytes per gradient element reduced (fp32 main gradients: Megatron, Llama 3)
    nvlink_gb_s: float | None = None  # scale-up bandwidth per accelerator per direction (GB/s)
    nvlink_domain: int | None = None  # accelerators in one scale-up domain
    network_gb_s: float | None = None  # scale-out bandwidth per accelerator per direction (GB/s)
    overlap_grad_reduce: bool = False  # gradient reduce under the last micro-batch's backward
    overlap_param_gather: bool = False  # weights' all-gather under the first micro-batch's forward
    tp_comm_overlap: bool = False  # tensor-parallel collectives pipelined with their GEMMs
    # a mixture of experts only (mcflops.layout.moe; a dense model ignores them)
    etp: int | None = None  # expert tensor parallelism (None: tp, Megatron-Core's default)
    grouped_gemm: bool = False  # one grouped GEMM over a rank's experts (else one GEMM per expert)
    ep_comm_overlap: bool = False  # the EP all-to-all hidden behind another micro-batch's compute
    capacity_factor: float | None = None  # None: dropless
    router: str = "learned"  # "uniform": a benchmark's random routing (no popularity skew)
    recompute_moe: bool = False  # the MoE layer recomputed in the backward (Megatron-Core's recompute module moe)
    hbm_gb_s: float | None = None  # memory bandwidth per accelerator (GB/s)

    def data_parallel(self, count: float) -> float:
        """dp at ``count`` accelerators: the file's, or count / (tp pp cp) (real-valued off the grid)."""
        return float(self.dp) if self.dp is not None else count / (self.tp * self.pp * self.cp)


@dataclass(frozen=True)
class Terms:
    """The deterministic parts of one step at one count (seconds per step, per accelerator)."""

    count: float
    dp: float
    micro_batches: float  # m (below 1: replicas beyond B / b sit idle)
    busy: float  # share of data-parallel replicas with work: min(1, m)
    t0: float  # model FLOPs at peak
    rho: float  # hardware / model FLOPs for the recompute
    g: float  # GEMM shape share
    bubble: float  # beta
    comm: Mapping[str, float]  # each class's time at full link bandwidth (:data:`CLASS_PARAM`'s keys)
    window: Mapping[str, float]  # the overlapped classes' windows, as shares of the compute time T_c
    straggler_scale: float  # sqrt(2 ln n): q = cv x this
    detail: Mapping[str, Any] = field(default_factory=dict)
    log_op: float = 0.0  # log(largest GEMM's FLOPs / GEMM_REF): gemm_shape's lever
    ew: float = 0.0  # E: memory-bound operations' time at full HBM bandwidth over the GEMMs' at peak (elementwise_share)
    attn: float = 0.0  # A: the causal attention core's share of the training FLOPs (attention_share)
    moe: Any = None  # mcflops.layout.moe.MoETerms for a mixture of experts (None: dense)


def problem(layout: Layout, shape, count: int) -> tuple[str | None, str] | None:
    """The first reason ``layout`` cannot run ``shape`` on ``count`` accelerators, as (layout key, message)."""
    lo = layout
    t, p, c, e = lo.tp, lo.pp, lo.cp, lo.ep
    # a chunk needs a layer, but two may hold the embedding and the loss alone: Megatron-Core counts them as
    # pipeline layers (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split), so
    # Qwen3-235B's 94 layers ran on pp 32 x vpp 3 = 96 chunks (Megatron-MoE-ModelZoo)
    if shape.layers + 2 < p * lo.vpp:
        return "pp", (f"{shape.layers} layers cannot fill pp x vpp = {p * lo.vpp} pipeline chunks (at most two "
                      "may hold only the embedding and the loss)")
    if shape.heads % t:
        return "tp", f"{shape.heads} attention heads do not split over tp = {t}"
    if e > 1 and not shape.moe:
        return "ep", "ep > 1 needs a mixture of experts (architecture.experts)"
    if shape.moe and shape.experts % e:
        return "ep", f"{shape.experts} experts do not split over ep = {e}"
    if lo.schedule == "interleaved" and lo.vpp < 2:
        return "schedule", "schedule: interleaved needs vpp >= 2 (virtual stages per pipeline rank)"
    if lo.dp is not None and t * p * c * lo.dp != count:
        return "dp", (f"tp x pp x cp x dp = {t * p * c * lo.dp:,}, but hardware.count is {count:,} "
                      "(leave dp out to follow the count)")
    if lo.dp is None and count % (t * p * c):
        return None, f"hardware.count {count:,} is not a multiple of tp x pp x cp = {t * p * c}"
    if lo.global_batch < lo.micro_batch * lo.data_parallel(count):
        return "global_batch", (f"global_batch {lo.global_batch:,} is less than micro_batch x dp = "
                                f"{lo.micro_batch * lo.data_parallel(count):,.0f}: some replicas would have no data")
    return None


def bubble_ratio(schedule: str, p: int, v: int, m: float) -> float:
    """Pipeline bubble time over ideal compute time for ``m`` micro-batches on ``p`` stages."""
    if p <= 1:
        return 0.0
    m = max(m, 1.0)
    if schedule == "1f1b":
        return (p - 1) / m  # GPipe and 1F1B: (p - 1) / m (Narayanan et al. 2021, Sec. 2.2.1)
    if schedule == "interleaved":
        return (p - 1) / (v * m)  # (p - 1) / (v m) (Narayanan Sec. 2.2.2; Llama 3 Sec. 3.3.2: (PP-1)/(V M))
    if schedule == "zero_bubble":
        # ZB-H1 (Qi et al. 2024; DeepSeek-V3 Table 2 "ZB1P"): (p - 1)(F + B - 2W) with F = B = W, of an ideal
        # m (F + B + W): a third of 1F1B's
        return (p - 1) / (3.0 * m)
    if schedule == "dualpipe":
        # DeepSeek-V3 Table 2: (p/2 - 1)(F&B + B - 3W) with F&B = F + B + W, F = B = W: 2 (p/2 - 1) / (3 m)
        return max(p / 2.0 - 1.0, 0.0) * 2.0 / (3.0 * m)
    raise ValueError(f"unknown schedule {schedule!r}")


def recompute_ratio(mode: str, seq: int, d_model: int) -> float:
    """Hardware FLOPs / model FLOPs. Full: one more forward, 4/3 (Korthikanti et al. 2022, Sec. 5; MFU =
    HFU x 6/8 in llm-foundry's and BLOOM's accounts). Selective: the attention scores' forward again, 4 b s^2 h
    per layer over 72 b s h^2 + 12 b s^2 h (Korthikanti Sec. 5 and Eq. 2), i.e. s / (18 h + 3 s)."""
    if mode == "none":
        return 1.0
    if mode == "full":
        return 4.0 / 3.0
    if mode == "selective":
        return 1.0 + seq / (18.0 * d_model + 3.0 * seq)
    raise ValueError(f"unknown recompute {mode!r}")


def ring(k: float) -> float:
    """A ring all-reduce moves 2 (k - 1) / k of the buffer per rank (Patarasuk & Yuan 2009); reduce-scatter
    plus all-gather the same; all-gather or reduce-scatter alone half of it."""
    return 2.0 * (k - 1.0) / k if k > 1 else 0.0


def overlap_defaults(fsdp: bool) -> dict[str, bool]:
    """Megatron-Core's defaults for the overlap flags (all off), or the data-parallel two on under PyTorch FSDP,
    whose prefetch and asynchronous reduce-scatter are part of its design (Zhao et al. 2023, Sec. 3.3);
    tensor-parallel overlap is its own option everywhere (off). A flag a prior file or a benchmark row does not
    state is unknown instead (both settings mixed 1:1: mcflops.spec.layoutspec, mcflops.layoutfit.mix),
    except FSDP's two, on by design."""
    return {"overlap_grad_reduce": bool(fsdp), "overlap_param_gather": bool(fsdp), "tp_comm_overlap": False}


def exposed(xp, busy, window):
    """The part of a collective of ``busy`` seconds that outlasts the ``window`` of compute it overlaps:
    max(0, busy - window), as the smooth hinge (d + sqrt(d^2 + (SOFT busy)^2)) / 2 with d = busy - window
    (within SOFT^2 busy^2 / (4 |d|) of the hard one away from the kink). ``xp``: numpy or jax.numpy."""
    d = busy - window
    # + 1e-30: the square root's gradient stays finite for a class of no time (NUTS differentiates every branch)
    return 0.5 * (d + xp.sqrt(d * d + (SOFT * busy) ** 2 + 1e-30))


def communication_time(xp, comm, window, t_c, mult):
    """X: every class's time x its efficiency multiplier ``mult[class]``, the overlapped ones (keys of
    ``window``) through :func:`exposed` against their windows' share of the compute time ``t_c``."""
    total = 0.0
    for k, c in comm.items():
        busy = mult[k] * c
        total = total + (exposed(xp, busy, window[k] * t_c) if k in window else busy)
    return total


def all_reduce_time(k: float, inner: float, nbytes: float, nv: float, net: float, domain: int) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` per rank over ``k`` ranks whose consecutive ranks sit
    ``inner`` apart in the placement [TP, CP, PP, DP] (Llama 3 Sec. 3.3.2): ``g = min(k, domain / inner)`` of
    them share a scale-up domain. Hierarchically (Jia et al. 2018, "Highly Scalable Deep Learning Training
    System with Mixed-Precision", Sec. 3.3; NCCL's one ring per network card): a ring inside the domain over
    NVLink, then a ring across the k / g domains over the network for the 1 / g of the buffer each rank holds
    after the inner reduce-scatter. A group inside one domain never touches the network; one rank per domain
    is the plain ring over the network."""
    if k <= 1:
        return 0.0
    g = max(1.0, min(k, domain / max(inner, 1.0)))
    inside = ring(g) * nbytes / nv if g > 1 else 0.0
    across = ring(k / g) * (nbytes / g) / net if k > g else 0.0
    return inside + across


def terms(layout: Layout, shape, counts, peak: float, count: float) -> Terms:
    """The step's deterministic terms at ``count`` accelerators (``shape``/``counts``: mcflops.arch)."""
    lo = layout
    t, p, c, e, v, b = lo.tp, lo.pp, lo.cp, lo.ep, lo.vpp, lo.micro_batch
    dp = lo.data_parallel(count)
    s, h, L = shape.seq_len, shape.d_model, shape.layers
    m_raw = lo.global_batch / (dp * b)
    busy = min(1.0, m_raw)  # beyond B / b replicas there is no micro-batch for the rest
    m = max(m_raw, 1.0)
    per_token = counts.training_flops_per_token
    t0 = per_token * lo.global_batch * s / (count * peak)

    nv, dom, net = lo.nvlink_gb_s * 1e9, lo.nvlink_domain, lo.network_gb_s * 1e9
    act = 2.0  # bf16 activations, bytes per element
    s_local = s / c
    layers_here = L / p
    # TP: 2 all-reduces forward and 2 backward per layer (Shoeybi et al. 2019, Fig. 4; Narayanan Sec. 3.2),
    # one more pair when the forward is recomputed; each of b s h elements. Sequence parallelism swaps each
    # for a reduce-scatter + all-gather of the same volume (Korthikanti et al. 2022, Sec. 4.2.2).
    n_ar = 6 if lo.recompute == "full" else 4
    # past one NVLink domain TP crosses the network (Narayanan Fig. 13: TP beyond 8 collapses)
    c_tp = m * layers_here * n_ar * all_reduce_time(t, 1, b * s_local * h * act, nv, net, dom)
    # CP (Llama 3 Sec. 3.3.2): all-gather of K and V per layer forward, reduce-scatter of their gradients
    # backward, each (cp - 1)/cp of b s x 2 (K and V) x the KV heads ON THIS RANK x head_dim: tensor parallelism
    # splits the heads (Shoeybi et al. 2019, Sec. 3; Megatron-Core divides the query groups by tp, replicating a
    # group only where there are fewer than tp). Meta: "the attention computation time is an order of magnitude
    # larger than all-gather latency" at 131K with GQA and tp 8, which the unsplit volume (8x) contradicts.
    kv = 2.0 * b * s * max(shape.kvh / t, 1.0) * shape.hd * act
    c_cp = m * layers_here * 2.0 * all_reduce_time(c, t, kv, nv, net, dom) / 2.0  # an all-gather: half a ring
    # EP: dispatch and combine all-to-alls per MoE layer, with the expert terms (mcflops.layout.moe)
    k = shape.experts_active or 1
    mt, c_ep = moe_terms(lo, shape, counts, gemm_shape_share, m, lo.hbm_gb_s * 1e9) if shape.moe else (None, 0.0)
    # DP, once per step over dp x cp ranks (context-parallel ranks hold the same weights): without ZeRO a ring
    # all-reduce of the gradients; with ZeRO >= 1 a reduce-scatter of the gradients (backward) and an all-gather
    # of the updated weights (forward), each half the ring; ZeRO-3 / FSDP gathers the weights again before the
    # backward (1.5x the all-reduce's volume: Rajbhandari et al. 2020, Sec. 7)
    dense, expert = dense_and_expert(counts, shape)
    p_rank = (dense + expert / e) / (t * p)
    d_sync = dp * c
    # data-parallel ranks sit t cp pp apart (TP, CP, PP inside: Llama 3's order); with CP, the CP ranks of the
    # gradient group sit t apart
    inner = t if c > 1 else t * p
    grads = all_reduce_time(d_sync, inner, p_rank * lo.grad_bytes, nv, net, dom)
    gather = 0.5 * all_reduce_time(d_sync, inner, p_rank * PARAM_BYTES, nv, net, dom)  # an all-gather: half a ring
    if lo.zero == 0:
        c_fwd, c_bwd = 0.0, grads
    else:
        c_fwd, c_bwd = gather, 0.5 * grads + (gather if lo.zero >= 3 else 0.0)
    # PP: activations (b s h / t with sequence parallelism) sent forward and gradients back at each stage
    # boundary, v boundaries per rank when interleaved (Narayanan Sec. 2.2.2: v times the 1F1B schedule's
    # sends); over NVLink only when the whole pipeline sits in one domain (the slowest boundary sets the pace)
    pp_bytes = b * s_local * h * act / (t if lo.sequence_parallel and t > 1 else 1)
    c_pp = m * 2.0 * v * pp_bytes / (nv if t * c * p <= dom else net) if p > 1 else 0.0
    # the overlap windows (module docstring) as shares of the step's compute T_c: one micro-batch's forward is
    # 1 / (3 rho) of its hardware FLOPs (forward 1, backward 2, the recompute's forward counted in the backward)
    rho = recompute_ratio(lo.recompute, s, h) + (mt.rho_extra if mt is not None else 0.0)
    window = {}
    if lo.tp_comm_overlap and t <= dom:  # userbuffers need NVLink (module docstring)
        window["tp"] = 1.0
    if lo.overlap_param_gather and c_fwd > 0:
        window["dp_fwd"] = 1.0 / (3.0 * rho * m)
    if lo.overlap_grad_reduce:
        window["dp_bwd"] = (3.0 * rho - 1.0) / (3.0 * rho * m)
    if mt is not None and lo.ep_comm_overlap and c_ep > 0:
        window["ep"] = 1.0  # another micro-batch's compute (mcflops.layout.moe, 4)

    # the largest GEMM of a micro-batch: the MLP's up projection (an expert's with a mixture of experts:
    # b s k e / E tokens reach each of a rank's experts)
    if shape.moe:
        tokens_e = b * s_local * k * e / shape.experts
        op = 2.0 * tokens_e * h * (shape.moe_ffn or shape.ff) / t
    else:
        op = 2.0 * b * s_local * h * shape.ff / t
    beta = bubble_ratio(lo.schedule, p, v, m_raw)
    return Terms(count=float(count), dp=dp, micro_batches=m_raw, busy=busy, t0=t0, rho=rho,
                 g=float(gemm_shape_share(op)) if mt is None else mt.g, bubble=beta,
                 comm={"tp": c_tp, "cp": c_cp, "dp_fwd": c_fwd, "dp_bwd": c_bwd, "pp": c_pp, "ep": c_ep},
                 window=window, straggler_scale=math.sqrt(2.0 * math.log(count)) if count > 1 else 0.0,
                 detail={"tp_s": c_tp, "cp_s": c_cp, "dp_s": c_fwd + c_bwd, "pp_s": c_pp, "ep_s": c_ep,
                         "gemm_op_flops": op, "t_model_s": t0},
                 log_op=math.log(max(op, 1.0) / GEMM_REF), moe=mt,
                 ew=elementwise_share(shape, lo, per_token, peak, lo.hbm_gb_s * 1e9) if lo.hbm_gb_s else 0.0,
                 attn=attention_share(counts))


def factors(tm: Terms, draws: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The factors (arrays over the draws of :data:`PARAMS`; ``memory`` where the draws have the elementwise
    multiplier, ``experts`` for a mixture of experts); their product is the MFU (true FLOPs)."""
    # a draws mapping without gemm_shape is the model before the shape's slope (kappa 0)
    kappa = np.asarray(draws.get("gemm_shape", 0.0), float)
    eta = gemm_efficiency(np, np.asarray(draws["gemm"], float), kappa, tm.log_op) * tm.g
    # the memory-bound operations beside the GEMMs (elementwise_share); a draws mapping without the multiplier, or
    # an accelerator without an HBM bandwidth, is the model before the term
    ew = tm.ew * np.asarray(draws.get("elementwise", 0.0), float)
    # the attention core at its own efficiency (attention_slowdown); a draws mapping without it is the model before
    att = draws.get(ATTENTION)
    k_att = attention_slowdown(tm.attn, tm.g, None if att is None else np.asarray(att, float))
    t_c = tm.t0 * tm.rho * (k_att / eta + ew) / tm.busy  # idle replicas: the busy ones take the whole batch
    mult = {k: np.asarray(draws[CLASS_PARAM[k]], float) for k in tm.comm}
    extra = 0.0
    if tm.moe is not None:  # imbalance and permutation beside the compute; the all-to-all waits for the max load
        extra, load = extra_time(tm.moe, t_c, draws)
        mult["ep"] = mult["ep"] * load
    x = communication_time(np, tm.comm, tm.window, t_c, mult)
    work = (t_c + extra) * (1.0 + tm.bubble)
    out = {"gemm": eta, "recompute": np.full(eta.shape, 1.0 / tm.rho),
           "pipeline": np.full(eta.shape, tm.busy / (1.0 + tm.bubble)), "communication": work / (work + x),
           "stragglers": 1.0 / (1.0 + np.asarray(draws["straggler_cv"]) * tm.straggler_scale)}
    if tm.moe is not None:
        out["experts"] = t_c / (t_c + extra)
    if ATTENTION in draws:
        out[ATTENTION] = np.broadcast_to(1.0 / k_att, eta.shape)
    if np.any(ew > 0):
        out["memory"] = np.broadcast_to(1.0 / (1.0 + eta * ew / k_att), eta.shape)
    return out


def factor_names(f: Mapping[str, Any]) -> list[str]:
    """The factors present in ``f`` in waterfall order: :data:`FACTORS`, ``memory`` (the memory-bound operations)
    after ``gemm`` where the model has the term, then ``experts`` for a mixture of experts."""
    return [n for n in (FACTORS[0], ATTENTION, "memory", "experts", *FACTORS[1:]) if n in f]


def mfu(tm: Terms, draws: Mapping[str, np.ndarray]) -> np.ndarray:
    """MFU in true model FLOPs: T0 / T_step, the product of :func:`factors`."""
    f = factors(tm, draws)
    out = f[FACTORS[0]]
    for name in factor_names(f)[1:]:
        out = out * f[name]
    return out
