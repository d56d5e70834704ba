"""Communication overlap: the exposed time against a bucket-by-bucket simulation and hand computations, the
windows' shares of a micro-batch, ZeRO's volumes, the interleaved schedule's sends, the flags through the file
grammar (unknown by default, resolved file, bad values)."""

from __future__ import annotations

import numpy as np
import pytest

from mcflops.arch import Shape, counts
from mcflops.layout import SOFT, Layout, exposed, factors, mfu, overlap_defaults, terms
from mcflops.layout.model import all_reduce_time
from mcflops.errors import SpecError
from mcflops.spec import load_spec

GPT175 = Shape(layers=96, d_model=12288, heads=96, vocab=51200, seq_len=2048, ffn=49152, glu=False)
NET = {"nvlink_gb_s": 300, "nvlink_domain": 8, "network_gb_s": 25}
DRAW = {"gemm": np.array([0.7]), "tp_comm": np.array([1.0]), "dp_comm": np.array([1.2]),
        "ep_comm": np.array([1.0]), "straggler_cv": np.array([0.0])}


def simulate_buckets(c: float, w: float, n: int) -> float:
    """Exposed seconds of a collective of ``c`` seconds in ``n`` equal buckets, bucket i ready at (i + 1) w / n
    (the backward produces gradients evenly over its window w), each sent when ready and the link is free."""
    free = 0.0
    for i in range(n):
        free = max(free, (i + 1) * w / n) + c / n
    return free - w


@pytest.mark.parametrize("c,w", [(1.0, 100.0), (1.0, 3.0), (1.0, 1.0), (3.0, 1.0), (10.0, 0.5), (1.0, 0.0)])
def test_the_hinge_is_the_bucketed_overlap_in_the_limit(c, w):
    """max(0, c - w) is the simulation's limit of many buckets (its gap is at most one bucket, c / n); the smooth
    hinge is within SOFT^2 c^2 / (4 |c - w|) of it away from the kink and within SOFT c / 2 at it."""
    hard = max(0.0, c - w)
    n = 1000
    assert abs(simulate_buckets(c, w, n) - hard) <= c / n + 1e-12
    got = float(exposed(np, c, w))
    d = abs(c - w)
    assert abs(got - hard) <= (SOFT * c / 2 if d < SOFT * c else SOFT ** 2 * c ** 2 / (4 * d)) + 1e-15
    assert got >= hard  # never hides more than the window


def test_exposed_is_zero_under_a_long_window_and_c_minus_w_under_a_short_one():
    assert float(exposed(np, 1.0, 1e4)) < 1e-6
    assert float(exposed(np, 5.0, 1.0)) == pytest.approx(4.0, abs=SOFT ** 2 * 25 / 16)  # c - w, within the bound
    # monotone: longer windows never expose more, longer collectives never less
    ws = np.linspace(0.0, 5.0, 51)
    assert np.all(np.diff(exposed(np, 2.0, ws)) < 0)
    assert np.all(np.diff(exposed(np, np.linspace(0.1, 5.0, 50), 2.0)) > 0)


def _terms(count=1536, **kw):
    lay = Layout(tp=8, pp=8, global_batch=1536, **NET, **kw)
    return terms(lay, GPT175, counts(GPT175), 312e12, count)


def test_the_windows_are_one_micro_batchs_forward_and_backward():
    """By hand: forward 1 and backward 2 of 3 units of model FLOPs; full recompute adds a forward inside the
    backward (3 of 4); the window is one micro-batch's, 1 / m of the step's compute."""
    tm = _terms(overlap_grad_reduce=True, overlap_param_gather=True, tp_comm_overlap=True)
    m = tm.micro_batches
    assert tm.window == pytest.approx({"tp": 1.0, "dp_fwd": 1 / (3 * m), "dp_bwd": 2 / (3 * m)})
    full = _terms(overlap_grad_reduce=True, overlap_param_gather=True, recompute="full")
    assert full.window == pytest.approx({"dp_fwd": 1 / (4 * m), "dp_bwd": 3 / (4 * m)})


def test_tp_overlap_needs_one_nvlink_domain():
    """Transformer Engine's userbuffers overlap TP only over NVLink: TP 16 on 8-GPU domains has no TP window."""
    inside = _terms(tp_comm_overlap=True)
    assert inside.window["tp"] == 1.0
    past = terms(Layout(tp=16, pp=4, global_batch=1536, tp_comm_overlap=True, **NET), GPT175, counts(GPT175), 312e12, 1536)
    off = terms(Layout(tp=16, pp=4, global_batch=1536, **NET), GPT175, counts(GPT175), 312e12, 1536)
    assert "tp" not in past.window and past.comm == off.comm and past.window == off.window


def test_zero_stages_move_the_volumes_rajbhandari_counts():
    """ZeRO-0 all-reduces the gradients (a ring); ZeRO-1 reduce-scatters them (half) and all-gathers the bf16
    weights (half); ZeRO-3 gathers the weights again for the backward: 1.5x the all-reduce at equal bytes."""
    p_rank = counts(GPT175).params_total / 64
    ar = all_reduce_time(24, 64, p_rank * 4, 300e9, 25e9, 8)
    z0, z1, z3 = (_terms(zero=z) for z in (0, 1, 3))
    assert (z0.comm["dp_fwd"], z0.comm["dp_bwd"]) == (0.0, pytest.approx(ar, rel=1e-12))
    assert z1.comm["dp_fwd"] == pytest.approx(ar / 4, rel=1e-12)  # half a ring of 2-byte weights
    assert z1.comm["dp_bwd"] == pytest.approx(ar / 2, rel=1e-12)
    assert z3.comm["dp_bwd"] == pytest.approx(ar / 2 + ar / 4, rel=1e-12)
    b2 = [_terms(zero=z, grad_bytes=2) for z in (0, 3)]
    assert sum(b2[1].comm[k] for k in ("dp_fwd", "dp_bwd")) == pytest.approx(1.5 * b2[0].comm["dp_bwd"], rel=1e-12)


def test_overlapped_step_time_by_hand():
    tm = _terms(overlap_grad_reduce=True, overlap_param_gather=True)
    t_c = tm.t0 * tm.rho / (0.7 * tm.g)
    hidden = {k: float(exposed(np, 1.2 * tm.comm[k], tm.window[k] * t_c)) for k in ("dp_fwd", "dp_bwd")}
    x = 1.0 * (tm.comm["tp"] + tm.comm["cp"]) + 1.2 * tm.comm["pp"] + sum(hidden.values())
    assert mfu(tm, DRAW)[0] == pytest.approx(tm.t0 / (t_c * (1 + tm.bubble) + x), rel=1e-12)
    plain = _terms()
    assert mfu(tm, DRAW)[0] > mfu(plain, DRAW)[0]


def test_exposed_dp_share_grows_with_dp_at_a_fixed_global_batch():
    """More replicas, fewer micro-batches each: the windows shrink with the step, the collectives do not."""
    share, prev = [], None
    for count in (512, 1024, 2048, 4096, 8192):
        lay = Layout(tp=8, pp=8, global_batch=6144, overlap_grad_reduce=True, overlap_param_gather=True, **NET)
        tm = terms(lay, GPT175, counts(GPT175), 312e12, count)
        t_c = tm.t0 * tm.rho / (0.7 * tm.g)
        x = sum(float(exposed(np, 1.2 * tm.comm[k], tm.window[k] * t_c)) for k in ("dp_fwd", "dp_bwd"))
        share.append(x / (t_c * (1 + tm.bubble) + x))
        m = mfu(tm, DRAW)[0]
        assert prev is None or m < prev
        prev = m
    assert all(a < b for a, b in zip(share, share[1:]))
    assert factors(tm, DRAW)["communication"][0] < 1


def test_interleaving_sends_v_times_the_activations():
    """Narayanan et al. 2021 Sec. 2.2.2: v chunks per rank, v times the point-to-point sends per micro-batch."""
    one = _terms()
    four = terms(Layout(tp=8, pp=8, vpp=4, schedule="interleaved", global_batch=1536, **NET), GPT175,
                 counts(GPT175), 312e12, 1536)
    assert four.comm["pp"] == pytest.approx(4 * one.comm["pp"], rel=1e-12)
    assert four.bubble == pytest.approx(one.bubble / 4, rel=1e-12)


DOC = {"name": "ov", "samples": 1000, "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 16384},
       "architecture": {"preset": "llama3.1-405b"},
       "priors": {"tokens": 15.6e12, "mfu": {"layout": {"tp": 8, "pp": 16, "vpp": 4, "global_batch": 2048, "zero": 2}}}}


def _lay(**kw):
    doc = {**DOC, "priors": {**DOC["priors"], "mfu": {"layout": {**DOC["priors"]["mfu"]["layout"], **kw}}}}
    return load_spec(doc).count_dependent["mfu"]


def test_unstated_flags_are_unknown_and_fsdp_overlaps_its_data_parallel_two():
    assert overlap_defaults(False) == {"overlap_grad_reduce": False, "overlap_param_gather": False,
                                       "tp_comm_overlap": False}  # the fit's defaults for rows that do not say
    assert _lay().unknown == ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
    fs = _lay(fsdp=True, zero=3, pp=8, vpp=2)
    assert fs.layout.overlap_grad_reduce and fs.layout.overlap_param_gather and fs.unknown == ("tp_comm_overlap",)
    on = _lay(overlap_grad_reduce=True, tp_comm_overlap=True)
    assert on.layout.overlap_grad_reduce and on.layout.tp_comm_overlap and on.unknown == ("overlap_param_gather",)
    assert on.to_dict()["layout"]["overlap_grad_reduce"] is True  # the resolved file writes it back
    assert on.to_dict()["layout"]["overlap_param_gather"] == "unknown"
    again = load_spec({**DOC, "priors": {**DOC["priors"], "mfu": on.to_dict()}}).count_dependent["mfu"]
    assert again.layout == on.layout and again.unknown == on.unknown
    off = _lay(overlap_grad_reduce=False, overlap_param_gather=False, tp_comm_overlap=False)
    assert off.unknown == () and np.median(on.factor_draws()["mfu"]) > np.median(off.factor_draws()["mfu"])


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_flag_that_is_not_a_boolean_is_one_line(value):
    with pytest.raises(SpecError) as e:
        _lay(overlap_param_gather=value)
    assert "\n" not in str(e.value) and "layout.overlap_param_gather: true, false or unknown" in str(e.value)


def test_a_sweep_of_a_flag_takes_true_and_false_only(capsys):
    from pathlib import Path

    from mcflops.cli.main import main

    path = Path(__file__).resolve().parents[2] / "priors" / "llama405b-layout.yaml"
    rc = main(["sensitivity", str(path), "--samples", "20000", "--sweep", "tp_comm_overlap=yes,false"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "expected true or false for layout field tp_comm_overlap" in err
