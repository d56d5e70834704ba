"""Tests for mcflops._rng: published known answers, JAX's own threefry, scipy's normal.

Statistical tests use fixed keys, so they are deterministic; each tolerance is stated as the
false-failure rate it would have for a fresh key (KS p > 1e-3: rate 1e-3; 5 standard errors:
rate 5.7e-7 per check). Strict JAX (rank promotion raises, warnings are errors) comes from
conftest.py and pyproject.toml.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from mcflops.engine import rng as _rng

import jax.extend.random as jex_random  # noqa: E402  (JAX's own threefry, for cross-checks)

GENS = _rng.GENERATORS


# --- known-answer vectors: Random123 tests/kat_vectors (counter, key -> output), hex uint32 ---
PHILOX4x32_10_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]
THREEFRY2x32_20_KAT = [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF,) * 2, (0xFFFFFFFF,) * 2, (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


def _u32(*xs):
    return tuple(jnp.asarray([x], jnp.uint32) for x in xs)


@pytest.mark.parametrize("ctr,key,expected", PHILOX4x32_10_KAT)
def test_philox4x32_10_known_answers(ctr, key, expected):
    out = jax.jit(_rng.philox4x32)(_u32(*ctr), _u32(*key))
    assert tuple(int(w[0]) for w in out) == expected


@pytest.mark.parametrize("ctr,key,expected", THREEFRY2x32_20_KAT)
def test_threefry2x32_20_known_answers(ctr, key, expected):
    out = jax.jit(_rng.threefry2x32)(_u32(*ctr), _u32(*key))
    assert tuple(int(w[0]) for w in out) == expected


def test_threefry_matches_jax_primitive():
    rng = np.random.default_rng(1)
    ctr = rng.integers(0, 2**32, size=(2, 1000), dtype=np.uint32)
    key = rng.integers(0, 2**32, size=2, dtype=np.uint32)
    ours = _rng.threefry2x32((ctr[0], ctr[1]), (key[0], key[1]))
    theirs = jex_random.threefry_2x32(jnp.asarray(key), jnp.asarray(ctr.reshape(-1)))
    np.testing.assert_array_equal(np.concatenate([np.asarray(w) for w in ours]), theirs)


def test_mulhilo32_matches_uint64_products():
    rng = np.random.default_rng(2)
    a = np.concatenate(
        [rng.integers(0, 2**32, 10_000, dtype=np.uint64), np.array([0, 1, 2**32 - 1], np.uint64)]
    )
    for m in (*_rng.PHILOX_M4x32, 0xFFFFFFFF, 1):
        hi, lo = _rng.mulhilo32(jnp.asarray(a.astype(np.uint32)), m)
        prod = a * np.uint64(m)
        np.testing.assert_array_equal(np.asarray(hi), (prod >> np.uint64(32)).astype(np.uint32))
        np.testing.assert_array_equal(np.asarray(lo), (prod & np.uint64(0xFFFFFFFF)).astype(np.uint32))


# --- word -> normal transform against scipy (no randomness) ----------------------------------
def test_normal_from_bits_matches_ndtri():
    # every sign, a dense grid of magnitudes plus the extremes of the 31-bit range
    m = np.unique(
        np.concatenate(
            [
                np.arange(0, 2**12, dtype=np.uint64),
                np.geomspace(1, 2**31 - 1, 20_000).astype(np.uint64),
                np.linspace(0, 2**31 - 1, 20_000).astype(np.uint64),
                np.array([2**31 - 1], np.uint64),
            ]
        )
    )
    words = np.concatenate([m, m | np.uint64(2**31)]).astype(np.uint32)
    z = np.asarray(jax.jit(_rng.normal_from_bits)(jnp.asarray(words)), np.float64)
    u = (np.concatenate([m, m]).astype(np.float64) + 0.5) * 2.0**-32
    sign = np.where(words >> 31, -1.0, 1.0)
    ref = -sign * special.ndtri(u)
    # float32 holds 24 of the 31 magnitude bits, so u near 1/2 is rounded by up to 2**-26:
    # an absolute error of 2.5 * 2**-26 = 4e-8 in z there, hence the absolute term.
    err = np.abs(z - ref) - 1e-7
    absz = np.abs(ref)
    assert np.all(err[absz < 5.3] < 5e-7 * absz[absz < 5.3])
    assert np.all(err[absz < 5.8] < 2e-5 * absz[absz < 5.8])
    assert np.all(err < 5e-4 * absz)
    assert np.abs(z).max() == pytest.approx(6.34, abs=0.01)  # the reachable tail
    # monotone in the magnitude bits within each sign
    zp = z[: m.size]
    assert np.all(np.diff(zp) <= 0)


def test_uniform_from_bits_open_interval():
    words = jnp.asarray([0, 255, 256, 2**32 - 1, 2**31], jnp.uint32)
    u = np.asarray(_rng.uniform_from_bits(words))
    assert u.min() > 0.0 and u.max() < 1.0
    assert u[0] == u[1] == u[2] == 0.5 * 2.0**-23
    assert u[3] == 1.0 - 0.5 * 2.0**-23
    assert u[4] == 0.5 + 0.5 * 2.0**-23


# --- determinism, keying, layout ---------------------------------------------------------------
@pytest.mark.parametrize("gen", GENS)
def test_deterministic_and_jit_invariant(gen):
    key = jax.random.key(42)
    f = jax.jit(lambda k: _rng.normals(k, (3, 1000), generator=gen))
    a, b = f(key), f(key)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_rng.normals(key, (3, 1000), generator=gen), a)  # eager
    np.testing.assert_array_equal(_rng.normals(jax.random.key(42), (3, 1000), generator=gen), a)


@pytest.mark.parametrize("gen", GENS)
def test_prefix_and_shape_layout(gen):
    key = jax.random.key(7)
    long = _rng.normals(key, (6000,), generator=gen)
    short = _rng.normals(key, (1000,), generator=gen)
    np.testing.assert_array_equal(long[:1000], short)
    np.testing.assert_array_equal(_rng.normals(key, (3, 2000), generator=gen).reshape(-1), long)


@pytest.mark.parametrize("gen", GENS)
def test_different_keys_differ(gen):
    n = 2**16
    key = jax.random.key(0)
    keys = [key, jax.random.key(1), jax.random.fold_in(key, 1), jax.random.fold_in(key, 2)]
    zs = [np.asarray(_rng.normals(k, (n,), generator=gen), np.float64) for k in keys]
    for i in range(len(zs)):
        for j in range(i + 1, len(zs)):
            assert np.mean(zs[i] == zs[j]) < 1e-3
            r = np.corrcoef(zs[i], zs[j])[0, 1]
            assert abs(r) < 5 / math.sqrt(n)
    # the two generators give different streams for the same key
    other = _rng.normals(key, (n,), generator="philox" if gen == "threefry" else "threefry")
    assert abs(np.corrcoef(zs[0], np.asarray(other, np.float64))[0, 1]) < 5 / math.sqrt(n)


def test_legacy_uint32_key_accepted():
    z = _rng.normals(jax.random.PRNGKey(0), (10,))
    assert z.shape == (10,) and z.dtype == jnp.float32


def test_dtypes_and_shapes():
    key = jax.random.key(0)
    assert _rng.normals(key, ()).shape == ()
    assert _rng.normals(key, (0, 3)).shape == (0, 3)
    assert _rng.normals(key, (4,), jnp.bfloat16).dtype == jnp.bfloat16
    assert _rng.uniforms(key, (4,)).dtype == jnp.float32
    with pytest.raises(TypeError, match="floating"):
        _rng.normals(key, (4,), jnp.int32)
    with pytest.raises(ValueError, match="non-negative"):
        _rng.normals(key, (-1,))
    with pytest.raises(ValueError, match="2\\*\\*32"):
        _rng.normals(key, (2**17, 2**16))
    with pytest.raises(ValueError, match="generator"):
        _rng.normals(key, (4,), generator="mt19937")


def test_compiles_once_per_shape():
    traces = []

    @jax.jit
    def f(key):
        traces.append(1)
        return _rng.normals(key, (128,))

    for seed in range(3):
        f(jax.random.key(seed))
    assert len(traces) == 1


# --- distribution tests (fixed keys: deterministic) --------------------------------------------
N_KS = 2**20
N_TAIL = 2**22


@pytest.fixture(scope="module", params=GENS)
def draws(request):
    gen = request.param
    z = jax.jit(lambda k: _rng.normals(k, (N_TAIL,), generator=gen))(jax.random.key(2024))
    return gen, np.asarray(z, np.float64)


def test_ks_against_scipy_norm(draws):
    _, z = draws
    res = stats.kstest(z[:N_KS], stats.norm.cdf)
    assert res.pvalue > 1e-3, res  # false-failure rate 1e-3 for a fresh key


def test_mean_and_variance_within_5_se(draws):
    _, z = draws
    n = N_KS
    x = z[:n]
    assert abs(x.mean()) < 5 / math.sqrt(n)
    # var of the sample variance of N(0,1) is 2/(n-1)
    assert abs(x.var(ddof=1) - 1) < 5 * math.sqrt(2 / (n - 1))


@pytest.mark.parametrize("p", [0.001, 0.5, 0.999])
def test_quantiles_within_5_se(draws, p):
    _, z = draws
    n = z.size
    zp = stats.norm.ppf(p)
    # asymptotic sd of a sample quantile: sqrt(p(1-p)/n) / phi(z_p)
    se = math.sqrt(p * (1 - p) / n) / stats.norm.pdf(zp)
    assert abs(np.quantile(z, p) - zp) < 5 * se


def test_lag1_correlation(draws):
    _, z = draws
    n = z.size - 1
    r = np.corrcoef(z[:-1], z[1:])[0, 1]
    assert abs(r) < 5 / math.sqrt(n)


def test_tails_reach_and_tail_mass(draws):
    _, z = draws
    n = z.size
    assert np.abs(z).max() > 4.5
    # counts beyond |z| > 4 and > 4.5 are Poisson: within 5 sd of the expectation
    for c in (4.0, 4.5):
        expected = n * 2 * stats.norm.sf(c)
        assert abs(np.sum(np.abs(z) > c) - expected) < 5 * math.sqrt(expected)


def test_uniforms_ks():
    u = np.asarray(_rng.uniforms(jax.random.key(5), (N_KS,)), np.float64)
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3
