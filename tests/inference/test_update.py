"""The Bayesian update against oracles we did not write: a 2-D quadrature (scipy) of the MFU-goodput
posterior, a conjugate all-lognormal case in closed form, numpyro's ESS for NUTS error bars; the
auto fallback, conflicts, the CLI's summary.json and posterior.nc (read back with arviz).

Every statistical check allows 4 Monte Carlo standard errors (a 6e-5 two-sided false-failure rate
per check for a normal error), with fixed seeds. MCSEs come from the exact posterior and the run's
effective sample size: sd / sqrt(ESS) for the mean, sqrt(mu4 - sd^4) / (2 sd sqrt(ESS)) for the sd,
sqrt(p (1 - p) / ESS) / f(q_p) for a quantile (Serfling 1980, Sec. 2.3.3).
"""

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

import mcflops
from mcflops import cli
from mcflops import inference
from mcflops.errors import SpecError

N_PARAMS, TOKENS, PEAK = 405.9e9, 15.6e12, 989.4e12
NUTS = {"chains": 4, "warmup": 300, "draws": 300}  # small: the file runs in well under a minute
N_DRAWS = 1 << 13  # one engine compile serves every run of the MFU-goodput model (the sharp case needs few draws)
PROBS = {"p5": 0.05, "p50": 0.5, "p95": 0.95}


def beta_from_moments(mean, sd):
    k = mean * (1 - mean) / sd**2 - 1  # method of moments: a = mean k, b = (1 - mean) k
    return stats.beta(mean * k, (1 - mean) * k)


MFU_PRIOR, GOODPUT_PRIOR = (0.40, 0.05), (0.90, 0.04)


def beta2_spec(sigma, samples, seed=11):
    return {"name": "beta2", "seed": seed, "samples": samples,
            "priors": {"params": N_PARAMS, "tokens": TOKENS, "peak_flops": PEAK,
                       "mfu": {"beta": dict(zip(("mean", "sd"), MFU_PRIOR))},
                       "goodput": {"beta": dict(zip(("mean", "sd"), GOODPUT_PRIOR))}},
            "observe": {"gpu_hours": {"value": 30.84e6, "sigma": sigma}},
            "reported": {"mfu": {"between": [0.38, 0.43], "source": "Llama 3 paper Table 4"}}}


def exact_mfu(sigma, value=30.84e6, n=2401):
    """The MFU marginal posterior by quadrature: p(m, g | y) ~ Beta(m) Beta(g) N(log y; log h(m, g), sigma)."""
    A, G = beta_from_moments(*MFU_PRIOR), beta_from_moments(*GOODPUT_PRIOR)
    m = np.linspace(A.ppf(1e-9), A.ppf(1 - 1e-9), n)
    g = np.linspace(G.ppf(1e-9), G.ppf(1 - 1e-9), n)
    log_h = math.log(6 * N_PARAMS * TOKENS / (PEAK * 3600)) - np.log(m)[:, None] - np.log(g)[None, :]
    joint = A.pdf(m)[:, None] * G.pdf(g)[None, :] * np.exp(-0.5 * ((math.log(value) - log_h) / sigma) ** 2)
    dens = integrate.simpson(joint, x=g, axis=1)
    dens /= integrate.simpson(dens, x=m)
    mean = integrate.simpson(m * dens, x=m)
    var = integrate.simpson((m - mean) ** 2 * dens, x=m)
    mu4 = integrate.simpson((m - mean) ** 4 * dens, x=m)
    cdf = integrate.cumulative_simpson(dens, x=m, initial=0.0)
    cdf /= cdf[-1]

    def q(p):
        return np.interp(p, cdf, m)

    lo = np.linspace(0, 0.1, 4001)[1:-1]
    i = int(np.argmin(q(lo + 0.9) - q(lo)))
    return {"mean": mean, "sd": math.sqrt(var), "mu4": mu4, "q": q, "pdf": lambda x: np.interp(x, m, dens),
            "hdi90": (float(q(lo[i])), float(q(lo[i] + 0.9))),
            "p_paper": float(np.interp(0.43, m, cdf) - np.interp(0.38, m, cdf))}


def assert_matches(est, ex, ess, what, ess_q=None):
    """est (a posterior summary) against the exact posterior within 4 MCSE."""
    sd = ex["sd"]
    assert abs(est["mean"] - ex["mean"]) < 4 * sd / math.sqrt(ess["mean"]), (what, "mean", est["mean"], ex["mean"])
    mcse_sd = math.sqrt(ex["mu4"] - sd**4) / (2 * sd * math.sqrt(ess["sd"]))
    assert abs(est["sd"] - sd) < 4 * mcse_sd, (what, "sd", est["sd"], sd)
    for k, p in PROBS.items():
        qp = float(ex["q"](p))
        mcse = math.sqrt(p * (1 - p) / ess[k]) / float(ex["pdf"](qp))
        assert abs(est[k] - qp) < 4 * mcse, (what, k, est[k], qp, mcse)
    for end, p in zip(est["hdi90"], (0.05, 0.95)):  # HDI ends: error bar of the quantile near them
        e = ex["hdi90"][p > 0.5]
        mcse = math.sqrt(p * (1 - p) / ess["p50"]) / float(ex["pdf"](e))
        assert abs(end - e) < 4 * mcse, (what, "hdi", end, e)


def nuts_ess(x, chains):
    """numpyro's ESS of each statistic's influence: x for the mean, (x - mean)^2 for the sd, and the
    indicator 1{x <= q_p} for a quantile (Vehtari et al. 2021, Sec. 4.3)."""
    from numpyro.diagnostics import effective_sample_size

    x = np.asarray(x).reshape(chains, -1)
    out = {"mean": effective_sample_size(x), "sd": effective_sample_size((x - x.mean()) ** 2)}
    for k, p in PROBS.items():
        out[k] = effective_sample_size((x <= np.quantile(x, p)).astype(float))
    return {k: float(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def exact05():
    return exact_mfu(0.05)


def test_importance_sampling_matches_quadrature(exact05):
    res = mcflops.run(beta2_spec(0.05, N_DRAWS), method="is")
    post = res.posterior
    assert post["method"] == "importance"
    assert post["pareto_k"] < 0.7 and post["ess"] > 0.2 * res.samples
    ess = dict.fromkeys(("mean", "sd", *PROBS), post["ess"])  # Kish's ESS for every statistic
    assert_matches(post["mfu"], exact05, ess, "IS")
    p = post["reported"]["mfu"]["posterior_probability"]
    assert abs(p - exact05["p_paper"]) < 4 * math.sqrt(exact05["p_paper"] * (1 - exact05["p_paper"]) / post["ess"])
    # the equally weighted resample of the reservoir (posterior.nc, plots) has the posterior mean
    draws = res.posterior_draws["mfu"]
    assert abs(draws.mean() - exact05["mean"]) < 4 * exact05["sd"] / math.sqrt(draws.size)
    # the data constrain the product: the logs of MFU and goodput are negatively correlated
    assert post["corr_mfu_goodput_log"] < -0.2
    assert any("MFU x goodput" in n for n in res.notes)


def test_nuts_matches_quadrature(exact05):
    res = mcflops.run(beta2_spec(0.05, N_DRAWS), method="nuts", nuts=NUTS)
    post = res.posterior
    assert post["method"] == "nuts" and post["chains"] == 4 and post["rhat"] < 1.05
    assert_matches(post["mfu"], exact05, nuts_ess(res.posterior_draws["mfu"], 4), "NUTS")
    # importance sampling is adequate here, so NUTS is checked against it: within 4 joint MCSEs
    assert post["nuts_vs_importance"]["agree"] and post["nuts_vs_importance"]["compared"] >= 8
    # the file's reported range under NUTS: the share of its draws inside, with the ESS of that indicator
    from numpyro.diagnostics import effective_sample_size

    x = res.posterior_draws["mfu"]
    inside = ((x >= 0.38) & (x <= 0.43)).astype(float)
    p, q = post["reported"]["mfu"]["posterior_probability"], exact05["p_paper"]
    assert p == float(np.mean(inside))
    assert abs(p - q) < 4 * math.sqrt(q * (1 - q) / float(effective_sample_size(inside.reshape(4, -1))))


def test_sharp_observation_falls_back_to_nuts():
    # sigma 0.005: the likelihood keeps ~4% of 8192 prior draws, an ESS of a few hundred
    spec = beta2_spec(0.005, N_DRAWS)
    res = mcflops.run(spec, nuts=NUTS)
    post = res.posterior
    assert post["method"] == "nuts"
    assert post["importance"]["ess"] < inference.ESS_MIN
    assert any("importance sampling was poor" in n and "effective sample size" in n for n in res.notes)
    assert post["nuts_vs_importance"]["agree"]  # a few hundred effective IS draws: enough to check NUTS by
    ex = exact_mfu(0.005, n=3001)
    assert_matches(post["mfu"], ex, nuts_ess(res.posterior_draws["mfu"], 4), "NUTS sharp")
    forced = mcflops.run(spec, method="is")
    assert forced.posterior["method"] == "importance"
    assert any(n.startswith("WARNING: importance sampling is poor") for n in forced.notes)


def test_conjugate_lognormal_closed_form():
    # log GPU-hours = log N + log D - log peak + c: linear in Gaussian logs, so the posterior of the
    # logs is Gaussian: mean mu + S a r / (a'S a + s^2), covariance S - S a a' S / (a'S a + s^2).
    s = np.array([0.05, 0.08, 0.03])
    mu = np.log([400e9, 15e12, 989.4e12])
    a = np.array([1.0, 1.0, -1.0])
    c = math.log(6 / (0.4 * 3600))
    y, sig = math.log(30e6), 0.04
    S = np.diag(s**2)
    denom = a @ S @ a + sig**2
    mean = mu + S @ a * (y - a @ mu - c) / denom
    cov = S - np.outer(S @ a, S @ a) / denom
    spec = {"name": "conj", "seed": 3, "samples": 1 << 16,
            "priors": {"params": {"lognormal": {"median": 400e9, "sigma": 0.05}},
                       "tokens": {"lognormal": {"median": 15e12, "sigma": 0.08}},
                       "peak_flops": {"lognormal": {"median": 989.4e12, "sigma": 0.03}}, "mfu": 0.4},
            "observe": {"gpu_hours": {"value": 30e6, "sigma": sig}}}
    res = mcflops.run(spec, method="is")
    post = res.posterior
    ess = post["ess"]
    exact = {"tokens": (mean[1], cov[1, 1]), "params": (mean[0], cov[0, 0]),
             "gpu_hours": (a @ mean + c, a @ cov @ a)}
    for name, (m, v) in exact.items():
        ref = stats.lognorm(math.sqrt(v), scale=math.exp(m))
        e = post[name]
        assert abs(e["log_mean"] - m) < 4 * math.sqrt(v / ess), name
        assert abs(e["log_sd"] - math.sqrt(v)) < 4 * math.sqrt(v / (2 * ess)), name
        assert abs(e["mean"] - ref.mean()) < 4 * ref.std() / math.sqrt(ess), name
        for k, p in PROBS.items():
            q = ref.ppf(p)
            assert abs(e[k] - q) < 4 * math.sqrt(p * (1 - p) / ess) / ref.pdf(q), (name, k)


def test_interval_observation_on_an_input_is_exact_truncation():
    # mfu observed in [0.38, 0.43] and nothing else: the posterior of mfu is its prior truncated there
    spec = beta2_spec(0.05, N_DRAWS)
    spec["observe"] = {"mfu": {"between": [0.38, 0.43]}}
    res = mcflops.run(spec, method="is")
    A = beta_from_moments(*MFU_PRIOR)
    t = (A.cdf(0.38), A.cdf(0.43))
    post = res.posterior
    assert post["pareto_k"] == -math.inf or post["pareto_k"] is None or post["pareto_k"] < 0
    for k, p in PROBS.items():
        q = A.ppf(t[0] + p * (t[1] - t[0]))
        f = A.pdf(q) / (t[1] - t[0])
        assert abs(post["mfu"][k] - q) < 4 * math.sqrt(p * (1 - p) / post["ess"]) / f, k
    assert post["reported"]["mfu"]["posterior_probability"] == pytest.approx(1.0, abs=0.01)
    from mcflops import engine
    from mcflops.inference import nuts
    from mcflops import model as model_mod

    m = model_mod.build_model(res.spec)
    trunc, rest = nuts._split(m, engine.build_likelihood(res.spec, m))
    assert rest is None
    zlo, zhi = trunc["mfu"]  # the sampler's z where mfu reaches the bounds: Phi^-1(F(bound))
    assert zlo == pytest.approx(stats.norm.ppf(t[0]), abs=1e-3)
    assert zhi == pytest.approx(stats.norm.ppf(t[1]), abs=1e-3)


def test_smoothed_interval_moves_the_predicted_mass():
    # NUTS smooths a box on an output: the likelihood mass moved is -(pi^2/6) tau^2 (f'(lo) - f'(hi))
    # (nuts.py). Check against quadrature (scipy) for a normal density of the observed log quantity.
    import jax.numpy as jnp

    from mcflops import engine
    from mcflops.inference import nuts

    lo, hi = -0.1, 0.15
    tau = (hi - lo) / nuts.SMOOTH_FRACTION
    lik = engine.Likelihood(("q",), ("between",), jnp.zeros(1), jnp.ones(1), jnp.asarray([lo], jnp.float32),
                            jnp.asarray([hi], jnp.float32))
    f = stats.norm(0.02, 0.1)

    def smooth(x):
        return math.exp(float(nuts.smooth_log_likelihood(lik, {"q": jnp.asarray(x, jnp.float32)})))

    got = integrate.quad(lambda x: f.pdf(x) * smooth(x), -1, 1, points=[lo, hi], limit=200)[0]
    exact = f.cdf(hi) - f.cdf(lo)
    fprime = lambda x: -(x - 0.02) / 0.1**2 * f.pdf(x)  # noqa: E731
    predicted = -(math.pi**2 / 6) * tau**2 * (fprime(lo) - fprime(hi))
    assert got - exact == pytest.approx(predicted, rel=0.1, abs=2e-5)
    assert abs(got - exact) < 0.01 * exact


def test_conflicting_observation_names_the_priors():
    spec = beta2_spec(0.05, N_DRAWS)
    spec["observe"] = {"mfu": {"between": [0.75, 0.8]}}
    with pytest.raises(SpecError) as e:
        mcflops.run(spec)
    msg = str(e.value)
    assert "observe.mfu [0.75" in msg and "lies outside every prior draw of mfu" in msg and "the prior of mfu" in msg
    # far outside the prior predictive but not impossible: IS warns and names the observation and priors
    spec["observe"] = {"gpu_hours": {"value": 1e3, "sigma": 0.05}}
    res = mcflops.run(spec, method="is")
    assert any("observe.gpu_hours" in n and "mfu, goodput" in n and "params, tokens, peak_flops fixed" in n
               for n in res.notes)
    assert any(n.startswith("WARNING") for n in res.notes)


def test_claims_come_from_the_prior_file():
    # a file without `reported:` checks no claim: no summary entry, no finding line
    spec = beta2_spec(0.05, N_DRAWS)
    del spec["reported"]
    res = mcflops.run(spec, method="is")
    assert "reported" not in res.posterior and not any(n.startswith("P(") for n in res.notes)
    assert res.posterior["findings"] and "MFU x goodput" in res.posterior["findings"][0]  # the other finding stays
    # claims on any input or output, each with its source; a fixed input holds its claim or not, exactly
    spec["reported"] = {"goodput": {"between": [0.9, 1.0], "source": "a blog"},
                        "gpu_hours": {"between": [28e6, 34e6], "source": "a card"},
                        "params": {"between": [400e9, 410e9], "source": "the paper"}}
    res = mcflops.run(spec, method="is")
    rep = res.posterior["reported"]
    assert list(rep) == ["goodput", "gpu_hours", "params"]
    assert rep["params"] == {"range": [400e9, 410e9], "prior_probability": 1.0, "posterior_probability": 1.0,
                             "source": "the paper"}
    assert 0 < rep["goodput"]["prior_probability"] < 1 and rep["goodput"]["source"] == "a blog"
    assert rep["gpu_hours"]["posterior_probability"] > rep["gpu_hours"]["prior_probability"]  # the data say so
    lines = [n for n in res.notes if n.startswith("P(")]
    assert lines[0].startswith("P(90% <= goodput <= 100%) = ") and lines[0].endswith("reported by a blog")
    assert lines[1].startswith("P(28.00M <= gpu_hours <= 34.00M) = ") and "flops" not in lines[1].lower()
    assert res.posterior["findings"][:3] == lines


def test_gpt3_gets_no_claim_from_another_paper():
    from pathlib import Path

    res = mcflops.run(Path(__file__).resolve().parents[2] / "priors" / "gpt3-175b.yaml", samples=1 << 14,
                      method="is")
    assert res.posterior is not None and "reported" not in res.posterior
    assert not any("38%" in n or "Llama" in n for n in res.notes + res.posterior.get("findings", []))


def test_the_update_returns_data_and_receives_its_key():
    import jax

    from mcflops import engine
    from mcflops.model import compute

    res = mcflops.run(beta2_spec(0.05, N_DRAWS), method="is")
    m = compute.build_model(res.spec)
    lik = engine.build_likelihood(res.spec, m)
    post = inference.posterior(jax.random.key(res.seed), res.spec, m, res.sums, lik, method="is")
    assert isinstance(post, inference.Posterior)
    assert json.dumps(post.summary, default=str) == json.dumps(res.posterior, default=str)  # what api.run put in
    # the run's notes are the file's (its MFU's units) and then the posterior's
    assert res.notes == [*res.spec.notes, *post.notes] and post.draws.keys() == res.posterior_draws.keys()
    for n, x in post.draws.items():
        np.testing.assert_array_equal(x, res.posterior_draws[n])
    other = inference.posterior(jax.random.key(res.seed + 1), res.spec, m, res.sums, lik, method="is")
    assert not np.array_equal(other.draws["mfu"], post.draws["mfu"])  # the reservoir's resample uses the key


def write_yaml(path, data):
    from ruamel.yaml import YAML

    with path.open("w") as fh:
        YAML(typ="safe", pure=True).dump(data, fh)


@pytest.fixture
def no_sensitivity(monkeypatch):
    """`mcflops run` also runs the sensitivity analysis (tests/test_sensitivity.py); skip it here for speed."""
    import mcflops.analysis.sensitivity

    monkeypatch.setattr(mcflops.analysis.sensitivity, "prior_analysis", lambda *a, **k: None)
    monkeypatch.setattr(mcflops.analysis.sensitivity, "analyze", lambda *a, **k: None)


def test_cli_writes_the_posterior(tmp_path, capsys, no_sensitivity):
    arviz = pytest.importorskip("arviz")
    pytest.importorskip("matplotlib")
    f = tmp_path / "beta2.yaml"
    spec = beta2_spec(0.05, N_DRAWS)
    for v in spec["priors"].values():
        if isinstance(v, dict):
            v["source"] = "test"
    write_yaml(f, spec)
    out = tmp_path / "out"
    assert cli.main(["run", str(f), "--out", str(out), "--json", "--quiet", "--method", "is"]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "summary.json").read_text())
    for d in (printed, saved):
        post = d["posterior"]
        assert post["method"] == "importance" and post["ess"] > 1000 and post["pareto_k"] < 0.7
        assert set(post["mfu"]) >= {"mean", "sd", "p5", "p50", "p95", "hdi90", "mcse_mean", "mcse_p50"}
        assert "mfu" in post["reported"] and "corr_mfu_goodput_log" in post and post["findings"]
    dt = arviz.from_netcdf(out / "posterior.nc")
    for group in ("posterior", "prior", "observed_data", "log_likelihood"):
        assert group in dt.children, group
    assert dict(dt["posterior"].sizes)["chain"] == 1 and dict(dt["posterior"].sizes)["draw"] > 3000
    assert float(dt["observed_data"]["gpu_hours"]) == 30.84e6
    ll = np.asarray(dt["log_likelihood"]["gpu_hours"])
    assert np.all(np.isfinite(ll))
    for png in ("posterior_inputs.png", "mfu_goodput_ridge.png", "predictive_gpu_hours.png"):
        assert (out / png).read_bytes().startswith(b"\x89PNG"), png
    assert cli.main(["run", str(f), "--out", str(out), "--quiet", "--method", "is"]) == 0
    text = capsys.readouterr().out
    assert "Posterior (method importance" in text and "P(38% <= MFU <= 43%)" in text.replace("\n", " ")


def test_cli_conflict_is_one_line_exit_2(tmp_path, capsys, no_sensitivity):
    spec = beta2_spec(0.05, N_DRAWS)
    spec["observe"] = {"mfu": {"between": [0.75, 0.8]}}
    f = tmp_path / "bad.yaml"
    write_yaml(f, spec)
    assert cli.main(["run", str(f), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "observe.mfu" in err
    assert not (tmp_path / "o").exists()
