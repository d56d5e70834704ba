"""The engine against closed forms: with lognormal inputs, log GPU-hours is exactly normal."""

import math

import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops.priors.dist import Z95

N = 1 << 20
SPEC = {
    "name": "closed-form", "seed": 7, "samples": N,
    "priors": {"params": 70e9, "tokens": {"lognormal": [1.0e12, 2.0e12]}, "mfu": 0.4,
               "peak_flops": {"lognormal": [300e12, 400e12]}},
}


def _sigma(lo, hi):
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


def test_prior_predictive_matches_lognormal_closed_form():
    res = mcflops.run(SPEC)
    s_t, s_p = _sigma(1e12, 2e12), _sigma(300e12, 400e12)
    mu = (math.log(6 * 70e9) + 0.5 * math.log(1e12 * 2e12) - 0.5 * math.log(300e12 * 400e12)
          - math.log(0.4) - math.log(3600))
    sigma = math.hypot(s_t, s_p)
    ref = stats.lognorm(sigma, scale=math.exp(mu))
    g = res.prior["gpu_hours"]
    for k, p in (("p5", 0.05), ("p25", 0.25), ("p50", 0.5), ("p75", 0.75), ("p95", 0.95)):
        # MCSE of a quantile: sqrt(p(1-p)/n) / f(q); 4 MCSE is a ~6e-5 false-failure rate per check
        q = ref.ppf(p)
        mcse = math.sqrt(p * (1 - p) / N) / ref.pdf(q)
        assert abs(g[k] - q) < 4 * mcse, (k, g[k], q, mcse)
    assert abs(g["mean"] - ref.mean()) < 4 * ref.std() / math.sqrt(N)
    assert abs(g["log_sd"] - sigma) < 4 * sigma / math.sqrt(2 * N)
    # the reported MCSE of the median is the delta-method value within 20%
    assert g["mcse_p50"] == pytest.approx(math.sqrt(0.25 / N) / ref.pdf(ref.median()), rel=0.2)


def test_same_seed_same_numbers_other_seed_differs():
    a = mcflops.run(SPEC, samples=100_000)
    b = mcflops.run(SPEC, samples=100_000)
    c = mcflops.run(SPEC, samples=100_000, seed=8)
    assert a.prior == b.prior
    assert a.prior["gpu_hours"]["p50"] != c.prior["gpu_hours"]["p50"]


def test_editing_one_prior_keeps_the_others_draws():
    """Inputs draw from fold_in(key, crc32(name)): changing the peak prior leaves the token draws alone."""
    a = mcflops.run(SPEC, samples=10_000)
    other = {**SPEC, "priors": {**SPEC["priors"], "peak_flops": {"lognormal": [500e12, 600e12]}}}
    b = mcflops.run(other, samples=10_000)
    np.testing.assert_array_equal(a.draws["tokens"], b.draws["tokens"])
    assert not np.array_equal(a.draws["peak_flops"], b.draws["peak_flops"])


def test_observed_percentile_is_the_prior_cdf():
    spec = {**SPEC, "observe": {"gpu_hours": {"value": 1.0e6, "sigma": 0.05}}}
    res = mcflops.run(spec, samples=N, posterior=False)
    s = math.hypot(_sigma(1e12, 2e12), _sigma(300e12, 400e12))
    mu = (math.log(6 * 70e9) + 0.5 * math.log(2e24) - 0.5 * math.log(1.2e29) - math.log(0.4 * 3600))
    p = stats.norm.cdf((math.log(1.0e6) - mu) / s)
    assert abs(res.observed["gpu_hours"]["prior_percentile"] / 100 - p) < 4 * math.sqrt(p * (1 - p) / N)
