"""A ``recompute``, ``vpp`` (under ``schedule: interleaved``) or ``micro_batch`` a file leaves unstated is unknown,
never refused: each draw takes the fastest of the settings that run and fit in memory, as an operator tunes them
(checked against the elementwise maximum of the files that state each setting), a setting that cannot fit is never
taken, only a layout no setting fits is refused, and the choice round-trips through the resolved file and the
schema."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mcflops.errors import SpecError
from mcflops.layout import DRAWS, Layout
from mcflops.layout.unstated import candidates
from mcflops.spec import load_spec
from tests.layout.test_unknown_overlap import DOC, _ecdf

FIXED_FLAGS = {"overlap_grad_reduce": False, "overlap_param_gather": False, "tp_comm_overlap": False}


def _doc(base: dict, **layout) -> dict:
    mfu = base["priors"]["mfu"]
    lay = {k: v for k, v in {**mfu["layout"], **layout}.items() if v is not None}
    return {**base, "priors": {**base["priors"], "mfu": {**mfu, "layout": lay}}}


def _prior(base: dict, **layout):
    return load_spec(_doc(base, **layout)).count_dependent["mfu"]


def _check_best(mixed, components) -> None:
    """The prior's MFU draws are, draw by draw, the largest of the files that state each setting (the same
    efficiency draws: common random numbers), and the setting it reports taking is the one that gives it."""
    m = mixed.factor_draws()["mfu"]
    comps = np.stack([c.factor_draws()["mfu"] for c in components])
    assert np.array_equal(m, comps.max(axis=0))
    assert np.array_equal(comps[mixed.setting_draws(), np.arange(DRAWS)], m)


# Nemotron-4 15B's shape on 2,304 H100s (tests/layout/test_unknown_overlap.py): every recompute mode fits
NEMO = _doc(DOC, micro_batch=1, **FIXED_FLAGS)


def test_an_unstated_recompute_takes_the_fastest_mode():
    mixed = _prior(NEMO)
    assert mixed.mixed == ("recompute",) and [c[0] for c in mixed.combos] == ["none", "selective", "full"]
    stated = [_prior(NEMO, recompute=m) for m in ("none", "selective", "full")]
    _check_best(mixed, stated)
    # recomputing nothing is fastest whenever it fits (the forward pass is not repeated), so every draw takes it,
    # and the check can fail: full recompute is slower on every draw
    assert not mixed.setting_draws().any()
    assert np.all(stated[0].factor_draws()["mfu"] > stated[2].factor_draws()["mfu"])
    # written out it says unknown, and `recompute: unknown` is the same prior
    same = _prior(NEMO, recompute="unknown")
    assert np.array_equal(same.factor_draws()["mfu"], mixed.factor_draws()["mfu"])
    assert "recompute is not stated: each draw takes the fastest of none, selective, full" in " ".join(mixed.notes())
    assert "(none in 100% of the draws)" in " ".join(mixed.notes())


# a 70B (Llama 3.1 70B's shape) on 64 H100s, tp 1, cp 2, FSDP: a layout that ran with activation checkpointing;
# without recomputation its activations cannot fit even at the favourable end of the estimate's error
L70 = {"name": "l70-fsdp", "samples": 1000, "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 64},
       "architecture": {"preset": "llama3.1-70b"},
       "priors": {"tokens": 15.6e12, "mfu": {"layout": {"tp": 1, "pp": 1, "cp": 2, "fsdp": True, "global_batch": 32}}}}


def test_a_mode_that_cannot_fit_gets_no_weight_and_the_layout_that_ran_is_not_refused():
    with pytest.raises(SpecError, match="layout: needs"):
        _prior(L70, recompute="none")
    with pytest.raises(SpecError, match="layout: needs"):
        _prior(L70, recompute="selective")
    lp = _prior(L70)
    assert set(lp.mixed) == {"recompute", "micro_batch"} and lp.combos == (("full", 1),)
    assert lp.layout.recompute == "full"
    full = _prior(L70, recompute="full", micro_batch=1)
    assert np.array_equal(lp.factor_draws()["mfu"], full.factor_draws()["mfu"])
    notes = " ".join(lp.notes())
    assert "recompute is not stated: full, the only setting that runs and fits in memory" in notes


# Llama 3 405B as the paper states it (Sec. 3.3.2, Table 4): interleaved, the virtual stages not given
L405 = {"name": "l405-paper", "samples": 1000,
        "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 16384},
        "architecture": {"preset": "llama3.1-405b"},
        "priors": {"tokens": 15.6e12, "mfu": {"layout": {
            "tp": 8, "pp": 16, "micro_batch": 1, "global_batch": 2048, "zero": 2, "recompute": "none",
            "schedule": "interleaved", **FIXED_FLAGS}}}}


def test_interleaved_without_vpp_mixes_the_virtual_stages_that_fit():
    from mcflops.layout import memory

    lp = _prior(L405)
    assert lp.mixed == ("vpp",)
    # 126 layers on 16 stages do not split evenly: every v from 2 to 126 // 16 = 7 is a candidate
    assert candidates("vpp", lp.layout, lp.shape, 16384) == (2, 3, 4, 5, 6, 7)
    # the memory filter: a v whose first stage cannot hold its micro-batches in flight gets no weight
    fits = [v for v in range(2, 8) if not memory(Layout(**{**lp.layout.__dict__, "vpp": v}), lp.shape, lp.counts,
                                                 80.0, 16384.0).cannot_fit]
    assert [c[0] for c in lp.combos] == fits and 0 < len(fits) < 6
    _check_best(lp, [_prior(L405, vpp=v) for v in fits])
    # more virtual stages shrink the bubble and add point-to-point sends: which wins depends on the draw
    assert len(np.unique(lp.setting_draws())) > 1
    # stated vpp stays a point; vpp: unknown alone means interleaved, and another schedule refuses it in one line
    assert _prior(L405, vpp=4).mixed == ()
    assert _prior(L405, schedule=None, vpp="unknown").combos == lp.combos
    with pytest.raises(SpecError) as e:
        _prior(L405, schedule="1f1b", vpp="unknown")
    assert "\n" not in str(e.value) and "vpp: unknown is the virtual stages of schedule: interleaved" in str(e.value)


def test_the_candidates_in_closed_form():
    from mcflops.arch import Shape

    shape = Shape(layers=96, d_model=12288, heads=96, vocab=51200, seq_len=2048, ffn=49152)
    lo = Layout(tp=8, pp=8, global_batch=1536)
    # 96 / 8 = 12 layers per stage: v divides 12
    assert candidates("vpp", lo, shape, 1024) == (2, 3, 4, 6, 12)
    # dp = 1024 / 64 = 16 replicas, 1536 / 16 = 96 sequences each: b divides 96
    assert candidates("micro_batch", lo, shape, 1024) == tuple(b for b in range(1, 97) if 96 % b == 0)
    # 1536 / (1000 / 64) = 98.3 sequences each (dp following a count that does not divide): powers of two to 64
    assert candidates("micro_batch", lo, shape, 1000) == (1, 2, 4, 8, 16, 32, 64)
    assert candidates("recompute", lo, shape, 1024) == ("none", "selective", "full")


def test_nothing_fits_is_refused_at_the_leanest_setting():
    # 405B's states alone (16 bytes a parameter over tp 1, pp 1, ZeRO 2) are far past 80 GB in any setting
    big = _doc(L405, tp=1, pp=1, schedule=None, recompute=None, micro_batch=None, global_batch=65536)
    with pytest.raises(SpecError) as e:
        _prior(big)
    # the message quotes the leanest setting: full recompute at micro-batch 1, 2 s h bytes a layer
    # (Korthikanti et al. 2022, Table 2: the layer's input kept)
    shape = load_spec(_doc(L405)).count_dependent["mfu"].shape
    s, h, layers = shape.seq_len, shape.d_model, shape.layers
    assert f"{2.0 * s * h * layers / 1e9:.1f} GB activations" in str(e.value)


def test_the_mixture_round_trips_through_the_resolved_file_the_schema_and_a_sweep():
    import jsonschema

    from mcflops.spec.schema import json_schema

    lp = _prior(_doc(L405, micro_batch=None))
    assert lp.mixed == ("vpp", "micro_batch")
    d = lp.to_dict()
    assert d["layout"]["vpp"] == "unknown" and d["layout"]["micro_batch"] == "unknown"
    doc = {**L405, "priors": {**L405["priors"], "mfu": json.loads(json.dumps(d))}}
    jsonschema.Draft202012Validator(json_schema()).validate(doc)
    again = load_spec(doc).count_dependent["mfu"]
    assert again.combos == lp.combos and again.layout == lp.layout
    assert np.array_equal(again.factor_draws()["mfu"], lp.factor_draws()["mfu"])
    assert "vpp is not stated" in " ".join(lp.notes()) and "unstated vpp, micro_batch" in lp.describe()
    assert "micro-batch unknown" in lp.describe() and "x vpp unknown" in lp.describe()
    # summary.json's account says unknown where the file did, and what each mixed field kept
    from mcflops.layout import explain

    ex = explain(lp)
    assert ex["layout"]["vpp"] == "unknown" and ex["layout"]["micro_batch"] == "unknown"
    assert ex["mixed"]["vpp"] == list(dict.fromkeys(c[0] for c in lp.combos)) and 1 in ex["mixed"]["micro_batch"]
    # a sweep point that states a field takes it out of the mixture; leaving interleaving drops the stages
    assert lp.variant(micro_batch=1).mixed == ("vpp",)
    one = lp.variant(schedule="1f1b")
    assert one.mixed == ("micro_batch",) and one.layout.vpp == 1
