"""The layout step-time model against things it did not write: a discrete-event simulation of the 1F1B
pipeline, the ring all-reduce's bytes counted by simulation, ZeRO's published memory figures, Korthikanti's
recompute accounting, and the expected maximum of normals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mcflops.arch import Shape, counts
from mcflops.layout import Layout, bubble_ratio, factors, memory, mfu, recompute_ratio, terms
from mcflops.layout.model import gemm_shape_share, ring

GPT175 = Shape(layers=96, d_model=12288, heads=96, vocab=51200, seq_len=2048, glu=False)  # GPT-3 175B


def simulate_1f1b(p: int, m: int, f: float = 1.0, b: float = 2.0) -> float:
    """Makespan of the 1F1B schedule, event by event: stage s runs its warm-up forwards, then alternates one
    backward and one forward, each op starting when its input (the neighbour's op) and the stage are free."""
    fwd_done = np.zeros((p, m))
    bwd_done = np.zeros((p, m))
    free = np.zeros(p)
    order = []
    for s in range(p):
        warm = min(p - s - 1, m)
        ops = [("F", i) for i in range(warm)]
        nf, nb = warm, 0
        while nb < m:
            if nf < m:
                ops.append(("F", nf))
                nf += 1
            ops.append(("B", nb))
            nb += 1
        order.append(ops)
    pos = [0] * p
    pending = sum(len(o) for o in order)
    while pending:
        progressed = False
        for s in range(p):
            if pos[s] == len(order[s]):
                continue
            kind, i = order[s][pos[s]]
            if kind == "F":
                dep = fwd_done[s - 1, i] if s > 0 else 0.0
                ready = s == 0 or fwd_done[s - 1, i] > 0
                if ready:
                    fwd_done[s, i] = max(free[s], dep) + f
                    free[s] = fwd_done[s, i]
            else:
                ready = fwd_done[s, i] > 0 and (s == p - 1 or bwd_done[s + 1, i] > 0)
                if ready:
                    dep = bwd_done[s + 1, i] if s < p - 1 else fwd_done[s, i]
                    bwd_done[s, i] = max(free[s], dep) + b
                    free[s] = bwd_done[s, i]
            if ready:
                pos[s] += 1
                pending -= 1
                progressed = True
        assert progressed
    return float(free.max())


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (8, 8), (8, 32), (16, 16)])
def test_1f1b_bubble_matches_an_event_simulation(p, m):
    ideal = m * 3.0  # each micro-batch: forward 1 + backward 2 on one stage
    simulated = simulate_1f1b(p, m) / ideal - 1.0
    assert bubble_ratio("1f1b", p, 1, m) == pytest.approx(simulated, rel=1e-12)


def test_interleaving_divides_the_bubble_and_schedules_order():
    b1 = bubble_ratio("1f1b", 16, 1, 16)
    assert bubble_ratio("interleaved", 16, 4, 16) == pytest.approx(b1 / 4)
    assert bubble_ratio("zero_bubble", 16, 1, 16) < bubble_ratio("interleaved", 16, 2, 16) < b1
    assert bubble_ratio("dualpipe", 16, 1, 16) < bubble_ratio("zero_bubble", 16, 1, 16)
    assert bubble_ratio("1f1b", 1, 1, 3) == 0.0


@pytest.mark.parametrize("k", [2, 4, 8, 64])
def test_ring_all_reduce_volume_counted_by_simulation(k):
    """Reduce-scatter then all-gather on a ring of k ranks, buffer in k chunks: count what one rank sends."""
    sent = 0
    for _phase in range(2):  # reduce-scatter, all-gather
        for _step in range(k - 1):
            sent += 1  # one chunk of 1/k of the buffer per step
    assert ring(k) == pytest.approx(sent / k)


def test_recompute_ratios_follow_korthikanti():
    assert recompute_ratio("full", 2048, 12288) == pytest.approx(4 / 3)  # one more forward: 8/6
    # selective recompute of GPT-3 175B: 4 b s^2 h extra over 72 b s h^2 + 12 b s^2 h per layer
    s, h = 2048, 12288
    extra = 4 * s * s * h
    base = 72 * s * h * h + 12 * s * s * h
    assert recompute_ratio("selective", s, h) == pytest.approx(1 + extra / base)
    # Korthikanti et al. 2022 (Megatron-LM README): HFU/MFU - 1 is 1.2-5.3% for 22B-1T with selective
    for s_, h_ in ((2048, 6144), (2048, 12288), (2048, 20480), (2048, 25600)):
        assert 1.003 < recompute_ratio("selective", s_, h_) < 1.06


def test_zero_memory_matches_the_papers_figure_1():
    """Rajbhandari et al. 2020, Fig. 1: 7.5B parameters on 64 data-parallel GPUs, K = 12, 16-bit gradients:
    120 GB baseline, 31.4 GB with P_os, 16.6 GB with P_os+g, 1.9 GB with P_os+g+p."""
    shape = Shape(layers=1, d_model=1, heads=1, vocab=1, seq_len=1, ffn=1)
    c = counts(shape)

    class Fixed:  # 7.5B parameters, no activations to speak of
        params_total = 7.5e9

    expected = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    for zero, gb in expected.items():
        lay = Layout(dp=64, global_batch=64, zero=zero, grad_bytes=2, nvlink_gb_s=1, nvlink_domain=8, network_gb_s=1)
        mem = memory(lay, shape, Fixed, 80.0, 64)
        assert mem.states / 1e9 == pytest.approx(gb, abs=0.05), zero
    assert c.params_total > 0


def test_activation_memory_full_recompute_keeps_the_layer_input():
    lay = Layout(tp=8, pp=8, global_batch=64, micro_batch=1, nvlink_gb_s=450, nvlink_domain=8, network_gb_s=50)
    c = counts(GPT175)
    none = memory(lay, GPT175, c, 80.0, 64).activations
    full = memory(Layout(**{**lay.__dict__, "recompute": "full"}), GPT175, c, 80.0, 64).activations
    # Korthikanti Table 2: 34 s b h / t per layer stored without recompute, 2 s b h / t with full recompute
    assert full / none == pytest.approx(2 / 34)
    assert none == pytest.approx(34 * 2048 * 12288 / 8 * 96)


def test_straggler_scale_bounds_the_expected_maximum_of_normals():
    rng = np.random.default_rng(1)
    for n in (64, 1024):
        emax = rng.standard_normal((4000, n)).max(axis=1).mean()
        assert emax < math.sqrt(2 * math.log(n))  # E max <= sigma sqrt(2 ln n), a standard bound
        assert emax > 0.75 * math.sqrt(2 * math.log(n))


def _llama(count, **kw):
    shape = Shape(layers=126, d_model=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256, seq_len=8192)
    lay = Layout(tp=8, pp=16, vpp=4, schedule="interleaved", global_batch=2048, zero=2,
                 nvlink_gb_s=450, nvlink_domain=8, network_gb_s=50, **kw)
    return terms(lay, shape, counts(shape), 989.4e12, count)


def test_factors_multiply_to_t0_over_the_step_time():
    tm = _llama(16384)
    d = {"gemm": np.array([0.7]), "tp_comm": np.array([0.5]), "dp_comm": np.array([0.2]),
         "ep_comm": np.array([1.0]), "straggler_cv": np.array([0.01])}
    t_c = tm.t0 * tm.rho / (0.7 * tm.g)
    assert tm.window == {}  # no overlap flag set: every class on the critical path
    x = 0.5 * (tm.comm["tp"] + tm.comm["cp"]) + 0.2 * (tm.comm["dp_fwd"] + tm.comm["dp_bwd"] + tm.comm["pp"])
    step = (t_c * (1 + tm.bubble) + x) * (1 + 0.01 * tm.straggler_scale)
    assert mfu(tm, d)[0] == pytest.approx(tm.t0 / step, rel=1e-12)
    assert set(factors(tm, d)) == {"gemm", "recompute", "pipeline", "communication", "stragglers"}


def test_mfu_falls_with_the_count_at_a_fixed_global_batch():
    d = {"gemm": np.array([0.7]), "tp_comm": np.array([0.5]), "dp_comm": np.array([0.2]),
         "ep_comm": np.array([1.0]), "straggler_cv": np.array([0.005])}
    got = [mfu(_llama(n), d)[0] for n in (2048, 4096, 8192, 16384, 32768)]
    assert all(a > b for a, b in zip(got, got[1:]))
    tm = _llama(16384 * 16)  # dp 2,048: one micro-batch each
    assert tm.micro_batches == pytest.approx(1.0) and tm.busy == 1.0
    idle = _llama(16384 * 32)  # dp 4,096 for 2,048 sequences: half the replicas have none
    assert idle.busy == pytest.approx(0.5)
    assert mfu(idle, d)[0] < 0.5 * mfu(tm, d)[0] * 1.01


def test_tensor_parallelism_past_the_nvlink_domain_costs_the_network():
    shape = Shape(layers=96, d_model=12288, heads=96, vocab=51200, seq_len=2048, ffn=49152, glu=False)
    c = counts(shape)
    inside = terms(Layout(tp=8, pp=8, global_batch=1536, nvlink_gb_s=300, nvlink_domain=8, network_gb_s=25),
                   shape, c, 312e12, 1536)
    across = terms(Layout(tp=16, pp=4, global_batch=1536, nvlink_gb_s=300, nvlink_domain=8, network_gb_s=25),
                   shape, c, 312e12, 1536)
    # by hand: tp 8 is one ring on NVLink, 2 (8 - 1)/8 of b s h x 2 bytes per all-reduce; tp 16 is that ring, then a
    # ring of 2 across the network for the eighth each rank holds (hierarchical all-reduce), on twice the layers
    per_ar = 2048 * 12288 * 2.0
    ring8 = 2 * 7 / 8 * per_ar / 300e9
    ring16 = ring8 + 2 * 1 / 2 * (per_ar / 8) / 25e9
    assert inside.comm["tp"] == pytest.approx(inside.micro_batches * 12 * 4 * ring8, rel=1e-9)
    assert across.comm["tp"] == pytest.approx(across.micro_batches * 24 * 4 * ring16, rel=1e-9)
    assert across.comm["tp"] > 3 * inside.comm["tp"]


def test_context_parallel_all_gather_moves_the_kv_heads_on_its_tensor_parallel_rank():
    # Llama 3 405B's 131K stage (arXiv 2407.21783 Table 4): tp 8, cp 16, pp 16, dp 8, 16M-token batches
    def cp_time(kv_heads: int) -> tuple[float, object]:
        shape = Shape(layers=126, d_model=16384, heads=128, kv_heads=kv_heads, ffn=53248, vocab=128256,
                      seq_len=131072, glu=True)
        lo = Layout(tp=8, pp=16, cp=16, global_batch=128, nvlink_gb_s=450, nvlink_domain=8, network_gb_s=50)
        tm = terms(lo, shape, counts(shape), 989e12, 16384)
        return tm.comm["cp"], tm

    got, tm = cp_time(8)
    # by hand: tp 8 splits the 8 KV heads one per rank; a rank's K and V of the whole sequence are
    # 2 x 131,072 x 128 x 2 bytes; the CP group's ranks sit tp = 8 apart, one per node, so the all-gather (half a
    # ring of 16) runs on the network; once forward, once (its reduce-scatter) backward, on each of 126 / 16 layers
    kv = 2 * 131072 * 1 * 128 * 2.0
    per_layer = 2 * (0.5 * 2 * 15 / 16 * kv / 50e9)
    # rel 1e-9: the same closed form in another order, so only float64 rounding separates them
    assert got == pytest.approx(tm.micro_batches * 126 / 16 * per_layer, rel=1e-9)
    # Meta (Sec. 3.3.2): the attention computation is "an order of magnitude larger than all-gather latency";
    # the attention's FLOPs at the full peak (a lower bound on its time) are at least 4x the all-gather
    assert got < tm.attn * tm.t0 / 4
    # fewer KV heads than tp: each rank holds one, replicated; more: each holds its share
    assert cp_time(1)[0] == pytest.approx(got, rel=1e-9)
    assert cp_time(16)[0] == pytest.approx(2 * got, rel=1e-9)


def test_gemm_shape_share_is_calculons_table_at_its_points():
    assert gemm_shape_share(256e9) == pytest.approx(1.0)
    assert gemm_shape_share(16e9) == pytest.approx(0.90 / 0.95)
    assert gemm_shape_share(1e9) == pytest.approx(0.60 / 0.95)
    assert gemm_shape_share(1e6) == pytest.approx(0.10 / 0.95)


def test_gemm_efficiency_slope_is_linear_in_logit_of_the_largest_gemms_size():
    from scipy.special import expit, logit

    shape = Shape(layers=96, d_model=12288, heads=96, vocab=51200, seq_len=2048, ffn=49152, glu=False)
    c = counts(shape)
    d = {"gemm": np.array([0.7, 0.7]), "tp_comm": np.array([0.5, 0.5]), "dp_comm": np.array([0.2, 0.2]),
         "ep_comm": np.array([1.0, 1.0]), "straggler_cv": np.array([0.0, 0.0]), "gemm_shape": np.array([0.0, 0.15])}
    for tp, b in ((8, 1), (4, 2), (2, 8)):
        tm = terms(Layout(tp=tp, pp=8, micro_batch=b, global_batch=1536, nvlink_gb_s=300, nvlink_domain=8,
                          network_gb_s=25), shape, c, 312e12, 1536)
        op = 2.0 * b * 2048 * 12288 * 49152 / tp  # the MLP's up projection of one micro-batch, by hand
        assert tm.log_op == pytest.approx(math.log(op / 128e9), rel=1e-12)
        eta = factors(tm, d)["gemm"]
        assert eta[0] == pytest.approx(0.7 * tm.g, rel=1e-12)  # no slope: the flat prior times Calculon's share
        assert eta[1] == pytest.approx(expit(logit(0.7) + 0.15 * math.log(op / 128e9)) * tm.g, rel=1e-12)
    # a larger GEMM per rank (less tp split, more tokens per micro-batch) is more efficient once kappa > 0
    small = terms(Layout(tp=8, pp=8, global_batch=1536, nvlink_gb_s=300, nvlink_domain=8, network_gb_s=25), shape, c,
                  312e12, 1536)
    big = terms(Layout(tp=2, pp=8, micro_batch=8, global_batch=1536, nvlink_gb_s=300, nvlink_domain=8,
                       network_gb_s=25), shape, c, 312e12, 1536)
    assert factors(big, d)["gemm"][1] > factors(small, d)["gemm"][1]


@pytest.mark.parametrize("tp,sp", [(1, True), (8, True), (8, False)])
def test_elementwise_share_is_korthikantis_activation_count_over_the_flops(tp, sp):
    """E for GPT-3 175B (a 4h MLP, no gate) by hand: Korthikanti et al. 2022 Table 2 counts 34 s b h bytes per layer,
    split over tp with sequence parallelism, (10 + 24 / tp) s b h without it; E is those bytes at the HBM bandwidth
    over the rank's share of the training FLOPs at peak."""
    from mcflops.layout.compute import elementwise_share

    shape = Shape(layers=96, d_model=12288, heads=96, vocab=51200, seq_len=2048, ffn=4 * 12288, glu=False)
    c = counts(shape)
    h, peak, bw = 12288, 989.4e12, 3350e9
    per_rank = 34 * h / tp if sp else (10 + 24 / tp) * h
    want = (96 * per_rank / bw) / (c.training_flops_per_token / tp / peak)
    lay = Layout(tp=tp, sequence_parallel=sp)
    assert elementwise_share(shape, lay, c.training_flops_per_token, peak, bw) == pytest.approx(want, rel=1e-12)
    # the term falls as 1 / h: half the width, about twice the share (the FLOPs' attention part aside)
    half = Shape(layers=96, d_model=6144, heads=48, vocab=51200, seq_len=2048, ffn=4 * 6144, glu=False)
    ratio = elementwise_share(half, lay, counts(half).training_flops_per_token, peak, bw) / want
    assert 1.8 < ratio < 2.1


def test_memory_bound_time_adds_to_the_gemms_and_is_its_own_factor():
    shape = Shape(layers=126, d_model=16384, heads=128, vocab=128256, seq_len=8192, kv_heads=8, ffn=53248)
    lay = Layout(tp=8, pp=16, global_batch=2048, nvlink_gb_s=450, nvlink_domain=8, network_gb_s=50, hbm_gb_s=3350)
    tm = terms(lay, shape, counts(shape), 989.4e12, 16384)
    assert tm.ew > 0
    d = {"gemm": np.array([0.7]), "tp_comm": np.array([0.5]), "dp_comm": np.array([0.2]), "ep_comm": np.array([1.0]),
         "straggler_cv": np.array([0.01]), "elementwise": np.array([12.0])}
    # by hand: the compute time is the GEMMs' at eta g plus the memory-bound time 12 E, both per unit of T0 rho
    t_c = tm.t0 * tm.rho * (1 / (0.7 * tm.g) + 12.0 * tm.ew)
    x = 0.5 * (tm.comm["tp"] + tm.comm["cp"]) + 0.2 * (tm.comm["dp_fwd"] + tm.comm["dp_bwd"] + tm.comm["pp"])
    step = (t_c * (1 + tm.bubble) + x) * (1 + 0.01 * tm.straggler_scale)
    assert mfu(tm, d)[0] == pytest.approx(tm.t0 / step, rel=1e-12)
    f = factors(tm, d)
    assert f["memory"][0] == pytest.approx(1 / (1 + 0.7 * tm.g * 12.0 * tm.ew), rel=1e-12)
    # without the multiplier, or without a bandwidth, the model before the term
    assert "memory" not in factors(tm, {k: v for k, v in d.items() if k != "elementwise"})
    bare = terms(Layout(tp=8, pp=16, global_batch=2048, nvlink_gb_s=450, nvlink_domain=8, network_gb_s=50), shape,
                 counts(shape), 989.4e12, 16384)
    assert bare.ew == 0.0 and "memory" not in factors(bare, d)


def test_attention_core_at_its_own_efficiency_slows_the_compute_by_hand():
    """The attention core's share A of the training FLOPs is 6 l d s per token (Q K^T and the weighted sum of V,
    2 matmuls x 2 FLOPs x 3 for forward and backward, halved by the causal mask) over the architecture's total; run
    at a fraction a of the large GEMMs' efficiency it makes the compute K = 1 - A + A g / a times longer, and the
    factors still multiply to the MFU."""
    from mcflops.layout.compute import attention_share, attention_slowdown

    shape = Shape(layers=32, d_model=4096, heads=32, vocab=128256, seq_len=32768, kv_heads=8, ffn=14336)
    c = counts(shape)
    share = 6 * 32 * 4096 * 32768 / c.training_flops_per_token
    assert attention_share(c) == pytest.approx(share, rel=1e-12)
    assert 0.3 < share < 0.45  # an 8B model at 32K tokens: over a third of its FLOPs are the attention core
    lay = Layout(tp=4, pp=1, global_batch=64, nvlink_gb_s=450, nvlink_domain=8, network_gb_s=50, hbm_gb_s=3350)
    tm = terms(lay, shape, c, 989.4e12, 64)
    d = {"gemm": np.array([0.7]), "tp_comm": np.array([0.5]), "dp_comm": np.array([0.2]), "ep_comm": np.array([1.0]),
         "straggler_cv": np.array([0.01]), "elementwise": np.array([12.0]), "attention": np.array([0.5])}
    k = 1 - share + share * tm.g / 0.5
    t_c = tm.t0 * tm.rho * (k / (0.7 * tm.g) + 12.0 * tm.ew)
    x = 0.5 * (tm.comm["tp"] + tm.comm["cp"]) + 0.2 * (tm.comm["dp_fwd"] + tm.comm["dp_bwd"] + tm.comm["pp"])
    step = (t_c * (1 + tm.bubble) + x) * (1 + 0.01 * tm.straggler_scale)
    assert mfu(tm, d)[0] == pytest.approx(tm.t0 / step, rel=1e-12)
    f = factors(tm, d)
    assert f["attention"][0] == pytest.approx(1 / k, rel=1e-12)
    assert np.prod([f[n][0] for n in ("gemm", "attention", "memory")]) == pytest.approx(
        1 / (k / (0.7 * tm.g) + 12.0 * tm.ew), rel=1e-12)
    # a kernel as efficient as the large GEMMs (a = g) costs nothing; a prior without the term is the model before it
    assert attention_slowdown(share, tm.g, tm.g) == pytest.approx(1.0, rel=1e-12)
    without = {p: v for p, v in d.items() if p != "attention"}
    assert "attention" not in factors(tm, without)
    assert mfu(tm, without)[0] > mfu(tm, d)[0]
