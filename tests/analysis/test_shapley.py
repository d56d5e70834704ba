"""Shapley effects against answers we did not compute with them: closed forms (Owen 2014; Iooss & Prieur
2019), the Ishigami variance decomposition, and an independent Gaussian-linear oracle by permutations.

Statistical checks allow K = 4 Monte Carlo standard errors (delta-method SEs of the estimator; a
two-sided normal false-failure rate of 6e-5 per comparison), with fixed keys.
"""

import itertools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcflops
from mcflops import model as model_mod
from mcflops.analysis import sensitivity as sens
from mcflops.analysis import shapley as sh
from mcflops.priors.dist import Z95

K = 4.0
N = 1 << 14


def _sigma(lo, hi):
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


PRIORS = {"params": {"lognormal": [60e9, 80e9]}, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": 0.4,
          "peak_flops": {"lognormal": [300e12, 500e12]}}
SPEC = {"name": "shapley", "seed": 3, "samples": 20_000, "hardware": {"accelerator": "h100-sxm"}, "priors": PRIORS}
SIG = {"params": _sigma(60e9, 80e9), "tokens": _sigma(1e12, 2e12), "peak_flops": _sigma(300e12, 500e12)}
SIGN = {"params": 1.0, "tokens": 1.0, "peak_flops": -1.0}  # 6nd: log gpu_hours = d params + d tokens - d peak


def _model(spec):
    return model_mod.build_model(mcflops.load_spec(spec))


def _within(est, se, exact):
    np.testing.assert_array_less(np.abs(np.asarray(est) - np.asarray(exact)), K * np.asarray(se))


def test_weights_are_the_shapley_weights():
    """Each input's weights sum to 0 except on the full set (efficiency), and the d = 2 weights are 1/2."""
    W = sh.weights(2)  # columns: {1}, {2}, {1, 2}
    np.testing.assert_allclose(W, [[0.5, -0.5, 0.5], [-0.5, 0.5, 0.5]])
    for d in (1, 3, 5):
        W = sh.weights(d)
        np.testing.assert_allclose(W.sum(axis=0), np.r_[np.zeros((1 << d) - 2), 1.0], atol=1e-12)


def test_independent_lognormals_log_and_linear(key):
    """Independent inputs. log GPU-hours = sum of +-sigma_i z_i (additive): Sh_i = sigma_i^2 / sum.
    GPU-hours = prod of g_i with mean mu_i = e^{s_i^2/2}, variance v_i = e^{s_i^2}(e^{s_i^2} - 1): the
    Sobol decomposition of a product has V_u = prod_{i in u} v_i prod_{j not in u} mu_j^2, and
    Sh_i = sum_{u containing i} V_u / |u| / V (Owen 2014, Theorem 1)."""
    out = sh.shapley(key, _model(SPEC), "gpu_hours", n=N)
    names = out["names"]
    assert not out["correlated"]
    s2 = np.array([SIG[n] ** 2 for n in names])
    _within(out["log"]["effect"], out["log"]["se"], s2 / s2.sum())
    mu2, v = np.exp(s2), np.exp(s2) * np.expm1(s2)
    d = len(names)
    Vu = {u: np.prod([v[i] if i in u else mu2[i] for i in range(d)]) for r in range(1, d + 1)
          for u in itertools.combinations(range(d), r)}
    exact = np.array([sum(Vu[u] / len(u) for u in Vu if i in u) for i in range(d)]) / sum(Vu.values())
    _within(out["linear"]["effect"], out["linear"]["se"], exact)
    assert np.all(out["log"]["se"] < 0.01)  # the test has power
    for scale in ("log", "linear"):
        assert out[scale]["effect"].sum() == pytest.approx(1.0, abs=1e-5)  # efficiency, by construction


def ishigami(params, z):
    """Ishigami & Homma (1990) on uniforms U(-pi, pi) = -pi + 2 pi Phi(z)."""
    a, b = params[0], params[1]
    x = {k: -jnp.pi + 2 * jnp.pi * jax.scipy.special.ndtr(v) for k, v in z.items()}
    y = jnp.sin(x["x1"]) + a * jnp.sin(x["x2"]) ** 2 + b * x["x3"] ** 4 * jnp.sin(x["x1"])
    return y[None, :]


def test_ishigami_first_plus_half_the_interaction(key):
    """Independent inputs: Sh_i = S_i + half of each pairwise interaction it is in (Owen 2014, Thm 1).
    Ishigami's only interaction is x1-x3 (D13; Sobol & Levitan 1999), so Sh = (D1 + D13/2, D2, D13/2) / D,
    between the first-order and total indices (Owen 2014, Eq. 6)."""
    a, b = 7.0, 0.1
    pi4, pi8 = math.pi**4, math.pi**8
    D = a * a / 8 + b * pi4 / 5 + b * b * pi8 / 18 + 0.5
    D1, D2, D13 = b * pi4 / 5 + b * b * pi8 / 50 + 0.5, a * a / 8, b * b * pi8 / 18 - b * b * pi8 / 50
    exact = np.array([D1 + D13 / 2, D2, D13 / 2]) / D
    sums = sh.shapley_sums(key, ishigami, jnp.asarray([a, b]), ("x1", "x2", "x3"), np.eye(3), 1 << 15)
    ix = sh.shapley_effects(sums)
    _within(ix["effect"], ix["se"], exact)
    first, total = np.array([D1, D2, 0.0]) / D, np.array([D1 + D13, D2, D13]) / D
    assert np.all(first <= exact) and np.all(exact <= total)
    assert np.all(ix["se"] < 0.02)


def test_between_sobol_first_and_total_under_independence(key):
    """Our Sobol estimator (Saltelli 2010 / Jansen 1999) and Shapley on GPU-hours with beta inputs:
    S_i <= Sh_i <= ST_i, each up to K standard errors of the difference."""
    spec = {**SPEC, "priors": {**PRIORS, "mfu": {"beta": [0.2, 0.6]}, "goodput": {"beta": [0.6, 0.97]}}}
    m = _model(spec)
    so = sens.sobol(key, m, "gpu_hours", n=N)
    out = sh.shapley(jax.random.fold_in(key, 1), m, "gpu_hours", n=N, names=so["names"])
    lin, s = out["linear"], so["linear"]
    assert np.all(s["total"] - s["first"] > 0.005)  # there are interactions to split on this scale
    assert np.all(lin["effect"] - s["first"] > -K * np.hypot(lin["se"], s["first_se"]))
    assert np.all(s["total"] - lin["effect"] > -K * np.hypot(lin["se"], s["total_se"]))


def _gaussian_linear_oracle(b, S):
    """Exact Shapley of Y = b^T Z, Z ~ N(0, S), by Owen's permutation definition with the other cost
    c(J) = Var(E[Y | Z_J]) = b^T S_{:,J} S_JJ^{-1} S_{J,:} b (Gaussian conditioning)."""
    d = len(b)

    def c(J):
        if not J:
            return 0.0
        J = list(J)
        g = S[:, J].T @ b
        return float(g @ np.linalg.solve(S[np.ix_(J, J)], g))

    sh_ = np.zeros(d)
    perms = list(itertools.permutations(range(d)))
    for p in perms:
        for k, i in enumerate(p):
            sh_[i] += c(set(p[:k + 1])) - c(set(p[:k]))
    return sh_ / len(perms) / float(b @ S @ b)


@pytest.mark.parametrize("pair, rho", [(("params", "tokens"), 0.6), (("tokens", "peak_flops"), -0.5)])
def test_correlated_pair_closed_form(key, pair, rho):
    """Y = sum b_i s_i z_i with one correlated pair and one independent input (Iooss & Prieur 2019, Sec. 3):
    Sh_1 = [b1^2 s1^2 (1 - rho^2/2) + rho b1 b2 s1 s2 + b2^2 s2^2 rho^2/2] / Var(Y), the independent input
    Var_3 / Var(Y)."""
    spec = {**SPEC, "correlations": [{"between": list(pair), "rho": rho}]}
    out = sh.shapley(key, _model(spec), "gpu_hours", n=N)
    assert out["correlated"]
    names = out["names"]
    bs = {n: SIGN[n] * SIG[n] for n in names}
    (x1, x2), x3 = pair, next(n for n in names if n not in pair)
    V = bs[x1] ** 2 + bs[x2] ** 2 + 2 * rho * bs[x1] * bs[x2] + bs[x3] ** 2
    exact = {x1: bs[x1] ** 2 * (1 - rho**2 / 2) + rho * bs[x1] * bs[x2] + bs[x2] ** 2 * rho**2 / 2,
             x2: bs[x2] ** 2 * (1 - rho**2 / 2) + rho * bs[x1] * bs[x2] + bs[x1] ** 2 * rho**2 / 2,
             x3: bs[x3] ** 2}
    _within(out["log"]["effect"], out["log"]["se"], [exact[n] / V for n in names])
    # and the oracle agrees with the closed form (a check of the oracle itself)
    S = np.eye(3)
    i, j = names.index(x1), names.index(x2)
    S[i, j] = S[j, i] = rho
    np.testing.assert_allclose(_gaussian_linear_oracle(np.array([bs[n] for n in names]), S),
                               [exact[n] / V for n in names], rtol=1e-12)


def linear(params, z):
    """Y = sum_i b_i z_i over the inputs given, in name order."""
    return sum(params[i] * z[k] for i, k in enumerate(sorted(z)))[None, :]


def test_full_correlation_matrix_against_the_permutation_oracle(key):
    """Three correlated Gaussians, one of which (c) does not enter Y: its effect is not zero (it carries
    information on a; Iooss & Prieur 2019, Sec. 3.2), and every effect matches the oracle."""
    b = np.array([1.0, 2.0, 0.0])
    S = np.array([[1.0, 0.3, 0.7], [0.3, 1.0, -0.4], [0.7, -0.4, 1.0]])
    ix = sh.shapley_effects(sh.shapley_sums(key, linear, jnp.asarray(b, jnp.float32), ("a", "b", "c"), S, N))
    exact = _gaussian_linear_oracle(b, S)
    assert exact[2] > 0.05
    _within(ix["effect"], ix["se"], exact)


def test_blocks_and_compiles(key):
    """Keyed blocks: the sums do not depend on blocks per call; one compile per structure."""
    args = (key, linear, jnp.asarray([1.0, 2.0, 0.5]), ("a", "b", "c"), np.eye(3), 3 * 1024 + 5)
    a = sh.shapley_sums(*args, size=1024, blocks_per_call=1)
    b = sh.shapley_sums(*args, size=1024, blocks_per_call=2)
    np.testing.assert_allclose(a["s"], b["s"], rtol=1e-12)
    m = _model(SPEC)
    sh.shapley(key, m, "gpu_hours", n=4096)
    size = sh._call._cache_size()
    other = {**SPEC, "priors": {**PRIORS, "tokens": {"lognormal": [2e12, 5e12]}},
             "correlations": [{"between": ["params", "tokens"], "rho": 0.3}]}
    sh.shapley(jax.random.key(9), _model(other), "gpu_hours", n=4096)
    assert sh._call._cache_size() == size


def test_one_input_and_too_many():
    ix = sh.shapley_effects(sh.shapley_sums(jax.random.key(0), linear, jnp.asarray([1.0, 0.0, 0.0]), ("a",),
                                            np.eye(1), 1024, static=()))
    np.testing.assert_allclose(ix["effect"], [1.0])
    with pytest.raises(ValueError, match="1 to"):
        sh.shapley_sums(jax.random.key(0), linear, None, tuple("abcdefghijk"), np.eye(11), 1024)


def test_a_dominant_input_has_its_complements_standard_error():
    """Shapley effects sum to one, so the effect of an input that carries nearly all the variance is one minus
    the others' and has their standard error. DeepSeek-V3's prior is such a case (MFU 0.9998 of log GPU-hours,
    tokens the rest, price none): with the full set's variance as a coordinate of its own, the delta method took
    MFU's se as a near-cancelling difference of float32 sums, 0.1% off the complement's on one build of XLA and
    12% on another. The complement here is tokens plus price, whose own se is 2e-6 of tokens': 1e-4 leaves 50x."""
    m = model_mod.build_model(mcflops.load_spec(Path(__file__).resolve().parents[2] / "priors" / "deepseek-v3.yaml"))
    out = sh.shapley(jax.random.key(0), m, "gpu_hours")
    i = {n: out["names"].index(n) for n in ("mfu", "tokens", "price")}
    for scale in ("log", "linear"):
        ix = out[scale]
        assert ix["effect"][i["mfu"]] > 0.999
        assert abs(ix["effect"][i["price"]]) < K * ix["se"][i["price"]] + 1e-9
        assert ix["se"][i["price"]] < 1e-4 * ix["se"][i["tokens"]]
        np.testing.assert_allclose(ix["se"][i["mfu"]], ix["se"][i["tokens"]], rtol=1e-4)
