"""The notes a Spec carries from its load: what the file leaves to the defaults (goodput 1, PUE 1, the
catalogue's peak and TDP), the priors that load but look like mistakes (a U-shaped beta, a beta whose
reciprocal has no mean or variance), the ones refused (no spread, weights not summing to 1), and a
published figure in the prior predictive's outer 1% ("check the figure's scope")."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from mcflops import hardware
from mcflops.errors import SpecError
from mcflops.spec import load_spec, resolved_dict

BASE = {"name": "notes", "seed": 3, "samples": 20_000, "hardware": {"accelerator": "h100", "count": 1024},
        "priors": {"params": 8e9, "tokens": {"lognormal": [1.4e12, 1.6e12]}, "mfu": {"beta": [0.3, 0.5]}}}


def spec(**priors):
    return load_spec({**BASE, "priors": {**BASE["priors"], **priors}})


def about(notes, word) -> list[str]:
    return [n for n in notes if n.startswith(word)]


def test_every_default_is_noted_with_its_figure_and_source():
    s = spec()
    h100 = hardware.get("h100-sxm")
    (g,) = about(s.notes, "goodput is 1")
    assert "about 10% optimistic" in g and "0.9" in g and "2407.21783" in g
    (p,) = about(s.notes, "peak_flops is the catalogue's")
    assert f"{h100.peak('bf16') / 1e12:g} TFLOP/s" in p and "NVIDIA H100 Tensor Core GPU datasheet" in p
    (w,) = about(s.notes, "power is the catalogue's TDP")
    assert f"{h100.tdp_w:g} W" in w and "datasheet" in w
    (u,) = about(s.notes, "PUE is 1")
    assert s.priors["pue"].params["value"] == 1.0 and "1.08" in u


def test_what_the_file_states_is_not_noted():
    s = spec(goodput={"beta": [0.85, 0.97]}, pue={"uniform": [1.05, 1.15]}, power=650, peak_flops=9e14)
    # what is left is what MFU means, not a default: its units under flops: 6nd (stated or not)
    assert [n.split(" (")[0] for n in s.notes] == ["mfu is in 6ND units"]


def test_the_calibrated_prior_gets_no_goodput_note():
    s = spec(mfu={"calibrated": True})  # effective utilization: downtime is in it
    assert about(s.notes, "goodput") == [] and s.priors["goodput"].params["value"] == 1.0


def test_the_resolved_file_loads_with_the_same_notes():
    s = spec(mfu={"beta": {"mean": 0.4, "sd": 0.4}})
    again = load_spec(resolved_dict(s))
    assert again.notes == s.notes and len(s.notes) == 7  # 4 defaults, the 6ND units, 2 warnings


def test_a_u_shaped_beta_warns_with_its_moments():
    s = spec(mfu={"beta": {"mean": 0.4, "sd": 0.4}})  # a typo for sd 0.04
    a, b = s.priors["mfu"].params["a"], s.priors["mfu"].params["b"]
    oracle = scipy.stats.beta(a, b)
    assert a < 1 and b < 1 and oracle.mean() == pytest.approx(0.4, rel=1e-12) and oracle.std() == pytest.approx(0.4)
    (u,) = [n for n in s.notes if "U-shaped" in n]
    assert u.startswith("WARNING: priors.mfu:") and "typo for sd 0.04" in u
    assert spec(mfu={"beta": {"mean": 0.4, "sd": 0.04}}).notes == spec().notes  # the intended prior: no warning


@pytest.mark.parametrize("a, mean_inf, var_inf", [(0.5, True, True), (1.0, True, True), (1.5, False, True),
                                                   (2.0, False, True), (2.5, False, False)])
def test_infinite_moments_of_one_over_mfu(a, mean_inf, var_inf):
    b = 4.0
    s = spec(mfu={"beta": {"a": a, "b": b}})
    lines = [n for n in s.notes if "proportional to 1/mfu" in n]
    # the oracle: E[X^-k] = integral of x^-k times scipy's beta density; it diverges at 0 exactly when a <= k,
    # so the integral over [eps, 1] keeps growing as eps shrinks (integrated in t = log x, where it is smooth)
    for k, infinite in ((1, mean_inf), (2, var_inf)):
        def f(t):
            return math.exp(t * (1 - k)) * scipy.stats.beta.pdf(math.exp(t), a, b)

        tail = [scipy.integrate.quad(f, math.log(eps), 0, limit=400)[0] for eps in (1e-6, 1e-12)]
        assert (tail[1] > 1.01 * tail[0]) == infinite, (k, tail)
        if not infinite:  # and, finite, it is B(a - k, b) / B(a, b)
            assert tail[1] == pytest.approx(scipy.special.beta(a - k, b) / scipy.special.beta(a, b), rel=1e-4)
    if not var_inf:
        assert lines == []
    else:
        (line,) = lines
        assert ("GPU-hours' mean and sd are infinite" if mean_inf else "GPU-hours' sd is infinite") in line


def test_a_beta_inside_a_mixture_is_checked_too():
    s = spec(goodput={"mixture": [{"beta": {"a": 0.5, "b": 0.5}}, 0.9]})
    assert [n[:40] for n in s.notes if n.startswith("WARNING")] == ["WARNING: priors.goodput.mixture[0]: beta"] * 2


@pytest.mark.parametrize("prior", [{"beta": {"a": 1e300, "b": 1e300}}, {"beta": {"a": 1e20, "b": 1e20}},
                                   {"normal": {"mean": 0.4, "sd": 1e-300}, "low": 0, "high": 1},
                                   {"pert": [0.4, 0.4, 0.4000000001]}])
def test_an_uncertain_prior_without_spread_is_one_line(prior):
    with pytest.raises(SpecError) as e:
        spec(mfu=prior)
    assert "has no spread" in e.value.message and e.value.field == "priors.mfu" and "(mfu: 0." in e.value.message


def test_a_narrow_prior_with_a_spread_is_kept():
    assert spec(params={"lognormal": [405.80e9, 405.81e9]}).priors["params"].family == "lognormal"


@pytest.mark.parametrize("weights, ok", [([0.7, 0.3], True), ([0.1] * 10, True), ([0.7, 0.2], False),
                                         ([1e308, 1e308], False), ([0.5, 0.5 + 1e-7], False), ([2, 2], False)])
def test_mixture_weights_sum_to_one(weights, ok):
    comps = [{"lognormal": [1.4e12, 1.6e12]}] * len(weights)
    prior = {"mixture": comps, "weights": weights}
    if ok:
        assert math.fsum(spec(tokens=prior).priors["tokens"].weights) == pytest.approx(1, abs=1e-15)
    else:
        with pytest.raises(SpecError, match="expected mixture weights that sum to 1"):
            spec(tokens=prior)


def _observed_at(z: float) -> dict:
    """gpu_hours at the normal score z of its prior: params and tokens lognormal, every other input a point, so
    that GPU-hours is lognormal with sigma = hypot of theirs, and its percentiles are exact (scipy's normal CDF).
    (Two uncertain inputs: the engine's one-uncertain-input path has a bug of its own, outside this test.)"""
    params, tokens = [7.5e9, 8.5e9], BASE["priors"]["tokens"]["lognormal"]
    mu = sum(np.log(x).mean() for x in (params, tokens))
    sigma = math.hypot(*(np.log(x[1] / x[0]) / (2 * 1.6448536269514722) for x in (params, tokens)))
    peak = hardware.get("h100-sxm").peak("bf16")
    value = 6 * math.exp(mu + z * sigma) / (peak * 0.4) / 3600
    return {**BASE, "priors": {**BASE["priors"], "params": {"lognormal": params}, "mfu": 0.4, "goodput": 1},
            "observe": {"gpu_hours": {"value": value}, "tokens": {"value": math.exp(np.log(tokens).mean())}}}


@pytest.mark.parametrize("z, warns", [(2.576, True), (-2.576, True), (2.054, False)])  # 99.5, 0.5, 98th
def test_a_figure_outside_the_prior_1_99_range_says_check_the_scope(z, warns, capsys):
    from mcflops import api
    from mcflops.cli.run import print_result

    res = api.sample(_observed_at(z))
    pct = res.observed["gpu_hours"]["prior_percentile"]
    # 20,000 draws: the percentile's sd is under 0.1 points; the cases sit 0.5 points or more from 1 and 99
    assert pct == pytest.approx(100 * scipy.stats.norm.cdf(z), abs=0.25)
    scope = [n for n in res.to_dict().get("notes", []) if "check the figure's scope" in n]
    assert len(scope) == (1 if warns else 0), res.notes
    if warns:
        assert scope[0].startswith("WARNING: the published gpu_hours") and "(params, tokens)" in scope[0]
        print_result(res, res.to_dict())
        assert "check the figure's scope" in " ".join(capsys.readouterr().out.split())


def test_the_report_lists_the_notes_among_the_assumptions():
    from mcflops import report
    from mcflops.report import sections

    s = spec(mfu={"beta": {"mean": 0.4, "sd": 0.4}})
    doc = report.Document("t", "", "m", [sections.assumptions(report.Run({"prior": {}}, s, {}, "x"))])
    md = " ".join(report.to_markdown(doc).split())
    for note in s.notes:
        assert " ".join(report.md_escape(note).split()) in md, note


def test_a_file_on_disk_notes_the_same(tmp_path):
    f = tmp_path / "f.yaml"
    f.write_text(Path(__file__).resolve().parents[1].joinpath("bad", "ok", "small.yaml").read_text())
    notes = load_spec(f).notes
    # small.yaml gives its goodput; the last is its MFU's units
    assert [n.split(" ")[0] for n in notes] == ["peak_flops", "power", "PUE", "mfu"]


def test_6nd_units_are_named_with_the_attention_share_palm_counts():
    """Under flops: 6nd the note gives the architecture's FLOPs over 6ND. PaLM's count (App. B: 6N + 12 L H Q T,
    halved for a causal mask) is an independent closed form of the same ratio; the two differ only by what
    PaLM leaves out (the logits, 1.4% of a 70B's FLOPs), so they agree within 2%."""
    import re

    from mcflops.priors.quantiles import median
    from mcflops.spec import load_spec

    root = Path(__file__).resolve().parents[2]
    spec = load_spec(root / "priors" / "llama3.1-70b.yaml")
    (note,) = [n for n in spec.notes if n.startswith("mfu is in 6ND units")]
    ratio = float(re.search(r"reads (\d\.\d+) x this file's", note).group(1))
    a, n = spec.architecture, float(median(spec.priors["params"]))
    palm = (6 * n + 12 * a.layers * a.d_model * a.seq_len / 2) / (6 * n)
    assert abs(ratio / palm - 1) < 0.02 and ratio > 1.03, (ratio, palm)
    # another convention: no such note; 6nd without an architecture: the note in words
    assert not [x for x in load_spec(root / "priors" / "palm-540b.yaml").notes if "6ND units" in x]
    small = load_spec(root / "tests" / "bad" / "ok" / "small.yaml")
    assert any("6ND units" in x and "give an architecture" in x for x in small.notes)
