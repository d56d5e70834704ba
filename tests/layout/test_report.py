"""A layout run's account reaches summary.json and the report: the waterfall's levels fall from the peak to
the achieved FLOP/s, the posterior MFU from the reweighted factors equals the engine's, the section renders."""

from __future__ import annotations

import numpy as np
import pytest

import mcflops
from mcflops.report import Run, build
from mcflops.report.markup import to_markdown
from tests.layout.test_prior import LLAMA

OBS = {**LLAMA, "priors": {**LLAMA["priors"], "goodput": {"beta": [0.85, 0.97]}},
       "observe": {"gpu_hours": {"value": 30.84e6, "sigma": 0.07}}}


@pytest.fixture(scope="module")
def result():
    return mcflops.run(OBS, samples=20000)


def test_summary_has_the_layout_and_its_posterior(result):
    lay = result.to_dict()["layout"]
    wf = lay["waterfall"]
    afters = [s["after"] for s in wf["steps"]]
    assert all(a >= b for a, b in zip(afters, afters[1:])) and afters[0] < wf["peak_flops"]
    # the factors' posterior MFU (prior draws reweighted by MFU's posterior / prior ratio) is the engine's:
    # within 3 standard errors of the engine's posterior median plus the 1/200 bin width in probability
    post = np.asarray(result.posterior_draws["mfu"])
    engine_p50 = float(np.median(post))
    mine = wf["factors"]["mfu"]["posterior"]["p50"]
    se = 1.2533 * np.std(post) / np.sqrt(len(post))  # the median's standard error, normal approximation
    prior_m = result.spec.count_dependent["mfu"].factor_draws()["mfu"]
    f = np.mean(prior_m < engine_p50)
    bin_width = np.quantile(prior_m, min(f + 1 / 200, 1)) - np.quantile(prior_m, max(f - 1 / 200, 0))
    assert abs(mine - engine_p50) < 3 * se + bin_width
    assert lay["identified"] and "product" in lay["identified"]
    assert lay["memory"]["capacity_gb"] == 80.0


def test_the_report_has_a_layout_section(result, tmp_path):
    summary = result.to_dict()
    run = Run(summary=summary, spec=result.spec, figures={}, label=str(tmp_path))
    md = to_markdown(build(run))
    assert "Where the FLOP/s go" in md and "GEMM efficiency" in md and "Of 989 TFLOP/s" in md


def test_the_widths_parts_are_those_of_the_file_with_that_prior_stated(result):
    """explain's width parts against files that state each prior at its median (the spec grammar's path: a layout
    table built afresh), and the whole against NumPy's quantiles of the table's MFU. The same Latin-hypercube columns
    feed both, so they agree to rounding; a part that drew the fixed prior's column afresh, or fixed the wrong one,
    moves the width by far more (GEMM efficiency alone takes it from 2.3x to 1.6x)."""
    import copy

    from mcflops.priors.quantiles import ppf
    from mcflops.spec import load_spec

    parts = result.to_dict()["layout"]["width_parts"]
    lp = result.spec.count_dependent["mfu"]
    lo, hi = np.quantile(lp.factor_draws()["mfu"], [0.05, 0.95])
    assert parts["all"] == pytest.approx(hi / lo, rel=1e-12)
    assert "ep_comm" not in parts["fixed"]  # a dense layout: no expert all-to-all to fix
    assert set(parts["fixed"]) >= {"gemm", "tp_comm", "dp_comm"}
    for p, got in parts["fixed"].items():
        doc = copy.deepcopy(OBS)
        doc["priors"]["mfu"]["efficiency"] = {p: {"point": float(ppf(lp.efficiency[p], 0.5)), "source": "median"}}
        one = load_spec(doc).count_dependent["mfu"]
        lo, hi = np.quantile(one.factor_draws()["mfu"], [0.05, 0.95])
        assert got == pytest.approx(hi / lo, rel=1e-9), p
    assert min(parts["fixed"], key=parts["fixed"].get) == "gemm" and parts["fixed"]["gemm"] < 0.8 * parts["all"]


def test_the_report_names_what_the_width_is_made_of(result, tmp_path):
    run = Run(summary=result.to_dict(), spec=result.spec, figures={}, label=str(tmp_path))
    md = to_markdown(build(run))
    text = md[md.index("What the width is made of"):]
    # the table sorted by what fixing each prior leaves, the narrowest first, and the note names it
    rows = [line for line in text.splitlines() if line.startswith("| ") and line.endswith("x |")]
    widths = [float(r.rsplit("|", 2)[1].strip()[:-1]) for r in rows]
    assert len(rows) >= 3 and widths == sorted(widths) and rows[0].startswith("| GEMM efficiency")
    from mcflops.layout.explain import width_parts

    parts = width_parts(result.spec.count_dependent["mfu"])
    assert (f"Note: GEMM efficiency narrows it most ({parts['all']:.2f}x to {parts['fixed']['gemm']:.2f}x)" in text
            and "`pilot:`" in text)


def test_a_prior_conditioned_on_a_pilot_has_no_width_parts(tmp_path):
    """The parts are read on the layout table's unweighted draws: for a file with a pilot they would describe the
    prior before it (2.3x for the example) where the file's MFU prior is the pilot's posterior predictive (about
    1.3x), so they are left out, in summary.json and the report."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "priors" / "examples" / "ladder" / "dense70b-pilot.yaml"
    res = mcflops.run(path, samples=20000)
    lay = res.to_dict()["layout"]
    assert lay["waterfall"] and lay["width_parts"] is None
    md = to_markdown(build(Run(summary=res.to_dict(), spec=res.spec, figures={}, label=str(tmp_path))))
    assert "Where the FLOP/s go" in md and "What the width is made of" not in md
