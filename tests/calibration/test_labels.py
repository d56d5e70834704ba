"""Where a calibrated prior is shown it is called MFU x goodput (effective utilization), not MFU: the report's
napkin chain, the calibration page and its figures."""

import json
from pathlib import Path

from mcflops import report
from mcflops.priors import calibrated
from mcflops.report import sections
from mcflops.spec import load_spec

CHAIN = {"flops": 3.8e25, "gpu_hours": 3.0e7, "peak_flops": 989e12, "mfu": 0.35, "goodput": 1.0, "tokens": 15e12,
         "params": 405e9}


def _napkin(mfu) -> str:
    s = load_spec({"name": "c", "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 1024},
                   "priors": {"params": 405e9, "tokens": 15e12, "mfu": mfu}})
    run = report.Run({"chain": CHAIN, "flops_convention": "6nd"}, s, {}, "x")
    return " ".join(report.to_markdown(report.Document("t", "", "m", [sections.napkin(run)])).split())


def test_the_napkin_chain_names_a_calibrated_prior_effective_utilization():
    assert "peak × MFU × goodput (calibrated) × goodput" in _napkin({"calibrated": {"org": "Meta"}})
    plain = _napkin({"beta": [0.3, 0.45]})
    assert "peak × MFU × goodput) / 3600" in plain and "(calibrated)" not in plain


def test_the_calibration_page_never_calls_the_calibrated_quantity_mfu_alone():
    from mcflops.report.calibration import render

    data = json.loads((Path(__file__).parents[2] / "reports" / "calibration" / "calibration.json").read_text())
    md = render(data, {})["report.md"]
    assert calibrated.LABEL in md
    for i in range(len(md)):  # every "MFU" on the page is "MFU x goodput" or an implied / 30-40% rule MFU
        if md.startswith("MFU", i):
            near = md[max(0, i - 12):i + 16]
            assert "MFU x goodput" in near or "MFU × goodput" in near or "implied MFU" in near or "MFU uniform" in near, near


def test_the_headline_names_a_calibrated_posterior_effective_utilization():
    st = {"p5": 0.25, "p50": 0.33, "p95": 0.42, "mean": 0.33, "sd": 0.05}
    gh = {"p5": 2.5e7, "p50": 3.0e7, "p95": 3.6e7, "mean": 3.0e7, "sd": 3e6}
    summary = {"prior": {"gpu_hours": gh, "mfu": st}, "posterior": {"gpu_hours": gh, "mfu": st}}

    def md(mfu):
        s = load_spec({"name": "c", "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 1024},
                       "priors": {"params": 405e9, "tokens": 15e12, "mfu": mfu}})
        run = report.Run(summary, s, {}, "x")
        return " ".join(report.to_markdown(report.Document("t", "", "m", [sections.headline(run)])).split())

    assert "the run-average MFU × goodput (effective utilization) is" in md({"calibrated": True})
    assert "the run-average MFU is" in md({"beta": [0.3, 0.45]})
