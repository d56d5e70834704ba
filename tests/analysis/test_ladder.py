"""The ladder of MFU priors (analysis.ladder) against what it did not compute: each rung's GPU-hours median and
the deadline's accelerators against a quadrature of the same priors (scipy's beta and lognormal, the calibrated
prior's quantile table read as the mixture of uniforms it is), and the published run its note names against
6ND / (peak x hours) from mcflops/data/published_runs.yaml. A pilot on the production layout and count returns
its own measurement (the conjugate normal limit), and the weighted quantiles reduce to NumPy's with equal weights.

Quantile checks allow K = 4 Monte Carlo standard errors of the quantile (sqrt(p(1-p)/n) / f(q), f the oracle's
density of log GPU-hours: a 6e-5 false-failure rate per comparison) plus one bin of the pass's histogram (its
width is 2 x the pilot's range / NBINS; the range is bounded by the oracle's 1e-8 and 1 - 1e-8 quantiles), with
the file's fixed seed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from ruamel.yaml import YAML
from scipy import optimize, stats

from mcflops import cli, hardware
from mcflops.analysis import ladder as ladder_mod
from mcflops.analysis import pilot as pilot_mod
from mcflops.analysis import scenarios as scen
from mcflops.engine import NBINS
from mcflops.priors.dist import Z95
from mcflops.priors.quantiles import ppf

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "priors" / "examples" / "ladder" / "dense70b-guess.yaml"
LAYOUT = "tp=8,pp=8,global_batch=2048"
PILOT = "count=512,tflops_per_gpu=420"
K = 4.0
N = 50_000


@pytest.fixture(scope="module")
def two_rungs():
    return ladder_mod.ladder(FILE, samples=N), ladder_mod.rungs(FILE)


def _ppf(d):
    """The prior's inverse CDF from scipy (beta, lognormal, point) or, for a quantile table, the mixture of
    adjacent uniforms it is (its CDF linear between knots)."""
    p = d.params
    if d.family == "beta":
        return stats.beta(p["a"], p["b"]).ppf
    if d.family == "point":
        return lambda u: np.full_like(np.asarray(u, float), p["value"])
    assert d.family == "mixture"
    lo = np.array([c.params["low"] for c in d.components])
    hi = np.array([c.params["high"] for c in d.components])
    assert np.allclose(lo[1:], hi[:-1])  # a table: each part starts where the last ends
    cum = np.concatenate([[0.0], np.cumsum(d.weights)])
    knots = np.concatenate([lo[:1], hi])
    return lambda u: np.interp(u, cum / cum[-1], knots)


def _oracle(spec, m=600):
    """CDF of log GPU-hours = log(6 N D / (peak 3600)) - log MFU - log goodput (Kaplan et al. 2020, C = 6ND):
    D lognormal (exact, scipy's normal CDF), MFU and goodput integrated on m equal-probability midpoints each."""
    pr = spec.priors
    assert pr["params"].family == "point" and pr["peak_flops"].family == "point"
    t = pr["tokens"].params
    c = math.log(6 * pr["params"].params["value"] / (pr["peak_flops"].params["value"] * 3600))
    u = (np.arange(m) + 0.5) / m
    y = (np.log(_ppf(pr["mfu"])(u))[:, None] + np.log(_ppf(pr["goodput"])(u))[None, :]).ravel()

    def cdf(h):
        return float(np.mean(stats.norm.cdf((h - c + y - t["mu"]) / t["sigma"])))

    def q(p):
        return optimize.brentq(lambda h: cdf(h) - p, c + t["mu"] - y.max() - 10, c + t["mu"] - y.min() + 10,
                               xtol=1e-10)

    def dens(h, e=1e-4):
        return (cdf(h + e) - cdf(h - e)) / (2 * e)

    return q, dens


def test_every_prior_in_the_example_says_where_it_comes_from():
    data = YAML(typ="safe", pure=True).load(FILE.read_text())
    assert data["architecture"].get("source") and data.get("plan")
    for name, node in data["priors"].items():
        assert isinstance(node, dict) and node.get("source"), f"priors.{name} has no source"


def test_the_files_priors_are_the_stated_intervals(two_rungs):
    _, rs = two_rungs
    pr = rs[0]["spec"].priors
    assert np.allclose(stats.beta(pr["mfu"].params["a"], pr["mfu"].params["b"]).ppf([0.05, 0.95]), [0.30, 0.45],
                       rtol=1e-3)
    t = pr["tokens"].params
    assert math.isclose(t["sigma"], math.log(16e12 / 14e12) / (2 * Z95), rel_tol=1e-9)


def test_each_rung_matches_its_quadrature(two_rungs):
    d, rs = two_rungs
    assert [r["kind"] for r in d["rungs"]] == ["hand-set", "calibrated"]
    assert d["deadline"]["days"] == 60 and d["deadline"]["prob"] == 0.9
    for row, r in zip(d["rungs"], rs):
        q, dens = _oracle(r["spec"])
        bin_ = 2 * (q(1 - 1e-8) - q(1e-8)) / NBINS
        for p, got in ((0.5, row["gpu_hours"]["p50"]), (0.9, row["deadline"]["gpus_exact"] * 24 * 60)):
            want = q(p)
            tol = K * math.sqrt(p * (1 - p) / N) / dens(want) + bin_
            assert abs(math.log(got) - want) < tol, (row["kind"], p, got, math.exp(want), tol)
        assert row["deadline"]["gpus"] == math.ceil(row["deadline"]["gpus_exact"] - 1e-9)
        # days on the file's 4,096: GPU-hours / (24 x 4,096), draw by draw, so its median is the hours' median's
        assert math.isclose(row["wall_days"]["p50"], row["gpu_hours"]["p50"] / (24 * 4096), rel_tol=2e-3)
        want = _ppf(r["spec"].priors["mfu"])(np.array([0.05, 0.5, 0.95]))
        assert np.allclose([row["mfu"][k] for k in ("p5", "p50", "p95")], want, rtol=1e-3)
    # effective utilization: the calibrated rung leaves the file's goodput out (downtime is in its MFU)
    assert d["rungs"][1]["goodput"] is None and rs[1]["spec"].priors["goodput"].params == {"value": 1.0}


def test_rungs_share_every_draw_but_the_mfu_and_goodput(two_rungs):
    _, rs = two_rungs
    a, b = scen.scenario_draws([r["spec"] for r in rs], size=4096)
    assert np.array_equal(a["tokens"], b["tokens"])  # common random numbers (same machine: exact)
    assert not np.array_equal(a["mfu"], b["mfu"])


def test_the_note_names_the_published_runs_the_guess_is_above(two_rungs):
    d, _ = two_rungs
    data = YAML(typ="safe", pure=True).load((ROOT / "mcflops" / "data" / "published_runs.yaml").read_text())
    run = next(r for r in data["runs"] if r["id"] == "llama3.1-70b")
    peak = hardware.get("h100-sxm").peak("bf16")
    implied = 6 * run["params_active"] * run["tokens"] / (peak * run["hours"] * 3600)  # 6ND / (peak x hours)
    mine = d["rungs"][0]["effective"]["p50"]
    assert implied < mine
    note = next(n for n in d["notes"] if "comparable published run" in n)
    assert f"llama3.1-70b {implied:.3f}" in note and f"median {mine:.3f}" in note
    assert note.index("above") < note.index("llama3.1-70b")
    assert any("published runs' (the calibrated prior) 90% band" in n for n in d["notes"])


def test_the_command_shows_four_rungs_and_writes_the_report(tmp_path, capsys):
    out = tmp_path / "ladder"
    assert cli.main(["ladder", str(FILE), "--layout", LAYOUT, "--pilot", PILOT, "--samples", "4000", "--quiet",
                     "--json", "--out", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in d["rungs"]] == ["hand-set", "calibrated", "layout", "pilot"]
    lay, pil = d["rungs"][2], d["rungs"][3]
    assert lay["count_dependent"] == ["mfu"] and lay["deadline"]["method"] == "fixed point"
    # the pilot's prior is re-solved at the deadline's count on the same weighted draws, as the layout's is
    assert pil["count_dependent"] == ["mfu"] and pil["deadline"]["method"] == "fixed point"
    assert pil["pilot"]["pilots"][0]["count"] == 512
    # the pilot narrows the layout model's production MFU (its 90% interval, as a ratio p95 / p5)
    assert pil["mfu"]["p95"] / pil["mfu"]["p5"] < lay["mfu"]["p95"] / lay["mfu"]["p5"]
    assert json.loads((out / "ladder.json").read_text())["rungs"][2]["label"] == lay["label"]
    # the layout leaves micro_batch and recompute to the run: the notes say what the tuned choice took, once for
    # the layout and pilot rungs (32 sequences a replica on 8 stages: one sequence a micro-batch, the least bubble)
    said = [x for x in d["notes"] if "micro_batch is not stated" in x]
    assert len(said) == 1 and said[0].startswith("C, D: layout: micro_batch is not stated: each draw takes the fastest "
                                                 "of 1, 2, 4, 8, 16, 32") and "(1 in 100% of the draws)" in said[0]
    # the layout rung's width and its largest part (mcflops.layout.explain.width_parts), its p95/p5 the rung's own
    # sampled one within 4.5 standard errors (each end's log quantile ~0.0085 at 4,000 draws of a log-sd ~0.25)
    # one pilot count: the note says what a second one adds
    assert sum(x.startswith("one pilot count pins the efficiencies' product") for x in d["notes"]) == 1
    said = [x for x in d["notes"] if x.startswith("the layout rung's MFU spans ")]
    assert len(said) == 1 and "GEMM efficiency at its median" in said[0]
    w = float(said[0].split("spans ", 1)[1].split("x", 1)[0])
    assert abs(math.log(w) - math.log(lay["mfu"]["p95"] / lay["mfu"]["p5"])) < 4.5 * math.sqrt(2) * 0.0085
    md = (out / "report.md").read_text()
    assert "## 1. MFU in context" in md and "C: layout tp 8, pp 8, global\\_batch 2048" in md
    assert f"--layout {LAYOUT} --pilot {PILOT},sigma=0.05" in md  # the reproduce line


def test_a_pilot_at_production_returns_its_measurement():
    """A pilot on the production layout and count is a direct measurement of the production MFU: with sigma far
    below the layout prior's spread (about 0.7 in log MFU) the posterior of log MFU is close to N(log m_obs,
    sigma^2) (conjugate normal: mean shrinks by sigma^2 / tau^2 < 0.1%, plus the prior's slope times sigma^2, under
    0.1 sigma for a slope below 5). Tolerance: that 0.1 sigma plus 4 MCSE of a weighted median (sqrt(pi / 2)
    sigma / sqrt(ESS)); the 90% interval's width within 15% of 2 z95 sigma."""
    rs = ladder_mod.rungs(FILE, ladder_mod.layout_options([LAYOUT]))
    prior = rs[2]["spec"].count_dependent["mfu"]
    sigma, tflops = 0.02, 350.0
    res = pilot_mod.condition(prior, [pilot_mod.parse_pilot(f"count=4096,tflops_per_gpu={tflops:g},sigma={sigma:g}")])
    obs = tflops * 1e12 / hardware.get("h100-sxm").peak("bf16")
    q5, q50, q95 = np.log(ppf(res["dist"], [0.05, 0.5, 0.95]))
    want = math.log(obs * prior.counting)  # the file's 6ND units: the architecture's FLOPs times counting
    assert abs(q50 - want) < 0.1 * sigma + 4 * math.sqrt(math.pi / 2) * sigma / math.sqrt(res["ess"]), (q50, want)
    assert abs((q95 - q5) / (2 * Z95 * sigma) - 1) < 0.15
    assert abs(res["pilots"][0]["predicted_posterior"]["p50"] / obs - 1) < 0.01


@pytest.mark.parametrize("bad, flag, says", [
    (["--layout", "tp8"], "--layout", "expected KEY=VALUE"),
    (["--layout", "tp=8,pp=8"], "--layout", "missing global_batch"),
    (["--pilot", PILOT], "--pilot", "give the production layout as well"),
    (["--layout", LAYOUT, "--pilot", "count=512"], "--pilot", "missing one measurement="),
    (["--layout", LAYOUT, "--pilot", f"{PILOT},tq=8"], "--pilot", "unknown field tq="),
    (["--layout", LAYOUT, "--pilot", "count=512,tflops_per_gpu=1200"], "--pilot", "of the accelerator's dense peak"),
    (["--layout", LAYOUT, "--pilot", "count=500,tflops_per_gpu=400"], "--pilot", "the pilot's layout on 500")])
def test_a_bad_layout_or_pilot_is_one_line_and_writes_nothing(tmp_path, capsys, bad, flag, says):
    out = tmp_path / "x"
    assert cli.main(["ladder", str(FILE), *bad, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and says in err, err
    assert not out.exists()


def test_a_file_in_other_units_gets_no_calibrated_rung_and_says_why():
    """PaLM's file counts FLOPs as PaLM App. B does (flops: palm); the calibrated prior is in 6ND units, so the
    ladder is the file's own rung, with a note, not an error (one rung: set beside itself, every draw shared)."""
    d = ladder_mod.ladder(ROOT / "priors" / "palm-540b.yaml", samples=2000)
    assert [r["kind"] for r in d["rungs"]] == ["hand-set"]
    assert d["notes"][0].startswith("no rung from published runs: the calibrated prior is in 6ND units")


def test_a_file_with_a_pilot_is_its_own_pilot_rung_beside_its_layout_without_it():
    from mcflops.spec.pilots import PilotedPrior

    rs = ladder_mod.rungs(FILE.parent / "dense70b-pilot.yaml")
    assert [r["kind"] for r in rs] == ["pilot", "calibrated", "layout"]
    own, lay = rs[0], rs[2]
    assert isinstance(own["spec"].count_dependent["mfu"], PilotedPrior) and own["pilot"]["pilots"][0]["count"] == 512
    assert not lay["spec"].pilots and not isinstance(lay["spec"].count_dependent["mfu"], PilotedPrior)
    # the same layout, the same draws: the pilot rung's table is the layout rung's draws reweighted
    piloted = own["spec"].count_dependent["mfu"]
    assert np.array_equal(piloted.factor_draws()["mfu"], lay["spec"].count_dependent["mfu"].factor_draws()["mfu"])


def test_the_api_returns_what_the_command_prints(capsys):
    """api.ladder and `mcflops ladder --json` on one file, seed and sample count: the same data (one machine,
    one process: the same code, so exactly equal); a mapping of the file gives the same rungs."""
    from mcflops import api

    got = api.ladder(str(FILE), samples=1000)
    assert cli.main(["ladder", str(FILE), "--samples", "1000", "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(got))
    lay = {"tp": 8, "pp": 8, "global_batch": 2048}
    from_dict = ladder_mod.rungs(YAML(typ="safe").load(FILE.read_text()), lay)
    assert [r["spec"].digest() for r in from_dict] == [r["spec"].digest() for r in ladder_mod.rungs(FILE, lay)]


@pytest.mark.parametrize("kw, says", [
    ({"layout": "tp=8"}, "mcflops.ladder(layout=): expected a mapping"),
    ({"layout": ["tp8"]}, "mcflops.ladder(layout=): expected KEY=VALUE"),
    ({"layout": {"tp": 8, "pp": 8, "global_batch": 2048}, "pilots": ["count=512"]},
     "mcflops.ladder(pilots=): missing one measurement="),
    ({"pilots": "count=512,tflops_per_gpu=420"}, "mcflops.ladder(pilots=): expected a list"),
    ({"samples": 10}, "mcflops.ladder(samples=): expected at least 1000")])
def test_the_api_names_its_arguments(kw, says):
    from mcflops import api
    from mcflops.errors import UsageError

    with pytest.raises(UsageError) as e:
        api.ladder(str(FILE), **kw)
    assert says in str(e.value), str(e.value)


def test_two_pilot_counts_leave_out_the_note_asking_for_a_second():
    d = ladder_mod.ladder(FILE, [LAYOUT], pilots=[PILOT, "count=1024,tflops_per_gpu=400"], samples=2000)
    pil = next(r for r in d["rungs"] if r["kind"] == "pilot")
    assert sorted(c["count"] for c in pil["pilot"]["pilots"]) == [512, 1024]
    assert not any(x.startswith("one pilot count pins") for x in d["notes"])
