"""The report: every section from what summary.json holds, text escaped, self-contained, re-renderable.

The oracles are parsers we did not write: Python's html.parser for the page, markdown-it-py (CommonMark)
for the Markdown, matplotlib's PNG reader for image sizes.
"""

from __future__ import annotations

import base64
import html
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from mcflops import cli
from mcflops.output import folder as write
from mcflops import report
from mcflops.report.blocks import P, Section, Table, fmt, interval

ROOT = Path(__file__).resolve().parents[2]
EVIL_SOURCE = "<script>alert(1)</script>"
EVIL_DESC = 'Llama & friends <img src=x onerror="alert(2)"> *not bold* [link](http://example.com)'

SPEC = f"""
name: evil-405b
description: '{EVIL_DESC}'
seed: 3
samples: 4000
hardware: {{accelerator: h100-sxm, precision: bf16, count: 16384}}
priors:
  params: 405.9e9
  tokens: {{lognormal: [15.0e12, 16.8e12], source: "{EVIL_SOURCE}"}}
  mfu: {{beta: {{mean: 0.40, sd: 0.03}}, source: "| pipe | and `tick` and **stars** and 1. list"}}
  goodput: {{beta: [0.85, 0.97], source: "- starts like a list"}}
  price: {{lognormal: [2, 4], source: "AWS & friends"}}
observe:
  gpu_hours: {{value: 30.84e6, sigma: 0.05, source: "model card <b>30.84M</b>"}}
sensitivity: {{sobol_samples: 1024, points: 3}}
"""


class Page(HTMLParser):
    """Tags, attributes and visible text of an HTML document."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self._skip = 0
        self.feed(text)

    BLOCKS = {"p", "div", "td", "th", "tr", "li", "ul", "ol", "h1", "h2", "h3", "figcaption", "section", "header",
              "nav", "table", "br", "blockquote"}

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("style", "title"):
            self._skip += 1
        if tag in self.BLOCKS:
            self.text.append(" ")

    def handle_endtag(self, tag):
        if tag in ("style", "title"):
            self._skip -= 1
        if tag in self.BLOCKS:
            self.text.append(" ")

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)

    @property
    def visible(self) -> str:
        return " ".join("".join(self.text).split())


class Cells(HTMLParser):
    """The text of every table cell, row by row."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _3(x: float) -> str:
    """Three significant digits, trailing zeros kept (28.0, 29.5): how the report writes numbers."""
    return f"{x:#.3g}".rstrip(".")


def _m(x: float) -> str:
    return _3(x / 1e6)


def _md_to_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").render(md)  # GFM tables, as GitHub renders them


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One real run (small sample) through the CLI, with hostile text in the prior file."""
    base = tmp_path_factory.mktemp("run")
    spec = base / "evil.yaml"
    spec.write_text(SPEC)
    out = base / "out"
    run_files = write.run_files  # the report alone (test_browser writes every file and figure)
    write.run_files = lambda res: ([], [])
    try:
        # --context: the file observes a figure, so the context is asked for (the page's whole order is checked)
        assert cli.main(["run", str(spec), "--out", str(out), "--quiet", "--json", "--context"]) == 0
    finally:
        write.run_files = run_files
    return out


def test_run_writes_the_report_files(run_dir):
    for name in ("report.md", "report.html", "summary.json", "spec.resolved.yaml", report.HEADLINE_FIGURE):
        assert (run_dir / name).is_file(), name


def test_html_escapes_prior_file_text(run_dir):
    page = Page((run_dir / "report.html").read_text())
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "b" not in tags
    assert all(a.get("href", "").startswith("#") for t, a in page.tags if t == "a")  # only the contents links
    for tag, attrs in page.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
    # the hostile text is shown, literally, as text
    assert EVIL_SOURCE in page.visible
    assert " ".join(EVIL_DESC.split()) in page.visible
    assert "model card <b>30.84M</b>" in page.visible


def test_markdown_escapes_prior_file_text(run_dir):
    md = (run_dir / "report.md").read_text()
    page = Page(_md_to_html(md))
    tags = {t for t, _ in page.tags}
    assert not tags & {"script", "b", "a"}, tags & {"script", "b", "a"}
    for tag, attrs in page.tags:
        assert not any(k.startswith("on") for k in attrs)
        if tag == "img":  # the figures, by file name, next to report.md
            assert (run_dir / attrs["src"]).is_file()
    assert EVIL_SOURCE in page.visible
    assert "| pipe | and `tick` and **stars** and 1. list" in page.visible
    assert "- starts like a list" in page.visible
    # every table row has as many cells as its header: a '|' in a source did not split a cell
    tables = [b for b in md.split("\n\n") if b.startswith("| ")]
    assert len(tables) >= 4
    for block in tables:
        rows = Cells(_md_to_html(block)).rows
        assert len({len(r) for r in rows}) == 1, block


def test_html_is_self_contained(run_dir):
    text = (run_dir / "report.html").read_text()
    page = Page(text)
    tags = [t for t, _ in page.tags]
    assert "link" not in tags and "script" not in tags and "iframe" not in tags
    metas = [a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert metas and "default-src 'none'" in metas[0]["content"]
    pngs = sorted(p.name for p in run_dir.glob("*.png"))
    srcs = [a["src"] for t, a in page.tags if t == "img"]
    assert len(srcs) == len(pngs) >= 1
    embedded = sorted(base64.b64decode(s.split(",", 1)[1]) for s in srcs)
    assert embedded == sorted((run_dir / n).read_bytes() for n in pngs)  # the very bytes of each figure
    for tag, attrs in page.tags:
        for k in ("src", "href"):
            v = attrs.get(k, "")
            assert not v or v.startswith(("#", "data:")), (tag, k, v[:40])
    assert "@media print" in text and "@media (max-width" in text


def test_png_size_matches_matplotlib(run_dir):
    import matplotlib.image as mpimg

    data = (run_dir / report.HEADLINE_FIGURE).read_bytes()
    h, w = mpimg.imread(run_dir / report.HEADLINE_FIGURE).shape[:2]
    assert report.png_size(data) == (w, h)
    assert w == 1050  # plots.style: 7 inches at 150 dpi, page width


def test_headline_numbers_and_section_order(run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    page = Page((run_dir / "report.html").read_text()).visible
    g = s["prior"]["gpu_hours"]
    # GPU-hours in millions, 3 significant digits (written independently of the report's formatter)
    for x in (g["p50"], g["p5"], g["p95"]):
        assert f"{_m(x)}M" in page
    assert f"{_3(s['prior']['wall_days']['p50'])} days" in page
    assert f"{s['observed']['gpu_hours']['value'] / 1e6:.4g}M" in page
    assert f"{round(s['observed']['gpu_hours']['prior_percentile'])}" in page
    assert f"{100 * s['posterior']['mfu']['p50']:.1f}%" in page
    # the answer, what the figure implies, the MFU prior in context (its priors: the file observes a figure), what
    # drives it, then how (napkin, assumptions, reproducibility), and the variance tables last
    titles = ["1. Headline", "2. What the published figure implies",
              "3. MFU in context (the priors, before the published figure)", "4. What drives it",
              "5. The napkin chain", "6. Assumptions", "7. Reproducibility", "Appendix: every variance table"]
    body = page[page.index(titles[0], page.index(titles[-1])):]  # after the table of contents
    pos = [body.index(t) for t in titles]
    assert pos == sorted(pos)
    assert s["spec_hash"] in page and f"{s['samples']:,}" in page


def test_assumptions_list_every_prior_with_its_source(run_dir):
    from mcflops.spec import load_spec

    spec = load_spec(run_dir / "spec.resolved.yaml")
    html_text = (run_dir / "report.html").read_text()
    table = html_text.split('id="assumptions"', 1)[1].split("</table>", 1)[0]
    rows = {r[0]: r for r in Cells(table).rows[1:]}
    assert set(rows) == set(spec.priors)  # every prior, no other row
    from mcflops.numbers import parse_number

    units = {"power": (" W", 1.0), "peak_flops": (" TFLOP/s", 1e12)}
    for name, d in spec.priors.items():
        if d.family == "point":  # a fixed value in its unit, to 4 significant digits
            unit, scale = units.get(name, ("", 1.0))
            cell = rows[name][2].removesuffix(unit).replace(",", "")
            shown = parse_number(cell.rstrip("%")) / (100 if cell.endswith("%") else 1) * scale
            assert abs(shown / d.params["value"] - 1) < 5e-4, (name, rows[name][2])
        else:
            assert rows[name][2] == " ".join(d.describe().split()), name
        assert rows[name][4] == " ".join((d.source or "none given").split()), name
    assert rows["params"][3] == "fixed" and rows["params"][2] == "405.9B"
    # the mfu interval shown is the prior's p5-p95: scipy's beta(mean 0.4, sd 0.03) quantiles within 4 Monte Carlo
    # standard errors of a quantile, sqrt(p(1-p)/n) / pdf(q) (false-failure rate ~6e-5 each), plus display rounding
    from scipy import stats

    k = 0.4 * 0.6 / 0.03**2 - 1
    exact = stats.beta(0.4 * k, 0.6 * k)
    lo, hi = (float(x) / 100 for x in rows["mfu"][3].rstrip("%").split("–"))
    n = json.loads((run_dir / "summary.json").read_text())["samples"]
    for shown, p in ((lo, 0.05), (hi, 0.95)):
        q = exact.ppf(p)
        assert abs(shown - q) <= 4 * (p * (1 - p) / n) ** 0.5 / exact.pdf(q) + 0.0005, (shown, q)


def test_report_dir_rerenders_identically_without_jax(run_dir, tmp_path):
    before = {n: (run_dir / n).read_bytes() for n in report.FILES}
    for n in report.FILES:
        (run_dir / n).unlink()
    code = ("import sys; from mcflops.cli import main; rc = main(['report', sys.argv[1]]); "
            "bad = sorted(m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'matplotlib', 'numpyro', "
            "'arviz'))); print(bad); sys.exit(rc or (3 if bad else 0))")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", code, str(run_dir)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    for n in report.FILES:
        assert (run_dir / n).read_bytes() == before[n], n
    # from the folder above, by a relative name: the page names the folder the same way
    r = subprocess.run([sys.executable, "-c", code, run_dir.name], capture_output=True, text=True, env=env,
                       cwd=str(run_dir.parent))
    assert r.returncode == 0, r.stdout + r.stderr
    md = (run_dir / "report.md").read_text()
    assert f"`mcflops report {run_dir.name}`" in md and f"`mcflops report {run_dir}`" in before["report.md"].decode()


def test_resolved_spec_repeats_the_run(run_dir):
    from mcflops.spec import load_spec

    s = json.loads((run_dir / "summary.json").read_text())
    assert load_spec(run_dir / "spec.resolved.yaml").digest() == s["spec_hash"]


def test_report_dir_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert cli.main(["report", str(tmp_path)]) == 2  # exists, no summary.json
    (tmp_path / "summary.json").write_text("{not json")
    assert cli.main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("mcflops: ") for line in err)
    assert not list(tmp_path.glob("report.*"))


# ---- degrading gracefully: each section from whatever summary.json holds ------------------------


def _folder(tmp_path, summary, spec_text=None, figures=()):
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    if spec_text is not None:
        (tmp_path / "spec.resolved.yaml").write_text(spec_text)
    for name in figures:
        _png(tmp_path / name)
    return tmp_path


def _png(path, w=40, h=20):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(w / 10, h / 10), dpi=10)
    fig.savefig(path, dpi=10)
    plt.close(fig)


def _sections(text: str) -> dict[str, str]:
    """Visible text of each <section id=...> of the page."""
    out = {}
    for chunk in text.split('<section id="')[1:]:
        sid, rest = chunk.split('"', 1)
        out[sid] = Page(rest.split("</section>", 1)[0]).visible
    return out


def test_minimal_summary_renders_every_section(tmp_path):
    d = _folder(tmp_path, {"name": "bare"})
    out = report.render(d)
    secs = _sections(out["report.html"])
    # nothing observed: a new run, with no section on a published figure
    assert list(secs) == ["headline", "drivers", "napkin", "assumptions", "reproducibility"]  # no appendix: no tables
    for sid in ("headline", "napkin", "drivers", "assumptions"):
        assert "Not computed" in secs[sid], sid
    assert "Not computed" in out["report.md"]


def test_observation_without_posterior_says_not_computed(tmp_path):
    d = _folder(tmp_path, {"name": "bare", "observed": {"gpu_hours": {"value": 3e7, "sigma": 0.05}}})
    secs = _sections(report.render(d)["report.html"])
    assert list(secs) == ["headline", "implied", "drivers", "napkin", "assumptions", "reproducibility"]
    assert "Not computed: no posterior: summary.json has none" in secs["implied"]


def test_no_observation_and_no_sensitivity(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    for k in ("posterior", "observed", "sensitivity"):
        s.pop(k, None)
    spec = _without_observe((run_dir / "spec.resolved.yaml").read_text())
    d = _folder(tmp_path, s, spec)
    secs = _sections(report.render(d)["report.html"])
    assert "implied" not in secs  # a new run: no section on a published figure
    assert "Not computed: no sensitivity analysis" in secs["drivers"]
    assert "posterior median" not in secs["headline"]
    assert "Not computed" not in secs["napkin"] and "Not computed" not in secs["assumptions"]


def _without_observe(spec_text: str) -> str:
    """A resolved prior file with its top-level observe: block removed (up to the next top-level key)."""
    import re

    out = re.sub(r"(?ms)^observe:.*?(?=^\S)", "", spec_text + "\n")
    assert "observe:" in spec_text and "observe:" not in out
    return out


SENSITIVITY = {  # the shape sensitivity.analyze gives (numbers rounded from a run of priors/_smoke.yaml)
    "output": "gpu_hours",
    "tornado": {"output": "gpu_hours", "base": 29.38e6, "inputs": [
        {"input": "mfu", "input_p5": 0.3511, "input_p95": 0.4498, "at_p5": 33.449e6, "at_p95": 26.11e6,
         "swing": 7.34e6, "swing_rel": 0.2499},
        {"input": "tokens", "input_p5": 15.0e12, "input_p95": 16.8e12, "at_p5": 27.76e6, "at_p95": 31.09e6,
         "swing": 3.33e6, "swing_rel": 0.1134}]},
    "sobol": {"tokens": {"first": 0.142, "total": 0.140, "first_se": 0.002, "total_se": 0.001},
              "mfu": {"first": 0.661, "total": 0.664, "first_se": 0.005, "total_se": 0.003}},
    "sobol_info": {"scale": "log gpu_hours", "base_samples": 65536, "estimators": "Saltelli 2010 / Jansen 1999"},
    "correlations": {"prior": {"pearson_log": {"tokens": 0.36, "mfu": -0.82},
                               "spearman": {"tokens": 0.35, "mfu": -0.81}}},
    "sweeps": {"mfu": {"input": "mfu", "output": "gpu_hours", "values": [0.30, 0.35, 0.40, 0.45],
                       "p5": [36.3e6, 31.1e6, 27.2e6, 24.2e6], "p50": [39.3e6, 33.7e6, 29.5e6, 26.2e6],
                       "p95": [43.4e6, 37.2e6, 32.5e6, 28.9e6]}},
    "notes": ["a note with <i>markup</i>"],
}


def test_sensitivity_tables_and_figures_land_in_drivers_and_appendix(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    s["sensitivity"] = SENSITIVITY
    d = _folder(tmp_path, s, (run_dir / "spec.resolved.yaml").read_text(),
                figures=("tornado.png", "sobol.png", "sweep_mfu.png", "posterior_mfu.png", "zzz_misc.png"))
    html_text = report.render(d)["report.html"]
    secs = _sections(html_text)
    drv, app = secs["drivers"], secs["appendix"]
    assert "Not computed" not in drv
    assert "MFU moves GPU-hours most: 33.4M with MFU at its p5 (35.1%), 26.1M at its p95 (45.0%), a swing of 25%" \
        in drv
    # one table: the tornado's swings and each input's share (no Shapley here: the first-order Sobol index)
    assert "MFU 35.1% → 33.4M 45.0% → 26.1M 25.0% 66% tokens (D) 15.0T → 27.8M 16.8T → 31.1M 11.3% 14%" in drv
    assert "first-order Sobol index" in drv and "0.664" not in drv and "Pearson" not in drv
    assert "With MFU fixed at 30.0%, the median GPU-hours is 39.3M (90%: 36.3M–43.4M); at 45.0% it is 26.2M" in drv
    assert "a factor of 1.50" in drv and "40.0% 27.2M 29.5M 32.5M" in drv
    # the variance tables in the appendix
    assert app.index("0.664 ± 0.003") < app.index("0.140 ± 0.001")  # sorted by total index
    assert "log GPU-hours: MFU explains the most: first-order index 0.66, total 0.66" in app
    assert "tokens (D) +0.36 +0.35 MFU -0.82 -0.81" in app
    assert "Note: a note with <i>markup</i>" in app and "<i>" not in html_text
    # each figure embedded once, in its section
    raw = {c.split('"', 1)[0]: c for c in html_text.split('<section id="')[1:]}
    assert raw["drivers"].count("<img") == 2 and raw["implied"].count("<img") == 1
    assert raw["appendix"].count("<img") == 1 and 'sobol.png' in raw["appendix"]
    assert raw["figures"].count("<img") == 1
    assert html_text.count("<img") == 5


def test_share_table_has_a_row_per_input_and_shares_within_0_1(run_dir, tmp_path):
    """The one share table: a row per input of the tornado; each share the Shapley effect clipped to [0, 1], so
    an estimate past 1 (Monte Carlo error) is shown as 100% and the shares add up to at most 100% (each is
    rounded to 1%: the sum within half a percent per row)."""
    s = json.loads((run_dir / "summary.json").read_text())
    s["sensitivity"] = {**SENSITIVITY, "shapley": {"tokens": {"effect": -0.004, "se": 0.003},
                                                   "mfu": {"effect": 1.004, "se": 0.003}}}
    drv = _sections(report.render(_folder(tmp_path, s))["report.html"])["drivers"]
    table = report.render(tmp_path)["report.html"].split('id="drivers"', 1)[1].split("</table>", 1)[0]
    rows = Cells(table).rows
    assert [r[0] for r in rows[1:]] == ["MFU", "tokens (D)"]  # one row per uncertain input, in tornado order
    assert rows[0][-1] == "share of the variance"
    got = [float(r[-1].rstrip("%")) for r in rows[1:]]
    assert got == [100.0, 0.0] and 0 <= sum(got) <= 100 + 0.5 * len(got)
    assert "Shapley effect" in drv
    # one uncertain input: no number past 1, the words say it
    one = {**SENSITIVITY, "tornado": {**SENSITIVITY["tornado"], "inputs": SENSITIVITY["tornado"]["inputs"][:1]},
           "sobol": {"mfu": {"first": 1.01, "total": 1.02, "first_se": 0.01, "total_se": 0.01}}}
    (tmp_path / "one").mkdir()
    secs = _sections(report.render(_folder(tmp_path / "one", {**s, "sensitivity": one}))["report.html"])
    assert "all (the only uncertain input)" in secs["drivers"] and "It is the only uncertain input." in secs["drivers"]
    assert "1.01" not in secs["appendix"] and "is the only uncertain input" in secs["appendix"]


def test_shapley_effects_and_conditional_tornado_render(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    s["sensitivity"] = {**SENSITIVITY, "tornado": {**SENSITIVITY["tornado"], "conditional": True},
                        "shapley": {"tokens": {"effect": 0.21, "se": 0.004}, "mfu": {"effect": 0.79, "se": 0.006}},
                        "shapley_info": {"correlated": True, "estimator": "Song, Nelson & Staum 2016"}}
    secs = _sections(report.render(_folder(tmp_path, s))["report.html"])
    drv, app = secs["drivers"], secs["appendix"]
    assert "MFU carries the largest share of the variance of log GPU-hours: 0.79 (the inputs are correlated" in app
    assert app.index("MFU 0.790 ± 0.006") < app.index("tokens (D) 0.210 ± 0.004")  # sorted by effect
    assert "the others at their medians given it (the prior's correlations)" in drv
    assert "25.0% 79%" in drv and "Shapley effect" in drv  # the share: the Shapley effect, where there is one
    del s["sensitivity"]["shapley"]
    (tmp_path / "b").mkdir()
    secs = _sections(report.render(_folder(tmp_path / "b", s))["report.html"])
    assert "Shapley" not in secs["drivers"] + secs["appendix"]  # nothing computed, nothing shown
    assert "25.0% 66%" in secs["drivers"]  # the first-order Sobol index instead


def test_sensitivity_of_another_shape_still_renders(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    s["sensitivity"] = {
        "tornado": [{"input": "mfu", "low": 34.0e6, "high": 25.9e6, "swing": 8.1e6}],
        "sobol": {"log_gpu_hours": {"mfu": {"first": 0.61, "total": 0.62, "first_se": 0.02, "total_se": 0.02}}},
        "sweeps": {"mfu": {"grid": [0.3, 0.35, 0.4], "p5": [35e6, 30e6, 26e6], "p50": [39e6, 33e6, 29e6]}},
    }
    secs = _sections(report.render(_folder(tmp_path, s))["report.html"])
    drv = secs["drivers"]
    assert "Not computed" not in drv
    assert "mfu 34.0M 25.9M 8.10M" in drv  # a row per record
    assert "MFU all (the only uncertain input)" in drv  # the share table on its own
    assert "log GPU-hours / log_gpu_hours: MFU is the only uncertain input" in secs["appendix"]
    assert "grid p5 p50 0.300 35.0M 39.0M 0.350 30.0M 33.0M" in drv  # a column per list


def test_reported_range_probability_is_shown(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    s["posterior"]["reported"] = {"mfu": {"range": [0.38, 0.43], "prior_probability": 0.2611,
                                          "posterior_probability": 0.4213, "flops_convention": "6nd",
                                          "source": "arXiv 2407.21783 Table 4 <38-43%>"}}
    d = _folder(tmp_path, s, (run_dir / "spec.resolved.yaml").read_text())
    secs = _sections(report.render(d)["report.html"])
    assert ("MFU lies in the paper's 38.0–43.0%: 0.42 (prior 0.26), with MFU counted by 6nd FLOPs. "
            "The paper's figure: arXiv 2407.21783 Table 4 <38-43%>.") in secs["implied"]
    s["posterior"]["reported"] = {"mfu": {"low": 0.38, "high": 0.43, "probability": 0.4213}}  # the plain shape
    secs = _sections(report.render(_folder(tmp_path, s))["report.html"])
    assert "MFU lies in the paper's 38.0–43.0%: 0.42." in secs["implied"]


def test_claims_come_from_the_file(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    assert "posterior" in s and "reported" not in s["posterior"]  # the prior file has no `reported:` block
    secs = _sections(report.render(run_dir)["report.html"])
    assert "lies in the paper's" not in secs["implied"] and "Posterior MFU" in secs["implied"]
    s["posterior"]["reported"] = {"goodput": {"range": [0.9, 1.0], "prior_probability": 0.25,
                                              "posterior_probability": 0.64, "source": "a blog"}}
    secs = _sections(report.render(_folder(tmp_path, s))["report.html"])
    assert "goodput lies in the paper's 90.0–100.0%: 0.64 (prior 0.25). The paper's figure: a blog." in secs["implied"]


def test_unreadable_spec_degrades(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    d = _folder(tmp_path, s, "priors: [not, a, mapping\n")
    secs = _sections(report.render(d)["report.html"])
    assert "Not computed: spec.resolved.yaml is missing or unreadable" in secs["assumptions"]
    assert "Not computed" not in secs["headline"]


def test_not_a_png_is_left_out(run_dir, tmp_path):
    s = json.loads((run_dir / "summary.json").read_text())
    d = _folder(tmp_path, s)
    (d / "fake.png").write_bytes(b"<svg onload=alert(1)>")
    assert "<img" not in report.render(d)["report.html"]


# ---- formatting and escaping units ---------------------------------------------------------------


def test_units_for_a_reader():
    assert fmt("gpu_hours", 30.84e6, 4) == "30.84M"
    assert fmt("mfu", 0.3458) == "34.6%"
    assert fmt("cost", 83.79e6) == "$83.8M"
    assert fmt("wall_days", 75.14) == "75.1 days"
    assert interval("wall_days", 65.06, 88.19) == "65.1–88.2 days"
    assert interval("gpu_hours", 25.58e6, 34.68e6) == "25.6M–34.7M"
    assert fmt("gpu_hours", float("nan")) == "n/a" and interval("mfu", None, 0.4) == "n/a"


# printable text: control characters (Cc) are shown by their code points instead (test_control_characters_...)
_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_categories=("Cc",)), min_size=1,
                max_size=40).filter(lambda t: t.strip())


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_markdown_paragraph_shows_any_text_literally(text):
    """CommonMark reads an escaped paragraph back as exactly the text (whitespace collapsed)."""
    md = report.to_markdown(report.Document("t", "", "m", [Section("s", "s", [P([text])])]))
    body = md.split("## s\n\n", 1)[1].split("\n\n", 1)[0]
    out = _md_to_html(body + "\n")
    assert out.startswith("<p>") and out.endswith("</p>\n"), (text, body, out)
    assert html.unescape(out[3:-5]) == " ".join(text.split())


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, min_size=2, max_size=4))
def test_markdown_table_cells_hold_any_text(cells):
    doc = report.Document("t", "", "m", [Section("s", "s", [Table(["a"] * len(cells), [cells])])])
    md = report.to_markdown(doc).split("## s\n\n", 1)[1].split("\n\n", 1)[0]
    rows = Cells(_md_to_html(md)).rows
    assert rows[1] == [" ".join(c.split()) for c in cells]


def test_committed_report_is_current():
    """reports/<name>/ (committed) was made by this code from priors/llama405b.yaml."""
    import mcflops
    from mcflops.spec import load_spec

    spec = load_spec(ROOT / "priors" / "llama405b.yaml")
    folder = next((f for f in (ROOT / "reports" / spec.name, ROOT / "reports" / "llama405b") if f.is_dir()), None)
    if folder is None:
        pytest.skip("reports/<name>/ is not committed yet (the lead regenerates it with the README command)")
    s = json.loads((folder / "summary.json").read_text())
    assert (s["spec_hash"], s["seed"], s["samples"], s["version"]) == (spec.digest(), spec.seed, spec.samples,
                                                                         mcflops.version())
    fresh = report.render(folder, label=str(folder.relative_to(ROOT)))
    for name, text in fresh.items():
        assert (folder / name).read_text() == text, f"{name} is stale: run the README's command again"


def test_control_characters_are_shown_by_name_not_sent():
    """ESC and BEL from a text field would drive a terminal that prints report.md (an OSC-8 link); like the bidi
    controls they are written out as their code points; tab and newline stay whitespace."""
    from mcflops.report.markup import md_escape, neutral

    osc8 = "\x1b]8;;https://x.example\x07click\x1b]8;;\x07"
    assert "\x1b" not in md_escape(osc8) and "\x07" not in md_escape(osc8)
    assert neutral(osc8).startswith("[U+001B]]8;;") and "[U+0007]" in neutral(osc8)
    assert neutral("a\tb\nc") == "a\tb\nc" and neutral("\x85\x9b") == "[U+0085][U+009B]"
