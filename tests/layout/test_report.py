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
