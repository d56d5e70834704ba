"""The starting points in priors/examples/ (the README's quick start names each): every file loads, every prior
in it carries its source, and each answers its question, checked against what the tool did not compute itself:
the H100 / B200 comparison's median against its closed form (the datasheets' peak ratio over the ratio prior's
median, scipy's truncated lognormal), the MoE's shape against its config.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from ruamel.yaml import YAML
from scipy import stats

import mcflops
from mcflops import hardware
from mcflops.analysis import compare as compare_mod
from mcflops.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "priors" / "examples"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def test_the_readme_runs_each_example():
    readme = (ROOT / "README.md").read_text()
    assert len(FILES) >= 3
    for f in FILES:
        assert f"priors/examples/{f.name}" in readme, f.name


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_each_example_loads_and_every_prior_says_where_it_comes_from(path):
    spec = load_spec(path)
    assert not spec.observe  # a new run: nothing published to condition on
    data = YAML(typ="safe", pure=True).load(path.read_text())
    for name, node in data["priors"].items():
        assert isinstance(node, dict) and node.get("source"), f"{path.name}: priors.{name} has no source"
    assert data.get("plan") or path.stem.endswith("b200")


def test_the_dense_example_answers_its_deadline():
    spec = load_spec(EXAMPLES / "dense70b-h100.yaml")
    ans = mcflops.plan(spec, samples=50_000)
    dl = ans["deadline"]
    # the count for 60 days at 90% is the p90 hours over 60 x 24: above the file's 4,096 only if its p90 is
    assert dl["gpus"] == math.ceil(ans["gpu_hours"]["at_prob"] / (60 * 24) - 1e-9)
    assert ans["notes"][0].startswith("what moves with the accelerator count: mfu is the calibrated MFU x goodput")


def test_h100_against_b200_is_the_peak_ratio_over_the_mfu_ratio():
    """Tokens are shared and B's MFU is A's times an independent ratio r, so B / A = (P_A / P_B) / r draw by
    draw, and its median is (P_A / P_B) / median(r). r is a lognormal with 90% interval [0.65, 1.0], truncated
    above at 1.03: its median solves F(x) = F(1.03) / 2 (scipy). Tolerance: 4 MCSE of a median of log B / A
    (sd / (n f) with the density of a normal of that sd: sqrt(pi / 2) sd / sqrt(n)), n = 50,000 (a false-failure
    rate of 6e-5), plus two bins of the histogram compare reads quantiles from (as tests/analysis/test_compare.py)."""
    a, b = load_spec(EXAMPLES / "dense70b-h100.yaml"), load_spec(EXAMPLES / "dense70b-b200.yaml")
    n = 50_000
    c = compare_mod.compare(a, b, samples=n)
    sigma = (math.log(1.0) - math.log(0.65)) / (2 * stats.norm.ppf(0.95))
    r = stats.lognorm(s=sigma, scale=math.sqrt(0.65 * 1.0))
    med_r = r.ppf(r.cdf(1.03) / 2)
    peak = hardware.get("h100-sxm").peak("bf16") / hardware.get("b200").peak("bf16")
    got = c["ratio"]["p50"]
    se = math.sqrt(math.pi / 2) * sigma / math.sqrt(n)
    log_bin = np.diff(c["ratio_hist"]["log_edges"])[0] / 64  # compare reads its quantiles off this fine histogram
    assert abs(math.log(got) - math.log(peak / med_r)) < 4 * se + 2 * log_bin, (got, peak / med_r)
    assert c["ratio"]["p5"] < got < c["ratio"]["p95"] and c["ratio"]["p95"] / c["ratio"]["p5"] > 1.3


def test_the_moe_example_reads_its_config_and_mixes_what_its_layout_leaves_out():
    cfg = json.loads((EXAMPLES / "mixtral-8x7b" / "config.json").read_text())
    spec = load_spec(EXAMPLES / "moe-from-config.yaml")
    shape = spec.architecture.shape()
    assert (shape.layers, shape.d_model, shape.experts, shape.experts_active) == (
        cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_local_experts"], cfg["num_experts_per_tok"])
    lp = spec.count_dependent["mfu"]
    assert "recompute" in lp.mixed and lp.layout.ep == 8
    notes = " ".join(lp.notes())
    assert "recompute is not stated" in notes
    m = lp.factor_draws()["mfu"]
    assert 0 < np.quantile(m, 0.05) < np.quantile(m, 0.95) < 1
