"""The report's shape follows the run: a new run (nothing observed) reads as a forecast from the priors, with
no section or legend about a published figure and its sections numbered without a gap; a run conditioned on
a figure leads with the posterior (unless the posterior failed its checks, which stays the first thing said).

Numbers are checked against summary.json, formatted here independently of the report's formatter."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcflops import cli, report
from mcflops.plots import report as headline_plot, style

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"  # observes gpu_hours 60K (sigma 0.1)


def _3(x: float) -> str:
    return f"{x:#.3g}".rstrip(".")


def _new_run_file(tmp: Path) -> Path:
    text = OK.read_text()
    assert "\nobserve:\n" in text
    f = tmp / "new.yaml"
    f.write_text(text.split("\nobserve:\n", 1)[0] + "\n")
    return f


@pytest.fixture(scope="module")
def new_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("new")
    out = tmp / "out"
    assert cli.main(["run", str(_new_run_file(tmp)), "--out", str(out), "--quiet", "--json"]) == 0
    return out


@pytest.fixture(scope="module")
def observed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("observed") / "out"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    return out


def _titles(md: str) -> list[str]:
    return re.findall(r"^## (.+)$", md, flags=re.M)


def _numbers(titles: list[str]) -> list[int]:
    return [int(t.split(".", 1)[0]) for t in titles if re.match(r"\d+\. ", t)]


def _headline(md: str) -> str:
    return md.split("## 1. Headline", 1)[1].split("\n## ", 1)[0]


def test_new_run_has_no_published_figure_section(new_run):
    md = (new_run / "report.md").read_text()
    html = (new_run / "report.html").read_text()
    titles = _titles(md)
    numbered = [t for t in titles if re.match(r"\d+\. ", t)]
    # the MFU in context (`mcflops run` computes it unless --no-context) follows the answer
    assert [t.split(". ", 1)[1] for t in numbered] == ["Headline", "MFU in context", "What drives it",
                                                       "The napkin chain", "Assumptions", "Reproducibility"]
    assert titles[len(numbered):] == ["Appendix: every variance table"]  # after the numbered sections, unnumbered
    assert _numbers(titles) == list(range(1, len(numbered) + 1))  # consecutive: no gap where section 2 was
    assert 'id="implied"' not in html and "What the published figure implies" not in html
    # the MFU in context speaks of other runs (published runs on this accelerator); nothing else says "published"
    rest_md = re.sub(r"## \d+\. MFU in context.*?(?=\n## )", "", md, flags=re.S)
    rest_html = re.sub(r'<section id="mfu-context".*?</section>', "", html, flags=re.S)
    assert "MFU in context" in md and "MFU in context" not in rest_md and 'id="mfu-context"' not in rest_html
    assert "published" not in rest_md.lower() and "published" not in re.sub(
        r'<nav.*?</nav>', "", rest_html, flags=re.S).lower(), "a new run has no published figure"
    assert "posterior" not in _headline(md).lower()


def test_new_run_headline_is_the_prior_predictive(new_run):
    s = json.loads((new_run / "summary.json").read_text())
    assert "observed" not in s or not s["observed"]
    g = s["prior"]["gpu_hours"]
    head = _headline((new_run / "report.md").read_text())
    first = re.search(r"\*\*([0-9.]+)M GPU-hours\*\* is the median of the prior predictive", head)
    assert first and first.group(1) == _3(g["p50"] / 1e6), head[:300]
    assert f"{_3(s['prior']['wall_days']['p50'])} days" in head
    assert (new_run / report.HEADLINE_FIGURE).is_file()
    cap = re.search(r"!\[([^\]]*)\]\(" + re.escape(report.HEADLINE_FIGURE), head)
    assert cap and "prior predictive" in cap.group(1) and "published" not in cap.group(1)


def test_observed_run_headline_is_the_posterior(observed_run):
    s = json.loads((observed_run / "summary.json").read_text())
    assert "checks" not in s["posterior"]  # a healthy posterior
    g0, g1 = s["prior"]["gpu_hours"], s["posterior"]["gpu_hours"]
    assert _3(g0["p50"] / 1e6) != _3(g1["p50"] / 1e6)  # the test can tell them apart
    md = (observed_run / "report.md").read_text()
    head = _headline(md)
    bold = re.findall(r"\*\*([0-9.]+)M GPU-hours\*\*", head)
    assert bold[0] == _3(g1["p50"] / 1e6), head[:300]  # the first number stated is the posterior median
    assert f"{_3(g1['p5'] / 1e6)}M–{_3(g1['p95'] / 1e6)}M" in head.split("\n\n")[1]
    assert f"{_3(g0['p50'] / 1e6)}M" in head.split("\n\n")[1]  # the prior beside it, said to be the prior
    assert f"{_3(s['posterior']['wall_days']['p50'])} days" in head.split("\n\n")[2]
    titles = _titles(md)
    assert _numbers(titles) == list(range(1, len([t for t in titles if re.match(r"\d+\. ", t)]) + 1))
    assert titles[1] == "2. What the published figure implies"  # right after the answer (no plan: block here)


# ---- the headline figure's title and legend -----------------------------------------------------------------


def _data(published=None, posterior=False, pct=None):
    import numpy as np

    grid = np.linspace(1e6, 5e6, 50)
    dens = np.exp(-0.5 * ((grid - 3e6) / 5e5) ** 2) / 1e6
    return {"grid": grid, "prior": dens, "posterior": dens if posterior else None, "published": published,
            "sigma": 0.05 if published else None, "percentile": pct, "napkin": 2.9e6,
            "prior_stats": {"p5": 2.2e6, "p50": 3.0e6, "p95": 4.1e6}}


SUMMARY_NEW = {"prior": {"gpu_hours": {"p5": 2.2e6, "p50": 3.0e6, "p95": 4.1e6},
                         "wall_days": {"p5": 89.5, "p50": 122.0, "p95": 167.0},
                         "cost": {"p5": 5.5e6, "p50": 7.5e6, "p95": 1.02e7}}}
POST = {"gpu_hours": {"p5": 2.6e6, "p50": 2.8e6, "p95": 3.05e6}}


def _legend(monkeypatch, tmp_path, data, summary):
    figs = []
    monkeypatch.setattr(style, "save", lambda fig, path: figs.append(fig) or str(path))
    headline_plot.headline(tmp_path / "h.png", data, 1024, summary)
    ax = figs[0].axes[0]
    return ax.get_title(loc="left"), [t.get_text() for t in ax.get_legend().get_texts()]


def test_new_run_figure_is_titled_for_the_prior_predictive(monkeypatch, tmp_path):
    title, legend = _legend(monkeypatch, tmp_path, _data(), SUMMARY_NEW)
    lines = title.split("\n")
    assert lines[0] == "Prior predictive: 3M GPU-hours (90%: 2.2–4.1M)"
    assert lines[1] == "122 days (90%: 89.5–167) on 1,024 accelerators; $7.5M (90%: 5.5–10.2M)"
    assert legend == ["prior predictive (the priors alone)", "napkin (medians) 2.9M"]
    assert not any("figure" in t or "published" in t or "posterior" in t for t in legend)


def test_observed_figure_is_titled_for_the_posterior(monkeypatch, tmp_path):
    summary = {**SUMMARY_NEW, "observed": {"gpu_hours": {"value": 2.75e6}}, "posterior": POST}
    title, legend = _legend(monkeypatch, tmp_path, _data(2.75e6, True, 30.2), summary)
    assert title.split("\n") == ["Posterior: 2.8M GPU-hours (90%: 2.6–3.05M), given the published 2.75M",
                                 "before it: 3M (90%: 2.2–4.1M), the figure at its 30th percentile"]
    assert legend[:2] == ["prior predictive (before the figure)", "posterior (given the figure)"]
    assert "published 2.75M" in legend


def test_failed_posterior_is_not_the_figure_title(monkeypatch, tmp_path):
    post = {**POST, "checks": {"passed": False, "why": ["effective sample size 1 < 1000"]}}
    summary = {**SUMMARY_NEW, "observed": {"gpu_hours": {"value": 2.75e6}}, "posterior": post}
    title, _ = _legend(monkeypatch, tmp_path, _data(2.75e6, True, 30.2), summary)
    assert title.startswith("Prior predictive: 3M GPU-hours") and "failed its checks" in title
    assert "2.8M" not in title
