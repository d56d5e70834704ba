"""The layout prior: its quantile table against an independent Monte Carlo, its count dependence, and the
factors' posterior (the prior conditional on MFU, reweighted) against a conjugate closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mcflops.layout import FACTORS, posterior_weights, waterfall
from mcflops.layout.model import factor_names
from mcflops.priors.quantiles import ppf
from mcflops.priors.table import KNOT_PROBS
from mcflops.spec import load_spec

LLAMA = {
    "name": "l405-layout", "samples": 20000,
    "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 16384},
    "architecture": {"preset": "llama3.1-405b"},
    "priors": {"tokens": 15.6e12, "mfu": {"layout": {
        "tp": 8, "pp": 16, "vpp": 4, "micro_batch": 1, "global_batch": 2048, "zero": 2, "recompute": "none",
        "nvlink_gb_s": 450, "nvlink_domain": 8, "network_gb_s": 50}}},
}


@pytest.fixture(scope="module")
def spec():
    return load_spec(LLAMA)


def test_the_table_matches_an_independent_monte_carlo(spec):
    """Draw each efficiency prior (and each unknown overlap flag, a fair coin, and the run's own residual) with
    NumPy's own generator (not the hypercube), run the factors, compare
    quantiles: a quantile's MC error is sqrt(p (1 - p) / n) / density; tolerance 5 of those (both sides)."""
    lp = spec.count_dependent["mfu"]
    rng = np.random.default_rng(7)
    n = 200_000
    draws = {p: np.asarray(ppf(d, rng.random(n))) for p, d in lp.efficiency.items()}
    # the run's own residual: a Student-t(4) of scale row_sigma in GEMM efficiency's logit, over (1 - gemm) (the
    # fit's first-order fold, mcflops.layout.prior's docstring), from this generator too
    g = draws["gemm"]
    draws["gemm"] = 1 / (1 + np.exp(-(np.log(g / (1 - g)) + lp.row_sigma * rng.standard_t(4.0, n) / (1 - g))))
    import dataclasses

    from mcflops.layout import factors, terms
    # an unknown overlap flag: an independent fair coin per draw (the hypercube's is balanced and permuted)
    coin = {k: rng.random(n) < 0.5 for k in lp.unknown}
    m = np.empty(n)
    for bits in np.ndindex(*(2,) * len(lp.unknown)):
        sel = np.ones(n, bool)
        for k, b in zip(lp.unknown, bits):
            sel &= coin[k] == bool(b)
        lay = dataclasses.replace(lp.layout, **{k: bool(b) for k, b in zip(lp.unknown, bits)})
        f = factors(terms(lay, lp.shape, lp.counts, lp.peak, float(lp.count)), {p: v[sel] for p, v in draws.items()})
        m[sel] = np.prod([f[k] for k in factor_names(f)], axis=0) * lp.counting  # memory-bound ops' too
    table = lp.at()
    got = np.asarray(ppf(table, np.array([0.05, 0.25, 0.5, 0.75, 0.95])))
    for p, g in zip((0.05, 0.25, 0.5, 0.75, 0.95), got):
        q = np.quantile(m, p)
        dens = stats.gaussian_kde(m[:20000])(q)[0]
        se = math.sqrt(p * (1 - p) / n) / dens + math.sqrt(p * (1 - p) / 65536) / dens
        assert abs(g - q) < 5 * se, (p, g, q, se)


def test_the_spec_prior_is_the_table_and_follows_the_count(spec):
    lp = spec.count_dependent["mfu"]
    assert np.allclose(ppf(spec.priors["mfu"], KNOT_PROBS[5:-5]), ppf(lp.at(16384), KNOT_PROBS[5:-5]))
    med = [float(ppf(lp.at(n), 0.5)) for n in (4096, 8192, 16384, 32768)]
    assert all(a > b for a, b in zip(med, med[1:]))


def test_posterior_weights_reproduce_a_conjugate_posterior():
    """log f1, log f2 ~ N(0, 1) and N(0, 0.5^2), independent; the figure sees m = f1 f2 with log-noise 0.2 at
    log m = 0.3. Closed form: the bivariate normal conditioned on a noisy sum."""
    rng = np.random.default_rng(3)
    n = 400_000
    a, b = rng.normal(0, 1.0, n), rng.normal(0, 0.5, n)
    m = a + b
    s2 = 1.0 + 0.25 + 0.04
    # an exact posterior sample of m: N(mean, var) of the sum given the figure
    post_mean_m = (1.25 / s2) * 0.3
    post_var_m = 1.25 * 0.04 / s2
    post_m = rng.normal(post_mean_m, math.sqrt(post_var_m), 200_000)
    w = posterior_weights(m, post_m, bins=200)
    mean_a = np.sum(w * a) / np.sum(w)
    expect_a = (1.0 / s2) * 0.3  # Cov(a, m + e) / Var(m + e) x 0.3
    ess = np.sum(w) ** 2 / np.sum(w * w)
    se = math.sqrt(1.0 / ess)  # a's sd is under 1: a conservative standard error
    # binning: inside a bin the weights are flat, so the estimate moves by at most E[a | m]'s change across the
    # bin; E[a | m] = m / 1.25 (a and b jointly normal), so half the widest bin the posterior reaches, / 1.25
    edges = np.quantile(m, np.linspace(0, 1, 201))
    lo, hi = np.quantile(post_m, [0.0005, 0.9995])
    reach = (edges[1:] > lo) & (edges[:-1] < hi)
    bias = float(np.max(np.diff(edges)[reach])) / 2 / 1.25
    assert abs(mean_a - expect_a) < 5 * se + bias


def test_waterfall_steps_run_from_peak_and_carry_posteriors(spec):
    lp = spec.count_dependent["mfu"]
    prior_m = lp.factor_draws()["mfu"]
    post = np.random.default_rng(0).choice(prior_m[prior_m < np.quantile(prior_m, 0.3)], 5000)
    wf = waterfall(lp, posterior_mfu=post, goodput=0.9)
    assert wf.steps[0][1] == pytest.approx(989.4e12)
    # the five factors in order, the memory-bound operations' after GEMM efficiency (the shipped fit has the term)
    assert [s[0] for s in wf.steps][:6] == [FACTORS[0], "memory", *FACTORS[1:]]
    assert wf.steps[-1][0] == "goodput"
    assert wf.factors["mfu"]["posterior"]["p50"] < wf.factors["mfu"]["prior"]["p50"]
    assert wf.factors["gemm"]["posterior"]["p50"] <= wf.factors["gemm"]["prior"]["p50"]


def test_the_recipe_round_trips_through_to_dict(spec):
    """What the resolved prior file writes loads back into the same prior (its table, at every count)."""
    lp = spec.count_dependent["mfu"]
    again = load_spec({**LLAMA, "priors": {**LLAMA["priors"], "mfu": lp.to_dict()}}).count_dependent["mfu"]
    u = np.linspace(0.01, 0.99, 99)
    for n in (8192, 16384, 32768):
        assert np.array_equal(ppf(again.at(n), u), ppf(lp.at(n), u))
