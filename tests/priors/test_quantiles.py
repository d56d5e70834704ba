"""mcflops.quantiles (numpy + scipy.special) against scipy.stats, far into the tails; the beta interval fit
against scipy.optimize; the report's KDE against scipy's; and the run path without scipy.stats/optimize.

Tolerances. Where scipy.stats computes the same quantity exactly (norm, lognorm, beta, uniform, triang,
and a root of its own accurate cdf/sf), ours agrees to 1e-10 relative. Two additive terms, each a
condition number times a few float64 ulps, and no looser: (1) x = loc + scale z and x = low + width y round
to ~eps |loc| (or |low|), whatever the algorithm (scipy does the same arithmetic), which matters for a
quantile near 0 next to a bound at 0; (2) on the far side (ppf at u > 1/2, isf at q > 1/2) every
algorithm that works from the near end is exact only for some u' within a few eps of u, so it is
within ~eps / f(x) of x (f the density).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import betaincinv, ndtr

from mcflops.priors import quantiles as Q
from mcflops.model.samplers import log_quantile_table
from tests.oracles import scipy_dist
from mcflops.priors.dist import TAIL_U, Z95, tail_quantiles
from mcflops.priors.fits import fit_beta_interval
from mcflops.spec.grammar import parse_dist
from mcflops.spec import Fields

ROOT = Path(__file__).resolve().parents[2]
EPS = np.finfo(float).eps
U = np.array([6.2e-16, 1e-12, 1e-6, 0.05, 0.5, 0.95, 1 - 1e-6])
REL = 1e-10

CASES = {
    "uniform": {"uniform": [0.30, 0.50]},
    "normal": {"normal": {"mean": 0.4, "sd": 0.08}},
    "lognormal": {"lognormal": [15.0e12, 16.8e12]},
    "normal_trunc_both": {"normal": {"mean": 0.4, "sd": 0.08}, "low": 0.0, "high": 1.0},  # low at -5 sd
    "normal_trunc_upper_tail": {"normal": {"mean": 0.0, "sd": 1.0}, "low": 4.0},  # keeps 3.2e-5
    "normal_trunc_in_upper_tail": {"normal": {"mean": 10.0, "sd": 2.0}, "low": 16.0, "high": 17.0},
    "normal_trunc_lower_tail": {"normal": {"mean": 10.0, "sd": 1.0}, "high": 6.0},
    "normal_trunc_narrow": {"normal": {"mean": 10.0, "sd": 1.0}, "low": 9.9, "high": 10.1},
    "lognormal_trunc": {"lognormal": {"median": 2.5, "sigma": 0.4}, "low": 1.5, "high": 4.0},
    "lognormal_trunc_far": {"lognormal": {"median": 1.0, "sigma": 1.0}, "low": 50.0},  # low at +3.9 sd
    "lognormal_trunc_high": {"lognormal": {"median": 1.0, "sigma": 1.0}, "high": 0.05},  # high at -3 sd
    "beta_mean_sd": {"beta": {"mean": 0.40, "sd": 0.03}},
    "beta_interval": {"beta": [0.85, 0.97]},
    "beta_u_shaped": {"beta": {"a": 0.5, "b": 0.5}},
    "beta_skewed": {"beta": {"a": 0.5, "b": 50.0}},
    "triangular": {"triangular": [0.2, 0.35, 0.6]},
    "triangular_mode_low": {"triangular": [0.2, 0.2, 0.6]},
    "triangular_mode_high": {"triangular": [0.2, 0.6, 0.6]},
    "pert": {"pert": [0.2, 0.35, 0.6]},
    "pert_mode_low": {"pert": [0.2, 0.2, 0.6]},
    "pert_lambda": {"pert": {"low": 1.0, "mode": 3.0, "high": 10.0, "lambda": 2.0}},
    "mixture_lognormal": {"mixture": [{"lognormal": [1e12, 2e12]}, {"lognormal": [3e12, 5e12]}], "weights": [0.7, 0.3]},
    "mixture_mixed": {"mixture": [{"beta": [0.3, 0.5]}, {"pert": [0.2, 0.3, 0.6]},
                                  {"normal": {"mean": 0.5, "sd": 0.1}, "low": 0.01, "high": 0.99}],
                      "weights": [0.5, 0.3, 0.2]},
    "mixture_disjoint": {"mixture": [{"uniform": [1.0, 2.0]}, {"pert": [5.0, 5.0, 9.0]}], "weights": [0.4, 0.6]},
}


def _dist(node):
    return parse_dist(node, "priors.x", Fields("<test>"))


def _std(d):
    """The scipy.stats truncnorm of (log) x for a truncated normal/lognormal."""
    p = d.params
    loc, scale = (p["mean"], p["sd"]) if d.family == "normal" else (p["mu"], p["sigma"])
    f = (lambda v: v) if d.family == "normal" else math.log
    a = -np.inf if d.low is None else (f(d.low) - loc) / scale
    b = np.inf if d.high is None else (f(d.high) - loc) / scale
    return stats.truncnorm(a, b, loc=loc, scale=scale)


def _oracle_fns(d):
    """scipy.stats cdf, sf and pdf of a prior (no mcflops code)."""
    if d.family == "mixture":
        comps = [(scipy_dist(c), w) for c, w in zip(d.components, d.weights)]
        return (lambda x: sum(w * c.cdf(x) for c, w in comps), lambda x: sum(w * c.sf(x) for c, w in comps),
                lambda x: sum(w * c.pdf(x) for c, w in comps))
    if d.family in ("normal", "lognormal") and (d.low is not None or d.high is not None):
        t = _std(d)
        if d.family == "normal":
            return t.cdf, t.sf, t.pdf
        return (lambda x: t.cdf(np.log(x)), lambda x: t.sf(np.log(x)), lambda x: t.pdf(np.log(x)) / x)
    s = scipy_dist(d)
    return s.cdf, s.sf, s.pdf


def _root(fn, target, guess, support):
    """x with fn(x) = target (fn monotone): brentq on log fn - log target from a bracket grown around guess."""
    g = lambda x: math.log(max(float(fn(x)), 1e-320)) - math.log(target)
    lo, hi = support
    step = 1e-9 * max(abs(guess), 1e-300)
    a, b = max(guess - step, lo), min(guess + step, hi)
    while np.sign(g(a)) == np.sign(g(b)):
        step *= 8
        a, b = max(guess - step, lo), min(guess + step, hi)
    return optimize.brentq(g, a, b, xtol=1e-300, rtol=4 * EPS, maxiter=500)


def _oracle_quantiles(d, upper):
    """scipy.stats' ppf (isf) where it is exact, else a root of scipy's cdf or sf (always on the small side:
    1 - u is exact for u >= 1/2). scipy's truncnorm ppf/isf lose digits in far tails, e.g.
    truncnorm.isf(6.2e-16, 4, inf) = 9.36 where its own sf is 0.2 x 6.2e-16; its cdf/sf do not."""
    if d.family == "triangular" and upper and d.params["mode"] < d.params["high"]:
        # scipy's triang.isf is its ppf(1 - q): no digits left for q < 1e-10. The closed-form survival
        # function (hi - x)^2 / ((hi - lo)(hi - mode)) (Johnson, Kotz & Balakrishnan 1995, Ch. 26) solved
        # by brentq
        p = d.params
        sf = lambda x: (p["high"] - x) ** 2 / ((p["high"] - p["low"]) * (p["high"] - p["mode"]))
        small = U <= (p["high"] - p["mode"]) / (p["high"] - p["low"])  # beyond the mode: sf(mode) = 1 - c
        return np.where(small, [_root(sf, q, x, (p["mode"], p["high"])) for q, x in zip(U, Q.isf(d, U))],
                        scipy_dist(d).isf(U))
    exact = d.family in ("uniform", "beta", "triangular", "pert") or (
        d.family in ("normal", "lognormal") and d.low is None and d.high is None)
    if exact:
        s = scipy_dist(d)
        return s.isf(U) if upper else s.ppf(U)
    cdf, sf, _ = _oracle_fns(d)
    mine = Q.isf(d, U) if upper else Q.ppf(d, U)
    lo = 0.0 if d.family == "lognormal" else -np.inf
    out = []
    for u, x in zip(U, mine):
        small_side_cdf = (u <= 0.5) != upper  # ppf at small u, or isf at large q: solve on the cdf
        p = (u if u <= 0.5 else 1.0 - u)
        out.append(_root(cdf if small_side_cdf else sf, p, x, (lo, np.inf)))
    return np.array(out)


def _shift(d):
    """|loc| (or |low|) of the x = loc + scale z (x = low + width y) the quantile is computed as."""
    p = d.params
    if d.family == "mixture":
        return max(_shift(c) for c in d.components)
    if d.family == "normal":
        return abs(p["mean"])
    return max(abs(p["low"]), abs(p["high"])) if d.family in ("uniform", "triangular", "pert") else 0.0


def _tolerance(d, want):
    dens = _oracle_fns(d)[2](want)
    with np.errstate(divide="ignore"):
        return REL * np.abs(want) + 4 * EPS * (_shift(d) + np.where(U > 0.5, 1.0 / dens, 0.0))


@pytest.mark.parametrize("upper", [False, True], ids=["ppf", "isf"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_quantiles_match_scipy(name, upper):
    d = _dist(CASES[name])
    got = Q.isf(d, U) if upper else Q.ppf(d, U)
    want = _oracle_quantiles(d, upper)
    tol = _tolerance(d, want)
    assert np.all(np.abs(got - want) <= tol), (got, want, np.abs(got - want) / tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cdf_sf_pdf_match_scipy(name):
    """cdf and sf at the 1e-6..1-1e-6 quantiles to 1e-9 relative, give or take what F at a float64 x is known
    to: eps (1 + |x| f(x)) (its rounding, and x's rounding times the slope); the density (the mixture's
    Newton steps use it) to 1e-10 relative."""
    d = _dist(CASES[name])
    cdf, sf, pdf = _oracle_fns(d)
    x = _oracle_quantiles(d, upper=False)[2:]
    atol = 4 * EPS * (1 + np.abs(x) * pdf(x))
    for mine, ref in ((Q.cdf(d, x), cdf(x)), (Q.sf(d, x), sf(x))):
        assert np.all(np.abs(mine - ref) <= 1e-9 * ref + atol), (mine, ref)
    np.testing.assert_allclose(Q.pdf(d, x), pdf(x), rtol=1e-10)


def test_mixture_with_a_point_mass_is_the_generalized_inverse():
    """0.5 at 1.0 and 0.5 uniform on [2, 3]: F jumps from 0 to 1/2 at 1 (closed forms)."""
    d = _dist({"mixture": [1.0, {"uniform": [2.0, 3.0]}]})
    np.testing.assert_array_equal(Q.ppf(d, [TAIL_U, 0.25, 0.5]), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(Q.ppf(d, [0.75, 1 - 1e-6]), [2.5, 3.0 - 2e-6], rtol=1e-12)
    np.testing.assert_allclose(Q.isf(d, [TAIL_U, 0.25]), [3.0 - 2 * TAIL_U, 2.5], rtol=1e-12)
    np.testing.assert_array_equal(Q.isf(d, [0.75]), [1.0])
    np.testing.assert_allclose(Q.cdf(d, [0.5, 1.0, 2.5]), [0.0, 0.5, 0.75])
    np.testing.assert_allclose(Q.sf(d, [0.5, 1.0, 2.5]), [1.0, 0.5, 0.25])


@pytest.mark.parametrize("name", ["lognormal_trunc", "mixture_lognormal", "mixture_mixed", "beta_interval"])
def test_tables_and_tails_are_the_quantiles_and_are_memoised(name):
    """log_quantile_table(d)[k] = log ppf/isf at Phi(z_k) (both ends = tail_quantiles), built once per prior:
    the same distribution with another source or line hits the cache and gets the same read-only table."""
    d = _dist(CASES[name])
    node = dict(CASES[name], source="another source")
    d2 = _dist(node)
    t = log_quantile_table(d)
    assert log_quantile_table(d2) is t and not t.flags.writeable
    z = np.linspace(-8, 8, t.size)
    k = [0, 100, t.size // 2, t.size - 101, t.size - 1]
    want = [Q.ppf(d, ndtr(z[i])) if z[i] <= 0 else Q.isf(d, ndtr(-z[i])) for i in k]
    np.testing.assert_allclose(t[k], np.log(want), rtol=1e-14)
    lo, hi = tail_quantiles(d)
    assert tail_quantiles(d2) == (lo, hi)
    np.testing.assert_allclose(np.log([lo, hi]), t[[0, -1]], rtol=1e-14)
    other = _dist({"beta": [0.2, 0.31]})
    assert log_quantile_table(other) is not t


# ---------------------------------------------------------------------------- the beta interval fit

def _least_squares_fit(p5, p95):
    """The former implementation (scipy.optimize.least_squares on absolute residuals), as the oracle."""
    def resid(t):
        a, b = np.exp(t)
        return [betaincinv(a, b, 0.05) - p5, betaincinv(a, b, 0.95) - p95]

    m, sd = (p5 + p95) / 2, (p95 - p5) / (2 * Z95)
    k = max(m * (1 - m) / sd**2 - 1, 0.5)
    sol = optimize.least_squares(resid, np.log([m * k, (1 - m) * k]), xtol=1e-14, ftol=1e-14, gtol=1e-14)
    return np.exp(sol.x)


INTERVALS = [(0.85, 0.97), (0.30, 0.45), (0.05, 0.95), (0.001, 0.999), (0.2, 0.9), (0.9, 0.99), (0.01, 0.2),
             (0.6, 0.7), (0.35, 0.45), (0.001, 0.01), (0.99, 0.999), (0.4, 0.41), (0.02, 0.98), (0.7, 0.999)]


@pytest.mark.parametrize("p5,p95", INTERVALS)
def test_beta_fit_matches_least_squares(p5, p95):
    """Same (a, b) as scipy.optimize.least_squares to 1e-9 relative, and the quantiles to 1e-12."""
    ab = fit_beta_interval(p5, p95)
    np.testing.assert_allclose([ab["a"], ab["b"]], _least_squares_fit(p5, p95), rtol=1e-9)
    np.testing.assert_allclose(stats.beta(ab["a"], ab["b"]).ppf([0.05, 0.95]), [p5, p95], rtol=1e-12)


def test_beta_fit_matches_the_benchmark_reference():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import reference_numpy
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    for p5, p95 in [(0.85, 0.97), (0.30, 0.45), (0.6, 0.7), (0.01, 0.2)]:  # where its own check passes
        ref = reference_numpy._beta_from_quantiles(p5, p95)
        ab = fit_beta_interval(p5, p95)
        # the reference stops at least_squares' default gtol (1e-8): its (a, b) are good to ~1e-9
        assert ab["a"] == pytest.approx(ref["a"], rel=1e-8) and ab["b"] == pytest.approx(ref["b"], rel=1e-8)


@pytest.mark.parametrize("p5,p95", [(1e-10, 2e-10), (0.999999, 0.9999995), (1e-12, 1 - 1e-12), (1e-200, 0.5),
                                    (3.3e-6, 3.6e-4)])
def test_beta_fit_is_exact_where_least_squares_was_not(p5, p95):
    """Relative residuals near 0 and 1: quantiles to 1e-12 of p5 and of 1 - p95, by scipy.stats.beta. The
    former least squares on absolute residuals missed p5 or 1 - p95 by 5e-6 (the last) to 1e192 (the
    fourth) relative here, and its check refused the first two."""
    ab = fit_beta_interval(p5, p95)
    b = stats.beta(ab["a"], ab["b"])
    assert b.ppf(0.05) == pytest.approx(p5, rel=1e-12)
    assert b.isf(0.05) == pytest.approx(p95, rel=1e-12) and b.sf(p95) == pytest.approx(0.05, rel=1e-9)


def test_beta_fit_failure_is_one_line():
    """An interval no float64 beta reaches (b would be ~1e300) keeps the former message."""
    with pytest.raises(ValueError, match=r"^no beta has 5% and 95% quantiles \[1e-300, 1e-299\]$"):
        fit_beta_interval(1e-300, 1e-299)


# ---------------------------------------------------------------------------- the report's KDE

@pytest.mark.parametrize("n,chunk", [(10, 1 << 22), (4000, 1 << 22), (4000, 10_000)])
def test_kde_matches_scipy_gaussian_kde(n, chunk):
    from mcflops.inference.plotdata import gaussian_kde

    rng = np.random.default_rng(n)
    x = np.log(rng.lognormal(17.0, 0.2, n))
    grid = np.linspace(x.min() - 0.5, x.max() + 0.5, 400)
    want = stats.gaussian_kde(x)(grid)
    np.testing.assert_allclose(gaussian_kde(x, grid, chunk=chunk), want, rtol=1e-10, atol=1e-10 * want.max())


# ---------------------------------------------------------------------------- the run path

def test_run_path_imports_neither_scipy_stats_nor_optimize(tmp_path):
    """`mcflops sample` and `mcflops run` (20,000 draws, every file written) in a fresh process: scipy.stats
    (~1 s to import) and scipy.optimize (~0.9 s) never load."""
    code = (
        "import sys\n"
        "from mcflops.cli import main\n"
        f"assert main(['sample', 'priors/llama405b.yaml', '--quiet', '--samples', '20000']) == 0\n"
        f"assert main(['run', 'priors/llama405b.yaml', '--out', {str(tmp_path / 'out')!r}, '--quiet',"
        " '--samples', '20000']) == 0\n"
        "assert 'mcflops.plots.report' in sys.modules or 'matplotlib' not in sys.modules\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scipy.stats', 'scipy.optimize'))))\n")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
                       check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout[-2000:]
    assert (tmp_path / "out" / "summary.json").exists()
