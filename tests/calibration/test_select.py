"""The candidates the selection compares, the shipped structure being one of them (the one the committed
selection chose), the "one noise" likelihood against a hand computation, and the closed-form Student-t."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from mcflops import calibration as cal
from mcflops.calibration import select
from mcflops.calibration.model import _model_fn
from mcflops.calibration.runs import KINDS
from mcflops.calibration.validate import quadrature_nodes
from mcflops.priors import calibrated

PAGE = Path(__file__).resolve().parents[2] / "reports" / "calibration" / "calibration.json"


def test_generations_and_families_are_one_partition_of_the_runs():
    # the "generation" candidates pool over the families (the level names the shipped prior looks up); that
    # is honest only while the rows' generations split the runs exactly as the families do
    runs = cal.load_runs()
    np.testing.assert_array_equal(runs.acc_index("family"), runs.acc_index("generation"))
    assert len(runs.acc_names("family")) == len(runs.acc_names("generation"))


def test_the_shipped_structure_is_the_candidate_the_committed_selection_chose():
    cfg = cal.Config()
    name = select.shipped(cfg)
    assert name is not None, "Config()'s structure is none of the candidates"
    chosen = [r["candidate"] for r in json.loads(PAGE.read_text())["selection"] if r["chosen"]]
    assert chosen == [name]
    assert calibrated.load_fit()["config"]["kind_noise"] == cfg.kind_noise


def test_every_candidate_is_a_distinct_structure():
    structures = {select.candidate(cal.Config(), n) for n in select.CANDIDATES}
    assert len(structures) == len(select.CANDIDATES)
    assert all(select.shipped(select.candidate(cal.Config(), n)) == n for n in select.CANDIDATES)


@pytest.mark.parametrize("df", [None, 4.0])
def test_one_noise_likelihood_is_logit_of_implied_u_around_its_location(df):
    # weights 1 against 0: the difference of the two log densities is the likelihood alone, which must be
    # sum_i log f(logit u_i; location_i, tau) with u_i = 6 N D / (P 3600 H_i), and, for the upper bound,
    # log P(logit u >= logit u_i) under a normal (the bound's censored term)
    import jax.numpy as jnp
    from numpyro.infer.util import log_density

    runs = cal.load_runs()
    cfg = cal.Config(covariates=(), run_df=df, org_effect=False, kind_noise=False)
    n_fam = len(runs.family_names)
    model = _model_fn(cfg, len(runs.org_names), n_fam, 1, tuple(sorted(set(runs.kinds))))
    ix = runs.index()
    alpha, tau, tau_acc = -0.7, 0.4, 0.3
    z_acc = np.linspace(-1.0, 1.0, n_fam)
    params = {"alpha": jnp.array([alpha]), "beta": jnp.zeros((1, 0)), "tau": jnp.array([tau]),
              "tau_acc": jnp.array([tau_acc]), "z_acc": jnp.asarray(z_acc[None, :])}
    args = (np.zeros((runs.n, 0)), ix["org"], ix["fam"], ix["kind"], runs.log_hours_u1, runs.log_hours)
    args = tuple(jnp.asarray(a, jnp.int32 if a.dtype.kind == "i" else jnp.float32) for a in args)
    lp1, _ = log_density(model, args + (jnp.ones((1, runs.n), jnp.float32),), {}, params)
    lp0, _ = log_density(model, args + (jnp.zeros((1, runs.n), jnp.float32),), {}, params)
    u = runs.implied_u
    z = np.log(u / (1 - u))
    loc = alpha + tau_acc * z_acc[ix["fam"]]
    bound = ix["kind"] == KINDS.index("upper_bound")
    dens = stats.norm.logpdf(z, loc, tau) if df is None else stats.t.logpdf(z, df, loc, tau)
    want = np.where(bound, stats.norm.logcdf((loc - z) / tau), dens).sum()
    assert float(lp1 - lp0) == pytest.approx(want, rel=2e-5)


def test_student_t_4_closed_form_matches_scipy():
    z = np.concatenate([np.linspace(-60, 60, 4001), [-1e4, 1e4, 0.0]])
    cdf, pdf = calibrated._std_cdf_pdf(z, 4.0)
    np.testing.assert_allclose(cdf, stats.t.cdf(z, 4), rtol=0, atol=1e-14)
    np.testing.assert_allclose(pdf, stats.t.pdf(z, 4), rtol=1e-12, atol=1e-300)
    other, _ = calibrated._std_cdf_pdf(z, 5.0)  # any other nu: scipy's incomplete beta
    np.testing.assert_allclose(other, stats.t.cdf(z, 5), rtol=0, atol=1e-14)


@pytest.mark.parametrize("df", [None, 4.0])
def test_predictive_without_noise_is_exact_in_one_node(df):
    # sigma 0: log U = log sigmoid(mean + sd T) exactly, so F(t) = F_T((logit(e^t) - mean) / sd), a mixture
    # over the draws; one quadrature node (the default and quadrature_nodes' choice) is exact
    rng = np.random.default_rng(0)
    mean, sd = rng.normal(-0.8, 0.2, 40), rng.uniform(0.3, 0.5, 40)
    zero = np.zeros(40)
    t = np.linspace(-4.0, -0.05, 200)
    cdf, pdf = calibrated.log_u_cdf_pdf(mean, sd, zero, zero, t, df=df)
    x = (t[None, :] - np.log(-np.expm1(t))[None, :] - mean[:, None]) / sd[:, None]
    dist = stats.norm if df is None else stats.t(df)
    np.testing.assert_allclose(cdf, dist.cdf(x).mean(axis=0), atol=1e-12)
    jac = 1.0 / (sd[:, None] * -np.expm1(t)[None, :])  # d logit(e^t) / dt = 1 / (1 - e^t)
    np.testing.assert_allclose(pdf, (dist.pdf(x) * jac).mean(axis=0), rtol=1e-10)
    assert set(quadrature_nodes(sd, zero).tolist()) == {1}


def test_the_page_describes_the_structure_it_fitted():
    terms, unseen = cal.describe_structure(cal.Config(org_effect=False, kind_noise=False).__dict__)
    assert "organisation" not in terms.split("no organisation effect")[0]
    assert "no noise per kind" in terms and "does not move the prior" in unseen
    terms, unseen = cal.describe_structure(cal.Config(org_effect=True).__dict__)
    assert "organisation and accelerator-family effects" in terms and "noise per kind" in terms
    assert math.isfinite(len(unseen)) and "population spread of organisations" in unseen


def test_error_floor_by_hand():
    from mcflops.calibration.baselines import error_floor

    peak = {"a100": calibrated.peak16("a100"), "h100-sxm": calibrated.peak16("h100-sxm")}
    # (org, accelerator, u): the hours are 6 N D / (P u 3600) with N = 1e9, D = 1e11
    rows = [("A", "a100", 0.2), ("A", "a100", 0.4), ("B", "a100", 0.3), ("B", "h100-sxm", 0.1),
            ("B", "h100-sxm", 0.3), ("C", "h100-sxm", 0.2)]
    recs = [{"id": f"r{i}", "org": o, "params_active": 1e9, "tokens": 1e11, "accelerator": a,
             "hours": 6e20 / (peak[a] * u * 3600.0), "hours_kind": "reported"} for i, (o, a, u) in enumerate(rows)]
    recs.append({**recs[0], "id": "bound", "hours": 1.0, "hours_kind": "upper_bound"})  # not scored
    got = error_floor(cal.runs_from_records(recs))
    ln = math.log
    # pooled: the median of log(0.1, 0.2, 0.2, 0.3, 0.3, 0.4) is log sqrt(0.06); per generation: a100's is
    # log 0.3 (deviations ln 1.5, ln 4/3, 0), h100's log 0.2 (ln 2, ln 1.5, 0); per org and generation: A|a100
    # log sqrt(0.08) (ln sqrt 2 twice), B|h100 log sqrt(0.03) (ln sqrt 3 twice), the rest alone (0, 0)
    pooled = sorted(abs(ln(u) - 0.5 * ln(0.06)) for _, _, u in rows)
    assert got["pooled"] == pytest.approx(0.5 * (pooled[2] + pooled[3]))
    assert got["per_generation"] == pytest.approx(0.5 * (ln(4 / 3) + ln(1.5)))
    assert got["per_org_generation"] == pytest.approx(0.5 * ln(2))


def test_a_given_org_or_moe_that_the_fit_cannot_use_is_said_not_to_move_the_prior():
    fit = calibrated.load_fit()
    u, text = calibrated.calibrated_prior(fit, 37e9, "h800", True, "DeepSeek", [0.05, 0.5, 0.95])
    u0, _ = calibrated.calibrated_prior(fit, 37e9, "h800", False, None, [0.05, 0.5, 0.95])
    if "a_org" not in fit["draws"] and "moe" not in fit["covariates"]:
        np.testing.assert_array_equal(u, u0)
        assert "DeepSeek does not move the prior" in text and "MoE does not move the prior" in text


def test_a_tie_on_the_crps_goes_to_calibration_then_to_the_simpler():
    """The rule by hand (calibration.select): the lowest CRPS wins outright beyond the tie margin; within it, the
    candidate whose worst grouped split falls least short of 0.85 coverage; equal shortfalls, the first listed."""
    def row(name, crps, *cov):
        return {"candidate": name, "crps": crps,
                "splits": {k: {"coverage_90": c, "crps": crps} for k, c in zip(select.GROUPED, cov)}}

    tied = [row("simple", 0.2496, 0.88, 0.86, 0.71), row("drift", 0.2492, 0.88, 0.90, 0.83),
            row("moe", 0.2499, 0.88, 0.86, 0.70)]
    assert select.choose(tied)["candidate"] == "drift"
    assert [r["chosen"] for r in tied] == [False, True, False]
    # beyond the margin the CRPS decides, however calibrated the other is
    apart = [row("simple", 0.2430, 0.88, 0.86, 0.71), row("drift", 0.2492, 0.90, 0.90, 0.90)]
    assert select.choose(apart)["candidate"] == "simple"
    # both calibrated (no shortfall): the simpler, listed first
    both = [row("simple", 0.2496, 0.88, 0.86, 0.86), row("drift", 0.2492, 0.90, 0.90, 0.90)]
    assert select.choose(both)["candidate"] == "simple"
    assert select.shortfall(tied[0]) == pytest.approx(0.85 - 0.71)
