"""Every prior file in priors/ gives the summary.json it gave before the package was reorganised into layers:
the stored copies in tests/golden/ were made by the flat package (tests/golden/make.py), and only the
version, the device, the timings and the measured seconds may differ. A change that is meant to move the numbers
regenerates them and says why."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.golden.make import summary

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = GOLDEN.parents[1]
VOLATILE = {"timings", "seconds", "version", "versions", "device"}  # how long it took, which build and machine made it


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _diff(a, b, where="") -> list[str]:
    """Paths where two JSON values differ (floats compared exactly: the same code path gives the same bits)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in one" for k in set(a) ^ set(b)]
        for k in set(a) & set(b):
            out += _diff(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.json")))
def test_summary_is_unchanged(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the stored copies name their prior files relative to the repository
    got = _strip(json.loads(json.dumps(summary(Path("priors") / f"{name}.yaml"))))
    want = _strip(json.loads((GOLDEN / f"{name}.json").read_text()))
    diffs = _diff(got, want)
    assert not diffs, "\n".join(sorted(diffs)[:20])


def test_every_prior_file_has_a_stored_summary():
    assert sorted(p.stem for p in (ROOT / "priors").glob("*.yaml")) == sorted(p.stem for p in GOLDEN.glob("*.json"))
