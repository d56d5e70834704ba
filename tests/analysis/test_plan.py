"""Planning against closed forms (lognormal hours) (compare: test_compare.py).

Quantile checks allow K = 4 Monte Carlo standard errors of the quantile (sqrt(p(1-p)/n) / f(q);
6e-5 false-failure rate per comparison) plus one histogram bin, with fixed seeds.
"""

import json
import math

import pytest
from scipy import stats

import mcflops
from mcflops.analysis import plan as plan_mod
from mcflops.priors.dist import Z95
from mcflops.errors import SpecError
from mcflops.spec import plan_options

K = 4.0
N = 200_000
PEAK = 989.4e12  # H100 SXM dense BF16 (the catalogue)


def _sigma(lo, hi):
    return (math.log(hi) - math.log(lo)) / (2 * Z95)


SPEC = {
    "name": "plan", "seed": 5, "samples": N, "hardware": {"accelerator": "h100-sxm", "count": 4096},
    "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": 0.4,
               "peak_flops": {"lognormal": [800e12, 1000e12]}, "price": {"lognormal": [2.0, 4.0]}},
}
S_T, S_P, S_PR = _sigma(1e12, 2e12), _sigma(800e12, 1000e12), _sigma(2.0, 4.0)
MU_T, MU_P, MU_PR = (0.5 * math.log(a * b) for a, b in ((1e12, 2e12), (800e12, 1000e12), (2.0, 4.0)))
MU_H = math.log(6 * 70e9) + MU_T - MU_P - math.log(0.4) - math.log(3600)  # log GPU-hours: normal
S_H = math.hypot(S_T, S_P)
MU_HPT, S_HPT = MU_H - MU_T, S_P  # hours per token: tokens drop out


def _tol_log(sigma, p, n=N):
    """K MCSE of a normal quantile (log space) plus a histogram bin (pilot span ~ 9 sigma, 4096 bins, x2)."""
    return K * sigma * math.sqrt(p * (1 - p) / n) / stats.norm.pdf(stats.norm.ppf(p)) + 2 * 9 * sigma / 4096


@pytest.fixture(scope="module")
def answer():
    spec = mcflops.load_spec(SPEC)
    opts = plan_options(spec, deadline_days=60, prob=0.9, budget_hours=1e6, budget_usd=3e6)
    return plan_mod.plan(spec, opts)


def test_gpus_for_a_deadline_is_the_lognormal_quantile(answer):
    z = stats.norm.ppf(0.9)
    exact = math.exp(MU_H + S_H * z) / (24 * 60)
    d = answer["deadline"]
    assert abs(math.log(d["gpus_exact"]) - math.log(exact)) < _tol_log(S_H, 0.9)
    assert d["gpus"] == math.ceil(d["gpus_exact"])
    assert abs(math.log(answer["gpu_hours"]["p50"]) - MU_H) < _tol_log(S_H, 0.5)


def test_days_on_the_cluster(answer):
    c = answer["cluster"]
    assert c["gpus"] == 4096
    for key, p in (("days_p50", 0.5), ("days_p90", 0.9)):
        exact = math.exp(MU_H + S_H * stats.norm.ppf(p)) / (24 * 4096)
        assert abs(math.log(c[key]) - math.log(exact)) < _tol_log(S_H, p)
    # probability of finishing in 60 days on 4096 GPUs: Phi((log(24*60*4096) - mu) / sigma); SE sqrt(P(1-P)/n)
    P = stats.norm.cdf((math.log(24 * 60 * 4096) - MU_H) / S_H)
    assert abs(c["prob_within_deadline"] - P) < K * math.sqrt(P * (1 - P) / N) + 2 * 9 / 4096 * stats.norm.pdf(0)


def test_curve_is_the_lognormal_cdf(answer):
    cur = answer["curve"]
    assert cur["gpus"] == sorted(cur["gpus"]) and cur["prob"] == sorted(cur["prob"])
    for g, pr in zip(cur["gpus"][::8], cur["prob"][::8]):
        P = stats.norm.cdf((math.log(24 * 60 * g) - MU_H) / S_H)
        assert abs(pr - P) < K * math.sqrt(max(P * (1 - P), 1e-6) / N) + 2 * 9 / 4096 * stats.norm.pdf(0)


def test_tokens_in_budgets(answer):
    z = stats.norm.ppf(0.9)
    b = answer["budget_hours"]
    exact = 1e6 / math.exp(MU_HPT + S_HPT * z)  # P(T h <= H) = 0.9 at T = H / q_0.9(h)
    assert abs(math.log(b["tokens"]) - math.log(exact)) < _tol_log(S_HPT, 0.9)
    assert b["tokens"] < b["tokens_p50"]
    s_c = math.hypot(S_HPT, S_PR)
    u = answer["budget_usd"]
    exact = 3e6 / math.exp(MU_HPT + MU_PR + s_c * z)
    assert abs(math.log(u["tokens"]) - math.log(exact)) < _tol_log(s_c, 0.9)


def test_posterior_plan_uses_the_runs_draws():
    spec = {**SPEC, "observe": {"gpu_hours": {"value": 2.5e5, "sigma": 0.05}}}
    res = mcflops.run(spec, samples=N)
    p = plan_mod.plan(mcflops.load_spec(spec), posterior=True)
    assert p["distribution"] == "posterior"
    # the same draws and weights as the engine (different bins): medians agree to a fraction of an MCSE
    assert p["gpu_hours"]["p50"] == pytest.approx(res.posterior["gpu_hours"]["p50"], rel=2e-3)
    assert p["ess"] == pytest.approx(res.posterior["ess"], rel=1e-3)


@pytest.mark.parametrize("kw, field", [
    ({"prob": 1.2}, "--prob"), ({"deadline_days": -3}, "--deadline-days"), ({"gpus": 2.5}, "--gpus"),
    ({"budget_hours": "lots"}, "--budget-hours"),
])
def test_bad_plan_options(kw, field):
    with pytest.raises(SpecError) as e:
        plan_options(mcflops.load_spec(SPEC), **kw)
    assert e.value.field == field


def test_budget_usd_needs_a_price():
    spec = {**SPEC, "priors": {k: v for k, v in SPEC["priors"].items() if k != "price"}}
    with pytest.raises(SpecError) as e:
        plan_options(mcflops.load_spec(spec), budget_usd=1e6)
    assert "price" in e.value.message


def test_plan_block_in_the_file(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nhardware: {accelerator: h100-sxm}\npriors:\n  params: 7e9\n  tokens: 1T\n  mfu: 0.4\n"
                 "plan:\n  deadline_days: 30\n  probb: 0.9\n")
    with pytest.raises(SpecError) as e:
        mcflops.load_spec(p)  # every block is checked at load
    assert e.value.field == "plan.probb" and e.value.line == 9
    p.write_text(p.read_text().replace("probb", "prob"))
    o = plan_options(mcflops.load_spec(p), prob=0.5)
    assert o.deadline_days == 30 and o.prob == 0.5  # the command line wins


def _cli(args, capsys):
    from mcflops.cli.main import main

    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_cli_plan_compare_sensitivity(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps({**SPEC, "samples": 20_000}))
    code, out, _ = _cli(["plan", str(f), "--deadline-days", "60", "--budget-hours", "1M", "--json"], capsys)
    assert code == 0
    d = json.loads(out)
    assert d["deadline"]["gpus"] >= 1 and d["budget_hours"]["tokens"] > 0
    code, out, err = _cli(["plan", str(f), "--prob", "1.5"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--prob" in err
    code, out, _ = _cli(["compare", str(f), str(f), "--json"], capsys)
    assert code == 0 and json.loads(out)["ratio"]["p50"] == 1.0
    code, out, _ = _cli(["sensitivity", str(f), "--sweep", "mfu=0.40,0.30", "--sobol-samples", "4096", "--json"],
                        capsys)
    assert code == 0
    s = json.loads(out)
    assert s["sweeps"]["mfu"]["p50_vs_first"][1] == pytest.approx(4 / 3, rel=1e-5)
    for cmd in (["plan", str(f), "--deadline-days", "60"], ["compare", str(f), str(f)],
                ["sensitivity", str(f), "--sweep", "mfu=0.40,0.30", "--sobol-samples", "4096"]):
        code, out, _ = _cli(cmd, capsys)
        assert code == 0 and out.strip()
