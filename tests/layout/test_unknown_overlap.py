"""An overlap flag left ``unknown``: the prior is the equal-weight mixture of its two settings (checked against a
NumPy oracle built from the two fixed-flag priors), it round-trips through the resolved file and the JSON schema,
the notes say so, and a value that is none of true / false / unknown is one line (exit 2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mcflops.errors import SpecError
from mcflops.layout import DRAWS
from mcflops.spec import load_spec

FLAGS = ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
# Nemotron-4 15B's shape on 2,304 H100s (report Table 1; tp 8, pp 1), half its global batch, and narrow efficiency
# priors: each flag then moves most of the MFU's mass, so a wrong mixture weight cannot hide in the noise
ARCH = {"layers": 32, "d_model": 6144, "heads": 48, "kv_heads": 8, "vocab": 256000, "seq_len": 4096, "ffn": 24576,
        "glu": False, "source": "Nemotron-4 15B report (arXiv 2402.16819) Table 1"}
EFF = {"gemm": {"beta": [0.6, 0.66]}, "tp_comm": {"lognormal": [1.0, 1.2]}, "dp_comm": {"lognormal": [1.0, 1.2]}}
DOC = {"name": "unk", "samples": 1000, "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 2304},
       "flops": "architecture", "architecture": ARCH,
       "priors": {"tokens": 15.6e12, "mfu": {"layout": {"tp": 8, "pp": 1, "global_batch": 576, "zero": 1},
                                             "efficiency": EFF}}}


def _lay(**kw):
    mfu = DOC["priors"]["mfu"]
    doc = {**DOC, "priors": {**DOC["priors"], "mfu": {**mfu, "layout": {**mfu["layout"], **kw}}}}
    return load_spec(doc).count_dependent["mfu"]


def _ecdf(x: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(x), at, side="right") / len(x)


@pytest.mark.parametrize("flag", FLAGS)
def test_one_unknown_flag_is_the_50_50_mixture_of_its_two_settings(flag):
    """The oracle: the two fixed-setting priors' draws (each all DRAWS of them), the mixture CDF
    F(q) = (F_on(q) + F_off(q)) / 2 inverted at p = 5%, 25%, 50%, 75%, 95%. The unknown prior's empirical CDF at
    those q must be p within 5 standard errors of a half-sample's empirical CDF, sqrt(p (1 - p) / (DRAWS / 2))
    (a false-failure rate below 1e-6 per point; Latin-hypercube draws only shrink the error)."""
    fixed = {k: False for k in FLAGS if k != flag}
    on = _lay(**fixed, **{flag: True}).factor_draws()["mfu"]
    off = _lay(**fixed, **{flag: False}).factor_draws()["mfu"]
    mixed = _lay(**fixed, **{flag: "unknown"})
    assert mixed.unknown == (flag,)
    m = mixed.factor_draws()["mfu"]
    grid = np.sort(np.concatenate([on, off]))
    oracle_cdf = 0.5 * (_ecdf(on, grid) + _ecdf(off, grid))
    for p in (0.05, 0.25, 0.5, 0.75, 0.95):
        q = grid[np.searchsorted(oracle_cdf, p)]
        se = math.sqrt(p * (1 - p) / (DRAWS / 2))
        assert abs(_ecdf(m, np.array([q]))[0] - p) <= 5 * se
    # the check can fail: the two settings differ by far more than the tolerance at the median
    q50 = grid[np.searchsorted(oracle_cdf, 0.5)]
    assert abs(_ecdf(on, np.array([q50]))[0] - _ecdf(off, np.array([q50]))[0]) > 20 * math.sqrt(0.25 / (DRAWS / 2))
    # each flag is on in exactly half the draws
    assert mixed.flag_draws()[flag].sum() == DRAWS // 2


def test_all_three_unknown_is_the_equal_mixture_of_the_eight_settings():
    import itertools

    comps = [_lay(**dict(zip(FLAGS, bits))).factor_draws()["mfu"] for bits in itertools.product((False, True), repeat=3)]
    m = _lay().factor_draws()["mfu"]
    grid = np.sort(np.concatenate(comps))
    oracle_cdf = np.mean([_ecdf(c, grid) for c in comps], axis=0)
    for p in (0.05, 0.5, 0.95):
        q = grid[np.searchsorted(oracle_cdf, p)]
        assert abs(_ecdf(m, np.array([q]))[0] - p) <= 5 * math.sqrt(p * (1 - p) / (DRAWS / 8))


def test_unknown_round_trips_through_the_resolved_file_the_schema_and_the_notes():
    import jsonschema

    from mcflops.spec.schema import json_schema

    lp = _lay(tp_comm_overlap="unknown", overlap_grad_reduce=True)
    d = lp.to_dict()
    assert d["layout"]["tp_comm_overlap"] == "unknown" and d["layout"]["overlap_grad_reduce"] is True
    again = load_spec({**DOC, "priors": {**DOC["priors"], "mfu": json.loads(json.dumps(d))}}).count_dependent["mfu"]
    assert again.unknown == lp.unknown and again.layout == lp.layout
    assert np.array_equal(again.factor_draws()["mfu"], lp.factor_draws()["mfu"])
    jsonschema.Draft202012Validator(json_schema()).validate({**DOC, "priors": {**DOC["priors"], "mfu": d}})
    notes = " ".join(lp.notes())
    assert "tp_comm_overlap is unknown" in notes and "overlap_param_gather is unknown" in notes
    assert "overlap_grad_reduce is unknown" not in notes
    # a sweep point that states the flag takes it out of the mixture
    assert lp.variant(tp_comm_overlap=True).unknown == ("overlap_param_gather",)


@pytest.mark.parametrize("value", ["Unknown", "maybe", 0.5])
def test_a_flag_that_is_not_true_false_or_unknown_is_one_line(value):
    with pytest.raises(SpecError) as e:
        _lay(tp_comm_overlap=value)
    assert "\n" not in str(e.value) and "layout.tp_comm_overlap: true, false or unknown" in str(e.value)


def test_the_bad_file_exits_2_with_one_line(capsys, tmp_path):
    from mcflops.cli.main import main

    bad = Path(__file__).resolve().parents[1] / "bad" / "layout_overlap_unknown.yaml"
    rc = main(["run", str(bad), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "true, false or unknown" in err
    assert not (tmp_path / "r").exists()
