"""Host-side randomness goes through one path (mcflops.hostrng.generator): the stream NumPy's own default_rng
gives for the seed (so the layout model's tables and the layout fit's predictions are the draws they were), a
seed that is not a whole number >= 0 refused, and no other ``np.random`` in the package."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from mcflops.hostrng import generator

PACKAGE = Path(__file__).resolve().parents[1] / "mcflops"
# the engine's probe inputs (engine/exact.py) are moved onto this path by the engine's owner
NOT_YET: set[str] = set()


@pytest.mark.parametrize("seed", [0, 1, 20240723, 2**63 - 1, 2**100])
def test_the_stream_is_numpys_for_that_seed(seed):
    a, b, c = generator(seed), np.random.default_rng(seed), np.random.Generator(np.random.PCG64(seed))
    x = a.random(64)
    assert np.array_equal(x, b.random(64)) and np.array_equal(x, c.random(64))  # bit for bit: one machine
    assert np.array_equal(generator(seed).permutation(100), np.random.default_rng(seed).permutation(100))
    assert not np.array_equal(generator(seed + 1).random(64), x)


@pytest.mark.parametrize("bad", [1.5, "1", -1, None])
def test_a_seed_that_is_not_a_whole_number_is_refused(bad):
    with pytest.raises((TypeError, ValueError)):
        generator(bad)


def test_no_other_numpy_randomness_in_the_package():
    found = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if p.name != "hostrng.py" and re.search(r"\bnp\.random\b|\bnumpy\.random\b", p.read_text()))
    assert set(found) <= NOT_YET, found
