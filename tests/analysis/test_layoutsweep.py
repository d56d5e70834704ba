"""A layout field's sweep against runs of the files written with that field: the quantile map on the kept draws
gives the GPU-hours a direct run of the changed file gives, within Monte Carlo error."""

from __future__ import annotations

import copy
import math

import pytest

import mcflops
from mcflops.errors import SpecError
from mcflops.spec import load_spec, sensitivity_options
from tests.layout.test_prior import LLAMA

BASE = {**LLAMA, "priors": {**LLAMA["priors"], "tokens": {"lognormal": [15e12, 16.8e12]}}}


@pytest.fixture(scope="module")
def swept():
    spec = load_spec(BASE)
    opts = sensitivity_options(spec, sweeps=["recompute=none,full", "global_batch=1024,4096"])
    return mcflops.run(spec, samples=50000, sensitivity=opts).sensitivity["layout_sweeps"]


@pytest.mark.parametrize("field,value,index", [("recompute", "full", 1), ("global_batch", 4096, 1),
                                               ("global_batch", 1024, 0)])
def test_sweep_matches_a_run_of_the_changed_file(swept, field, value, index):
    data = copy.deepcopy(BASE)
    data["priors"]["mfu"]["layout"][field] = value
    res = mcflops.run(data, samples=50000)
    direct = res.prior["gpu_hours"]
    got = swept[field]["prior"]["p50"][index]
    # two independent estimates of a median: the direct run's MCSE, and the sweep's from its kept draws
    n_kept = swept[field]["prior"]["draws"]
    sd_log = direct["sd"] / direct["mean"]
    se = math.hypot(direct["mcse_p50"] / direct["p50"], 1.2533 * sd_log / math.sqrt(n_kept))
    assert abs(math.log(got / direct["p50"])) < 4 * se, (got, direct["p50"], se)


def test_full_recompute_costs_about_a_quarter(swept):
    m = swept["recompute"]["prior"]["mfu"]["p50"]
    assert m[1] / m[0] == pytest.approx(0.75, abs=0.03)  # 3/4 of the FLOPs are model FLOPs, and a few more all-reduces


def test_a_layout_that_cannot_fit_is_refused_with_its_field():
    spec = load_spec(BASE)
    with pytest.raises(SpecError, match="layout micro_batch = 4: needs"):
        sensitivity_options(spec, sweeps=["micro_batch=1,4"])
    with pytest.raises(SpecError, match="expected whole numbers"):
        sensitivity_options(spec, sweeps=["pp=8,x"])
