"""Planning with a layout MFU prior: the MFU is re-solved at each count (more data-parallel ranks at a fixed global
batch: fewer micro-batches, a longer bubble, more exposed communication), and the answers at a count agree with
the file written for that count."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from mcflops.analysis import percount
from mcflops.analysis import plan as plan_mod
from mcflops.errors import SpecError
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


def test_the_layout_runs_on_whole_micro_batches_only():
    """runnable_counts: each count passes the loader's check and splits the global batch into whole micro-batches
    per replica (Megatron-LM's rule); counts between them, or off the tp x pp x cp grid, give a reason."""
    lp = _spec(16384).count_dependent["mfu"]
    lay = lp.layout
    ok = lp.runnable_counts()
    step = lay.tp * lay.pp * lay.cp
    assert ok and ok == sorted(ok) and 16384 in ok
    for g in ok:
        dp = g // step
        assert g % step == 0 and lay.global_batch % (lay.micro_batch * dp) == 0
    rng = np.random.default_rng(7)
    others = set(rng.integers(1, ok[-1] + step, 200).tolist()) | {g + step for g in ok[:-1]} | {7554}
    for g in others - set(ok):
        assert lp.runs_on(int(g)) is not None


class _Logistic:
    """A plan curve in closed form: P(done) rises with log count, 1 / (1 + (g0 / g)^4)."""

    def __init__(self, g0: float):
        self.g0, self.p = g0, {}

    def __call__(self, counts):
        for g in counts:
            self.p[int(g)] = 1.0 / (1.0 + (self.g0 / g) ** 4)
        return np.asarray([self.p[int(g)] for g in counts])


@pytest.mark.parametrize("allowed", [None, [128 * 2**k for k in range(12)], list(range(96, 40000, 96))])
@pytest.mark.parametrize("g0", [300.0, 5000.0, 77777.0])
def test_the_search_answers_the_smallest_allowed_count_that_reaches_p(allowed, g0):
    """fixed_point over a set of allowed counts against the brute-force answer of the closed-form curve."""
    p, start = 0.9, g0 * 1.7
    counts = percount.Counts(allowed)
    got = percount.fixed_point(_Logistic(g0), p, start, counts)
    exact = g0 * (p / (1 - p)) ** 0.25  # 1 / (1 + (g0/g)^4) = p
    pool = np.arange(1, 10 * int(exact)) if allowed is None else np.asarray(allowed)
    reach = pool[pool >= exact - 1e-9]
    if not len(reach):
        assert got["gpus"] is None and got["best_gpus"] == pool[-1]
        return
    assert got["gpus"] == reach[0]
    below = pool[pool < reach[0]]
    assert got["fewer_gpus"] == (below[-1] if len(below) else None)


def test_a_layout_plan_answers_a_count_it_runs_on():
    spec = _spec(16384)
    ans = plan_mod.plan(spec, plan_options(spec, deadline_days=60, prob=0.9))
    ok = spec.count_dependent["mfu"].runnable_counts()
    dl = ans["deadline"]
    assert dl["gpus"] in ok and dl["fewer_gpus"] == ok[ok.index(dl["gpus"]) - 1]
    assert dl["prob_at_gpus"] >= 0.9 > dl["prob_one_fewer"]
    assert set(ans["curve"]["gpus"]) <= set(ok)
    assert any(n.startswith("only counts the layout runs on were searched") for n in ans["notes"])


def test_a_count_the_layout_cannot_run_on_is_one_line():
    spec = _spec(16384)
    with pytest.raises(SpecError, match=r"gpus: mfu's layout cannot run on 7,554 accelerators: .*multiple of tp x pp "
                                        r"x cp = 128; it runs on 4,096 or 8,192 \(the nearest\)"):
        plan_mod.plan(spec, plan_options(spec, gpus=7554))


def test_an_expert_layout_runs_on_multiples_of_its_expert_groups():
    """EP 8 with tp = pp = cp = 1: the counts are multiples of tp x pp x ep = 8 whose dp divides the 1,024-sequence
    batch (an unstated micro-batch: its smallest setting, 1)."""
    from pathlib import Path

    spec = load_spec(Path(__file__).resolve().parents[2] / "priors" / "examples" / "moe-from-config.yaml")
    lp = spec.count_dependent["mfu"]
    assert lp.layout.ep == 8 and "micro_batch" in lp.mixed
    assert lp.runnable_counts() == [g for g in range(1, 1025) if g % 8 == 0 and 1024 % g == 0]
    assert "tp x pp x ep = 8" in lp.runs_on(12)
