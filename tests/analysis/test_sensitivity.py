"""Sensitivity against answers we did not compute with it: closed forms, Ishigami, SALib, scipy.

Statistical checks allow K = 4 Monte Carlo standard errors (delta-method SEs of the estimator; a
two-sided normal false-failure rate of 6e-5 per comparison), with fixed keys.
"""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import mcflops
from mcflops import chain
from mcflops import model as model_mod
from mcflops.analysis import sensitivity as sens
from mcflops.priors.dist import Z95
from mcflops.errors import SpecError
from mcflops.spec import sensitivity_options

K = 4.0


def _sigma(lo, hi):
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


LOGNORMAL = {
    "name": "sobol-lognormal", "seed": 3, "samples": 20_000,
    "priors": {"params": {"lognormal": [60e9, 80e9]}, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": 0.4,
               "peak_flops": {"lognormal": [300e12, 500e12]}},
}
SIGMAS = {"params": _sigma(60e9, 80e9), "tokens": _sigma(1e12, 2e12), "peak_flops": _sigma(300e12, 500e12)}


def _model(spec):
    return model_mod.build_model(mcflops.load_spec(spec))


def test_lognormal_inputs_closed_form_log_and_linear(key):
    """log GPU-hours = sum of +-sigma_i z_i: S_i = ST_i = sigma_i^2 / sum. GPU-hours (a product of
    lognormals, S = sum sigma^2): S_i = (e^{s_i^2} - 1) / (e^S - 1), ST_i = e^{S - s_i^2} (e^{s_i^2} - 1) / (e^S - 1)."""
    m = _model(LOGNORMAL)
    out = sens.sobol(key, m, "gpu_hours", n=1 << 15)
    names = out["names"]
    s2 = np.array([SIGMAS[n] ** 2 for n in names])
    S = s2.sum()
    p = len(names)
    log, lin = out["log"], out["linear"]
    np.testing.assert_array_less(np.abs(log["first"] - s2 / S), K * log["first_se"])
    np.testing.assert_array_less(np.abs(log["total"] - s2 / S), K * log["total_se"])
    # first == total for an additive model: their difference within K SE of the difference (delta-method cov)
    d = log["first"] - log["total"]
    cov = log["cov"]
    se_d = np.sqrt([cov[i, i] + cov[p + i, p + i] - 2 * cov[i, p + i] for i in range(p)])
    np.testing.assert_array_less(np.abs(d), K * se_d)
    s1 = np.expm1(s2) / math.expm1(S)
    st = np.exp(S - s2) * np.expm1(s2) / math.expm1(S)
    np.testing.assert_array_less(np.abs(lin["first"] - s1), K * lin["first_se"])
    np.testing.assert_array_less(np.abs(lin["total"] - st), K * lin["total_se"])
    assert np.all(log["first_se"] < 0.02)  # the test has power: SEs are small next to the indices


def test_beta_input_var_log_share_by_quadrature(key):
    """Any independent inputs of an additive log model: S_i = Var(log x_i) / sum (Var of a beta's log by quadrature)."""
    spec = {**LOGNORMAL, "priors": {**LOGNORMAL["priors"], "goodput": {"beta": [0.8, 0.97]}}}
    m = _model(spec)
    dist = mcflops.load_spec(spec).priors["goodput"]
    b = stats.beta(dist.params["a"], dist.params["b"])
    m1 = integrate.quad(lambda x: math.log(x) * b.pdf(x), 0, 1, limit=200)[0]
    m2 = integrate.quad(lambda x: math.log(x) ** 2 * b.pdf(x), 0, 1, limit=200)[0]
    var = {**{n: s**2 for n, s in SIGMAS.items()}, "goodput": m2 - m1 * m1}
    out = sens.sobol(key, m, "gpu_hours", n=1 << 15)
    expect = np.array([var[n] for n in out["names"]]) / sum(var.values())
    np.testing.assert_array_less(np.abs(out["log"]["first"] - expect), K * out["log"]["first_se"])
    np.testing.assert_array_less(np.abs(out["log"]["total"] - expect), K * out["log"]["total_se"])


def ishigami(params, z):
    """Ishigami & Homma (1990) on uniforms U(-pi, pi) = -pi + 2 pi Phi(z)."""
    a, b = params[0], params[1]
    x = {k: -jnp.pi + 2 * jnp.pi * jax.scipy.special.ndtr(v) for k, v in z.items()}
    y = jnp.sin(x["x1"]) + a * jnp.sin(x["x2"]) ** 2 + b * x["x3"] ** 4 * jnp.sin(x["x1"])
    return y[None, :]


def _ishigami_exact(a=7.0, b=0.1):
    """Closed form (Sobol & Levitan 1999; Saltelli et al. 2000): D, D1, D2, D13."""
    pi4, pi8 = math.pi**4, math.pi**8
    D = a * a / 8 + b * pi4 / 5 + b * b * pi8 / 18 + 0.5
    D1 = b * pi4 / 5 + b * b * pi8 / 50 + 0.5
    D2 = a * a / 8
    D13 = b * b * pi8 / 18 - b * b * pi8 / 50
    return np.array([D1, D2, 0.0]) / D, np.array([D1 + D13, D2, D13]) / D


def test_ishigami_within_standard_errors(key):
    s1, st = _ishigami_exact()
    # the closed form reproduces the published values (SALib docs, Saltelli et al. 2010)
    np.testing.assert_allclose(s1, [0.314, 0.442, 0.0], atol=6e-4)
    np.testing.assert_allclose(st, [0.558, 0.442, 0.244], atol=6e-4)
    sums = sens.sobol_sums(key, ishigami, jnp.asarray([7.0, 0.1]), ("x1", "x2", "x3"), 1 << 15)
    ix = sens.sobol_indices(sums)
    np.testing.assert_array_less(np.abs(ix["first"] - s1), K * ix["first_se"])
    np.testing.assert_array_less(np.abs(ix["total"] - st), K * ix["total_se"])
    assert np.all(ix["first_se"] < 0.03) and np.all(ix["total_se"] < 0.03)


def test_blocks_do_not_change_the_answer(key):
    """Keyed blocks: the sums depend on the base count and the seed, not on how many blocks a call takes."""
    args = (key, ishigami, jnp.asarray([7.0, 0.1]), ("x1", "x2", "x3"), 3 * 4096 + 5)
    a = sens.sobol_sums(*args, size=4096, blocks_per_call=1)
    b = sens.sobol_sums(*args, size=4096, blocks_per_call=2)
    np.testing.assert_allclose(a["s"], b["s"], rtol=1e-12)


def test_salib_agrees_on_gpu_hours(key):
    """SALib's Sobol (Sobol'-sequence Saltelli design, bootstrap CIs) on the same model and the same output."""
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample

    spec = {"name": "salib", "hardware": {"accelerator": "h100-sxm"},
            "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 3e12]}, "mfu": {"beta": [0.25, 0.5]},
                       "goodput": {"beta": [0.7, 0.97]}}}
    m = _model(spec)
    ours = sens.sobol(key, m, "gpu_hours", n=1 << 15)
    names = ours["names"]
    problem = {"num_vars": len(names), "names": list(names), "bounds": [[0.0, 1.0]] * len(names),
               "dists": ["norm"] * len(names)}  # SALib 'norm': [mean, sd] -> the standard-normal z of each input
    Z = sobol_sample.sample(problem, 1 << 13, calc_second_order=False, seed=11)
    v = model_mod.evaluate(m, {n: jnp.asarray(Z[:, i], jnp.float32) for i, n in enumerate(names)})
    Y = np.exp(np.asarray(v["gpu_hours"], np.float64))
    ref = sobol_analyze.analyze(problem, Y, calc_second_order=False, num_resamples=300, seed=12)
    z975 = stats.norm.ppf(0.975)
    for key_, conf in (("first", "S1"), ("total", "ST")):
        se = np.hypot(ours["linear"][f"{key_}_se"], ref[f"{conf}_conf"] / z975)
        np.testing.assert_array_less(np.abs(ours["linear"][key_] - ref[conf]), K * se)


def test_sobol_compiles_once_per_structure(key):
    m1 = _model(LOGNORMAL)
    sens.sobol(key, m1, "gpu_hours", n=4096)
    size = sens._sobol_call._cache_size()
    other = {**LOGNORMAL, "priors": {"params": {"lognormal": [7e9, 9e9]}, "tokens": {"lognormal": [2e12, 5e12]},
                                     "mfu": 0.3, "peak_flops": {"lognormal": [100e12, 200e12]}}}
    sens.sobol(jax.random.key(9), _model(other), "gpu_hours", n=4096)
    assert sens._sobol_call._cache_size() == size


def test_tornado_matches_the_chain_at_scipy_quantiles():
    """Each input at its scipy p5/p95, others at scipy medians, through the float64 napkin chain (palm:
    the nonlinear attention term counts)."""
    spec = mcflops.load_spec({
        "name": "tornado", "hardware": {"accelerator": "h100-sxm"}, "flops": "palm",
        "architecture": {"layers": 32, "d_model": 4096, "heads": 32, "seq_len": 32768, "vocab": 32000},
        "priors": {"params": {"lognormal": [5e9, 9e9]}, "tokens": {"lognormal": [1e12, 2e12]},
                   "mfu": {"beta": [0.3, 0.5]}, "goodput": {"triangular": [0.8, 0.9, 0.99]}}})
    from tests.oracles import scipy_dist

    tor = sens.tornado(model_mod.build_model(spec))
    med = {n: float(scipy_dist(d).ppf(0.5)) for n, d in spec.priors.items()}
    assert tor["base"] == pytest.approx(chain.chain(spec, med)["gpu_hours"], rel=1e-4)
    swings = []
    for bar in tor["inputs"]:
        n = bar["input"]
        d = scipy_dist(spec.priors[n])
        for tag, p in (("p5", 0.05), ("p95", 0.95)):
            ref = chain.chain(spec, {**med, n: float(d.ppf(p))})["gpu_hours"]
            assert bar[f"at_{tag}"] == pytest.approx(ref, rel=1e-4), (n, tag)
            assert bar[f"input_{tag}"] == pytest.approx(float(d.ppf(p)), rel=1e-4)
        swings.append(bar["swing"])
    assert swings == sorted(swings, reverse=True)


def test_sweep_answers_the_mfu_question(key):
    """MFU 0.40 -> 0.30: every draw's GPU-hours scale by 0.40/0.30 (same draws at each point); the
    quantiles at a fixed MFU match the lognormal closed form of the other inputs."""
    spec = mcflops.load_spec(LOGNORMAL)
    m = model_mod.build_model(spec)
    n = 1 << 15
    out = sens.sweep(key, m, "mfu", [0.40, 0.30], n=n)
    assert out["p50_vs_first"][1] == pytest.approx(0.40 / 0.30, rel=1e-5)
    for k in ("p5", "p95", "mean"):
        assert out[k][1] / out[k][0] == pytest.approx(0.40 / 0.30, rel=1e-5)
    sigma = math.sqrt(sum(s * s for s in SIGMAS.values()))
    mu = (0.5 * math.log(60e9 * 80e9) + math.log(6) + 0.5 * math.log(1e12 * 2e12)
          - 0.5 * math.log(300e12 * 500e12) - math.log(0.40) - math.log(3600))
    for k, p in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
        zp = stats.norm.ppf(p)
        se_log = sigma * math.sqrt(p * (1 - p) / n) / stats.norm.pdf(zp)
        assert abs(math.log(out[k][0]) - (mu + sigma * zp)) < K * se_log, k


def test_analyze_in_a_run_and_summary_json(key):
    spec = {**LOGNORMAL, "priors": {**LOGNORMAL["priors"], "price": {"lognormal": [2, 4]}},
            "sensitivity": {"sweep": {"mfu": [0.30, 0.45]}, "sobol_samples": 4096}}
    res = mcflops.run(spec, samples=20_000, sensitivity=True)
    s = res.to_dict()["sensitivity"]
    assert set(s["sobol"]) == {"params", "tokens", "peak_flops"}  # price does not move GPU-hours
    assert s["unused"] == ["price"]
    for v in s["sobol"].values():
        assert set(v) == {"first", "total", "first_se", "total_se"}
    sw = s["sweeps"]["mfu"]
    np.testing.assert_allclose(sw["values"], np.linspace(0.30, 0.45, 16))
    assert sw["values"][10] == pytest.approx(0.40)
    assert sw["p50_vs_first"][10] == pytest.approx(0.30 / 0.40, rel=1e-5)
    # prior Pearson correlation of log input and log output is +-sqrt(S_i) in an additive log model
    sig2 = {n: SIGMAS[n] ** 2 for n in SIGMAS}
    r = s["correlations"]["prior"]["pearson_log"]
    for n, v in sig2.items():
        sign = -1 if n == "peak_flops" else 1
        assert r[n] == pytest.approx(sign * math.sqrt(v / sum(sig2.values())), abs=0.03)


def test_background_analysis_equals_the_sequential_one():
    """api.run computes tornado, Sobol, Shapley and sweeps in a thread alongside the posterior: the result is
    the one the analysis gives on its own, key for key and bit for bit (every pass is keyed)."""
    spec = {**LOGNORMAL, "observe": {"gpu_hours": {"value": 7e5, "sigma": 0.1}},
            "sensitivity": {"sweep": {"mfu": [0.30, 0.45]}, "sobol_samples": 4096}}
    res = mcflops.run(spec, samples=20_000, sensitivity=True)
    alone = sens.analyze(jax.random.key(res.seed), res.model, res.sums, res.draws, res.posterior_draws,
                         res.spec.sensitivity)
    assert list(res.sensitivity) == list(alone)

    def numbers(d):  # everything but the timings
        return json.dumps(d, sort_keys=True, default=repr,
                          ) if not isinstance(d, dict) else {k: numbers(v) for k, v in d.items() if k != "seconds"}

    assert numbers(res.sensitivity) == numbers(alone)
    assert res.sensitivity["sobol"] and res.sensitivity["shapley"] and res.sensitivity["correlations"]["posterior"]


def test_background_analysis_stops_when_told(monkeypatch):
    """Ctrl-C or an error in the sampling: the analysis in the thread stops at its next stage or Sobol call, so
    the process does not wait for it to finish."""
    m = model_mod.build_model(mcflops.load_spec({**LOGNORMAL, "sensitivity": {"sobol_samples": 4096}}))
    opts = mcflops.load_spec({**LOGNORMAL, "sensitivity": {"sobol_samples": 4096}}).sensitivity
    calls = []
    with pytest.raises(sens.Cancelled):
        sens.prior_analysis(jax.random.key(0), m, opts, stop=lambda: calls.append(1) or len(calls) > 1)
    assert len(calls) == 2  # checked before Sobol (go on), then at Sobol's first call (stop)

    started, seen = [], {}

    def failing_run(*a, **k):  # the sampling fails once the analysis is under way
        started.append(1)
        raise RuntimeError("sampling failed")

    real = sens.prior_analysis

    def watched(*a, stop=None, **k):
        seen["stop"] = stop
        return real(*a, stop=stop, **k)

    monkeypatch.setattr(sens, "prior_analysis", watched)
    monkeypatch.setattr(mcflops.engine, "run", failing_run)
    with pytest.raises(RuntimeError, match="sampling failed"):
        mcflops.run({**LOGNORMAL, "sensitivity": {"sobol_samples": 4096}}, samples=1000, sensitivity=True)
    assert started and seen["stop"]()  # the thread was told to stop


def test_posterior_reports_correlations_not_sobol_shares():
    spec = {"name": "post", "hardware": {"accelerator": "h100-sxm"},
            "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.3, 0.5]},
                       "goodput": {"beta": [0.8, 0.97]}},
            "observe": {"gpu_hours": {"value": 7e5, "sigma": 0.05}}, "sensitivity": {"sobol_samples": 4096}}
    res = mcflops.run(spec, samples=50_000, sensitivity=True)
    s = res.sensitivity
    post = s["correlations"]["posterior"]
    assert set(post["spearman"]) == {"tokens", "mfu", "goodput"}
    assert any("posterior" in n for n in s["notes"])
    # the data pin down tokens / (mfu x goodput): the posterior correlation of log mfu with log
    # goodput is negative (the engine's weighted sums)
    from mcflops.engine.summary import correlation

    C = correlation(res.sums, "post")
    names = list(res.sums.names)
    assert C[names.index("mfu"), names.index("goodput")] < -0.1


BAD = """name: bad
hardware: {accelerator: h100-sxm}
priors:
  params: 70e9
  tokens: {lognormal: [1e12, 2e12]}
  mfu: {beta: [0.3, 0.5]}
sensitivity: %s
"""


@pytest.mark.parametrize("block, field", [
    ({"sweep": {"mfu": [0.5, 0.3]}}, "sensitivity.sweep.mfu"),
    ({"sweep": {"mfu": [0.3, 1.5]}}, "sensitivity.sweep.mfu"),
    ({"sweep": {"price": [1, 2]}}, "sensitivity.sweep.price"),
    ({"sweep": {"mfuu": [0.3, 0.4]}}, "sensitivity.sweep.mfuu"),
    ({"sweep": {"mfu": {"values": ["x", 0.3]}}}, "sensitivity.sweep.mfu"),
    ({"sweep": [0.3, 0.4]}, "sensitivity.sweep"),
    ({"points": 1}, "sensitivity.points"),
    ({"sobol_samples": 10}, "sensitivity.sobol_samples"),
    ({"output": "cost"}, "sensitivity.output"),
    ({"swep": {}}, "sensitivity.swep"),
])
def test_bad_sensitivity_block_names_field_and_line(tmp_path, block, field):
    import json

    p = tmp_path / "bad.yaml"
    p.write_text(BAD % json.dumps(block))
    with pytest.raises(SpecError) as e:
        mcflops.load_spec(p)  # every block is checked at load
    assert e.value.field == field
    assert e.value.line == 7 and e.value.path == str(p)


def test_command_line_sweeps():
    spec = mcflops.load_spec(LOGNORMAL)
    o = sensitivity_options(spec, sweeps=["mfu=0.40,0.30", "peak_flops=3e14:5e14"], points=5)
    assert dict(o.sweeps)["mfu"] == (0.40, 0.30)
    np.testing.assert_allclose(dict(o.sweeps)["peak_flops"], np.linspace(3e14, 5e14, 5))
    for bad in ("mfu", "mfu=", "mfu=0.4:0.3", "mfu=0.5,1.2", "nope=1,2"):
        with pytest.raises(SpecError) as e:
            sensitivity_options(spec, sweeps=[bad])
        assert e.value.field == "--sweep"


def test_cli_validate_and_run_refuse_a_bad_block_before_sampling(tmp_path, capsys):
    import json

    from mcflops.cli.main import main

    p = tmp_path / "bad.yaml"
    p.write_text(BAD % json.dumps({"sweep": {"mfu": [0.5, 0.3]}}))
    for args in (["validate", str(p)], ["run", str(p), "--out", str(tmp_path / "o"), "--quiet"],
                 ["sensitivity", str(p), "--quiet"]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{p}:7: sensitivity.sweep.mfu:" in err[0], err
    assert not (tmp_path / "o").exists()


CORR = {**LOGNORMAL, "priors": {**LOGNORMAL["priors"], "price": {"lognormal": [2, 4]}},
        "correlations": [{"between": ["params", "tokens"], "rho": 0.6},
                         {"between": ["tokens", "peak_flops"], "rho": -0.3},
                         {"between": ["tokens", "price"], "rho": 0.5}]}
SIGN = {"params": 1.0, "tokens": 1.0, "peak_flops": -1.0}  # 6nd: log gpu_hours = d params + d tokens - d peak


def _corr_matrix(names):
    R = np.eye(len(names))
    for c in CORR["correlations"]:
        a, b = c["between"]
        if a in names and b in names:
            R[names.index(a), names.index(b)] = R[names.index(b), names.index(a)] = c["rho"]
    return R


def test_conditional_tornado_closed_form():
    """Lognormal inputs, log GPU-hours = sum b_i s_i z_i with correlated z's: given z_j the others' conditional
    medians are rho_oj z_j, and log GPU-hours is then its conditional median, base + z_j sum_i b_i s_i rho_ij
    (Gaussian conditioning, Anderson 2003 Thm 2.5.1), at z_j = Phi^{-1}(0.05), Phi^{-1}(0.95) (scipy)."""
    spec = mcflops.load_spec(CORR)
    tor = sens.tornado(model_mod.build_model(spec))
    assert tor["conditional"]
    base = chain.chain(spec)["gpu_hours"]
    assert tor["base"] == pytest.approx(base, rel=1e-5)
    names = list(SIGMAS)
    R = _corr_matrix(names)
    bs = np.array([SIGN[n] * SIGMAS[n] for n in names])
    bars = {b["input"]: b for b in tor["inputs"]}
    assert bars["price"]["swing"] > 0  # price does not enter GPU-hours, but it carries news about tokens
    for j, n in enumerate(names):
        slope = float(bs @ R[:, j])
        for tag, p in (("p5", 0.05), ("p95", 0.95)):
            zp = stats.norm.ppf(p)
            assert bars[n][f"at_{tag}"] == pytest.approx(base * math.exp(slope * zp), rel=1e-5), (n, tag)
            assert bars[n][f"input_{tag}"] == pytest.approx(float(stats.lognorm(SIGMAS[n], scale=math.exp(
                model_mod.build_model(spec).centers[n])).ppf(p)), rel=1e-5)
    # without correlations the same call gives the unconditional tornado
    plain = sens.tornado(model_mod.build_model(spec), conditional=False)
    assert "conditional" not in plain
    p_bars = {b["input"]: b for b in plain["inputs"]}
    assert p_bars["price"]["swing"] == 0.0
    assert p_bars["params"]["at_p95"] == pytest.approx(
        base * math.exp(Z95 * SIGMAS["params"]), rel=1e-5)


def test_conditional_sweep_closed_form(key):
    """Sweep tokens under correlations: given z_t = c, log GPU-hours ~ N(base + c sum_i b_i s_i rho_it,
    b_o^T (R_oo - R_ot R_to) b_o) (Gaussian conditioning); quantiles within K SE of a sample quantile."""
    spec = mcflops.load_spec(CORR)
    m = model_mod.build_model(spec)
    n = 1 << 15
    vals = [1.2e12, 1.8e12]
    out = sens.sweep(key, m, "tokens", vals, n=n)
    assert out["conditional"]
    names = list(SIGMAS)
    R = _corr_matrix(names)
    bs = np.array([SIGN[k] * SIGMAS[k] for k in names])
    j = names.index("tokens")
    o = [i for i in range(3) if i != j]
    cond = R[np.ix_(o, o)] - np.outer(R[o, j], R[j, o])
    sd = math.sqrt(bs[o] @ cond @ bs[o])
    base = math.log(chain.chain(spec)["gpu_hours"])
    for g, v in enumerate(vals):
        c = (math.log(v) - m.centers["tokens"]) / SIGMAS["tokens"]
        mu = base + c * float(bs @ R[:, j])
        for k, p in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
            zp = stats.norm.ppf(p)
            se_log = sd * math.sqrt(p * (1 - p) / n) / stats.norm.pdf(zp)
            assert abs(math.log(out[k][g]) - (mu + sd * zp)) < K * se_log, (v, k)
    # the unconditional spread would be wider: the test tells the two apart
    sd_plain = math.sqrt(sum(bs[i] ** 2 for i in o) + 2 * bs[o[0]] * bs[o[1]] * R[o[0], o[1]])
    assert sd_plain - sd > 0.01


def test_analyze_with_correlations_reports_shapley(key):
    spec = {**CORR, "sensitivity": {"sweep": {"tokens": [1.2e12, 1.8e12]}}}
    res = mcflops.run(spec, samples=20_000, sensitivity=True)
    s = res.to_dict()["sensitivity"]
    assert s["sobol"] is None and s["unused"] == ["price"]
    assert set(s["shapley"]) == {"params", "tokens", "peak_flops"}
    assert sum(v["effect"] for v in s["shapley"].values()) == pytest.approx(1.0, abs=1e-5)
    assert s["shapley_info"]["correlated"] and s["tornado"]["conditional"] and s["sweeps"]["tokens"]["conditional"]
    assert {b["input"] for b in s["tornado"]["inputs"]} == {"params", "tokens", "peak_flops"}
    assert any("Shapley" in n for n in s["notes"])
    from mcflops.cli.sensitivity import brief_lines

    line = brief_lines(s)[-1]  # `mcflops run`: the Shapley line stands in for the withheld Sobol line
    assert line.startswith("Shapley effects (share of Var log gpu_hours, correlated inputs): ")
    top = max(s["shapley"], key=lambda n: s["shapley"][n]["effect"])
    assert line.split(": ")[1].startswith(f"{top} {s['shapley'][top]['effect']:.2f}")


def test_overflowed_linear_sums_withhold_the_indices_without_a_warning():
    """Sums of squares past float64 (an output spanning ~1e14x, squared) while the variance itself is finite and
    positive: every index NaN, the same as no variance, and no RuntimeWarning reaches the user (the suite turns
    warnings into errors)."""
    names = ("a", "b")
    s = np.array([[1.0, 2.0, 0.5, 0.5, 0.5, 0.5]])  # mean 0.1, second moment 0.2: V = 0.19
    ss = np.full((1, 6, 6), np.inf)
    ix = sens.sobol_indices({"n": 10, "names": names, "s": s, "ss": ss})
    assert all(np.isnan(ix[k]).all() for k in ("first", "total", "first_se", "total_se"))
