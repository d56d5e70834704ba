"""Every prior family against scipy.stats: exact quantiles of the z -> x map, and a KS test of draws."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import ndtri

from mcflops.model.samplers import make_sampler
from tests.oracles import scipy_dist
from mcflops.priors.fits import fit_beta_interval
from mcflops.spec import Fields
from mcflops.spec.grammar import parse_dist

CASES = {
    "uniform": {"uniform": [0.30, 0.50]},
    "lognormal_interval": {"lognormal": [15.0e12, 16.8e12]},
    "lognormal_trunc": {"lognormal": {"median": 2.5, "sigma": 0.4}, "low": 1.5, "high": 4.0},
    "normal_trunc": {"normal": {"mean": 0.4, "sd": 0.08}, "low": 0.0, "high": 1.0},
    "beta_mean_sd": {"beta": {"mean": 0.40, "sd": 0.03}},
    "beta_interval": {"beta": [0.85, 0.97]},
    "beta_u_shaped": {"beta": {"a": 0.5, "b": 0.5}},
    "triangular": {"triangular": [0.2, 0.35, 0.6]},
    "pert": {"pert": [0.2, 0.35, 0.6]},
    "mixture": {"mixture": [{"lognormal": [1e12, 2e12]}, {"lognormal": [3e12, 5e12]}], "weights": [0.7, 0.3]},
}
PROBS = np.array([0.001, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.999])


def _dist(node):
    return parse_dist(node, "priors.x", Fields("<test>"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_quantile_map_matches_scipy(name):
    """x(z) at z = Phi^-1(p) is scipy's ppf(p): relative error < 1e-4 (float32 table, 4096 intervals)."""
    d = _dist(CASES[name])
    s = make_sampler(d)
    got = np.exp(s.center + np.asarray(s(jnp.asarray(ndtri(PROBS), jnp.float32)), np.float64))
    want = scipy_dist(d).ppf(PROBS)
    if name == "mixture":  # the oracle: invert the mixture CDF with scipy's root finder
        from scipy.optimize import brentq

        f = lambda x, p: 0.7 * stats.lognorm.cdf(x, *_ln(1e12, 2e12)) + 0.3 * stats.lognorm.cdf(x, *_ln(3e12, 5e12)) - p  # noqa: E731
        want = np.array([brentq(f, 1e10, 1e14, args=(p,), xtol=1e-3, rtol=1e-12) for p in PROBS])
    np.testing.assert_allclose(got, want, rtol=1e-4)


def _ln(p5, p95):
    sigma = (math.log(p95) - math.log(p5)) / (2 * 1.6448536269514722)
    return (sigma, 0, math.sqrt(p5 * p95))


@pytest.mark.parametrize("name", sorted(CASES))
def test_draws_pass_ks_against_scipy(name, key):
    """2^16 draws through the sampler: KS p-value > 1e-3 (a 0.1% false-failure rate; the key is fixed)."""
    d = _dist(CASES[name])
    s = make_sampler(d)
    z = jax.random.normal(key, (1 << 16,), jnp.float32)
    x = np.exp(s.center + np.asarray(jax.jit(s.__call__)(z), np.float64))
    ref = scipy_dist(d)
    assert stats.kstest(x, ref.cdf).pvalue > 1e-3


def test_named_forms_agree():
    """The same lognormal written four ways gives the same canonical parameters."""
    mu, sigma = math.log(15.87e12), 0.0348
    forms = [{"lognormal": {"median": 15.87e12, "sigma": sigma}}, {"lognormal": {"mu": mu, "sigma": sigma}},
             {"lognormal": [math.exp(mu - 1.6448536269514722 * sigma), math.exp(mu + 1.6448536269514722 * sigma)]},
             {"lognormal": {"mean": math.exp(mu + sigma**2 / 2),
                            "sd": math.exp(mu + sigma**2 / 2) * math.sqrt(math.expm1(sigma**2))}}]
    for f in forms:
        p = _dist(f).params
        assert p["mu"] == pytest.approx(mu, abs=1e-12) and p["sigma"] == pytest.approx(sigma, rel=1e-9)


def test_interval_forms_hit_their_quantiles():
    """[p5, p95] means the 5% and 95% quantiles, for every family that takes an interval (scipy checks)."""
    for fam in ("normal", "lognormal", "beta"):
        d = _dist({fam: [0.85, 0.97]})
        np.testing.assert_allclose(scipy_dist(d).ppf([0.05, 0.95]), [0.85, 0.97], rtol=1e-7)


def test_beta_mean_sd_matches_scipy_moments():
    d = _dist({"beta": {"mean": 0.4, "sd": 0.03}})
    ref = stats.beta(d.params["a"], d.params["b"])
    assert ref.mean() == pytest.approx(0.4, rel=1e-12) and ref.std() == pytest.approx(0.03, rel=1e-12)


def test_beta_interval_fit_is_exact():
    ab = fit_beta_interval(0.30, 0.45)
    np.testing.assert_allclose(stats.beta(ab["a"], ab["b"]).ppf([0.05, 0.95]), [0.30, 0.45], rtol=1e-8)


def test_pert_is_the_vose_beta():
    d = _dist({"pert": [0.2, 0.35, 0.6]})
    ref = stats.beta(1 + 4 * 0.15 / 0.4, 1 + 4 * 0.25 / 0.4, loc=0.2, scale=0.4)
    assert scipy_dist(d).mean() == pytest.approx((0.2 + 4 * 0.35 + 0.6) / 6, rel=1e-12)  # PERT mean (a+4m+b)/6
    np.testing.assert_allclose(scipy_dist(d).ppf(PROBS), ref.ppf(PROBS))
