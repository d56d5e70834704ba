"""Goodput from failures (mcflops/goodput.py): Daly's closed form against an event-driven simulation,
against its first-order expansion, against the Llama 3 paper's numbers, and as a prior form."""

import math

import numpy as np
import pytest

from mcflops.priors import goodput as gp
from mcflops.priors.table import KNOT_PROBS
from mcflops.errors import SpecError
from mcflops.spec import load_spec


def _simulate_run(rng, work_h, mtbf_h, tau, delta, restart):
    """One training run on a global clock with Poisson failures (rate 1/M), written as a timeline,
    independently of the renewal algebra: compute tau, write a checkpoint (delta), repeat; a failure
    loses everything since the last completed checkpoint and triggers a restart of R hours, which a
    failure during it starts over. Returns the wall-clock hours."""
    t, done = 0.0, 0.0
    next_fail = rng.exponential(mtbf_h)
    while done < work_h - 1e-12:
        seg = min(tau, work_h - done) + delta  # compute, then the checkpoint that commits it
        if next_fail >= t + seg:
            t += seg
            done += seg - delta
            continue
        t = next_fail  # lost: the partial segment
        next_fail = t + rng.exponential(mtbf_h)
        while next_fail < t + restart:  # restart interrupted: start it over
            t = next_fail
            next_fail = t + rng.exponential(mtbf_h)
        t += restart
    return t


def test_daly_closed_form_matches_event_simulation():
    """G = tau / (M e^{R/M} (e^{(tau+delta)/M} - 1)) against a timeline simulation: within 4 standard
    errors (false-failure rate 6e-5 for a normal mean of 200 runs)."""
    rng = np.random.default_rng(7)
    m, tau, delta, restart, work = 3.0, 0.5, 0.05, 0.2, 120.0  # failures matter: G ~ 0.8
    runs = np.array([work / _simulate_run(rng, work, m, tau, delta, restart) for _ in range(200)])
    exact = float(gp.goodput(1.0 / m, 1, tau, delta, restart))
    se = runs.std(ddof=1) / math.sqrt(runs.size)
    assert abs(runs.mean() - exact) < 4 * se, (runs.mean(), exact, se)
    assert 0.7 < exact < 0.9  # the case tests something: goodput well below 1
    # the first-order model is visibly off here (its error is second order in (tau, delta, R) / M)
    fo = float(gp.goodput_first_order(1.0 / m, 1, tau, delta, restart))
    assert abs(fo - exact) > 4 * se


def test_first_order_is_the_expansion_of_the_closed_form():
    """(G_first_order - G_exact) shrinks like x^2 as (tau, delta, R) = x (0.5, 0.05, 0.2) M shrinks."""
    errs = []
    for x in (0.1, 0.05, 0.025, 0.0125):
        tau, delta, r = 0.5 * x, 0.05 * x, 0.2 * x
        errs.append(abs(float(gp.goodput_first_order(1.0, 1, tau, delta, r)) - float(gp.goodput(1.0, 1, tau, delta, r))))
    ratios = [a / b for a, b in zip(errs, errs[1:])]
    assert all(3.5 < q < 4.5 for q in ratios), ratios  # halving x quarters the gap


def test_optimum_intervals():
    """The first-order goodput peaks at Daly's sqrt(2 delta M) - delta (R = 0), within a grid step; the
    exact model's optimum is near it (Daly 2006 Fig. 3: M = 24 h, R = 10 min, delta = 5 min ->
    tau_opt = 117 min; our grid search of the complete model agrees within 2 min)."""
    m, delta = 3.0, 0.01
    taus = np.linspace(0.05, 1.0, 20001)
    best = taus[np.argmax(gp.goodput_first_order(1 / m, 1, taus, delta, 0.0))]
    assert abs(best - gp.daly_interval(delta, m)) < 1e-4
    assert gp.young_interval(delta, m) == pytest.approx(math.sqrt(2 * delta * m))
    taus = np.linspace(60, 180, 12001) / 60
    best = taus[np.argmax(gp.goodput(1 / 24, 1, taus, 5 / 60, 10 / 60))] * 60
    assert abs(best - 117) < 2, best


def test_llama3_failure_rate_and_effective_training_time():
    """Llama 3 paper Sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 H100s, and
    "higher than 90% effective training time"."""
    rate = gp.rate_from_counts(419, 54, 16384)
    assert rate == pytest.approx(419 / (54 * 24 * 16384))
    assert rate == pytest.approx(1.973e-5, rel=1e-3)  # failures per GPU-hour
    mtbf = float(gp.mtbf_hours(rate, 16384))
    assert mtbf == pytest.approx(3.09, abs=0.01)  # "one failure every three hours" (press summaries)
    # >90% needs fast checkpoints and restarts: at a 18 s blocking write and Young's interval (~10.5 min)
    # a 5-minute restart gives ~92%, a 20-minute one ~84%
    tau = gp.young_interval(0.005, mtbf)
    assert float(gp.goodput(rate, 16384, tau, 0.005, 5 / 60)) > 0.90
    assert float(gp.goodput(rate, 16384, tau, 0.005, 20 / 60)) < 0.86


BASE = {"name": "f", "hardware": {"accelerator": "h100-sxm", "count": 16384},
        "priors": {"params": 405e9, "tokens": 15e12, "mfu": {"beta": [0.3, 0.45]}}}


def _spec(failures, **extra):
    return load_spec({**BASE, "priors": {**BASE["priors"], "goodput": {"failures": failures, **extra}}})


@pytest.mark.parametrize("uncertain", ["restart_h", "rate_per_gpu_hour"])
def test_failures_prior_quantiles_are_the_formula_at_input_quantiles(uncertain):
    """Goodput decreases in the input, so its p-quantile is G(input's (1-p)-quantile), exactly at knots."""
    from scipy import stats

    from tests.oracles import scipy_dist

    f = {"rate_per_gpu_hour": 1.973e-5, "checkpoint_interval_h": 0.18, "checkpoint_write_h": 0.005,
         "restart_h": 0.08}
    lo, hi = {"restart_h": (0.03, 0.2), "rate_per_gpu_hour": (1.5e-5, 2.6e-5)}[uncertain]
    f[uncertain] = {"lognormal": [lo, hi]}
    d = _spec(f).priors["goodput"]
    assert d.family == "mixture"
    mu, sig = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / (2 * 1.6448536269514722)
    x = stats.lognorm(sig, scale=math.exp(mu))
    probs = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    args = {**f, uncertain: x.ppf(1 - probs)}
    want = gp.goodput(args["rate_per_gpu_hour"], 16384, args["checkpoint_interval_h"], args["checkpoint_write_h"],
                      args["restart_h"])
    got = scipy_dist(d).ppf(probs)
    np.testing.assert_allclose(got, want, rtol=2e-5)  # the mixture's CDF inversion grid (65,536 points)
    assert np.all(np.isin(np.round(probs, 12), np.round(KNOT_PROBS, 12)))  # these are knots: exact there
    assert "Daly 2006" in d.source


def test_failures_prior_point_when_nothing_is_uncertain():
    d = _spec({"rate_per_gpu_hour": 2e-5, "count": 8192, "checkpoint_interval_h": 0.25, "restart_h": 0.1}).priors[
        "goodput"]
    assert d.family == "point"
    assert d.params["value"] == pytest.approx(float(gp.goodput(2e-5, 8192, 0.25, 0.0, 0.1)))


def test_failures_prior_samples_through_the_engine():
    """The engine's draws of a failures goodput prior have the formula's median (within 4 MCSE + table error)."""
    import mcflops

    spec = _spec({"rate_per_gpu_hour": 1.973e-5, "checkpoint_interval_h": 0.18, "checkpoint_write_h": 0.005,
                  "restart_h": {"lognormal": [0.03, 0.2]}})
    res = mcflops.run(spec, samples=50_000, posterior=False)
    want = float(gp.goodput(1.973e-5, 16384, 0.18, 0.005, math.sqrt(0.03 * 0.2)))
    s = res.prior["goodput"]
    assert abs(s["p50"] - want) < 4 * s["mcse_p50"] + 1e-4


@pytest.mark.parametrize("failures, extra, message", [
    ({"rate_per_gpu_hour": 2e-5, "checkpoint_interval_h": 0.25, "restart": 0.1}, {}, "did you mean 'restart_h'"),
    ({"rate_per_gpu_hour": {"lognormal": [1e-5, 3e-5]}, "checkpoint_interval_h": 0.25,
      "restart_h": {"lognormal": [0.05, 0.2]}}, {}, "at most one uncertain input"),
    ({"rate_per_gpu_hour": 2e-5, "checkpoint_interval_h": 0.25, "restart_h": {"beta": [0.1, 0.2]}}, {},
     "lognormal or a uniform"),
    ({"rate_per_gpu_hour": 2e-5, "checkpoint_interval_h": 0.25}, {}, "missing restart_h"),
    ({"rate_per_gpu_hour": 0, "checkpoint_interval_h": 0.25, "restart_h": 0.1}, {}, "rate_per_gpu_hour > 0"),
    ({"rate_per_gpu_hour": 2e-5, "checkpoint_interval_h": "soon", "restart_h": 0.1}, {}, "checkpoint_interval_h"),
    ({"rate_per_gpu_hour": 2e-5, "checkpoint_interval_h": 0.25, "restart_h": 0.1}, {"beta": [0.8, 0.9]},
     "beside failures"),
])
def test_failures_prior_errors_are_one_line(failures, extra, message):
    with pytest.raises(SpecError, match=message) as e:
        _spec(failures, **extra)
    assert "\n" not in str(e.value) and e.value.field.startswith("priors.goodput")


def test_failures_needs_a_count_and_belongs_to_goodput():
    spec = {**BASE, "hardware": {"accelerator": "h100-sxm"}}
    f = {"rate_per_gpu_hour": 2e-5, "checkpoint_interval_h": 0.25, "restart_h": 0.1}
    with pytest.raises(SpecError, match="count"):
        load_spec({**spec, "priors": {**spec["priors"], "goodput": {"failures": f}}})
    assert load_spec({**spec, "priors": {**spec["priors"], "goodput": {"failures": {**f, "count": 64}}}})
    with pytest.raises(SpecError, match="goodput prior"):
        load_spec({**BASE, "priors": {**BASE["priors"], "mfu": {"failures": f}}})
