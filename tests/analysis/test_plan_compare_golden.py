"""plan's and compare's answers on the shipped examples are the ones the code gave before its passes were put
on the engine's pieces (one NBINS, the engine's binning, block loop and histogram readers): the stored copy,
tests/analysis/plan_compare_golden.json, was made by the code at 9349fda (``python -m
tests.analysis.test_plan_compare_golden`` with that tree first on PYTHONPATH).

Precision (as tests/test_golden.py's): these are prior answers, host float64 arithmetic on the histograms'
counts (whole numbers of draws, exact in float32 per block) and on the draws' extremes (elementwise float32,
the same bits on every SIMD path), so every float is compared to RTOL_HOST, text and integers exactly. Any
change to the draws, the pilot's ranges, the bins or the readers moves a quantile by a good part of a bin
(1e-4 relative and more), far outside it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mcflops.analysis import compare as compare_mod
from mcflops.analysis import plan as plan_mod
from mcflops.analysis import scenarios as scen
from mcflops.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
A, B = ROOT / "priors/examples/dense70b-h100.yaml", ROOT / "priors/examples/dense70b-b200.yaml"
STORED = Path(__file__).resolve().parent / "plan_compare_golden.json"
RTOL_HOST = 1e-9


def _numbers(x):
    """The answers' numbers and words (notes and paths left out: they are text about the files, not answers)."""
    if isinstance(x, dict):
        return {k: _numbers(v) for k, v in x.items() if k not in ("notes", "path", "inputs")}
    if isinstance(x, (list, tuple)):
        return [_numbers(v) for v in x]
    return x


def answers(which: str):
    a, b = load_spec(A), load_spec(B)
    if which == "plan":
        return _numbers(plan_mod.plan(a))
    if which == "compare":
        return _numbers(compare_mod.compare(a, b))
    return _numbers(scen.scenarios([a, b], deadline=scen.deadline_of([a, b])))


def _same(got, want, where="") -> None:
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert math.isclose(got, want, rel_tol=RTOL_HOST, abs_tol=0.0), (where, got, want)
    else:
        assert got == want, (where, got, want)


@pytest.mark.parametrize("which", ["plan", "compare", "scenarios"])
def test_answers_as_stored(which):
    stored = json.loads(STORED.read_text())[which]
    _same(json.loads(json.dumps(answers(which))), stored, which)


if __name__ == "__main__":  # regenerate the stored copy (a change meant to move the numbers says why)
    STORED.write_text(json.dumps({w: answers(w) for w in ("plan", "compare", "scenarios")}, indent=1) + "\n")
