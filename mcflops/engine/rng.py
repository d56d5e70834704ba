"""Fast counter-based standard normals for the engine's hot loop (pure JAX, jittable).

Why this exists: ``jax.random.normal`` is slow on a CPU, and the threefry *algorithm* is not the
slow part: JAX evaluates each 2x32 block once and then
concatenates the two output words, and XLA:CPU has no multi-output loop fusion, so it emits
one fusion per word (each recomputing the block) plus a concatenate. Here every output element
evaluates its own block, keeps one word, and turns it into a normal in the same elementwise
fusion: one fused, vectorised, multi-threaded loop and no intermediate arrays. Measured numbers:
``benchmarks/rng_bench.py`` and ``benchmarks/RESULTS.md``.

Generators (both from Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3",
SC'11, doi:10.1145/2063384.2063405; checked against the Random123 ``kat_vectors``):

* ``"threefry"``: Threefry-2x32 with 20 rounds, the generator behind JAX's default PRNG
  (``jax.extend.random.threefry_2x32`` gives identical words; the tests check that).
* ``"philox"``: Philox-4x32 with 10 rounds (the Random123/cuRAND default); the 32x32->64
  multiply is done in 16-bit halves so that no 64-bit type (``jax_enable_x64``) is needed.

Both are keyed bijections of a 64- or 128-bit counter; Salmon et al. report that they pass
TestU01 BigCrush already at fewer rounds than the defaults used here (the rest is margin).

Layout: element ``i`` (flat, row-major) of the output uses counter ``i`` and four key words
``k = jax.random.bits(key, (4,), uint32)``: threefry key ``(k0, k1)``, counter ``(i, k2)``;
philox key ``(k0, k1)``, counter ``(i, 0, k2, k3)``. So the result is a pure function of
``key`` and the element index: a prefix of a longer draw equals the shorter draw, and it does
not depend on device or jit. The integer words are bit-identical on every backend; the normals
go through float32 ``log``/``sqrt``, whose last-ulp rounding may differ between backends.

Word -> normal: the top bit is the sign; the other 31 bits give
``u = (m + 1/2) * 2**-32`` in (0, 1/2), the lower-tail probability, and
``|z| = sqrt(2) * erfinv(1 - 2u)`` with Giles' single-precision erfinv polynomials
(M. Giles, "Approximating the erfinv function", GPU Computing Gems Jade, 2011), evaluated
from ``w = -log(4u(1-u))`` computed from ``u`` directly so that the tail keeps its precision.
Error against float64 ``scipy.special.ndtri`` of the same u: relative < 3e-7 for |z| < 5.3,
< 1.3e-5 for |z| < 5.8, < 4e-4 out to the largest reachable |z| = 6.34 (u = 2**-33), plus an
absolute 4e-8 near z = 0 (float32 keeps 24 of the 31 bits there).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "GENERATORS",
    "bits",
    "normal_from_bits",
    "normals",
    "philox4x32",
    "threefry2x32",
    "uniform_from_bits",
    "uniforms",
]

Generator = Literal["threefry", "philox"]
GENERATORS: tuple[str, ...] = ("threefry", "philox")

_U32 = jnp.uint32
_F32 = jnp.float32

# --- Philox-4x32 (Salmon et al. 2011, Sec. 4.2; constants as in Random123 philox.h) ----------
PHILOX_M4x32 = (0xD2511F53, 0xCD9E8D57)  # round multipliers
PHILOX_W32 = (0x9E3779B9, 0xBB67AE85)  # Weyl key increments (golden ratio, sqrt(3) - 1)


def mulhilo32(a: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    """(hi, lo) 32-bit words of the 64-bit product ``a * m`` (a: uint32 array, m: constant).

    Schoolbook multiply in 16-bit halves, so it stays in uint32 (no jax_enable_x64)."""
    m_lo, m_hi = _U32(m & 0xFFFF), _U32(m >> 16)
    a_lo, a_hi = a & _U32(0xFFFF), a >> _U32(16)
    ll = a_lo * m_lo
    lh = a_lo * m_hi
    hl = a_hi * m_lo
    hh = a_hi * m_hi
    mid = (ll >> _U32(16)) + (lh & _U32(0xFFFF)) + (hl & _U32(0xFFFF))  # < 3 * 2**16
    hi = hh + (lh >> _U32(16)) + (hl >> _U32(16)) + (mid >> _U32(16))
    return hi, a * _U32(m)


def philox4x32(counter, key, rounds: int = 10, mulhilo=mulhilo32):
    """Philox-4x32-R on uint32 arrays (broadcasting). counter: 4 words, key: 2 words.

    Each round: (hi0, lo0) = mulhilo(M0, c0); (hi1, lo1) = mulhilo(M1, c2);
    c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); then the key is bumped by the Weyl constants."""
    c0, c1, c2, c3 = (jnp.asarray(c, _U32) for c in counter)
    k0, k1 = (jnp.asarray(k, _U32) for k in key)
    for r in range(rounds):
        if r:
            k0 = k0 + _U32(PHILOX_W32[0])
            k1 = k1 + _U32(PHILOX_W32[1])
        hi0, lo0 = mulhilo(c0, PHILOX_M4x32[0])
        hi1, lo1 = mulhilo(c2, PHILOX_M4x32[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


# --- Threefry-2x32 (Salmon et al. 2011, Sec. 4.1; rotations and parity as in Random123) ------
THREEFRY_ROT2x32 = (13, 15, 26, 6, 17, 29, 16, 24)
THREEFRY_PARITY32 = 0x1BD11BDA


def _rotl(x: jax.Array, r: int) -> jax.Array:
    return (x << _U32(r)) | (x >> _U32(32 - r))


def threefry2x32(counter, key, rounds: int = 20):
    """Threefry-2x32-R on uint32 arrays (broadcasting). counter: 2 words, key: 2 words.

    Each round: x0 += x1; x1 = rotl(x1, R[r % 8]) ^ x0; after every 4th round inject the
    key schedule (k0, k1, k0 ^ k1 ^ parity) plus the injection count."""
    x0, x1 = (jnp.asarray(c, _U32) for c in counter)
    k0, k1 = (jnp.asarray(k, _U32) for k in key)
    ks = (k0, k1, k0 ^ k1 ^ _U32(THREEFRY_PARITY32))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for r in range(rounds):
        x0 = x0 + x1
        x1 = _rotl(x1, THREEFRY_ROT2x32[r % 8]) ^ x0
        if r % 4 == 3:
            s = r // 4 + 1
            x0 = x0 + ks[s % 3]
            x1 = x1 + ks[(s + 1) % 3] + _U32(s)
    return x0, x1


# --- word -> float -----------------------------------------------------------------------------
# Giles (2011) single-precision erfinv: erfinv(x) = x * p(w), w = -log((1 - x)(1 + x)),
# p = P_CENTRAL(w - 2.5) for w < 5, else P_TAIL(sqrt(w) - 3). Coefficients highest degree first.
_GILES_CENTRAL = (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941,
)  # fmt: skip
_GILES_TAIL = (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682,
)  # fmt: skip
_SQRT2 = math.sqrt(2.0)


def _horner(coeffs, x):
    p = _F32(coeffs[0])
    for c in coeffs[1:]:
        p = p * x + _F32(c)
    return p


def normal_from_bits(b: jax.Array) -> jax.Array:
    """uint32 words -> float32 standard normals (one word each; inverse-CDF, so monotone in
    the low 31 bits). Largest |z| is 6.34; P(|Z| > 6.34) = 2.3e-10, so the tails are intact
    far past anything a Monte Carlo summary looks at."""
    b = jnp.asarray(b, _U32)
    m = (b & _U32(0x7FFFFFFF)).astype(jnp.int32).astype(_F32)  # 31 bits, exact below 2**24
    u = (m + _F32(0.5)) * _F32(2.0**-32)  # lower-tail probability, in (0, 1/2)
    w = -jnp.log(_F32(4.0) * u * (_F32(1.0) - u))  # = -log((1 - x)(1 + x)), x = 1 - 2u
    p = jnp.where(
        w < _F32(5.0),
        _horner(_GILES_CENTRAL, w - _F32(2.5)),
        _horner(_GILES_TAIL, jnp.sqrt(w) - _F32(3.0)),
    )
    mag = _F32(_SQRT2) * (_F32(1.0) - _F32(2.0) * u) * p
    return jnp.where(b >> _U32(31) == _U32(0), mag, -mag)


def uniform_from_bits(b: jax.Array) -> jax.Array:
    """uint32 words -> float32 uniforms on the open interval (0, 1): (b >> 9 + 1/2) * 2**-23.

    The values are the 2**23 cell midpoints, all exact in float32 (24-bit midpoints would round
    the top one to 1.0), so neither 0 nor 1 occurs and 1 - u is exact."""
    b = jnp.asarray(b, _U32)
    return ((b >> _U32(9)).astype(jnp.int32).astype(_F32) + _F32(0.5)) * _F32(2.0**-23)


# --- keyed arrays --------------------------------------------------------------------------------
def _check_shape(shape) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError as e:
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from e
    if any(d < 0 for d in shape):
        raise ValueError(f"shape must be non-negative, got {shape}")
    if math.prod(shape) > 2**32:
        raise ValueError(
            f"at most 2**32 elements per call (the element index is a 32-bit counter); "
            f"got {math.prod(shape)}: split the draw into blocks with fold_in"
        )
    return shape


def _check_args(shape, dtype, generator) -> tuple[tuple[int, ...], np.dtype]:
    shape = _check_shape(shape)
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {GENERATORS}, got {generator!r}")
    if dtype is None:
        return shape, None
    dtype = jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating type, got {dtype}")
    return shape, dtype


@partial(jax.jit, static_argnums=(1, 2, 3))
def _keyed(key, shape, generator, what):
    # jitted so that eager callers get one fused kernel instead of ~300 dispatched ops
    k = jax.random.bits(key, (4,), _U32)
    idx = jax.lax.iota(_U32, math.prod(shape)).reshape(shape)
    if generator == "threefry":
        w = threefry2x32((idx, k[2]), (k[0], k[1]))[0]
    else:
        w = philox4x32((idx, jnp.zeros((), _U32), k[2], k[3]), (k[0], k[1]))[0]
    if what == "normal":
        return normal_from_bits(w)
    if what == "uniform":
        return uniform_from_bits(w)
    return w


def bits(key: jax.Array, shape: tuple[int, ...], generator: Generator = "threefry") -> jax.Array:
    """uint32 words of the given shape; element i (flat, row-major) uses counter i."""
    shape, _ = _check_args(shape, None, generator)
    return _keyed(key, shape, generator, "bits")


def normals(
    key: jax.Array,
    shape: tuple[int, ...],
    dtype=jnp.float32,
    *,
    generator: Generator = "threefry",
) -> jax.Array:
    """Standard normals of ``shape``: a pure, deterministic, jittable function of ``key``.

    ``key`` is a typed JAX key (``jax.random.key(seed)``; legacy uint32 keys work too).
    Computed in float32 (relative error < 3e-7 for |z| < 5.3), then cast to ``dtype``: asking
    for float64 gives float32-accurate values. See the module docstring for the layout."""
    shape, dtype = _check_args(shape, dtype, generator)
    z = _keyed(key, shape, generator, "normal")
    return z if dtype == np.dtype(np.float32) else z.astype(dtype)


def uniforms(
    key: jax.Array,
    shape: tuple[int, ...],
    dtype=jnp.float32,
    *,
    generator: Generator = "threefry",
) -> jax.Array:
    """Uniforms on (0, 1) with 23-bit resolution; same keying and layout as ``normals``."""
    shape, dtype = _check_args(shape, dtype, generator)
    u = _keyed(key, shape, generator, "uniform")
    return u if dtype == np.dtype(np.float32) else u.astype(dtype)
