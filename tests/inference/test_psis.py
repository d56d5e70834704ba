"""Pareto k-hat (psis.py) against arviz-stats' PSIS on the same weights, against a known GPD tail, and
from the engine's kept top log-likelihoods."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from mcflops import engine
from mcflops import model as model_mod
from mcflops.inference import psis
from mcflops.spec import load_spec

array_stats = pytest.importorskip("arviz_stats.base").array_stats


def _arviz_khat(logw: np.ndarray) -> float:
    # arviz-stats' psislw takes log-likelihoods of LOO (weights = -ary), so pass -log w
    return float(array_stats.psislw(-np.asarray(logw, np.float64))[1])


@pytest.mark.parametrize("n", [200, 1000, 4096, 100_000])
@pytest.mark.parametrize("df", [1.5, 3.0, 30.0])
def test_khat_equals_arviz_stats(n, df):
    # Importance weights of a Student-t target under a normal proposal: heavy (df 1.5) to light tails.
    rng = np.random.default_rng(int(n * df))
    x = rng.normal(0.0, 1.3, n)
    logw = stats.t(df).logpdf(x) - stats.norm(0, 1.3).logpdf(x)
    assert psis.khat_from_logw(logw) == pytest.approx(_arviz_khat(logw), abs=1e-9)


def test_khat_recovers_a_known_pareto_shape():
    # Weights drawn from a generalized Pareto with shape k: k-hat estimates k. Its sampling sd is about
    # (1 + k) / sqrt(M) (Zhang & Stephens 2009, Table 2 is within that); M = 3 sqrt(S) = 1341 here,
    # so 4 sd is 0.16 (the prior's pull towards 0.5 is 10 / (M + 10) of the gap, under 0.01).
    rng = np.random.default_rng(3)
    n = 200_000
    m = psis.tail_length(n)
    for k in (0.2, 0.5, 0.9):
        w = stats.genpareto(k).rvs(n, random_state=rng)
        assert abs(psis.khat_from_logw(np.log(w)) - k) < 4 * (1 + k) / math.sqrt(m), k


def test_gpd_fit_scale_matches_scipy_on_a_large_sample():
    # The Zhang-Stephens estimate converges to the truth: on 20,000 GPD(k=0.3, sigma=2) draws both k and
    # sigma are within 4 asymptotic sd (ML: sd(k) ~ (1+k)/sqrt(n), sd(sigma)/sigma ~ sqrt(2(1+k)/n)).
    rng = np.random.default_rng(11)
    n, k, s = 20_000, 0.3, 2.0
    x = np.sort(stats.genpareto(k, scale=s).rvs(n, random_state=rng))
    kh, sh = psis.gpd_fit(x)
    kh_raw = (kh * (n + psis.PRIOR_N) - psis.PRIOR_N * psis.PRIOR_K) / n  # undo the prior
    assert abs(kh_raw - k) < 4 * (1 + k) / math.sqrt(n)
    assert abs(sh / s - 1) < 4 * math.sqrt(2 * (1 + k) / n)


def test_equal_weights_have_no_tail():
    assert psis.khat_from_top(np.zeros(50), 1000) == -math.inf
    assert psis.khat_from_top(np.array([-np.inf] * 40 + [0.0] * 3), 1000) == math.inf


SPEC = {
    "name": "psis", "seed": 5,
    "priors": {"params": 405.9e9, "tokens": {"lognormal": [13e12, 18e12]}, "mfu": {"beta": {"mean": 0.4, "sd": 0.05}},
               "goodput": {"beta": {"mean": 0.9, "sd": 0.04}}, "peak_flops": 989.4e12},
    "observe": {"gpu_hours": {"value": 30.84e6, "sigma": 0.03}},
}


def test_engine_top_gives_the_khat_of_all_its_weights():
    # The engine keeps only the largest log-likelihoods; recompute every draw's (same keyed blocks) and
    # compare: the kept top is the true top, and k-hat from it equals arviz-stats' k-hat on all weights.
    spec = load_spec(SPEC)
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    key = jax.random.key(spec.seed)
    size, n = 1 << 13, 3 * (1 << 13)
    sums = engine.run(key, m, lik, n, size=size)
    ll = np.concatenate([
        np.asarray(engine.log_likelihood(lik, model_mod.evaluate(m, engine.draw_z(key, m, jnp.uint32(b), size))),
                   np.float64) for b in range(3)])
    m_tail = psis.tail_length(n)
    assert sums.top.size > m_tail
    # float32 kernels: the engine's fused jit and this eager recomputation round differently (~1e-7 abs)
    np.testing.assert_allclose(np.sort(sums.top)[-m_tail - 1:], np.sort(ll)[-m_tail - 1:], rtol=0, atol=2e-6)
    assert psis.khat_from_top(sums.top, n) == pytest.approx(_arviz_khat(ll), abs=2e-3)
