"""The prior file's ``pilot:`` block: each of its three measurements is the same MFU when they state the same
throughput (the conversions by hand: tokens x the architecture's FLOPs per token; a step's global batch x
seq_len tokens), the file's MFU is the layout prior's draws weighted by the pilot's likelihood, the weights move
with the count and a layout variant (the posterior predictive there), the block round-trips through
spec.resolved.yaml, and `mcflops run` draws from it. Bad blocks: tests/bad/pilot_*.yaml."""

import copy
import math

import numpy as np
import pytest

from mcflops.priors.quantiles import ppf
from mcflops.spec import load_spec, resolved_dict
from mcflops.spec.pilots import PilotedPrior
from mcflops.spec.reader import read_yaml
from tests.conftest import ROOT

from pathlib import Path

FILE = Path(ROOT) / "priors" / "examples" / "ladder" / "dense70b-pilot.yaml"
PROBS = [0.05, 0.25, 0.5, 0.75, 0.95]


@pytest.fixture(scope="module")
def spec():
    return load_spec(FILE)


def _with(pilot):
    d = copy.deepcopy(read_yaml(FILE))
    d["pilot"] = [pilot]
    return load_spec(d, path=str(FILE))


def test_the_file_mfu_is_the_layout_prior_weighted_by_the_pilot(spec):
    lp = spec.count_dependent["mfu"]
    assert isinstance(lp, PilotedPrior) and len(spec.pilots) == 1
    base = lp.unconditioned()
    # the weights by hand (NumPy, not mcflops.priors.weighting): a lognormal likelihood at the pilot's count, its
    # MFU in the architecture's FLOPs (the file's 6ND MFU / counting) against the shared draws' (without the run's
    # own residual), of sd sqrt(0.05^2 + the run's own residual^2): the pilot's run is not production's
    obs = 420e12 / base.peak
    pred = base.factor_draws(512, row=False)["mfu"] / base.counting
    w = np.exp(-0.5 * ((math.log(obs) - np.log(pred)) / math.hypot(0.05, base.row_sigma)) ** 2)
    m = base.factor_draws()["mfu"]
    o = np.argsort(m)
    c = (np.cumsum(w[o]) - 0.5 * w[o]) / w.sum()
    want = np.interp(PROBS, c, m[o])
    # the table's knots are these quantiles; between knots it interpolates: 1e-3 relative is well within a knot
    assert np.allclose(ppf(spec.priors["mfu"], PROBS), want, rtol=1e-3)
    # the pilot is the evidence: given it, the pilot's own MFU is predicted close to what it measured
    (chk,) = lp.checks
    assert abs(math.log(chk["predicted_posterior"]["p50"] / obs)) < math.hypot(0.05, base.row_sigma)
    assert ppf(spec.priors["mfu"], [0.95])[0] / ppf(spec.priors["mfu"], [0.05])[0] < \
        ppf(base.at(), [0.95])[0] / ppf(base.at(), [0.05])[0]


def test_three_measurements_of_one_throughput_are_one_pilot(spec):
    lp = spec.count_dependent["mfu"]
    per_token = lp.counts.training_flops_per_token
    tokens = 420e12 / per_token  # tokens/s per GPU at 420 TFLOP/s
    step = 2048 * 8192 / (tokens * 512)  # seconds per step of 2,048 sequences of 8,192 tokens on 512 GPUs
    want = ppf(spec.priors["mfu"], PROBS)
    for pilot in ({"count": 512, "tokens_per_s_per_gpu": tokens, "source": "x"},
                  {"count": 512, "step_time_s": step, "source": "x"}):
        assert np.allclose(ppf(_with(pilot).priors["mfu"], PROBS), want, rtol=1e-9), pilot


def test_the_weights_carry_to_other_counts_and_layouts(spec):
    """The posterior predictive at another count or layout is the same weighted draws evaluated there."""
    lp = spec.count_dependent["mfu"]
    base = lp.unconditioned()
    m = base.factor_draws(8192)["mfu"]
    o = np.argsort(m)
    c = (np.cumsum(lp.weights[o]) - 0.5 * lp.weights[o]) / lp.weights.sum()
    assert np.allclose(ppf(lp.at(8192), PROBS), np.interp(PROBS, c, m[o]), rtol=1e-3)
    v = lp.variant(pp=4)
    assert isinstance(v, PilotedPrior) and v.weights is lp.weights
    assert not np.allclose(ppf(v.at(), PROBS), ppf(lp.at(), PROBS), rtol=1e-3)


def test_the_block_round_trips_through_the_resolved_file(spec):
    d = resolved_dict(spec)
    assert d["pilot"] == [{"count": 512, "tflops_per_gpu": 420.0, "sigma": 0.05, "source": spec.pilots[0].source}]
    again = load_spec(d, path="spec.resolved.yaml")
    assert again.pilots == spec.pilots and again.digest() == spec.digest()
    assert np.array_equal(ppf(again.priors["mfu"], PROBS), ppf(spec.priors["mfu"], PROBS))
    # a pilot is part of what the file means: without it the hash differs
    d.pop("pilot")
    assert load_spec(d, path="x").digest() != spec.digest()


def test_run_draws_the_pilot_conditioned_mfu():
    """`mcflops run`'s computation (api.run) samples the pilot's posterior predictive: its sampled median against
    the table's within 5 of the run's own MCSE of it (the plan block dropped: a plan pass is not the claim)."""
    from mcflops import api

    d = copy.deepcopy(read_yaml(FILE))
    d.pop("plan")
    spec = load_spec(d, path=str(FILE))
    res = api.run(spec, samples=4000, posterior=False)
    mfu = res.prior["mfu"]
    want = float(ppf(spec.priors["mfu"], [0.5])[0])
    assert abs(mfu["p50"] - want) < 5 * mfu["mcse_p50"], (mfu["p50"], want, mfu["mcse_p50"])


def _residual(sigma):
    d = copy.deepcopy(read_yaml(FILE))
    d["priors"]["mfu"]["residual"] = sigma
    return load_spec(d, path=str(FILE)).count_dependent["mfu"]


def _by_hand(base, sigma):
    """The pilot's weights in NumPy: its MFU (architecture FLOPs) against the shared draws' at 512, lognormal of sd
    ``sigma``, largest 1."""
    z = (math.log(420e12 / base.peak) - np.log(base.factor_draws(512, row=False)["mfu"] / base.counting)) / sigma
    return np.exp(-0.5 * z * z - np.max(-0.5 * z * z))


def test_without_a_row_residual_the_weights_are_the_measurements_alone():
    """residual: 0 (no run-level residual): the shared draws are the MFU draws, bit for bit, and the weights are the
    measurement's lognormal alone, as before the split."""
    lp = _residual(0)
    base = lp.unconditioned()
    assert lp.row_sigma == 0
    assert np.array_equal(base.factor_draws(4096)["mfu"], base.factor_draws(4096, row=False)["mfu"])
    np.testing.assert_allclose(lp.weights, _by_hand(base, 0.05), rtol=1e-12, atol=1e-300)


def test_a_row_residual_is_in_the_pilots_likelihood_and_production_draws_its_own():
    """residual: 0.1: the pilot's weights widen to sqrt(0.05^2 + 0.1^2) on the same shared draws (more draws keep
    weight), and production's MFU carries a draw of its own, so its interval given the pilot is wider than with no
    run-level residual (the width a pilot cannot remove)."""
    lp0, lp1 = _residual(0), _residual(0.1)
    b0, b1 = lp0.unconditioned(), lp1.unconditioned()
    assert lp1.row_sigma == 0.1
    for p in b0.draws():
        assert np.array_equal(b0.draws()[p], b1.draws()[p])  # the shared draws: the residual's stream is its own
    np.testing.assert_allclose(lp1.weights, _by_hand(b1, math.hypot(0.05, 0.1)), rtol=1e-12, atol=1e-300)
    assert lp1.ess > 1.5 * lp0.ess
    width = [ppf(lp.at(), [0.95])[0] / ppf(lp.at(), [0.05])[0] for lp in (lp0, lp1)]
    assert width[1] > 1.2 * width[0]
    # production's own residual: given the weights, its log MFU spreads by about the residual's scale more than
    # the shared draws' do (Student-t(4) of scale 0.1 has sd 0.141; folded into GEMM efficiency its effect on
    # the MFU is the GEMM factor's share, so between half and all of it)
    w = lp1.weights / lp1.weights.sum()
    var = [np.sum(w * (np.log(x) - np.sum(w * np.log(x))) ** 2)
           for x in (b1.factor_draws(row=False)["mfu"], b1.factor_draws()["mfu"])]
    assert 0.5 * 0.141 ** 2 < var[1] - var[0] < 1.2 * 0.141 ** 2
    with pytest.raises(Exception, match="residual"):
        _residual(-0.1)


def test_a_pilot_of_productions_own_configuration_shares_its_residual():
    """A pilot on production's count and layout measures production itself: there its likelihood is the
    measurement's error alone, on the draws with the run's residual (production's own), so production's interval
    is about the measurement's (2 x 1.645 x 0.05 in log MFU, within 15%); at another count it is a different run
    and the weights are the shared ones."""
    d = copy.deepcopy(read_yaml(FILE))
    d["priors"]["mfu"]["residual"] = 0.1
    d["pilot"] = [{"count": 4096, "tflops_per_gpu": 420, "source": "x"}]
    lp = load_spec(d, path=str(FILE)).count_dependent["mfu"]
    base = lp.unconditioned()
    run = base.factor_draws(4096)["mfu"] / base.counting
    z = (math.log(420e12 / base.peak) - np.log(run)) / 0.05
    np.testing.assert_allclose(lp.weights_at(4096), np.exp(-0.5 * z * z - np.max(-0.5 * z * z)), rtol=1e-12, atol=1e-300)
    q5, q95 = np.log(ppf(lp.at(), [0.05, 0.95]))
    assert abs((q95 - q5) / (2 * 1.6449 * 0.05) - 1) < 0.15
    assert lp.weights_at(8192) is lp.shared_weights
    s = (math.log(420e12 / base.peak) - np.log(base.factor_draws(4096, row=False)["mfu"] / base.counting)) / math.hypot(0.05, 0.1)
    np.testing.assert_allclose(lp.shared_weights, np.exp(-0.5 * s * s - np.max(-0.5 * s * s)), rtol=1e-12, atol=1e-300)
