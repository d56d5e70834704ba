"""A ratio prior (`mfu: {relative_to: A.yaml, ratio: <prior>}`) against oracles we did not write: in compare, B / A
for that input is the ratio prior (its lognormal closed form) and B / A for GPU-hours matches a NumPy simulation
of independent draws; alone, B's prior is the product of A's prior and the ratio (NumPy sampling). Bad forms
give one line and exit 2, and nothing is written.

Tolerances: K = 4 Monte Carlo standard errors (6e-5 false-failure rate per comparison, normal approximation),
plus two histogram bins where a quantile is read off compare's histogram; fixed seeds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops.analysis import compare as compare_mod
from mcflops.cli.main import main

K = 4.0
N = 1 << 18
M = 4_000_000  # the NumPy oracle's draws
PROBS = (0.05, 0.25, 0.5, 0.75, 0.95)
NAMES = ("p5", "p25", "p50", "p75", "p95")
MU, SIGMA = math.log(1.3) / 2, math.log(1.3) / (2 * stats.norm.ppf(0.95))  # lognormal 90% [1.0, 1.3]

A = """name: h100
seed: 11
samples: {n}
hardware: {{accelerator: h100-sxm, count: 4096}}
priors:
  params: 70e9
  tokens: {{lognormal: [1e12, 2e12]}}
  mfu: {{beta: [0.25, 0.40]}}
  goodput: {{beta: [0.85, 0.97]}}
"""
B = """name: h200
seed: 11
samples: {n}
hardware: {{accelerator: h200, count: 4096}}
priors:
  params: 70e9
  tokens: {{lognormal: [1e12, 2e12]}}
  mfu:
    {mfu}
  goodput: {{beta: [0.80, 0.95]}}
"""
RATIO = "{relative_to: a.yaml, ratio: {lognormal: [1.0, 1.3]}, source: 'a guess'}"


def _files(tmp: Path, mfu: str = RATIO, n: int = N) -> tuple[Path, Path]:
    (tmp / "a.yaml").write_text(A.format(n=n))
    (tmp / "b.yaml").write_text(B.format(n=n, mfu=mfu))
    return tmp / "a.yaml", tmp / "b.yaml"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    a, b = _files(tmp_path_factory.mktemp("ratio"))
    return mcflops.load_spec(a), mcflops.load_spec(b)


def _beta(spec, name):
    p = spec.priors[name].params
    return stats.beta(p["a"], p["b"])


def test_b_over_a_for_the_input_is_the_ratio_prior(pair):
    sa, sb = pair
    va, vb = compare_mod.paired_draws(sa, sb, size=N)
    log_r = np.log(vb["mfu"] / va["mfu"])
    for p in PROBS:
        q = MU + SIGMA * stats.norm.ppf(p)  # the lognormal's closed form
        se = math.sqrt(p * (1 - p) / N) / stats.norm.pdf(q, MU, SIGMA)
        assert abs(np.quantile(log_r, p) - q) < K * se, p
    assert abs(log_r.mean() - MU) < K * SIGMA / math.sqrt(N)
    # drawn independently of A's MFU: rank correlation 0 within K of its standard error 1/sqrt(N - 1)
    assert abs(stats.spearmanr(log_r[:1 << 16], va["mfu"][:1 << 16])[0]) < K / math.sqrt((1 << 16) - 1)
    # tokens (identical priors) are still shared; goodput (priors differ) independent
    assert np.array_equal(va["tokens"], vb["tokens"])


def test_gpu_hours_ratio_matches_numpy(pair):
    sa, sb = pair
    c = compare_mod.compare(sa, sb)
    row = next(r for r in c["inputs"] if r["name"] == "mfu")
    assert row["draws"] == "ratio to A" and row["relative_to"] == "a.yaml" and row["spearman"] is None
    assert c["ratio_inputs"] == {"mfu": row["ratio"]} and "1.300" in row["ratio"]
    assert c["shared_inputs"] == ["tokens"] and c["independent_inputs"] == ["goodput"]
    assert any("ratio to A" in n or "that prior exactly" in n for n in c["notes"])
    # the oracle: hours ∝ 1 / (mfu goodput), so B / A = (goodput_A / goodput_B) / ratio, all three independent
    rng = np.random.default_rng(2024)
    ga, gb = _beta(sa, "goodput").rvs(M, random_state=rng), _beta(sb, "goodput").rvs(M, random_state=rng)
    log_oracle = np.log(ga / gb) - rng.normal(MU, SIGMA, M)
    log_bin = np.diff(c["ratio_hist"]["log_edges"])[0] / 64  # the fine histogram's bin
    h = 0.01
    for p, k in zip(PROBS, NAMES):
        q, lo, hi = np.quantile(log_oracle, [p, p - h, p + h])
        dens = 2 * h / (hi - lo)
        se = math.sqrt(p * (1 - p) * (1 / N + 1 / M)) / dens
        assert abs(math.log(c["ratio"][k]) - q) < K * se + 2 * log_bin, k
    P = float(np.mean(log_oracle < 0))
    assert abs(c["ratio"]["prob_b_less"] - P) < K * math.sqrt(P * (1 - P) * (1 / N + 1 / M))


def test_alone_b_is_a_times_the_ratio(pair):
    sa, sb = pair
    from mcflops.priors import quantiles

    d = sb.priors["mfu"]
    assert "mfu of a.yaml" in d.source and d.source.startswith("a guess")
    rng = np.random.default_rng(7)
    x = _beta(sa, "mfu").rvs(M, random_state=rng) * rng.lognormal(MU, SIGMA, M)
    from mcflops.priors.table import KNOT_PROBS

    knots = KNOT_PROBS[(KNOT_PROBS > 1e-3) & (KNOT_PROBS < 1 - 1e-3)]  # the table is exact at its knots
    # every quantile in one call (one partition of the 4M draws, not three per knot): the same numbers
    qs, his, los = np.quantile(x, np.stack([knots, knots + 0.002, knots - 0.002]))
    for p, q, hi, lo in zip(knots, qs, his, los):
        dens = 2 * 0.002 / (hi - lo)
        assert abs(float(quantiles.ppf(d, p)) - q) < K * math.sqrt(p * (1 - p) / M) / dens + 1e-4 * q, p


def test_run_b_alone_and_its_resolved_file(tmp_path, capsys):
    a, b = _files(tmp_path, n=4000)
    assert main(["run", str(b), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    from mcflops.priors import quantiles

    again = mcflops.load_spec(tmp_path / "out" / "spec.resolved.yaml")  # the product, standalone
    assert again.priors["mfu"] == mcflops.load_spec(b).priors["mfu"] and not again.compare.ratios
    median = float(quantiles.ppf(again.priors["mfu"], 0.5))
    assert abs(summary["prior"]["mfu"]["p50"] - median) < K * summary["prior"]["mfu"]["mcse_p50"] + 1e-3 * median


def _cli(argv, capsys):
    rc = main([str(x) for x in argv])
    out, err = capsys.readouterr()
    return rc, err


@pytest.mark.parametrize("mfu,fragment,field", [
    ("{relative_to: nowhere.yaml, ratio: {lognormal: [1.0, 1.3]}}", "nowhere.yaml is not a file",
     "priors.mfu.relative_to"),
    ("{relative_to: a.yaml, ratio: {normal: {mean: 1, sd: 0.5}}}", "expected a positive prior for the ratio",
     "priors.mfu.ratio"),
    ("{relative_to: a.yaml, ratio: -1.1}", "expected a positive prior for the ratio", "priors.mfu.ratio"),
    ("{relative_to: a.yaml}", "expected ratio:", "priors.mfu"),
    ("{relative_to: a.yaml, ratio: {lognormal: [2, 4]}}", "leaves (0, 1] with probability", "priors.mfu.ratio"),
    ("{relative_to: b.yaml, ratio: 1.1}", "leads back to this file", "priors.mfu.relative_to"),
    ("{relative_to: a.yaml, ratio: 1.1, couple: 0.5}", "unknown key 'couple'", "priors.mfu"),
])
def test_bad_ratio_forms_give_one_line_and_write_nothing(tmp_path, capsys, mfu, fragment, field):
    a, b = _files(tmp_path, mfu=mfu, n=4000)
    for argv in (["compare", a, b, "--out", tmp_path / "cmp"], ["run", b, "--out", tmp_path / "run"]):
        rc, err = _cli(argv, capsys)
        assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert err.startswith(f"error: {b}:") or f"{b}:" in err, err
        assert fragment in err and f": {field}: " in err, err
        assert not (tmp_path / "cmp").exists() and not (tmp_path / "run").exists()


def test_relative_to_an_input_a_lacks(tmp_path, capsys):
    a, b = _files(tmp_path, n=4000)
    b.write_text(b.read_text() + "  price: {relative_to: a.yaml, ratio: 1.1}\n")
    rc, err = _cli(["compare", a, b], capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "a.yaml has no price prior" in err
    assert ": priors.price.relative_to: " in err
    b.write_text(B.format(n=4000, mfu=RATIO) + "  pue: {relative_to: a.yaml, ratio: 1.1}\n  power: 700\n")
    rc, err = _cli(["compare", a, b], capsys)
    assert rc == 2 and "leaves to its default the pue prior" in err


def test_compare_against_another_file_or_coupled_is_refused(tmp_path, capsys):
    a, b = _files(tmp_path, n=4000)
    c = tmp_path / "c.yaml"
    c.write_text(a.read_text().replace("name: h100", "name: other"))
    rc, err = _cli(["compare", c, b, "--out", tmp_path / "x"], capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "mfu is relative to a.yaml, but A here is" in err, err
    assert f"{b}:" in err and not (tmp_path / "x").exists()
    rc, err = _cli(["compare", a, b, "--couple", "mfu=0.5"], capsys)
    assert rc == 2 and "cannot also be coupled" in err and "--couple" in err


def test_the_report_and_the_figure_say_ratio_to_a(tmp_path, capsys):
    a, b = _files(tmp_path, n=4000)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "ratio to A mfu (x lognormal 90% [1.000, 1.300])" in " ".join(out.split())
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "ratio to A: mfu (x lognormal 90%" in report and "ratio to A (A's draw times the ratio's)" in report
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert data["ratio_inputs"] == {"mfu": "lognormal 90% [1.000, 1.300]"}
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 1000


def test_the_figure_label_says_ratio_to_a(tmp_path, monkeypatch):
    from mcflops.plots import sensitivity as plots, style

    a, b = _files(tmp_path, n=4000)
    data = mcflops.compare(str(a), str(b))
    labels = []
    monkeypatch.setattr(style, "save", lambda fig, path: labels.append(fig.axes[0].get_xlabel()) or str(path))
    plots.compare_ratio(tmp_path / "c.png", data)
    assert "ratio to A: mfu (x lognormal 90% [1.000, 1.300])" in labels[0]
