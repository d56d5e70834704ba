"""Planning with a count-dependent input (the failures goodput): the deadline's count is the fixed point
min G: P(hours(G) / (24 G) <= D) >= p, with goodput(G) at every G.

Checks against things the planner does not compute: a file written for the count it finds (its goodput
resolved at load, then written out as a plain prior: the closed-form path), and, with every input but
the tokens a number, the exact fixed point (log hours normal, goodput from Daly's formula, a scan of
the integers in NumPy). Tolerances: K = 4 Monte Carlo standard errors (6e-5 false-failure rate per
comparison) plus one histogram bin, fixed seeds.
"""

import math

import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops.analysis import plan as plan_mod
from mcflops.priors import goodput as gp
from mcflops.priors.dist import Z95
from mcflops.spec import plan_options

K = 4.0
N = 40_000
D = 90.0
P = 0.9
H100 = 989.4e12


def _spec(count, goodput=None, restart=None, rate=1.973e-5, seed=3):
    g = goodput if goodput is not None else {"failures": {
        "rate_per_gpu_hour": rate, "checkpoint_write_h": 0.005, "checkpoint_interval_h": 0.17,
        "restart_h": restart if restart is not None else {"lognormal": [0.03, 0.2]}}}
    return mcflops.load_spec({
        "name": "pc", "seed": seed, "samples": N, "hardware": {"accelerator": "h100-sxm", "count": count},
        "priors": {"params": 405e9, "tokens": {"lognormal": [15e12, 16.8e12]}, "mfu": {"beta": {"mean": 0.36, "sd": 0.04}},
                   "goodput": g}})


def _sigma_log_hours(ans):
    h = ans["gpu_hours"]
    return (math.log(h["p95"]) - math.log(h["p5"])) / (2 * Z95)


@pytest.fixture(scope="module")
def found():
    spec = _spec(4096)
    return spec, plan_mod.plan(spec, plan_options(spec, deadline_days=D, prob=P))


def test_the_answer_is_the_first_count_that_reaches_p(found):
    _, ans = found
    dl = ans["deadline"]
    assert ans["count_dependent"] == ["goodput"] and dl["method"] == "fixed point"
    assert dl["prob_at_gpus"] >= P > dl["prob_one_fewer"]
    assert dl["mcse"] == pytest.approx(math.sqrt(P * (1 - P) / N), rel=0.05)
    assert any("fixed point" in n for n in ans["notes"])
    # the file's own count is far too few: the answer is several times it, where goodput is lower
    assert dl["gpus"] > 3 * 4096


def test_fixed_point_agrees_with_a_file_written_for_that_count(found):
    spec, ans = found
    g = ans["deadline"]["gpus"]
    at_g = _spec(g)  # a file written for g accelerators: its goodput resolved at load, at g
    assert at_g.priors["goodput"] != spec.priors["goodput"]
    fixed = _spec(g, goodput=at_g.priors["goodput"].to_dict())  # the same prior, no longer count-dependent
    assert not fixed.count_dependent
    closed = plan_mod.plan(fixed, plan_options(fixed, deadline_days=D, prob=P, gpus=g))
    assert "count_dependent" not in closed and len(closed["notes"]) == 1
    assert "goodput" in closed["notes"][0] and "held at the file's prior" in closed["notes"][0]
    # that file's closed-form count is g: its log within K MCSE of the p-quantile of log hours (+ a bin, + the step)
    s = _sigma_log_hours(closed)
    tol = K * s * math.sqrt(P * (1 - P) / N) / stats.norm.pdf(stats.norm.ppf(P)) + 2 * 9 * s / 4096 + 1.0 / g
    assert abs(math.log(closed["deadline"]["gpus_exact"]) - math.log(g)) < tol
    # and its P(done within D) on g accelerators is p, within K MCSE (+ a bin of the histogram's CDF)
    pw = closed["cluster"]["prob_within_deadline"]
    assert abs(pw - ans["deadline"]["prob_at_gpus"]) < K * math.sqrt(P * (1 - P) / N) + 2 * 9 / 4096 * stats.norm.pdf(0)


def test_cluster_days_at_another_count_are_that_files():
    a, b = _spec(4096), _spec(16384)
    on_a = plan_mod.plan(a, plan_options(a, gpus=16384))
    on_b = plan_mod.plan(b, plan_options(b))
    assert on_a["cluster"]["gpus"] == on_b["cluster"]["gpus"] == 16384
    for k in ("days_p50", "days_p90"):  # the same draws, the same goodput(16,384): the same days
        assert on_a["cluster"][k] == pytest.approx(on_b["cluster"][k], rel=1e-6)
    # and not what the 4,096-GPU goodput would say: goodput falls with the count
    old = plan_mod.plan(a, plan_options(a))["gpu_hours"]["p50"]
    assert on_a["gpu_hours"]["p50"] > 1.02 * old


def _exact_fixed_point(mu1, sigma, rate, tau, delta, restart, p, days):
    """min integer G with Phi((log(24 D G g(G)) - mu1) / sigma) >= p, log hours at goodput 1 ~ N(mu1, sigma)."""
    G = np.arange(1, 200_000)
    need = math.exp(mu1 + sigma * stats.norm.ppf(p)) / (24 * days)
    ok = G * gp.goodput(rate, G, tau, delta, restart) >= need
    return int(G[np.argmax(ok)]) if ok.any() else None


def test_fixed_point_matches_the_closed_form_with_point_goodput():
    rate, tau, delta, restart = 3e-5, 0.5, 0.01, 0.1
    spec = mcflops.load_spec({
        "name": "pc2", "seed": 11, "samples": N, "hardware": {"accelerator": "h100-sxm", "count": 1024},
        "priors": {"params": 70e9, "tokens": {"lognormal": [10e12, 20e12]}, "mfu": 0.4,
                   "goodput": {"failures": {"rate_per_gpu_hour": rate, "checkpoint_write_h": delta,
                                            "checkpoint_interval_h": tau, "restart_h": restart}}}})
    ans = plan_mod.plan(spec, plan_options(spec, deadline_days=30, prob=P))
    sigma = (math.log(20e12) - math.log(10e12)) / (2 * Z95)
    mu1 = math.log(6 * 70e9) + 0.5 * math.log(10e12 * 20e12) - math.log(H100 * 0.4 * 3600)
    # K MCSE of the p-quantile of log hours moves the exact answer between these two
    tol = K * sigma * math.sqrt(P * (1 - P) / N) / stats.norm.pdf(stats.norm.ppf(P))
    lo = _exact_fixed_point(mu1 - tol, sigma, rate, tau, delta, restart, P, 30)
    hi = _exact_fixed_point(mu1 + tol, sigma, rate, tau, delta, restart, P, 30)
    assert lo is not None and lo <= ans["deadline"]["gpus"] <= hi
    assert hi < 1.1 * lo  # the check is tight
    # on common random numbers each draw's "done" is monotone in G g(G), which rises below its peak
    # G = 1.594 / ((tau + delta) rate) (x^2 / (e^x - 1) peaks at x = 1.594): the curve cannot fall there
    peak = 1.594 / ((tau + delta) * rate)
    g, pr = np.asarray(ans["curve"]["gpus"]), np.asarray(ans["curve"]["prob"])
    assert g.max() < peak and np.all(np.diff(pr) >= 0)


def test_no_count_reaches_p_when_failures_cap_the_throughput():
    spec = mcflops.load_spec({**_raw(4096, seed=4), "priors": {**_raw(4096)["priors"], "goodput": {"failures": {
        "rate_per_gpu_hour": 2e-5, "checkpoint_write_h": 0.005, "checkpoint_interval_h": 24, "restart_h": 0.1}}}})
    ans = plan_mod.plan(spec, plan_options(spec, deadline_days=900, prob=P))
    dl = ans["deadline"]
    # G g(G) = 24 r G^2 / (e^{24 r G} - 1) (restart aside) peaks at 24 r G = 1.594: at most ~1,370 GPUs' worth
    assert dl["gpus"] is None and 0 < dl["best_prob"] < P
    assert abs(dl["best_gpus"] - 1.594 / (24 * 2e-5)) < 0.25 * 1.594 / (24 * 2e-5)
    assert any("no accelerator count" in n for n in ans["notes"])
    assert any("optimum" in n for n in ans["notes"])  # the interval is ~70x Daly's optimum


def _raw(count, seed=3):
    return {"name": "pc", "seed": seed, "samples": N, "hardware": {"accelerator": "h100-sxm", "count": count},
            "priors": {"params": 405e9, "tokens": {"lognormal": [15e12, 16.8e12]},
                       "mfu": {"beta": {"mean": 0.36, "sd": 0.04}}}}


def test_run_answers_the_plan_block_as_plan_does():
    raw = {**_raw(4096), "samples": 20_000, "priors": {**_raw(4096)["priors"], "price": {"lognormal": [2, 5]}},
           "plan": {"deadline_days": 200, "budget_usd": 1e8}}
    res = mcflops.run(raw)
    assert res.to_dict()["plan"] == mcflops.plan(raw)
    assert "plan" not in mcflops.run({k: v for k, v in raw.items() if k != "plan"}).to_dict()
