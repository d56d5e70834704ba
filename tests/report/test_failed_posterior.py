"""A posterior that fails its checks is never quoted with confidence: summary.json's posterior carries the
verdict (checks.passed false, with the reasons), the report's headline opens with the warning and
withholds the posterior MFU and the sentence a reviewer can quote, and the terminal's first line says so.

The failures are deterministic: an observation with sigma 1e-9 leaves importance sampling one
effective draw out of 5,000 (with ``--method is`` there is nothing to fall back on), and NUTS's chains
cannot meet on a ridge that thin (R-hat far above 1.01, a handful of effective draws)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import mcflops
from mcflops import cli

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
WARNING = "Warning: the posterior failed its checks"


def tight(tmp_path: Path) -> Path:
    f = tmp_path / "tight.yaml"
    f.write_text(OK.read_text().replace("sigma: 0.1", "sigma: 1e-9"))
    return f


@pytest.fixture(scope="module")
def failed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("failed")
    out = tmp / "report"
    assert cli.main(["run", str(tight(tmp)), "--method", "is", "--out", str(out), "--quiet", "--json"]) == 0
    return out


def test_summary_carries_the_verdict(failed):
    checks = json.loads((failed / "summary.json").read_text())["posterior"]["checks"]
    assert checks["passed"] is False
    assert len(checks["why"]) == 1 and "effective sample size 1 < 1000" in checks["why"][0], checks


def test_report_md_opens_with_the_warning_and_quotes_nothing(failed):
    md = (failed / "report.md").read_text()
    first = md.split("## 1. Headline", 1)[1].strip().split("\n\n")[0]
    assert first.startswith(f"**{WARNING}**") and "effective sample size 1" in first, first
    assert "Given the published figure" not in md and "Conditioning the priors" not in md
    quote = md.split("### A sentence a reviewer can quote", 1)[1].strip().split("\n\n")[0]
    assert quote == "*None: the posterior failed its checks, so no sentence is offered.*"
    assert md.count(WARNING) == 2  # the headline and section 3


def test_report_html_opens_with_the_warning(failed):
    html = (failed / "report.html").read_text()
    body = html[html.index('id="headline"'):]
    assert re.match(r'[^<]*<h2[^>]*>[^<]*</h2>\s*<p class="note"><strong>' + WARNING, body), body[:300]
    assert "Given the published figure" not in html and "Conditioning the priors" not in html
    assert '<p class="quote">' not in html


def test_terminal_says_so_first(failed, tmp_path, capsys):
    assert cli.main(["run", str(tight(tmp_path)), "--method", "is", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("WARNING: the posterior failed its checks (effective sample size 1"), out[:200]
    assert out.index("WARNING") < out.index("Posterior (")


def test_healthy_run_has_no_verdict_and_keeps_its_sentence(tmp_path, capsys):
    out = tmp_path / "report"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet"]) == 0
    assert not capsys.readouterr().out.startswith("WARNING")
    assert "checks" not in json.loads((out / "summary.json").read_text())["posterior"]
    md = (out / "report.md").read_text()
    assert WARNING not in md and "Given the published figure" in md and "> Conditioning the priors" in md


def test_nuts_that_does_not_mix_fails_its_checks(tmp_path):
    res = mcflops.run(tight(tmp_path), method="nuts", nuts={"chains": 2, "warmup": 100, "draws": 100})
    checks = res.posterior["checks"]
    assert checks["passed"] is False
    assert any(w.startswith("R-hat") for w in checks["why"]) and any("effective sample size" in w for w in checks["why"])
