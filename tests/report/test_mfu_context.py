"""A run's MFU in context (analysis.context; summary.json's ``mfu_context``; the report's "MFU in context"):
the rungs a run records are the ladder's own (`mcflops.ladder` on the same file, seed and draws: the same
computation on the same key, so equal to the last bit on one machine); the report's table holds the recorded
numbers and `mcflops report DIR` rebuilds it byte for byte; a file without a layout gets no layout rung and a
calibrated file no second calibrated one; the run of the flagship, which observes Meta's hours, says its rungs
are priors and names the published run it observes, found here by reading mcflops/data/published_runs.yaml
itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

import mcflops
from mcflops import report
from mcflops import cli
from mcflops.analysis import ladder as ladder_mod
from mcflops.report.blocks import fmt

ROOT = Path(__file__).resolve().parents[2]
GUESS = ROOT / "priors" / "examples" / "ladder" / "dense70b-guess.yaml"
FLAGSHIP = ROOT / "priors" / "llama405b.yaml"
N = 20_000


@pytest.fixture(scope="module")
def guess_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctx") / "guess"
    assert cli.main(["run", str(GUESS), "--samples", str(N), "--out", str(out), "--quiet", "--json"]) == 0
    return out


def test_the_recorded_rungs_are_the_ladders(guess_dir):
    got = json.loads((guess_dir / "summary.json").read_text())["mfu_context"]
    want = mcflops.ladder(str(GUESS), samples=N, seed=0)
    assert got["rungs"] == want["rungs"]  # the same pass on the same key: exact on one machine
    assert got["notes"] == want["notes"] and got["deadline"] == want["deadline"]
    assert got["distribution"] == "prior" and "observed" not in got


def test_a_file_without_a_layout_gets_no_layout_rung(guess_dir):
    got = json.loads((guess_dir / "summary.json").read_text())["mfu_context"]
    assert [r["kind"] for r in got["rungs"]] == ["hand-set", "calibrated"]
    assert got["layout"] is None


@pytest.mark.parametrize("name, kinds", [
    ("priors/llama405b-layout.yaml", ["layout", "calibrated"]),  # its own layout rung, not a second one
    ("priors/examples/dense70b-h100.yaml", ["calibrated"]),  # its prior is the calibrated one: shown once
])
def test_a_rung_the_file_already_is_is_not_repeated(name, kinds):
    assert [r["kind"] for r in ladder_mod.rungs(ROOT / name)] == kinds


def test_the_report_shows_the_recorded_numbers_and_report_dir_rebuilds_it(guess_dir):
    summary = json.loads((guess_dir / "summary.json").read_text())
    md = (guess_dir / "report.md").read_text()
    html = (guess_dir / "report.html").read_text()
    assert "## 3. MFU in context" in md and 'id="mfu-context"' in html
    section = md.split("MFU in context", 1)[1].split("\n## ", 1)[0]
    for r in summary["mfu_context"]["rungs"]:
        row = next(line for line in section.splitlines() if line.startswith(f"| {r['tag']}: "))
        assert fmt("gpu_hours", r["gpu_hours"]["p50"]) in row and fmt("wall_days", r["wall_days"]["p50"]) in row
        assert f"{r['deadline']['gpus']:,}" in row
    assert "published runs" in section and "comparable published run" in section  # the ladder's notes
    before = {n: (guess_dir / n).read_bytes() for n in ("report.md", "report.html")}
    for n in before:
        (guess_dir / n).unlink()
    assert cli.main(["report", str(guess_dir)]) == 0
    assert {n: (guess_dir / n).read_bytes() for n in before} == before


def test_no_context_leaves_it_out(tmp_path):
    out = tmp_path / "plain"
    assert cli.main(["run", str(GUESS), "--samples", str(N), "--out", str(out), "--quiet", "--json",
                     "--no-context"]) == 0
    assert "mfu_context" not in json.loads((out / "summary.json").read_text())
    assert "MFU in context" not in (out / "report.md").read_text()


def test_the_cli_asks_for_it_on_a_forward_run_and_not_on_an_observed_one(monkeypatch, tmp_path):
    """Unsaid, `mcflops run` computes the context for a file without `observe:` and leaves it out of one that
    observes a figure (its answer is the posterior); --context and --no-context decide either way."""
    from mcflops import api

    asked = []

    def spy(*a, **kw):
        asked.append(kw["context"])
        raise KeyboardInterrupt  # what was asked is all this test needs: stop before sampling

    monkeypatch.setattr(api, "run", spy)
    for argv in ([str(GUESS)], [str(FLAGSHIP)], [str(FLAGSHIP), "--context"], [str(GUESS), "--no-context"]):
        try:
            cli.main(["run", *argv, "--samples", str(N), "--quiet", "--out", str(tmp_path / "out")])
        except KeyboardInterrupt:
            pass
    assert asked == [True, False, True, False]


def test_the_api_leaves_it_out_unless_asked():
    res = mcflops.run(str(GUESS), samples=N, posterior=False)
    assert res.context is None and "mfu_context" not in res.to_dict()


def test_an_observed_run_shows_the_priors_and_names_the_run_it_observes():
    res = mcflops.run(str(FLAGSHIP), samples=N, context=True)
    ctx = res.to_dict()["mfu_context"]
    assert ctx["observed"] == ["gpu_hours"] and ctx["distribution"] == "prior"
    assert ctx["rungs"] == mcflops.ladder(str(FLAGSHIP), samples=N, seed=0)["rungs"]
    # the run whose hours the file observes, read from the data file (same accelerator, the same figure)
    runs = YAML(typ="safe").load((ROOT / "mcflops" / "data" / "published_runs.yaml").read_text())["runs"]
    value = res.spec.observe["gpu_hours"].value
    same = [r["id"] for r in runs if r["accelerator"] == res.spec.hardware.accelerator
            and abs(r["hours"] / value - 1) <= 0.01]
    assert same == ["llama3.1-405b"]
    assert any(f"fit to {same[0]} among others" in n for n in ctx["notes"])
    u = res.posterior["mfu_x_goodput"]["p50"]
    assert any(n.startswith(f"the posterior's MFU x goodput median {u:.3f}") for n in ctx["notes"])
    md = report.pages(report.Run(res.to_dict(), res.spec, {}, "x"))["report.md"]
    assert "MFU in context (the priors, before the published figure)" in md


def test_the_medians_mcse_against_the_order_statistics_closed_form():
    """sd of the median of n draws -> sqrt(1/4 / n) / f(median) (Serfling 1980, Sec. 2.3.3); for a lognormal with
    log-sd s, f at the median 1 is 1 / (s sqrt(2 pi)), so the relative MCSE is s sqrt(pi / 2) / sqrt(n). The
    estimate reads 1 / f from 65,536 draws' 45th-55th percentiles: its own error is ~1.5% (sd of a quantile
    spacing of 6,554 draws' worth), its bias 0.4% at s = 0.4 (the density's curvature over the 10% band), so
    5% is over three of its standard errors."""
    import math

    import numpy as np

    s, n = 0.4, 1 << 18
    x = np.exp(s * np.random.default_rng(0).standard_normal(1 << 16))
    want = s * math.sqrt(math.pi / 2) / math.sqrt(n)
    assert abs(ladder_mod.median_mcse(x, n) / want - 1) < 0.05
