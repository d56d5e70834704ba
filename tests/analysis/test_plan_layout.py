"""Planning with a layout MFU prior: the MFU is re-solved at each count (more data-parallel ranks at a fixed global
batch: fewer micro-batches, a longer bubble, more exposed communication), and the answers at a count agree with
the file written for that count."""

from __future__ import annotations

import copy

import pytest

from mcflops.analysis import plan as plan_mod
from mcflops.spec import load_spec, plan_options
from tests.layout.test_prior import LLAMA

BASE = copy.deepcopy(LLAMA)
BASE["priors"]["tokens"] = {"lognormal": [15e12, 16.8e12]}


def _spec(count):
    d = copy.deepcopy(BASE)
    d["hardware"]["count"] = count
    return load_spec(d)


def test_days_on_another_count_are_that_files():
    a, b = _spec(16384), _spec(8192)
    on_a = plan_mod.plan(a, plan_options(a, gpus=8192))
    on_b = plan_mod.plan(b, plan_options(b))
    assert on_a["count_dependent"] == ["mfu"]
    for k in ("days_p50", "days_p90"):  # the same draws, the same MFU table at 8,192: the same days
        assert on_a["cluster"][k] == pytest.approx(on_b["cluster"][k], rel=1e-6)


def test_the_plan_curve_shows_the_diminishing_return():
    spec = _spec(16384)
    ans = plan_mod.plan(spec, plan_options(spec, deadline_days=60, prob=0.9))
    assert ans["deadline"]["method"] == "fixed point"
    lp = spec.count_dependent["mfu"]
    from mcflops.priors.quantiles import ppf
    med = [float(ppf(lp.at(n), 0.5)) for n in (4096, 16384, 65536)]
    # throughput per accelerator falls as the count grows at a fixed global batch of 2,048 sequences
    assert med[0] > med[1] > med[2]
    # doubling the count past the file's gives less than double the throughput
    assert 65536 * med[2] < 4 * 16384 * med[1]


def test_the_plan_says_what_moves_with_the_count():
    """The first note names what is re-solved and what is held: a layout's MFU with its global batch held; a
    hand-set MFU and goodput held at the file's prior, and the recipes that would re-solve them."""
    spec = _spec(16384)
    first = plan_mod.plan(spec, plan_options(spec, gpus=8192))["notes"][0]
    assert first.startswith("what moves with the accelerator count:")
    assert "mfu is re-solved at each count from the layout" in first and "2,048 sequences" in first
    assert "goodput is held at the file's prior" in first  # LLAMA gives no goodput recipe
    hand = load_spec({**BASE, "priors": {"tokens": BASE["priors"]["tokens"], "mfu": {"beta": [0.3, 0.45]},
                                         "goodput": {"beta": [0.85, 0.97]}}})
    note = plan_mod.plan(hand, plan_options(hand, deadline_days=60))["notes"][0]
    assert "mfu and goodput are held at the file's prior at every count (it was set for 16,384" in note
    assert "re-solve" in note and "re-solved at each count" not in note
