"""The calibration's validation (mcflops/calibration/splits.py, baselines.py, scores.py): the splits hold out
what they claim, the baselines are the hand computations their docstrings state, and the scores agree with
closed forms and scipy."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from mcflops import calibration as cal
from mcflops.calibration import baselines as base
from mcflops.calibration.scores import Scored, aggregate, score
from mcflops.calibration.validate import hours_predictive
from mcflops.priors import calibrated

TOY = [  # id, org, accelerator, generation, published, implied u
    ("a", "Meta", "a100", None, "2021-06", 0.40), ("b", "Meta", "a100", None, "2022-03", 0.45),
    ("c", "Meta", "h100-sxm", None, "2024-07", 0.38), ("d", "Google", "tpu-v4", None, "2022-04", 0.46),
    ("e", "Google", "tpu-v4", None, "2023-05", 0.30), ("f", "Other", "v100", None, "2020-05", 0.20),
    ("g", "Other", "h800", "hopper-x", "2024-12", 0.25)]


def _toy(published=True, gen=True):
    recs = []
    for rid, org, acc, g, pub, u in TOY:
        n, d = 1e10, 1e12
        hours = 6 * n * d / (calibrated.peak16(acc) * 3600 * u)
        r = {"id": rid, "org": org, "moe": False, "params_active": n, "tokens": d, "accelerator": acc,
             "hours": hours, "hours_kind": "reported"}
        if published:
            r["published"] = pub
        if gen and g:
            r["generation"] = g
        recs.append(r)
    return cal.runs_from_records(recs)


def _split(runs, name):
    return cal.make_splits(runs, (name,))[0]


@pytest.mark.parametrize("name, key", [("org", "orgs"), ("generation", "generations")])
def test_grouped_splits_hold_a_whole_group_out(name, key):
    """Every run of the held-out group has weight 0 in its fold, every other run weight 1; the folds partition
    the runs."""
    runs = _toy()
    s = _split(runs, name)
    groups = getattr(runs, key)
    w = s.weights(runs.n)
    assert sorted(i for f in s.folds for i in f.held_out) == list(range(runs.n))
    for f, fold in enumerate(s.folds):
        for i in range(runs.n):
            assert w[f, i] == (0.0 if groups[i] == fold.label else 1.0)
        assert all(groups[i] == fold.label for i in fold.held_out)
    assert len(s.folds) == len(set(groups))


def test_generation_is_the_field_else_the_accelerator_family():
    runs = _toy()
    assert runs.generations == ("ampere", "ampere", "hopper", "tpu-v4", "tpu-v4", "volta", "hopper-x")
    assert _toy(gen=False).generations[-1] == "hopper"  # h800 and h100 share the hopper family


def test_time_split_predicts_each_year_from_the_years_before_and_is_skipped_without_dates():
    """A rolling origin: one fold per year from 2023, holding out that year's runs and fitting only on the runs
    published before 1 January of it (later runs are neither fitted nor scored in that fold); every run from
    2023 on is held out exactly once."""
    runs = _toy()
    s = _split(runs, "time")
    assert [[runs.ids[i] for i in f.held_out] for f in s.folds] == [["e"], ["c", "g"]]
    w = s.weights(runs.n)
    for fold, row in zip(s.folds, w):
        year = runs.published[fold.held_out[0]][:4]
        assert all(runs.published[i][:4] == year for i in fold.held_out)
        assert all((row[i] == 1.0) == (runs.published[i] < f"{year}-01") for i in range(runs.n))
    assert sorted(i for f in s.folds for i in f.held_out) == [i for i in range(runs.n) if runs.published[i] >= "2023"]
    skipped = _split(_toy(published=False), "time")
    assert skipped.folds == () and "published" in skipped.skipped


def test_date_and_tokens_per_parameter_covariates():
    """years: months since 2023-01 over 12; log10_tokens_per_param: log10(D / (20 N)), Hoffmann et al.'s ratio
    at 0. By hand on the toy rows (N 1e10, D 1e12: 100 tokens per parameter)."""
    runs = _toy()
    x = runs.x(("years", "log10_tokens_per_param"))
    months = [(int(p[:4]) - 2023) * 12 + int(p[5:7]) - 1 for p in runs.published]
    np.testing.assert_allclose(x[:, 0], np.array(months) / 12.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(x[:, 1], math.log10(100 / 20), rtol=1e-12)
    with pytest.raises(ValueError, match="published"):
        _toy(published=False).x(("years",))
    with pytest.raises(ValueError, match="needs tokens"):
        calibrated.covariates(("log10_tokens_per_param",), 1e10, 312e12, 0.0)


def test_published_must_be_a_month():
    recs = [{"id": "x", "org": "o", "params_active": 1e9, "tokens": 1e11, "accelerator": "a100", "hours": 1e4,
             "hours_kind": "reported", "published": "July 2023"}]
    with pytest.raises(ValueError, match="YYYY-MM"):
        cal.runs_from_records(recs)


def test_loo_holds_one_run_out():
    runs = _toy()
    w = _split(runs, "loo").weights(runs.n)
    np.testing.assert_array_equal(w, 1.0 - np.eye(runs.n))


def _hours_quantile(runs, i, pred, p):
    return float(np.exp(hours_predictive(runs.log_hours_u1[i], pred).quantile(p)))


def test_constant_baseline_is_the_classical_prediction_interval():
    """Fitted on the runs other than 'g': logit u ~ m + s sqrt(1 + 1/n) t(n - 1); hours' p-quantile is u's
    (1 - p)-quantile."""
    runs = _toy()
    w = np.ones(runs.n)
    w[6] = 0
    u = np.array([t[5] for t in TOY[:6]])
    z = np.log(u / (1 - u))
    m, s, n = z.mean(), z.std(ddof=1), 6
    pred = base.fit_baselines(runs, w)["constant"](6)
    for p in (0.05, 0.5, 0.95):
        uq = 1 / (1 + math.exp(-(m + s * math.sqrt(1 + 1 / n) * stats.t.ppf(1 - p, n - 1))))
        want = 6e22 / (calibrated.peak16("h800") * 3600 * uq)
        assert _hours_quantile(runs, 6, pred, p) == pytest.approx(want, rel=2e-3)


def test_generation_baseline_pools_the_within_generation_sd():
    """Generation means, the pooled sd over n - G degrees of freedom; an unseen generation gets the constant."""
    runs = _toy()
    w = np.ones(runs.n)
    w[[4, 6]] = 0  # fit on a, b (ampere), c (hopper), d (tpu-v4), f (volta)
    fitted = base.fit_baselines(runs, w)
    u = {k: t[5] for k, t in zip("abcdefg", TOY)}
    z = {k: math.log(v / (1 - v)) for k, v in u.items()}
    amp = (z["a"] + z["b"]) / 2
    ss = (z["a"] - amp) ** 2 + (z["b"] - amp) ** 2  # the other generations have one run: no spread
    sp = math.sqrt(ss / (5 - 4))
    uq = 1 / (1 + math.exp(-(z["d"] + sp * math.sqrt(2) * stats.t.ppf(0.5, 1))))  # tpu-v4: d alone
    assert _hours_quantile(runs, 4, fitted["generation"](4), 0.5) == pytest.approx(
        6e22 / (calibrated.peak16("tpu-v4") * 3600 * uq), rel=2e-3)
    for p in (0.05, 0.95):
        uq = 1 / (1 + math.exp(-(z["d"] + sp * math.sqrt(2) * stats.t.ppf(1 - p, 1))))
        assert _hours_quantile(runs, 4, fitted["generation"](4), p) == pytest.approx(
            6e22 / (calibrated.peak16("tpu-v4") * 3600 * uq), rel=5e-3)
    unseen, const = fitted["generation"](6), fitted["constant"](6)
    assert _hours_quantile(runs, 6, unseen, 0.2) == _hours_quantile(runs, 6, const, 0.2)


def test_rule_is_uniform_mfu_between_30_and_40_percent():
    runs = _toy()
    pred = base.fit_baselines(runs, np.ones(runs.n))["rule"](0)
    c = 6e22 / (calibrated.peak16("a100") * 3600)
    for p in (0.05, 0.5, 0.95):
        assert _hours_quantile(runs, 0, pred, p) == pytest.approx(c / (0.3 + 0.1 * (1 - p)), rel=1e-3)
    ph = hours_predictive(runs.log_hours_u1[0], pred)
    assert ph.log_score(math.log(c / 0.2)) == -math.inf  # u = 0.2 is outside the rule's support


@pytest.mark.parametrize("mu, sd, y", [(0.0, 1.0, 0.3), (2.0, 0.2, 1.5), (-1.0, 0.5, 0.4)])
def test_grid_crps_and_log_score_of_a_normal(mu, sd, y):
    """CRPS on the grid against the closed form (Gneiting & Raftery 2007, eq. 21 ff.) and scipy's quadrature
    of (F - 1{x >= y})^2; the log score against scipy's logpdf."""
    x = np.linspace(mu - 10 * sd, mu + 10 * sd, 4001)
    p = cal.Predictive(x, stats.norm.cdf(x, mu, sd), stats.norm.pdf(x, mu, sd))
    quad = (integrate.quad(lambda t: stats.norm.cdf(t, mu, sd) ** 2, -np.inf, y)[0]
            + integrate.quad(lambda t: stats.norm.sf(t, mu, sd) ** 2, y, np.inf)[0])
    assert p.crps(y) == pytest.approx(cal.crps_normal(mu, sd, y), rel=1e-4)
    assert cal.crps_normal(mu, sd, y) == pytest.approx(quad, rel=1e-6)
    assert p.log_score(y) == pytest.approx(stats.norm.logpdf(y, mu, sd), abs=1e-5)
    assert p.pit(y) == pytest.approx(stats.norm.cdf(y, mu, sd), abs=1e-6)
    assert p.crps(mu + 20 * sd) == pytest.approx(cal.crps_normal(mu, sd, mu + 20 * sd), rel=1e-4)  # off the grid


@pytest.mark.parametrize("df, y", [(4.0, 0.3), (4.0, 2.5), (7.0, -1.0)])
def test_grid_crps_of_a_student_t_is_its_expectation_form(df, y):
    """The model's run effects are Student-t: the grid CRPS of a scaled t against the kernel form CRPS = E|X - y|
    - E|X - X'| / 2 (Gneiting & Raftery 2007, eq. 21), both expectations by scipy's quadrature of scipy.stats.t
    (E|X - X'| as the integral of 2 F (1 - F): a closed form neither shares with the grid code)."""
    loc, scale = 0.4, 0.6
    d = stats.t(df, loc, scale)
    x = np.linspace(loc - 400 * scale, loc + 400 * scale, 400_001)
    p = cal.Predictive(x, d.cdf(x), d.pdf(x))
    e_abs = (integrate.quad(lambda t: (y - t) * d.pdf(t), -np.inf, y, limit=200)[0]
             + integrate.quad(lambda t: (t - y) * d.pdf(t), y, np.inf, limit=200)[0])
    e_pair = integrate.quad(lambda t: 2 * d.cdf(t) * d.sf(t), -np.inf, np.inf, limit=200)[0]
    # deterministic, no sampling: what separates the two is the grid's step (0.002 scales) and its cut tails
    # (past 400 scales a t with 4 degrees of freedom holds ~1e-10 of its mass), far inside 2e-4
    assert p.crps(y) == pytest.approx(e_abs - 0.5 * e_pair, rel=2e-4)


def test_log_u_cdf_and_density_against_scipy():
    """sigma = 0: P(log sigmoid(L) <= t) = F_T((logit(e^t) - m) / s), density by the change of variables; and
    the density is the CDF's derivative also with the reporting noise on."""
    t = np.linspace(-2.5, -0.3, 50)
    m, s = np.array([-0.4]), np.array([0.5])
    zero = np.zeros(1)
    for df in (None, 4.0):
        cdf, pdf = calibrated.log_u_cdf_pdf(m, s, zero, zero, t, df=df)
        z = (t - np.log(-np.expm1(t)) - m[0]) / s[0]
        dist = stats.norm if df is None else stats.t(df)
        np.testing.assert_allclose(cdf, dist.cdf(z), atol=1e-10)
        np.testing.assert_allclose(pdf, dist.pdf(z) / (s[0] * -np.expm1(t)), rtol=1e-8)
    tt = np.linspace(-3, -0.05, 3001)
    cdf, pdf = calibrated.log_u_cdf_pdf(np.array([-0.4, 0.2]), np.array([0.3, 0.2]), zero.repeat(2),
                                     np.array([0.2, 0.1]), tt)
    np.testing.assert_allclose(np.gradient(cdf, tt)[5:-5], pdf[5:-5], atol=2e-3)


def test_aggregate_counts_coverage_and_medians():
    rows = [Scored("r", "f", "reported", 100.0, 50, 80, 100 * math.exp(0.1), 120, 200, 0.5, -1.0, 0.1),
            Scored("s", "f", "reported", 100.0, 101, 110, 100 * math.exp(0.3), 150, 300, 0.01, -3.0, 0.3),
            Scored("t", "f", "reported", 100.0, 20, 30, 100 * math.exp(-0.2), 90, 99, 0.99, -math.inf, 0.2)]
    a = aggregate(rows)
    assert a["coverage_90"] == pytest.approx(1 / 3) and a["coverage_50"] == pytest.approx(1 / 3)
    assert a["median_abs_log_error"] == pytest.approx(0.2)
    assert a["median_p95_over_p5"] == pytest.approx(4.0)
    assert a["crps"] == pytest.approx(0.2) and a["log_score"] is None and a["outside_support"] == 1
    x = np.linspace(-5, 5, 2001)
    sc = score("r", "f", "reported", 0.0, cal.Predictive(x, stats.norm.cdf(x), stats.norm.pdf(x)))
    assert sc.p5 == pytest.approx(math.exp(-1.6448536), rel=1e-4) and sc.covered_90 and sc.covered_50


def test_a_skipped_split_fits_nothing():
    import jax

    runs = _toy(published=False)
    said, ticks = [], []
    v = cal.validate(jax.random.key(0), runs, cal.Config(chains=1, warmup=10, draws=10), ("time",),
                     phase=said.append, tick=lambda done, total: ticks.append((done, total)))
    assert v.splits[0].split.skipped and v.table() == []
    assert said == [] and ticks == []  # a skipped split has no phase line and nothing to count
    assert "skipped" in v.to_dict()["splits"][0]


@pytest.mark.parametrize("ratio", [0.25, 0.95, 1.9, 4.0])
def test_the_validations_quadrature_matches_48_nodes(ratio):
    """The scores with validate.quadrature_nodes' count against 48 Gauss-Hermite nodes (the shipped prior's
    count for a wide noise): within 1e-3 where the noise is up to the run spread's size."""
    from mcflops.calibration.validate import quadrature_nodes

    rng = np.random.default_rng(3)
    m = rng.normal(-0.8, 0.2, 40)
    s = rng.uniform(0.2, 0.35, 40)
    g = ratio * s
    a = np.zeros(40)
    n = quadrature_nodes(s, g)
    assert set(n) == {{0.25: 8, 0.95: 16, 1.9: 16, 4.0: 48}[ratio]}
    n = int(n[0])
    for y in (15.7, 16.2, 16.8):  # log hours around the predictive's median, 15 - log sigmoid(-0.8)
        ref = score("x", "f", "derived", y, hours_predictive(15.0, lambda t: calibrated.log_u_cdf_pdf(
            m, s, a, g, t, df=4.0, nodes=48)))
        got = score("x", "f", "derived", y, hours_predictive(15.0, lambda t: calibrated.log_u_cdf_pdf(
            m, s, a, g, t, df=4.0, nodes=n)))
        assert abs(got.crps - ref.crps) < 1e-3 and abs(got.pit - ref.pit) < 1e-3
        assert abs(math.log(got.p95 / ref.p95)) < 1e-3 and abs(math.log(got.p5 / ref.p5)) < 1e-3


def test_the_validations_log_score_is_the_full_computations():
    """model_log_u with the published log u: the same log score as the full 48-node computation (the density
    is computed only where the log score reads it), and a CRPS within 1e-3."""
    from mcflops.calibration.model import Fit
    from mcflops.calibration.validate import model_log_u, quadrature_nodes

    runs = _toy()
    rng = np.random.default_rng(5)
    s_ = 30
    draws = {"alpha": rng.normal(-0.6, 0.1, s_), "beta": rng.normal(0, 0.1, (s_, 1)), "tau": rng.uniform(0.25, 0.3, s_),
             "a_org": rng.normal(0, 0.1, (s_, 3)), "a_acc": rng.normal(0, 0.1, (s_, 4)),
             "sigma": np.tile([0.2, 0.25, 0.3, 0.15, 0.15, 0.1, 0.1], (s_, 1)), "throughput_offset": np.zeros(s_)}
    # a structure with the MoE covariate, an organisation effect and a noise per kind (the draws above)
    cfg = cal.Config(chains=1, warmup=1, draws=s_, run_df=4.0, covariates=("moe",), org_effect=True, kind_noise=True)
    fit = Fit(cfg, runs, np.ones(runs.n), draws, {}, 0, 0.0)
    assert set(quadrature_nodes(draws["tau"], draws["sigma"][:, 0])) == {16}  # toy runs are "reported": sigma 0.2
    for i in (0, 3, 6):
        for y in runs.log_hours[i] + np.array([-0.3, 0.4]):
            c = runs.log_hours_u1[i]
            full = score("x", "f", "derived", y, hours_predictive(c, model_log_u(fit, i)))
            fast = score("x", "f", "derived", y, hours_predictive(c, model_log_u(fit, i, at=c - y)))
            assert fast.log_score == pytest.approx(full.log_score, rel=1e-12, abs=1e-12)
            assert abs(fast.crps - full.crps) < 1e-3 and abs(fast.pit - full.pit) < 1e-3


def test_each_split_has_a_phase_line_and_counts_its_scored_runs():
    import jax

    runs = _toy()
    said, ticks = [], []
    cal.validate(jax.random.key(0), runs, cal.Config(chains=1, warmup=20, draws=20), ("org", "time"),
                 phase=said.append, tick=lambda done, total: ticks.append((done, total)))
    assert said[0].startswith("validation: 5 folds of 2 splits")  # Meta, Google, Other; 2023 and 2024
    assert said[1:] == ["validation, organisation out: scoring 7 held-out runs",
                        "validation, time split: scoring 3 held-out runs"]
    assert ticks == [(i, 7) for i in range(1, 8)] + [(i, 3) for i in range(1, 4)]


def test_grouped_targets_count_the_splits_where_the_crps_beats_both_baselines():
    """By hand: org beats both, generation beats the constant only, time beats both: two wins of three; the
    coverage target fails on the one split below 0.85."""
    from mcflops.calibration.results import grouped_targets

    def rows(split, cov, m, c, g):
        base = {"split": split, "coverage_90": cov}
        return [{**base, "model": "model", "crps": m}, {**base, "model": "constant", "crps": c},
                {**base, "model": "rule", "crps": 0.1}, {**base, "model": "generation", "crps": g}]

    table = rows("org", 0.9, 0.20, 0.23, 0.21) + rows("generation", 0.80, 0.28, 0.33, 0.27) + \
        rows("time", 0.86, 0.23, 0.25, 0.24)
    g = grouped_targets(table)
    assert [g["splits"][k]["beats_both"] for k in ("org", "generation", "time")] == [True, False, True]
    assert g["crps_wins"] == 2 and g["crps_met"] and not g["coverage_met"]
    assert grouped_targets(rows("org", 0.9, 0.30, 0.23, 0.21))["crps_wins"] == 0
