"""Scenarios side by side (`compare A B C`): the table against NumPy on the same draws
(analysis.scenarios.scenario_draws) and against closed forms: a scenario that differs from A only in its
accelerator count has days ratio count_A / count_C and GPU-hours ratio 1 on every draw (common random
numbers); B on B200 with its MFU a ratio to A's has GPU-hours ratio (peak_A / peak_B) / r, r the ratio prior
(a truncated lognormal: scipy). Bad input: one line, exit 2, nothing written.

Tolerances: K = 4 Monte Carlo standard errors (6e-5 false-failure rate per comparison, normal approximation),
plus two bins of the histogram a quantile is read from; fixed seed. On the same draws only the histogram's
binning separates the table from NumPy (two bins).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops import hardware
from mcflops.analysis import scenarios as sc
from mcflops.cli.main import main

K = 4.0
N = 1 << 16
ROOT = Path(__file__).resolve().parents[2]
H100, B200 = ROOT / "priors/examples/dense70b-h100.yaml", ROOT / "priors/examples/dense70b-b200.yaml"


def _third(tmp: Path) -> Path:
    f = tmp / "h100-8k.yaml"
    f.write_text(H100.read_text().replace("count: 4096", "count: 8192").replace("name: dense70b-h100",
                                                                                "name: dense70b-h100-8k"))
    return f


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    specs = [mcflops.load_spec(f) for f in (H100, B200, _third(tmp_path_factory.mktemp("scen")))]
    dl = sc.deadline_of(specs)
    return specs, sc.scenarios(specs, samples=N, deadline=dl), sc.scenario_draws(specs, size=N)



def test_count_only_scenario_is_exact_on_every_draw(three):
    specs, res, draws = three
    a, b, c = res["table"]
    assert c["ratio"]["wall_days"]["min"] == pytest.approx(0.5, rel=1e-12)
    assert c["ratio"]["wall_days"]["max"] == pytest.approx(0.5, rel=1e-12)
    assert c["ratio"]["wall_days"]["prob_less"] == 1.0
    for q in ("gpu_hours", "cost", "energy_mwh"):
        assert c["ratio"][q]["min"] == c["ratio"][q]["max"] == pytest.approx(1.0, rel=1e-12), q
    assert np.array_equal(draws[0]["gpu_hours"], draws[2]["gpu_hours"])  # every input shared: the same draws
    assert [r["draws"][2] for r in res["inputs"] if r["name"] in ("tokens", "mfu", "price")] == ["shared"] * 3
    assert a["deadline"]["gpus"] == c["deadline"]["gpus"]  # the deadline's need does not depend on the count


def test_table_matches_numpy_on_the_same_draws(three):
    specs, res, draws = three
    D, p = res["deadline"]["days"], res["deadline"]["prob"]
    assert (D, p, res["deadline"]["from"]) == (60.0, 0.9, "A")
    for k, e in enumerate(res["table"]):
        h = draws[k]["gpu_hours"]
        span = math.log(h.max() / h.min())
        tol = 2 * (2 * span / 4096) + 1e-6  # two histogram bins (the pass's bins span twice the pilot's range)
        for name, pr in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
            assert abs(math.log(e["gpu_hours"][name] / np.quantile(h, pr))) < tol, (k, name)
        G = specs[k].hardware.count
        assert e["deadline"]["prob_done"] == pytest.approx(np.mean(h <= 24 * D * G), abs=2 / N)
        exact = np.quantile(h, p) / (24 * D)
        assert abs(e["deadline"]["gpus_exact"] / exact - 1) < math.expm1(tol)
        assert abs(e["deadline"]["gpus"] - math.ceil(exact)) <= max(1, math.ceil(exact * math.expm1(tol)))
    for k in (1, 2):
        r = np.log(draws[k]["gpu_hours"] / draws[0]["gpu_hours"])
        P = res["table"][k]["ratio"]["gpu_hours"]["prob_less"]
        assert P == pytest.approx(np.mean(r < 0), abs=2 / N)


def test_b200_ratio_is_the_peak_ratio_over_the_mfu_ratio_prior(three):
    """GPU-hours B / A = (peak_A / peak_B) / r with r the MFU ratio prior alone (tokens shared, goodput 1):
    its quantiles from scipy's lognormal truncated at the prior's upper bound."""
    specs, res, _ = three
    d = specs[1].compare.ratio("mfu").ratio
    base = stats.lognorm(s=d.params["sigma"], scale=math.exp(d.params["mu"]))
    top = base.cdf(d.high)
    c = hardware.get("h100-sxm").peak("bf16") / hardware.get("b200").peak("bf16")
    r = res["table"][1]["ratio"]["gpu_hours"]
    for name, pr in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
        q = base.ppf((1 - pr) * top)  # the ratio's (1 - p) quantile: hours fall as the MFU ratio rises
        dens = base.pdf(q) * q / top  # density of log r at q
        se = math.sqrt(pr * (1 - pr) / N) / dens
        assert abs(math.log(r[name]) - math.log(c / q)) < K * se + 2 * 0.002, name
    assert r["prob_less"] == 1.0  # the ratio prior stops at 1.03 < peak_B / peak_A


def test_cli_three_files_one_command_and_a_missing_file(tmp_path, capsys):
    c = _third(tmp_path)
    out = tmp_path / "cmp"
    assert main(["compare", str(H100), str(B200), str(c), "--samples", "20000", "--out", str(out), "--quiet"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "3 scenarios, each against A = dense70b-h100" in text and "every draw" in text and "8,192" in text
    assert {p.name for p in out.iterdir()} >= {"compare.json", "report.md", "report.html", "scenarios.png"}
    md = (out / "report.md").read_text()
    assert "Scenarios side by side" in md and "×0.5 every draw" in md and str(c) in md
    gone = tmp_path / "nowhere.yaml"
    out2 = tmp_path / "cmp2"
    rc = main(["compare", str(H100), str(B200), str(gone), "--samples", "20000", "--out", str(out2), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "nowhere.yaml" in err and "Traceback" not in err
    assert not out2.exists()
    rc = main(["compare", str(H100), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "two or more" in err


def _captured(monkeypatch, draw, *args):
    from mcflops.plots import style

    figs = []
    monkeypatch.setattr(style, "save", lambda fig, path: (fig.tight_layout(), fig.canvas.draw(), figs.append(fig))
                        and str(path))
    draw("x.png", *args)
    return figs[0]


def _inside(fig):
    """Everything drawn (labels, tick labels, title, legend: the figure's tight box) inside its canvas, and the
    x label and title on their own inside it too."""
    r = fig.canvas.get_renderer()
    tight, page = fig.get_tightbbox(r), fig.bbox_inches
    assert tight.x0 >= page.x0 - 1e-3 and tight.y0 >= page.y0 - 1e-3, tight
    assert tight.x1 <= page.x1 + 1e-3 and tight.y1 <= page.y1 + 1e-3, tight
    W, H = fig.canvas.get_width_height()
    ax = fig.axes[0]
    for t in (ax.xaxis.label, ax.title):
        bb = t.get_window_extent(r)
        assert bb.x0 >= 0 and bb.x1 <= W and bb.y0 >= 0 and bb.y1 <= H, t.get_text()


def test_figures_fit_their_axes_to_the_data_and_clip_no_label(three, monkeypatch):
    from mcflops.plots import scenarios as plots, sensitivity

    specs, res, draws = three
    data = {"scenarios": res, "distribution": "prior"}
    fig = _captured(monkeypatch, plots.scenarios, data)
    lo, hi = fig.axes[0].get_xlim()
    dlo = min(float(d["gpu_hours"].min()) for d in draws)
    dhi = max(float(d["gpu_hours"].max()) for d in draws)
    assert lo <= dlo and hi >= dhi  # every draw inside (the pass saw the same draws)
    assert math.log(hi / lo) < 1.2 * math.log(dhi / dlo)  # and nothing far beyond
    _inside(fig)
    # the two-file figure: the axis ends near the ratio's draws (it ran to 10 for draws in 0.3-2.1)
    two = mcflops.compare(str(H100), str(B200), samples=20_000)
    fig = _captured(monkeypatch, sensitivity.compare_ratio, {**two, "b": {**two["b"], "name": "x" * 60}})
    lo, hi = fig.axes[0].get_xlim()
    r = two["ratio"]
    assert lo <= r["min"] and hi >= r["max"] and (hi - lo) < 1.3 * (r["max"] - r["min"])
    _inside(fig)


def test_scenarios_legend_covers_no_curve(three, monkeypatch):
    """The legend lies outside the axes (no curve, tail or median line under it) and inside the figure."""
    from mcflops.plots import scenarios as plots

    specs, res, _ = three
    fig = _captured(monkeypatch, plots.scenarios, {"scenarios": res, "distribution": "prior"})
    r = fig.canvas.get_renderer()
    ax = fig.axes[0]
    leg, box = ax.get_legend().get_window_extent(r), ax.get_window_extent(r)
    assert not leg.overlaps(box), (leg, box)
    W, H = fig.canvas.get_width_height()
    assert leg.x0 >= 0 and leg.y0 >= 0 and leg.x1 <= W and leg.y1 <= H
    assert not leg.overlaps(ax.xaxis.label.get_window_extent(r))  # nor under the axis label
    _inside(fig)


def test_the_count_note_is_stated_once(three):
    """With three scenarios, what moves with the accelerator count is one note with one clause per way of holding
    it: A and C (the calibrated prior, MFU x goodput in one number) share theirs, B (that prior times a hand-set
    ratio, read as a hand-set MFU) has its own with the count its prior was set for."""
    specs, res, _ = three
    held = [n for n in res["notes"] if "what moves with the accelerator count" in n]
    assert len(held) == 1, held
    note = held[0]
    assert note.count("held at") == 2, note  # two clauses, not one per scenario
    assert note.count("A and C: mfu is the calibrated MFU x goodput") == 1, note
    assert note.count(f"B: mfu and goodput are held at the file's prior at every count (set for "
                      f"{specs[1].hardware.count:,} accelerators)") == 1, note


def test_two_files_are_one_pass_with_the_pair_pass_answer(monkeypatch):
    """`compare A B` reads B / A from the scenarios' pass: one pass over the draws, and exactly the answer the
    separate B / A pass (analysis.compare.compare) gives on the same key (the same draws, rows and histograms;
    exact equality: one machine, one process). An output the scenarios' pass does not hold keeps that pass."""
    from mcflops import engine
    from mcflops.analysis import compare as pair

    passes = []
    real = engine.run_rows
    monkeypatch.setattr(engine, "run_rows", lambda *a, **k: passes.append(1) or real(*a, **k))
    got = mcflops.compare(str(H100), str(B200), samples=20_000)
    assert len(passes) == 1
    specs = [mcflops.load_spec(f) for f in (H100, B200)]
    want = pair.compare(*specs, samples=20_000, key=engine.seed_key(specs[0].seed))
    assert {k: got[k] for k in want if k != "notes"} == {k: v for k, v in want.items() if k != "notes"}
    assert got["notes"][:len(want["notes"])] == want["notes"]  # then the scenarios' own notes
    passes.clear()
    mcflops.compare(str(H100), str(B200), samples=20_000, output="flops")
    assert len(passes) == 2  # FLOPs: not a scenarios quantity, so the B / A pass runs too
