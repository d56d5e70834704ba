"""Importance weighting against the conjugate normal closed form: a lognormal prior sample weighted by a lognormal
measurement is the posterior N(mu1, s1^2) in log space (the normal-normal update, e.g. Gelman et al., BDA3 Sec.
2.5), and Kish's effective sample size is n (E w)^2 / E w^2, both Gaussian integrals in closed form."""

import math

import numpy as np
from scipy import stats

from mcflops.priors.weighting import effective_size, log_weights, normalised, weighted_quantiles

MU0, S0, Y, SIGMA, N = math.log(0.40), 0.30, 0.35, 0.10, 200_000


def _sample():
    return np.exp(np.random.default_rng(0).normal(MU0, S0, N))  # fixed seed


def test_weighted_sample_is_the_conjugate_posterior():
    m = _sample()
    w = normalised(log_weights(Y, m, SIGMA))
    prec = 1 / S0**2 + 1 / SIGMA**2
    mu1, s1 = (MU0 / S0**2 + math.log(Y) / SIGMA**2) / prec, prec**-0.5
    ess = effective_size(w)
    for p in (0.05, 0.5, 0.95):
        z = stats.norm.ppf(p)
        got = math.log(weighted_quantiles(m, w, [p])[0])
        # MCSE of a quantile of ess independent draws: sqrt(p (1 - p) / ess) / density; 5 of them (false-failure
        # rate below 1e-6 for a normal estimate)
        mcse = math.sqrt(p * (1 - p) / ess) / stats.norm.pdf(z) * s1
        assert abs(got - (mu1 + s1 * z)) < 5 * mcse, (p, got, mu1 + s1 * z, mcse)


def test_effective_size_is_kishs_closed_form():
    m = _sample()
    w = normalised(log_weights(Y, m, SIGMA))
    d = MU0 - math.log(Y)
    ew = SIGMA / math.hypot(SIGMA, S0) * math.exp(-d * d / (2 * (SIGMA**2 + S0**2)))
    v2 = SIGMA**2 / 2  # w^2 is a normal kernel of variance sigma^2 / 2
    ew2 = math.sqrt(v2 / (v2 + S0**2)) * math.exp(-d * d / (2 * (v2 + S0**2)))
    expected = N * ew**2 / ew2
    # the ratio of two sample means of n draws: its relative error is a few times 1/sqrt(ess); 5% is > 10 of them
    assert abs(effective_size(w) / expected - 1) < 0.05, (effective_size(w), expected)


def test_equal_weights_are_numpys_hazen_quantiles():
    x = _sample()[:1001]
    p = [0.01, 0.05, 0.5, 0.95, 0.99]
    assert np.allclose(weighted_quantiles(x, np.ones_like(x), p), np.quantile(x, p, method="hazen"), rtol=1e-12)
