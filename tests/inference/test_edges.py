"""Posteriors that reach the end of a sampler's table are withheld (inference/edges.py), against a quadrature of
the stated priors (scipy.stats): an observation 10x, 100x and 1,000x above the prior predictive's median puts
the exact posterior's MFU beyond the table's z = -8, so NUTS's draws pile there and the posterior must fail."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops.inference import edges
from mcflops.model.samplers import ZMAX, make_sampler
from mcflops.priors.dist import Dist

PARAMS, TOKENS, PEAK = 8e9, 1.5e12, 989.4e12
NUTS = {"chains": 2, "warmup": 200, "draws": 200}


def edge_spec(value):
    return {"name": "edge", "seed": 1, "samples": 20_000,
            "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 1024},
            "priors": {"params": PARAMS, "tokens": TOKENS, "mfu": {"beta": [0.3, 0.5]}, "goodput": {"beta": [0.85, 0.97]}},
            "observe": {"gpu_hours": {"value": value, "sigma": 0.1}}}


def quadrature_mfu_p50(spec, value, sigma=0.1, n=1500):
    """The exact posterior median of MFU on a dense grid in (log MFU, log goodput): Beta priors (the fitted a, b)
    times the lognormal likelihood of the observed GPU-hours, in log space (the mass is 1e-50 of the prior's)."""
    M = stats.beta(spec.priors["mfu"].params["a"], spec.priors["mfu"].params["b"])
    G = stats.beta(spec.priors["goodput"].params["a"], spec.priors["goodput"].params["b"])
    lm = np.linspace(math.log(1e-7), 0, n)[:-1]
    lg = np.linspace(math.log(1e-5), 0, n)[:-1]
    lp = (M.logpdf(np.exp(lm)) + lm)[:, None] + (G.logpdf(np.exp(lg)) + lg)[None, :]
    log_h = math.log(6 * PARAMS * TOKENS / (PEAK * 3600)) - lm[:, None] - lg[None, :]
    lp = lp - 0.5 * ((math.log(value) - log_h) / sigma) ** 2
    w = np.exp(lp - lp.max()).sum(axis=1)
    cdf = np.cumsum(w) / w.sum()
    return float(np.exp(np.interp(0.5, cdf, lm))), M


@pytest.mark.parametrize("factor", [10, 100, 1000])
def test_far_observations_are_withheld_where_the_exact_posterior_lies_beyond_the_table(factor):
    prior_median = 6 * PARAMS * TOKENS / (PEAK * 3600 * 0.4 * 0.915)  # roughly the prior predictive's median
    spec = mcflops.load_spec(edge_spec(factor * prior_median))
    exact, M = quadrature_mfu_p50(spec, factor * prior_median)
    assert stats.norm.ppf(M.cdf(exact)) < -ZMAX  # the oracle: the answer lies where the table cannot reach
    post = mcflops.run(spec, nuts=NUTS).to_dict()["posterior"]
    checks = post["checks"]
    assert checks["passed"] is False
    assert checks["why"][0].startswith("the data contradict the prior") and "mfu" in checks["why"][0]
    assert checks["prior_edge"]["mfu"]["side"] == "low"
    # what was withheld is the table's edge, not the answer: the exact median lies below it, the draws at it
    edge_value = checks["prior_edge"]["mfu"]["value"]
    assert exact < edge_value <= 1.01 * post["mfu"]["p50"]


def test_edge_check_on_synthetic_draws():
    key = jax.random.key(0)
    beta = Dist("beta", {"a": 25.45, "b": 38.47})
    s = make_sampler(beta)
    model = type("M", (), {"inputs": ("mfu",), "samplers": (s,), "centers": {"mfu": s.center}})()

    def draws(mu, sd, sampler=s):
        z = mu + sd * jax.random.normal(key, (4000,), jnp.float32)
        return np.asarray(sampler(z), np.float64)[None, :]

    assert "mfu" in edges.edge_piles(model, ("mfu",), draws(-7.9, 0.2))  # piled at the edge
    assert edges.edge_piles(model, ("mfu",), draws(-5.0, 0.5)) == {}  # far in the tail, but inside the table
    # 1% of draws in the band is the line: 0.5% there passes
    mix = np.concatenate([draws(0.0, 1.0)[:, :3980], draws(-7.9, 0.05)[:, :20]], axis=1)
    assert edges.edge_piles(model, ("mfu",), mix) == {}
    uni = make_sampler(Dist("uniform", {"low": 0.3, "high": 0.5}))  # bounded: at its bound long before the edge
    umodel = type("M", (), {"inputs": ("mfu",), "samplers": (uni,), "centers": {"mfu": uni.center}})()
    assert edges.edge_piles(umodel, ("mfu",), draws(-7.9, 0.2, uni)) == {}
