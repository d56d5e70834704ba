"""report.html in a real browser: Debian's headless Chromium driven by Playwright (no browser download).

Checks every figure loaded, the headline numbers are on the page, nothing was fetched from the network,
no script ran, the page fits a phone's width and prints. Saves artifacts/report.png (and report.pdf).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from mcflops import cli
from mcflops import report

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
EVIL = "<script>alert(1)</script>"

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"Debian's chromium is not installed at {CHROMIUM} "
                                "(apt-get install -y chromium; .ci/run installs it)")

SPEC = f"""
name: browser-405b
description: Llama 3.1 405B on H100s, for the browser test
seed: 1
samples: 4000
hardware: {{accelerator: h100-sxm, precision: bf16, count: 16384}}
priors:
  params: 405.9e9
  tokens: {{lognormal: [15.0e12, 16.8e12], source: "{EVIL}"}}
  mfu: {{beta: {{mean: 0.40, sd: 0.03}}, source: "Table 4"}}
  goodput: {{beta: [0.85, 0.97], source: "Sec. 3.3.4"}}
  price: {{lognormal: [2, 4], source: "cloud prices"}}
observe:
  gpu_hours: {{value: 30.84e6, sigma: 0.05, source: "model card"}}
sensitivity: {{sobol_samples: 1024, points: 5, sweep: {{mfu: [0.30, 0.45]}}}}
"""


def _3(x: float) -> str:
    return f"{x:#.3g}".rstrip(".")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    (base / "spec.yaml").write_text(SPEC)
    out = base / "out"
    assert cli.main(["run", str(base / "spec.yaml"), "--out", str(out), "--quiet", "--json"]) == 0
    return out


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def _open(browser, run_dir, **context):
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    seen = {"requests": [], "dialogs": [], "errors": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.goto((run_dir / "report.html").as_uri(), wait_until="load")
    return ctx, page, seen


def test_report_in_chromium(browser, run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    ctx, page, seen = _open(browser, run_dir, viewport={"width": 1100, "height": 900})
    try:
        imgs = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
        pngs = sorted(run_dir.glob("*.png"))
        assert len(imgs) == len(pngs) >= 1
        assert all(done and w > 0 and h > 0 for done, w, h in imgs), imgs
        assert sorted((w, h) for _, w, h in imgs) == sorted(report.png_size(p.read_bytes()) for p in pngs)
        text = " ".join(page.inner_text("body").split())
        g, g1 = s["prior"]["gpu_hours"], s["posterior"]["gpu_hours"]
        assert f"{_3(g1['p50'] / 1e6)}M GPU-hours" in text  # the headline: the posterior, in millions, 3 digits
        assert f"{_3(g['p50'] / 1e6)}M" in text  # the prior beside it
        assert f"{_3(g['p5'] / 1e6)}M–{_3(g['p95'] / 1e6)}M" in text
        assert f"{s['observed']['gpu_hours']['value'] / 1e6:.4g}M GPU-hours" in text
        assert f"{_3(s['prior']['wall_days']['p50'])} days" in text
        assert EVIL in text  # shown as text ...
        assert page.evaluate("document.scripts.length") == 0 and seen["dialogs"] == []  # ... and never run
        assert seen["errors"] == []
        page_url = (run_dir / "report.html").as_uri()
        assert [u for u in seen["requests"] if u != page_url and not u.startswith("data:")] == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        assert (ARTIFACTS / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        ctx.close()


def test_report_fits_a_phone(browser, run_dir):
    ctx, page, _ = _open(browser, run_dir, viewport={"width": 390, "height": 844}, device_scale_factor=2,
                         is_mobile=True)
    try:
        # the page itself never scrolls sideways (wide tables scroll inside their own box) and figures fit
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        widths = page.eval_on_selector_all("img", "els => els.map(e => e.getBoundingClientRect().width)")
        assert widths and max(widths) <= 390
        size = page.evaluate("parseFloat(getComputedStyle(document.body).fontSize)")
        assert size >= 14
        # the assumptions table stacks each prior's cells, labelled, instead of a table wider than the phone
        assert page.evaluate("getComputedStyle(document.querySelector('table.stack thead')).display") == "none"
        assert page.evaluate("document.querySelector('table.stack').getBoundingClientRect().width") <= 390
    finally:
        ctx.close()


def test_report_prints(browser, run_dir):
    ctx, page, _ = _open(browser, run_dir)
    try:
        page.emulate_media(media="print")
        assert page.evaluate("getComputedStyle(document.querySelector('nav.toc')).display") == "none"
        assert page.evaluate("getComputedStyle(document.querySelector('figure')).breakInside") == "avoid"
        ARTIFACTS.mkdir(exist_ok=True)
        pdf = page.pdf(path=str(ARTIFACTS / "report.pdf"), format="A4", print_background=True)
        pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
        assert pdf[:5] == b"%PDF-" and 3 <= pages <= 12, pages  # the six sections on a few A4 pages
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def scenario_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("scenarios")
    h100 = ROOT / "priors/examples/dense70b-h100.yaml"
    third = base / "h100-8k.yaml"
    third.write_text(h100.read_text().replace("count: 4096", "count: 8192"))
    out = base / "out"
    assert cli.main(["compare", str(h100), str(ROOT / "priors/examples/dense70b-b200.yaml"), str(third),
                     "--samples", "20000", "--out", str(out), "--quiet", "--json"]) == 0
    return out


def test_scenario_report_in_chromium_clips_nothing(browser, scenario_dir):
    """The three-scenario report: its figure loads whole, inside the page, and its outermost pixels are the
    white background (an axis label cut at the figure's edge would leave ink there)."""
    import io

    from PIL import Image

    d = json.loads((scenario_dir / "compare.json").read_text())
    ctx, page, seen = _open(browser, scenario_dir, viewport={"width": 1100, "height": 900})
    try:
        imgs = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
        assert len(imgs) == 1 and all(done and w > 0 and h > 0 for done, w, h in imgs), imgs
        box = page.eval_on_selector("img", "e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; }")
        assert box[0] >= 0 and box[1] <= page.evaluate("document.documentElement.clientWidth")
        text = " ".join(page.inner_text("body").split())
        assert "Scenarios side by side" in text and "×0.5 every draw" in text
        assert f"{d['scenarios']['table'][2]['deadline']['prob_done']:.3f} on 8,192" in text
        assert seen["errors"] == []
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "scenarios_report.png"), full_page=True)
        shot = Image.open(io.BytesIO(page.locator("img").screenshot())).convert("L")
        px = __import__("numpy").asarray(shot)
        ring = [px[:2].ravel(), px[-2:].ravel(), px[:, :2].ravel(), px[:, -2:].ravel()]
        assert min(r.min() for r in ring) >= 235, "ink at the figure's edge: something is cut off"
    finally:
        ctx.close()


def test_run_report_figures_clip_nothing(browser, run_dir):
    """Every figure of the run report, as Chromium shows it: its outermost pixels are the white background (a
    label, tick or legend cut at the figure's edge would leave ink there)."""
    import io

    import numpy as np
    from PIL import Image

    ctx, page, _ = _open(browser, run_dir, viewport={"width": 1100, "height": 900})
    try:
        figs = page.locator("img").all()
        assert len(figs) == len(list(run_dir.glob("*.png"))) >= 5
        for i, img in enumerate(figs):
            px = np.asarray(Image.open(io.BytesIO(img.screenshot())).convert("L"))
            ring = [px[:2].ravel(), px[-2:].ravel(), px[:, :2].ravel(), px[:, -2:].ravel()]
            assert min(r.min() for r in ring) >= 235, f"figure {i} ({img.get_attribute('alt')}): ink at its edge"
    finally:
        ctx.close()
