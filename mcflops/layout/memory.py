"""Memory per accelerator for a parallel layout: model states and activations. NumPy-free plain Python.

Model states (Rajbhandari et al. 2020, "ZeRO", Sec. 3.1 and Fig. 1): with mixed-precision Adam each
parameter keeps 2 bytes of 16-bit weights, ``grad_bytes`` of gradients and K = 12 bytes of optimizer state
(fp32 master weights, momentum and variance). ZeRO stage 1 splits the optimizer state over the data-parallel
ranks, stage 2 the gradients too, stage 3 (FSDP's full sharding) the weights too.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
Sec. 4, Table 2): per layer and micro-batch, s b h (34 + 5 a s / h) bytes without parallelism; tensor and
sequence parallelism divide all of it by t; the 5 a s / h term is the attention scores and softmax, which
FlashAttention does not store (Dao et al. 2022), so it is left out here; selective recompute keeps 34 s b h / t;
full recompute keeps the layer's input, 2 s b h / t. With context parallelism s is the local s / cp. The first
pipeline stage holds p micro-batches in flight under 1F1B (its L / p layers x p = L layers' worth,
Korthikanti Sec. 4.2.3), times (1 + (p - 1) / (p v)) when interleaved. The 34 counts a GPT layer
(a 4h GELU MLP with dropout); a GLU MLP of another width moves it by a few bytes, left out.

Not counted: the logits and the embedding's activations, framework workspace, NCCL buffers and allocator
fragmentation; the headroom the report states is before them. The model states are exact counts; the
activations are an estimate: Calculon's validation of these formulas against Korthikanti's measurements found
errors up to 30.4% (Isaev et al. 2023, the "full" mode of the 22B model), so a layout is refused only when it
cannot fit even at the favourable end of that error (:data:`ACTIVATION_ERROR`), and noted when the central
estimate does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcflops.layout.model import Layout, dense_and_expert

OPTIMIZER_BYTES = 12.0  # fp32 master weights + Adam's two moments (ZeRO Sec. 3.1: K = 12)
WEIGHT_BYTES = 2.0  # 16-bit weights
ACTIVATION_ERROR = 0.304  # Calculon's largest activation-memory error against measurements (see above)


@dataclass(frozen=True)
class Memory:
    """Bytes per accelerator (the first pipeline stage's, which holds the most activations)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    capacity: float  # the accelerator's memory (bytes)

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def states(self) -> float:
        return self.weights + self.gradients + self.optimizer

    @property
    def headroom(self) -> float:
        return self.capacity - self.total

    @property
    def cannot_fit(self) -> bool:
        """Over capacity even with the activations at the favourable end of their estimate's error."""
        return self.states + self.activations * (1.0 - ACTIVATION_ERROR) > self.capacity

    def to_dict(self) -> dict:
        gb = 1e9
        return {"weights_gb": self.weights / gb, "gradients_gb": self.gradients / gb,
                "optimizer_gb": self.optimizer / gb, "activations_gb": self.activations / gb,
                "total_gb": self.total / gb, "capacity_gb": self.capacity / gb, "headroom_gb": self.headroom / gb}


def memory(layout: Layout, shape, counts, capacity_gb: float, count: float) -> Memory:
    """Memory per accelerator at ``count`` accelerators."""
    lo = layout
    t, p, c, e, v, b = lo.tp, lo.pp, lo.cp, lo.ep, lo.vpp, lo.micro_batch
    dense, expert = dense_and_expert(counts, shape)
    # the routed experts split over ep x etp (etp unstated: tp, as Megatron-Core's default), the rest over tp
    per_rank = dense / (t * p) + expert / (e * (lo.etp or t) * p)
    d_shard = max(lo.data_parallel(count) * c, 1.0)  # ZeRO shards over the data- and context-parallel ranks
    weights = per_rank * WEIGHT_BYTES / (d_shard if lo.zero >= 3 else 1.0)
    grads = per_rank * lo.grad_bytes / (d_shard if lo.zero >= 2 else 1.0)
    opt = per_rank * OPTIMIZER_BYTES / (d_shard if lo.zero >= 1 else 1.0)

    s_local, h = shape.seq_len / c, shape.d_model
    per_layer = {"none": 34.0, "selective": 34.0, "full": 2.0}[lo.recompute] * s_local * b * h / t
    # (L / p layers) x p micro-batches in flight on the first stage: L layers' worth, as one micro-batch of
    # every layer without a pipeline
    in_flight = 1.0 + ((p - 1.0) / (p * v) if lo.schedule == "interleaved" and v > 1 else 0.0)
    act = per_layer * shape.layers * in_flight
    return Memory(weights, grads, opt, act, capacity_gb * 1e9)
