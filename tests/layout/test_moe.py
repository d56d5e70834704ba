"""The mixture-of-experts terms (mcflops.layout.moe) against closed forms, hand computations and NumPy
simulations; and the dense model untouched by them."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from mcflops.arch import Shape, counts as arch_counts
from mcflops.errors import SpecError
from mcflops.layout import Layout, factors, gemm_efficiency, terms
from mcflops.layout.model import gemm_shape_share
from mcflops.layout.moe import MOE_PARAMS, MoETerms, ep_alltoall_time, expected_max_normal, imbalance, routing_cv

QWEN = Shape(layers=94, d_model=4096, heads=64, vocab=151936, seq_len=4096, kv_heads=4, head_dim=128, ffn=12288,
             glu=True, experts=128, experts_active=8, moe_ffn=1536)
PEAK = 989.4e12
BW = {"nvlink_gb_s": 450.0, "nvlink_domain": 8, "network_gb_s": 50.0, "hbm_gb_s": 3350.0}
DRAWS = {"gemm": np.array([0.5]), "tp_comm": np.array([1.0]), "dp_comm": np.array([1.0]), "ep_comm": np.array([1.0]),
         "straggler_cv": np.array([0.0]), "moe_mem": np.array([1.0]), "moe_imbalance": np.array([0.0])}


def test_expected_max_normal_closed_forms_and_simulation():
    # E[max of 2] = 1 / sqrt(pi), E[max of 3] = 3 / (2 sqrt(pi)) (David & Nagaraja, Order Statistics, Sec. 3.2)
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1.0 / math.sqrt(math.pi), abs=1e-9)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), abs=1e-9)
    x = np.random.default_rng(11).standard_normal((200_000, 32)).max(axis=1)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert abs(expected_max_normal(32) - x.mean()) < 4.0 * se  # false-failure rate ~6e-5


def _simulate(n_r: int, k: int, E: int, e: int, reps: int, cv: float, seed: int) -> tuple[float, float]:
    """Mean and MCSE of max rank load / mean - 1: n_r e tokens each pick k distinct of E experts (uniformly, or
    k = 1 with expert shares Gamma-distributed with coefficient of variation cv), E / e experts per rank."""
    rng = np.random.default_rng(seed)
    out = np.empty(reps)
    for i in range(reps):
        if cv > 0:
            w = rng.gamma(1.0 / cv**2, cv**2, E)
            cnt = rng.multinomial(n_r * e, w / w.sum())
        else:
            pick = np.argpartition(rng.random((n_r * e, E)), k, axis=1)[:, :k]
            cnt = np.bincount(pick.ravel(), minlength=E)
        load = cnt.reshape(e, E // e).sum(axis=1)
        out[i] = load.max() / load.mean() - 1.0
    return float(out.mean()), float(out.std(ddof=1) / math.sqrt(reps))


def _mt(n_r, k, E, e, router="learned", capacity=None):
    return MoETerms(g=1.0, expert_share=1.0, perm_s=0.0, ep=e, experts=E, z=expected_max_normal(e),
                    r=routing_cv(n_r, k, E), capacity_factor=capacity, router=router, op_expert=0.0, op_other=0.0)


@pytest.mark.parametrize("n_r,k,E,e", [(256, 2, 16, 4), (128, 4, 32, 8)])
def test_uniform_routing_imbalance_matches_a_multinomial_simulation(n_r, k, E, e):
    sim, se = _simulate(n_r, k, E, e, 1500, 0.0, seed=3)
    model = float(imbalance(_mt(n_r, k, E, e, router="uniform"), np.array([0.5]))[0])  # uniform: c ignored
    assert abs(model - sim) < 4.0 * se


def test_popularity_imbalance_matches_a_simulation():
    n_r, E, e, cv = 1024, 32, 8, 0.2
    sim, se = _simulate(n_r, 1, E, e, 3000, cv, seed=5)
    model = float(imbalance(_mt(n_r, 1, E, e), np.array([cv]))[0])
    assert abs(model - sim) < 4.0 * se
    assert model > float(imbalance(_mt(n_r, 1, E, e), np.array([0.0]))[0])  # popularity adds to the noise


def test_capacity_factor_pads_every_expert():
    assert imbalance(_mt(512, 8, 128, 32, capacity=1.25), np.array([0.1, 0.9])) == pytest.approx([0.25, 0.25])
    assert float(imbalance(_mt(512, 8, 128, 1), np.array([0.3]))[0]) == 0.0  # one rank holds every expert


def test_alltoall_splits_nvlink_and_network():
    n_r, k, h = 2048, 8, 4096
    copies = n_r * k * h * 2.0
    # ep 32 with etp 1: 8 ranks per 8-GPU domain, 7/32 of the copies over NVLink and 24/32 over the network
    assert ep_alltoall_time(n_r, k, h, 32, 1, 450e9, 50e9, 8) == pytest.approx(max(copies * 7 / 32 / 450e9,
                                                                                 copies * 24 / 32 / 50e9))
    assert ep_alltoall_time(n_r, k, h, 8, 1, 450e9, 50e9, 8) == pytest.approx(copies * 7 / 8 / 450e9)
    assert ep_alltoall_time(n_r, k, h, 8, 2, 450e9, 50e9, 8) == pytest.approx(max(copies * 3 / 8 / 450e9,
                                                                                copies * 4 / 8 / 50e9))
    assert ep_alltoall_time(n_r, k, h, 1, 1, 450e9, 50e9, 8) == 0.0


def _terms(**kw):
    lo = Layout(**{"tp": 2, "pp": 8, "dp": 16, "ep": 32, "etp": 1, "vpp": 4, "micro_batch": 1, "global_batch": 2048,
                   "recompute": "selective", "schedule": "interleaved", **BW, **kw})
    return terms(lo, QWEN, arch_counts(QWEN), PEAK, 256.0)


def test_expert_gemm_share_and_permutation_by_hand():
    c = arch_counts(QWEN)
    b, s, h, k, E, F, t, e = 1, 4096, 4096, 8, 128, 1536, 2, 32
    op_x = 2.0 * b * s * k * h * F * e / (E * t)  # 51.5 GFLOP per expert GEMM
    op_d = 2.0 * b * s * h * 64 * 128 / t  # the attention's output projection
    f = c.flops["routed_experts"] / c.flops_per_token
    for grouped, op in ((False, op_x), (True, op_x * E / e)):
        tm = _terms(grouped_gemm=grouped)
        want = 1.0 / ((1 - f) / gemm_shape_share(op_d) + f / gemm_shape_share(op))
        assert tm.g == pytest.approx(float(want), rel=1e-12)
    assert _terms(grouped_gemm=True).g >= _terms(grouped_gemm=False).g
    # permutation: m = 2048 / 16 micro-batches x 94 / 8 MoE layers x (forward + backward) x the bytes moved
    n_r = b * s / t
    moved = 2 * (k + 1) * n_r * h * 2 + 2 * n_r * E * 4
    assert _terms().moe.perm_s == pytest.approx(128 * 94 / 8 * 2 * moved / 3350e9, rel=1e-12)
    assert _terms(recompute="full").moe.perm_s == pytest.approx(128 * 94 / 8 * 3 * moved / 3350e9, rel=1e-12)


def test_moe_factor_is_the_step_time_identity():
    tm = _terms(grouped_gemm=True)
    d = {**DRAWS, "moe_imbalance": np.array([0.2]), "moe_mem": np.array([1.5])}
    f = factors(tm, d)
    eta = float(gemm_efficiency(np, 0.5, 0.0, tm.log_op)) * tm.g
    t_c = tm.t0 * tm.rho / eta / tm.busy
    i = float(imbalance(tm.moe, np.array([0.2]))[0])
    extra = t_c * tm.moe.expert_share * i + tm.moe.perm_s * 1.5
    assert float(f["experts"][0]) == pytest.approx(t_c / (t_c + extra), rel=1e-12)
    mfu = np.prod([float(v[0]) for v in f.values()])
    x = sum(v * (1 + i if k == "ep" else 1.0) for k, v in tm.comm.items())  # no window: every class exposed
    assert mfu == pytest.approx(tm.t0 / ((t_c + extra) * (1 + tm.bubble) + x), rel=1e-9)
    # the all-to-all overlapped: exposed only where it outlasts the compute
    assert float(factors(_terms(grouped_gemm=True, ep_comm_overlap=True), d)["communication"][0]) > \
        float(f["communication"][0])


def test_dense_layout_takes_no_moe_term():
    dense = dataclasses.replace(QWEN, experts=None, experts_active=None, moe_ffn=None)
    lo = Layout(tp=8, pp=4, global_batch=1024, nvlink_gb_s=450.0, nvlink_domain=8, network_gb_s=50.0)
    tm = terms(lo, dense, arch_counts(dense), PEAK, 256.0)
    assert tm.moe is None and tm.comm["ep"] == 0.0
    base = {k: v for k, v in DRAWS.items() if not k.startswith("moe_")}
    with_moe = factors(tm, DRAWS)
    assert "experts" not in with_moe
    for k, v in factors(tm, base).items():
        assert np.array_equal(v, with_moe[k])


def test_flagship_layout_prior_takes_no_moe_term():
    """A dense layout takes no MoE term: no expert factor in its waterfall, no MoE efficiency prior drawn, and its
    MFU draws the product of the dense factors (times the FLOP convention's constant). (Its numbers are the golden summary's,
    tests/golden/llama405b-layout.json, which the MoE terms left unchanged against the commit before them.)"""
    from mcflops.spec import load_spec

    lp = load_spec("priors/llama405b-layout.yaml").count_dependent["mfu"]
    f = lp.factor_draws()
    assert "experts" not in f and not any(p in lp.efficiency for p in MOE_PARAMS)
    dense = [k for k in f if k != "mfu"]
    assert "experts" not in dense and {"gemm", "pipeline"} <= set(dense)
    # the MFU is the factors' product times one constant (the file's FLOP convention over the architecture's count):
    # no per-draw factor beyond the dense ones
    ratio = f["mfu"] / np.prod([f[k] for k in dense], axis=0)
    assert np.allclose(ratio, ratio[0], rtol=1e-12)


def _moe_doc(layout):
    return {"name": "t", "seed": 0, "samples": 1000,
            "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 256}, "flops": "architecture",
            "architecture": {**{k: getattr(QWEN, k) for k in ("layers", "d_model", "heads", "vocab", "seq_len",
                                                             "kv_heads", "head_dim", "ffn", "experts",
                                                             "experts_active", "moe_ffn")}, "source": "test"},
            "priors": {"tokens": {"point": 1e12, "source": "t"},
                       "mfu": {"layout": layout, "source": "t"}}}


def test_spec_moe_flags_unknown_unless_stated_and_dualpipe_overlaps():
    from mcflops.spec import load_spec

    base = {"tp": 2, "pp": 8, "ep": 32, "etp": 1, "vpp": 4, "micro_batch": 1, "global_batch": 2048,
            "recompute": "selective", "zero": 1, "overlap_grad_reduce": True, "overlap_param_gather": True,
            "tp_comm_overlap": False}
    lp = load_spec(_moe_doc(base)).count_dependent["mfu"]
    assert set(lp.unknown) == {"grouped_gemm", "ep_comm_overlap"}
    assert {"moe_mem", "moe_imbalance"} <= set(lp.efficiency) and "experts" in lp.factor_draws()
    lp = load_spec(_moe_doc({**base, "grouped_gemm": True, "schedule": "dualpipe", "vpp": 1})).count_dependent["mfu"]
    assert lp.unknown == () and lp.layout.ep_comm_overlap and lp.layout.grouped_gemm


def test_spec_refuses_expert_fields_on_a_dense_model():
    from mcflops.spec import load_spec

    doc = _moe_doc({"tp": 2, "pp": 8, "global_batch": 2048, "grouped_gemm": True})
    doc["architecture"] = {k: v for k, v in doc["architecture"].items() if k not in ("experts", "experts_active",
                                                                                   "moe_ffn")}
    with pytest.raises(SpecError, match="grouped_gemm is for a mixture of experts"):
        load_spec(doc)


def test_recompute_moe_adds_the_experts_forward_by_hand():
    c = arch_counts(QWEN)
    f = c.flops["routed_experts"] / c.flops_per_token
    plain, again = _terms(recompute="none"), _terms(recompute="none", recompute_moe=True)
    assert plain.rho == 1.0 and again.rho == pytest.approx(1.0 + f / 3.0, rel=1e-12)
    assert again.moe.perm_s == pytest.approx(1.5 * plain.moe.perm_s, rel=1e-12)  # a third pass of two
    assert again.comm["ep"] == pytest.approx(1.5 * plain.comm["ep"], rel=1e-12)
    assert _terms(recompute="full", recompute_moe=True).rho == _terms(recompute="full").rho  # full reruns it all


@pytest.mark.parametrize("field,value,message", [
    ("capacity_factor", 0.8, "expected layout.capacity_factor: a number >= 1"),
    ("router", "greedy", "expected layout.router: one of learned, uniform"),
    ("grouped_gemm", "yes", "expected layout.grouped_gemm: true, false or unknown"),
])
def test_spec_bad_expert_fields_are_one_clear_line(field, value, message):
    from mcflops.spec import load_spec

    base = {"tp": 2, "pp": 8, "ep": 32, "etp": 1, "vpp": 4, "micro_batch": 1, "global_batch": 2048,
            "recompute": "selective", field: value}
    with pytest.raises(SpecError, match=message):
        load_spec(_moe_doc(base))


def test_two_chunks_may_hold_only_the_embedding_and_the_loss():
    """Qwen3-235B's 94 layers ran on pp 32 x vpp 3 = 96 chunks (Megatron-Core counts the embedding and the loss as
    pipeline layers): a layout that ran is not refused; three chunks short is."""
    from mcflops.layout import problem

    lay = Layout(tp=1, pp=32, vpp=3, schedule="interleaved", ep=8, global_batch=1024, micro_batch=1)
    assert problem(lay, QWEN, 256) is None
    short = dataclasses.replace(QWEN, layers=93)
    field, message = problem(lay, short, 256)
    assert field == "pp" and "93 layers cannot fill pp x vpp = 96" in message


def test_the_prior_tables_streams_are_each_their_own():
    """The layout prior's fixed streams (efficiencies, flags, MoE parameters, the run's residual, the elementwise
    multiplier, the attention core's efficiency; an unstated setting is chosen, not drawn) come from distinct
    seeds: two drawn from one seed would be dependent (a MoE parameter and the residual moving together in every
    draw)."""
    import inspect
    import re

    from mcflops.layout import prior

    seeds = re.findall(r"generator\(_SEED(?: \+ (\d+))?\)", inspect.getsource(prior))
    assert len(seeds) == 6 and len(set(seeds)) == len(seeds), seeds
