"""Correlated inputs (Gaussian copula on the z's): marginals kept, correlations as specified, bad input refused.

Statistical checks: K = 4 standard errors (false-failure rate 6e-5 per comparison) or a KS p-value
above 1e-3 (false-failure rate 1e-3), with fixed keys.
"""

import math

import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops.model import copula
from mcflops import engine
from mcflops import model as model_mod
from mcflops.errors import SpecError

K = 4.0
N = 1 << 16

SPEC = {
    "name": "copula", "seed": 1, "samples": 20_000, "hardware": {"accelerator": "h100-sxm"},
    "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.3, 0.5]},
               "goodput": {"beta": [0.8, 0.97]}, "price": {"lognormal": [2, 4]}},
    "correlations": [{"between": ["mfu", "goodput"], "rho": 0.6, "source": "test"},
                     {"between": ["tokens", "price"], "spearman": -0.3}],
}


def _draws(spec, key):
    m = model_mod.build_model(mcflops.load_spec(spec))
    v = model_mod.evaluate(m, engine.draw_z(key, m, np.uint32(0), N))
    return m, {n: np.asarray(v[n], np.float64) + m.centers[n] for n in m.inputs}


def _spearman(x, y):
    return stats.spearmanr(x, y).statistic


def test_rank_correlations_follow_the_copula_and_marginals_stay(key):
    m, d = _draws(SPEC, key)
    assert m.copula.names == ("tokens", "mfu", "goodput", "price")
    # Spearman of a Gaussian copula: (6/pi) asin(rho/2) (Kruskal 1958), whatever the marginals;
    # Var(atanh r_s) ~ 1.06 / (n - 3) (Fieller, Hartley & Pearson 1957), so SE(r_s) ~ (1 - r_s^2) sqrt(1.06 / (n - 3))
    se1 = math.sqrt(1.06 / (N - 3))
    rs = _spearman(d["mfu"], d["goodput"])
    want = 6 / math.pi * math.asin(0.6 / 2)
    assert abs(rs - want) < K * (1 - want**2) * se1
    rs2 = _spearman(d["tokens"], d["price"])
    assert abs(rs2 - (-0.3)) < K * (1 - 0.09) * se1
    # lognormal pair: log x are normal, so their Pearson correlation is the copula's rho (SE (1-r^2)/sqrt(n))
    rho = 2 * math.sin(math.pi * -0.3 / 6)
    r = np.corrcoef(d["tokens"], d["price"])[0, 1]
    assert abs(r - rho) < K * (1 - rho**2) / math.sqrt(N)
    # pairs not named stay independent
    assert abs(_spearman(d["mfu"], d["tokens"])) < K * se1
    # each marginal is unchanged: KS against the prior's scipy distribution
    spec = mcflops.load_spec(SPEC)
    from tests.oracles import scipy_dist

    for n in ("mfu", "goodput", "tokens"):
        p = stats.kstest(np.exp(d[n]), scipy_dist(spec.priors[n]).cdf).pvalue
        assert p > 1e-3, (n, p)


def test_engine_run_uses_the_copula(key):
    """The engine's own draws (its sums): weighted log-correlation of mfu and goodput is positive now."""
    from mcflops.engine.summary import correlation

    res = mcflops.run(SPEC, samples=50_000)
    names = list(res.sums.names)
    c = correlation(res.sums, "prior")[names.index("mfu"), names.index("goodput")]
    assert c > 0.45  # about 0.6 in normal scores; beta marginals bend it a little
    plain = mcflops.run({k: v for k, v in SPEC.items() if k != "correlations"}, samples=50_000)
    assert abs(correlation(plain.sums, "prior")[names.index("mfu"), names.index("goodput")]) < 0.03


def test_sensitivity_with_correlations_reports_ranks_not_sobol():
    res = mcflops.run({**SPEC, "sensitivity": {"sobol_samples": 4096}}, samples=20_000, sensitivity=True)
    s = res.to_dict()["sensitivity"]
    assert s["sobol"] is None
    assert any("independent" in n for n in s["notes"])
    sp = s["correlations"]["prior"]["spearman"]
    assert sp["mfu"] < 0 and sp["goodput"] < 0 and sp["tokens"] > 0


def test_spearman_form_converts():
    assert copula.spearman(2 * math.sin(math.pi * 0.4 / 6)) == pytest.approx(0.4)


BAD = """name: bad
hardware: {accelerator: h100-sxm}
priors:
  params: 70e9
  tokens: {lognormal: [1e12, 2e12]}
  mfu: {beta: [0.3, 0.5]}
  goodput: {beta: [0.8, 0.97]}
correlations:
%s
"""


@pytest.mark.parametrize("entries, field, needle", [
    (["{between: [mfu, goodput], rho: 1.0}"], "correlations[0].rho", "between -1 and 1"),
    (["{between: [mfu, goodput]}"], "correlations[0]", "exactly one of rho"),
    (["{between: [mfu, params], rho: 0.3}"], "correlations[0].between", "point mass"),
    (["{between: [mfu, price], rho: 0.3}"], "correlations[0].between", "not an input"),
    (["{between: [mfu, mfu], rho: 0.3}"], "correlations[0].between", "itself"),
    (["{between: [mfu], rho: 0.3}"], "correlations[0].between", "two input names"),
    (["{between: [mfu, goodput], rho: 0.3, rh: 1}"], "correlations[0].rh", "unknown key"),
    (["{between: [mfu, goodput], rho: 0.3}", "{between: [goodput, mfu], rho: 0.1}"], "correlations[1].between",
     "twice"),
    (["{between: [mfu, goodput], rho: 0.9}", "{between: [goodput, tokens], rho: 0.9}",
      "{between: [mfu, tokens], rho: -0.9}"], "correlations", "positive definite"),
])
def test_bad_correlations_one_clear_line(tmp_path, entries, field, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(BAD % "\n".join(f"  - {e}" for e in entries))
    with pytest.raises(SpecError) as e:
        model_mod.build_model(mcflops.load_spec(p))
    assert e.value.field == field and needle in e.value.message, str(e.value)
    assert e.value.path == str(p) and e.value.line is not None
    assert 8 <= e.value.line <= 8 + len(entries)
    assert "\n" not in str(e.value)


def test_cli_exit_2_on_bad_correlations(tmp_path, capsys):
    from mcflops.cli.main import main

    p = tmp_path / "bad.yaml"
    p.write_text(BAD % "  - {between: [mfu, goodput], rho: 2}")
    assert main(["sample", str(p), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "correlations[0].rho" in err[0]


def test_copula_key_structure_common_random_numbers(key):
    """Uncorrelated inputs keep their draws when correlations are added between others."""
    plain = {k: v for k, v in SPEC.items() if k != "correlations"}
    only = {**plain, "correlations": [{"between": ["mfu", "goodput"], "rho": 0.6}]}
    _, a = _draws(plain, key)
    _, b = _draws(only, key)
    np.testing.assert_array_equal(a["tokens"], b["tokens"])
    np.testing.assert_array_equal(a["mfu"], b["mfu"])  # first in the Cholesky order: z unchanged
    assert not np.array_equal(a["goodput"], b["goodput"])


def test_the_models_z_correlation_is_the_files_matrix_and_the_uncertain_inputs_the_specs():
    """z_correlation reads the file's matrix back from the float32 Cholesky factor: against the matrix the
    spec builds from its pairs (NumPy, float64) to a few float32 roundings (|R| <= 1, 4 inputs: 1e-6), the
    identity for an input outside the copula, in the order asked; the model's uncertain inputs are the spec's."""
    spec = mcflops.load_spec(SPEC)
    m = model_mod.build_model(spec)
    names, R = mcflops.spec.correlation_matrix(spec.priors, spec.correlations)
    assert np.abs(copula.z_correlation(m, names) - R).max() < 1e-6
    assert copula.z_correlation(m, names)[names.index("mfu"), names.index("goodput")] == pytest.approx(0.6, abs=1e-6)
    back = ("price", "goodput", "tokens")  # a subset, in another order: the same entries
    S = copula.z_correlation(m, back)
    assert S[0, 2] == pytest.approx(R[names.index("price"), names.index("tokens")], abs=1e-6) and S[0, 1] == 0.0
    assert m.uncertain == spec.uncertain == ("tokens", "mfu", "goodput", "price")  # params is a point mass
    plain = model_mod.build_model(mcflops.load_spec({k: v for k, v in SPEC.items() if k != "correlations"}))
    assert np.array_equal(copula.z_correlation(plain, names), np.eye(4))
