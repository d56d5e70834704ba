"""The device's group sums (engine/tree.py) and the host's selection against NumPy oracles.

- The compensated tree: float32 values added on the device match the exact sum (``math.fsum`` of the
  same float32 values) to within a few units of float32's epsilon squared, where a plain float32 tree
  is off by ~eps; infinities pass through (TwoSum alone would give nan).
- Rescaling to a group's maximum: against NumPy in float64; a group with no weight adds exact zeros.
- The engine: one block per group (every block added on the host in float64, as before the device
  merged groups) against groups of 16: the same sums within float32 rounding, integer counts exactly.
- The host's reservoir selection: the k largest, ties to the earlier position, as a stable sort (as a set).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcflops
from mcflops import engine
from mcflops import model as model_mod
from mcflops.engine import driver, merge, tree

EPS32 = float(np.finfo(np.float32).eps)


def _exact(x: np.ndarray) -> np.ndarray:
    """Sum over axis 1 of float32 values, exactly (fsum), per group and element."""
    x = np.asarray(x, np.float64)
    out = np.empty((x.shape[0],) + x.shape[2:])
    for i in range(x.shape[0]):
        for j in np.ndindex(*x.shape[2:]):
            out[(i, *j)] = math.fsum(x[(i, slice(None), *j)])
    return out


def test_compensated_sum_is_near_exact_where_float32_is_not():
    rng = np.random.default_rng(7)
    # magnitudes over 12 decades and both signs: cancellation that a float32 sum gets wrong
    x = (rng.standard_normal((64, 16, 5)) * 10.0 ** rng.integers(-6, 6, (64, 16, 5))).astype(np.float32)
    got = np.asarray(tree.compensated_sum(jnp.asarray(x)), np.float64)
    want = _exact(x)
    scale = np.sum(np.abs(np.asarray(x, np.float64)), axis=1)  # the error bound scales with sum |x|
    err = np.abs(got[:, 0] + got[:, 1] - want) / scale
    assert np.max(err) < 8 * EPS32 ** 2
    plain = np.asarray(jnp.sum(jnp.asarray(x), axis=1), np.float64)
    assert np.max(np.abs(plain - want) / scale) > 1e3 * EPS32 ** 2  # the oracle can tell the two apart


def test_compensated_sum_passes_infinities_and_nan_through():
    x = np.ones((3, 16), np.float32)
    x[0, 5] = np.inf
    x[1, 2], x[1, 9] = np.inf, -np.inf
    x[2, 0] = np.nan
    got = np.asarray(tree.compensated_sum(jnp.asarray(x)))
    assert got[0, 0] == np.inf and got[0, 1] == 0
    assert np.isnan(got[1, 0]) and np.isnan(got[2, 0])  # inf - inf and nan stay nan, as in float64


def test_rescale_to_the_group_maximum_against_numpy():
    m = np.array([[-3.0, 0.5, -np.inf, 2.0], [-np.inf] * 4, [1.0, 1.0, 1.0, -50.0]], np.float32)
    f, top = map(np.asarray, tree._rescale(jnp.asarray(m)))
    want_top = np.max(m, axis=1)
    np.testing.assert_array_equal(top, want_top)
    with np.errstate(invalid="ignore"):
        want = np.where(np.isfinite(want_top)[:, None], np.exp(m.astype(np.float64) - want_top[:, None]), 0.0)
    np.testing.assert_allclose(f, want, rtol=4 * EPS32, atol=0)
    assert np.all(f[1] == 0)  # a group with no weight adds exact zeros, not e^(-inf + inf) = nan


def test_group_size_is_a_power_of_two_leaving_min_groups():
    for blocks in (1, 2, 127, 128, 129, 954, 9537, 10**6):
        g = tree.group_size(blocks)
        assert g & (g - 1) == 0 and 1 <= g <= tree.GROUP_BLOCKS
        assert blocks // g >= tree.MIN_GROUPS or g == 1
        assert g == tree.GROUP_BLOCKS or blocks // (2 * g) < tree.MIN_GROUPS  # the largest such
    assert tree.group_size(9537) == 16 and tree.group_size(96) == 1  # 1e10 and 1e8 draws


def test_fields_split_round_trip():
    shapes = tree.fields(q=3, sampled=2, nbins=8, nobs=1)
    for section, fs in shapes.items():
        size = sum(math.prod(s) for s in fs.values())
        vec = np.arange(size, dtype=np.float64)
        parts = tree.split(vec, fs)
        assert list(parts) == list(fs) and all(parts[k].shape == fs[k] for k in fs)
        np.testing.assert_array_equal(np.concatenate([v.reshape(-1) for v in parts.values()]), vec)


@pytest.mark.parametrize("k", [1, 5, 40])
def test_largest_is_a_stable_sort_of_the_top(k):
    rng = np.random.default_rng(k)
    x = rng.integers(0, 12, 300).astype(np.float64)  # many ties
    x[rng.integers(0, 300, 20)] = -np.inf
    np.testing.assert_array_equal(merge._largest(x, k), np.sort(np.argsort(-x, kind="stable")[:k]))


SPEC = {"name": "tree", "seed": 5, "hardware": {"accelerator": "h100-sxm", "count": 1024},
        "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.3, 0.5]},
                   "goodput": {"pert": [0.8, 0.9, 0.98]}},
        "observe": {"gpu_hours": {"value": 4e5, "sigma": 0.1}}}


def test_group_sums_match_block_by_block_host_sums(monkeypatch):
    spec = mcflops.load_spec(SPEC)
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    n = 37 * (1 << 12) + 999  # 38 blocks of 2^12: groups of 16, 16 and 6, the last block partial

    def sums(group):
        monkeypatch.setattr(tree, "GROUP_BLOCKS", group)
        monkeypatch.setattr(tree, "MIN_GROUPS", 1)  # groups as large as GROUP_BLOCKS however few the blocks
        return engine.run(jax.random.key(2), m, lik, n, size=1 << 12, sub=1 << 10)

    per_block, grouped = sums(1), sums(16)
    monkeypatch.undo()
    assert driver._CALLS  # both programs were compiled and are kept apart by their group size
    np.testing.assert_array_equal(grouped.prior["hist"], per_block.prior["hist"])  # counts: exact
    np.testing.assert_array_equal(grouped.below, per_block.below)
    for part in ("prior", "post"):
        a, b = getattr(per_block, part), getattr(grouped, part)
        for key in a:
            # the group's weights are rescaled in float32 on the device (e^(m_b - M): a few ulps), not float64
            np.testing.assert_allclose(b[key], a[key], rtol=16 * EPS32, atol=1e-30, err_msg=f"{part}.{key}")
    assert grouped.log_max == per_block.log_max
    np.testing.assert_array_equal(grouped.reservoir["key"], per_block.reservoir["key"])
