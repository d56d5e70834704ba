"""The GPU's call shape on the CPU: blocks vmapped GPU_BATCH at a time (``PassShape.batch``) and histograms
spread over GPU_HIST_COPIES copies (``PassShape.copies``), which CI never runs otherwise. The first GPU run found it crashing on a file with one uncertain input (lax.map's batch_size
reshapes every output with a -1, which divides by a section of size zero)."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import numpy as np
import pytest
from scipy import stats

import mcflops
from mcflops import engine
from mcflops.engine import driver
from mcflops.model.compute import build_model
from mcflops.spec import load_spec
from tests.engine.test_single_input import N as N1
from tests.engine.test_single_input import SPEC as ONE_INPUT

SIZE, SUB = 1 << 15, 1 << 12
N = 9 * SIZE + 123  # whole batches of 8 and a short block


def gpu_shape(monkeypatch):
    monkeypatch.setattr(driver, "_batch", lambda: engine.GPU_BATCH)
    monkeypatch.setattr(driver, "_copies", lambda: engine.GPU_HIST_COPIES)


@pytest.fixture
def batched(monkeypatch):
    gpu_shape(monkeypatch)


def test_one_uncertain_input_runs_batched_and_follows_the_closed_form(batched):
    res = mcflops.sample({**ONE_INPUT, "samples": N1})
    median = math.sqrt(10e12 * 20e12)
    sigma = math.log(2.0) / (2.0 * stats.norm.ppf(0.95))
    scale = 6.0 * 70e9 / (989.4e12 * 0.4) / 3600.0
    got = res.quantile("gpu_hours", 0.5)
    se = math.sqrt(0.25 / N1) / stats.norm.pdf(0.0) * sigma  # MCSE of the median of log hours; 5 of them
    assert abs(math.log(got / (scale * median))) < 5 * se + 1e-5


@pytest.mark.parametrize("posterior", [False, True])
def test_batched_sums_are_the_one_at_a_time_sums(monkeypatch, posterior):
    """The same draws in the same blocks: the prior's histograms (whole counts) exactly, float sums to float32
    rounding (a sum of at most SIZE terms is within SIZE * 2^-24 of its total, Higham 2002, Eq. 4.4, against the
    largest entry of the section)."""
    spec = load_spec(Path(__file__).resolve().parents[2] / "priors" / "llama405b.yaml")
    m = build_model(spec)
    lik = engine.build_likelihood(spec, m) if posterior else None
    key = jax.random.key(7)
    one = engine.run(key, m, lik, N, size=SIZE, sub=SUB)
    gpu_shape(monkeypatch)
    many = engine.run(key, m, lik, N, size=SIZE, sub=SUB)
    for sect in ("prior", "post") if posterior else ("prior",):
        a, b = getattr(one, sect), getattr(many, sect)
        assert a.keys() == b.keys()
        for k in a:
            if a[k] is None:
                continue
            x, y = np.asarray(a[k], np.float64), np.asarray(b[k], np.float64)
            assert x.shape == y.shape, (sect, k)
            if sect == "prior" and k == "hist":
                assert np.array_equal(x, y) and x.sum() == N * x.shape[0]
                continue
            tol = SIZE * 2.0 ** -24 * np.abs(x).max(initial=0.0)
            assert np.max(np.abs(x - y), initial=0.0) <= tol, (sect, k)
