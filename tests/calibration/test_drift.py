"""The drift over publication years (calibration.model, Config.drift): the random walk's prior is the
one its docstring states, a held-out year is predicted from the last fitted one with tau_drift^2 per year
added, and the shipped predictive widens for a year past the data as the closed form says."""

import math

import numpy as np
import pytest
from scipy import stats

from mcflops import calibration as cal
from mcflops.calibration.model import _model_fn
from mcflops.priors import calibrated


def _toy_fit(years=(2022, 2024), a_year=(0.0, 0.3), tau=0.4, tau_acc=0.2, tau_drift=0.25):
    return {"draws": {"alpha": [-0.8], "beta": [[]], "tau": [tau], "tau_acc": [tau_acc], "a_acc": [[0.1]],
                      "tau_drift": [tau_drift], "a_year": [list(a_year)], "sigma": [[0.0] * len(cal.KINDS)]},
            "covariates": [], "orgs": [], "families": ["hopper"], "kinds": list(cal.KINDS), "years": list(years),
            "peak_range": [989.4e12, 989.4e12], "n_runs": 2, "fit_id": "toy", "config": {"run_df": None}}


@pytest.mark.parametrize("year, level, gap", [(None, 0.3, 0), (2024, 0.3, 0), (2023, 0.0, 1), (2027, 0.3, 3)])
def test_the_predictive_takes_the_last_fitted_level_and_adds_the_drift_per_year(year, level, gap):
    """logit u ~ N(alpha + a_acc + a_year[level], tau^2 + tau_drift^2 x years past it): the quantiles of u are
    sigmoid of scipy's normal quantiles (one draw, no reporting noise, a normal run effect)."""
    fit = _toy_fit()
    probs = np.array([0.05, 0.5, 0.95])
    u, text = calibrated.calibrated_prior(fit, 70e9, "h100-sxm", False, None, probs, year=year)
    sd = math.sqrt(0.4 ** 2 + 0.25 ** 2 * gap)
    want = 1 / (1 + np.exp(-stats.norm.ppf(probs, -0.8 + 0.1 + level, sd)))
    # the prior's quantiles invert a CDF tabulated on 300 points of log u (priors.calibrated.log_u_quantiles):
    # linear interpolation there is off by ~1e-3 in log u, so 3e-3 in u leaves room and still sees a wrong sd
    # (the drift's 0.25^2 per year moves the 5% and 95% quantiles by 8% or more a year)
    np.testing.assert_allclose(u, want, rtol=3e-3)
    assert ("past the last year with published runs" in text) == (gap > 0)


def test_a_later_year_widens_the_prior():
    fit = _toy_fit()
    w = [np.subtract(*np.log(calibrated.calibrated_prior(fit, 70e9, "h100-sxm", False, None, [0.95, 0.05],
                                                          year=y)[0])) for y in (2024, 2026, 2030)]
    assert w[0] < w[1] < w[2]


def test_the_random_walk_prior_is_normal_increments_scaled_by_the_gaps():
    """With every run's weight 0 the model's density is its prior alone: the z_year terms are standard normal
    and the half-normal tau_drift; a_year is tau_drift sqrt(gap) z accumulated from 0 (scipy's logpdf)."""
    import jax.numpy as jnp
    from numpyro.infer.util import log_density

    runs = cal.load_runs()
    cfg = cal.Config(covariates=(), run_df=4.0, org_effect=False, kind_noise=False, drift=True)
    years = runs.year_names
    gaps = tuple(float(b - a) for a, b in zip(years, years[1:]))
    model = _model_fn(cfg, len(runs.org_names), len(runs.family_names), 1, tuple(sorted(set(runs.kinds))), gaps)
    ix = runs.index()
    z = np.linspace(-1.2, 0.9, len(gaps))
    params = {"alpha": jnp.array([-0.7]), "beta": jnp.zeros((1, 0)), "tau": jnp.array([0.4]),
              "tau_acc": jnp.array([0.3]), "z_acc": jnp.zeros((1, len(runs.family_names))),
              "tau_drift": jnp.array([0.2]), "z_year": jnp.asarray(z[None, :])}
    args = (np.zeros((runs.n, 0)), ix["org"], ix["fam"], ix["kind"], runs.log_hours_u1, runs.log_hours)
    args = tuple(jnp.asarray(a, jnp.int32 if a.dtype.kind == "i" else jnp.float32) for a in args)
    yr = jnp.asarray(runs.year_index(), jnp.int32)
    lp, trace = log_density(model, args + (jnp.zeros((1, runs.n), jnp.float32), yr), {}, params)
    base = params | {"z_year": jnp.zeros((1, len(gaps)))}
    lp0, _ = log_density(model, args + (jnp.zeros((1, runs.n), jnp.float32), yr), {}, base)
    assert float(lp - lp0) == pytest.approx(float(stats.norm.logpdf(z).sum() - stats.norm.logpdf(0 * z).sum()), rel=1e-5)
    np.testing.assert_allclose(np.asarray(trace["a_year"]["value"])[0],
                               np.concatenate([[0.0], np.cumsum(0.2 * np.sqrt(gaps) * z)]), rtol=1e-5, atol=1e-6)


def test_a_year_given_to_a_fit_without_drift_is_said_not_to_move_it():
    fit = _toy_fit()
    fit["draws"] = {k: v for k, v in fit["draws"].items() if k not in ("a_year", "tau_drift")}
    u0, _ = calibrated.calibrated_prior(fit, 70e9, "h100-sxm", False, None, [0.05, 0.5, 0.95])
    u1, text = calibrated.calibrated_prior(fit, 70e9, "h100-sxm", False, None, [0.05, 0.5, 0.95], year=2027)
    np.testing.assert_array_equal(u0, u1)
    assert "no drift over publication years" in text and "2027 does not move the prior" in text


@pytest.mark.parametrize("year, ok", [("2027", True), ("soon", False), ("1999", False), ("true", False)])
def test_calibrated_year_is_a_calendar_year_or_one_clear_error(tmp_path, year, ok):
    from pathlib import Path

    from mcflops.errors import SpecError
    from mcflops.spec import load_spec

    src = (Path(__file__).resolve().parents[2] / "priors/examples/dense70b-h100.yaml").read_text()
    assert "    calibrated: true\n" in src
    f = tmp_path / "p.yaml"
    f.write_text(src.replace("    calibrated: true\n", f"    calibrated: {{year: {year}}}\n"))
    if ok:
        # the shipped fit has the drift: a run dated past the newest year with published runs is wider than an
        # undated one (which starts from that year's level with none added), and its source says by how many years
        from mcflops.priors.quantiles import ppf

        dated = load_spec(f).priors["mfu"]
        undated = load_spec((Path(__file__).resolve().parents[2] / "priors/examples/dense70b-h100.yaml")).priors["mfu"]
        last = max(calibrated.load_fit()["years"])
        assert f"dated 2027, {2027 - last} year" in dated.source and "the drift's spread" in dated.source
        width = [float(np.log(ppf(d, 0.95) / ppf(d, 0.05))) for d in (dated, undated)]
        assert width[0] > width[1]
    else:
        with pytest.raises(SpecError, match="year: the calendar year"):
            load_spec(f)
