"""Samplers: every prior as a map from a standard normal z to log x. Pure JAX at sampling time.

Each input is drawn as ``x = F^{-1}(Phi(z))`` with ``z ~ N(0, 1)``: one representation serves the
prior predictive, importance sampling, Saltelli's Sobol matrices (columns of z) and a Gaussian
copula (correlate the z's). The map is exact for point and lognormal priors (``log x = mu + sigma z``);
for every other family it is a table of ``log F^{-1}(Phi(z))`` on a uniform z grid, built once with
the quantile functions of :mod:`mcflops.priors.quantiles` (memoised per prior) and read back by linear
interpolation. ``jax.random.beta`` is a rejection sampler, far slower than a lookup; the table costs one
gather, and its quantile error is below 1e-5 relative (tests/model/test_samplers.py checks every family
against scipy.stats).

Values are centred: the kernel works with ``d = log x - center`` (float32 is exact enough for
deviations of order sigma), and the float64 centre stays on the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import diskcache
from mcflops.priors import quantiles
from mcflops.priors.dist import Dist

ZMAX = 8.0  # the table spans z in [-8, 8]: Phi(-8) = 6e-16, beyond any float32 normal draw
GRID = 4096  # intervals; dz = 0.0039, interpolation error ~ dz^2/8 * |d2 log x / dz2|


@dataclass(frozen=True)
class Sampler:
    """How one input turns z into a centred log value. ``kind`` is static; arrays are leaves."""

    kind: str  # "const" | "affine" | "table"
    center: float  # float64 log-centre, host side (a leaf so that new numbers never retrace; unused in the kernel)
    a: jax.Array  # affine: d = a + b z ; const: d = a
    b: jax.Array
    table: jax.Array  # table: d = interp(z) on the z grid (GRID + 1 values), else shape (1,)

    def __call__(self, z: jax.Array) -> jax.Array:
        if self.kind == "const":
            return jnp.broadcast_to(self.a, z.shape)
        if self.kind == "affine":
            return self.a + self.b * z
        return interp_table(self.table, z)


jax.tree_util.register_dataclass(Sampler, data_fields=["a", "b", "table", "center"], meta_fields=["kind"])


def interp_table(table: jax.Array, z: jax.Array) -> jax.Array:
    """Linear interpolation on the uniform grid [-ZMAX, ZMAX] (a gather, not a search)."""
    t = jnp.clip((z + ZMAX) * (GRID / (2 * ZMAX)), 0.0, GRID - 2.0**-10)  # 2^-10: exact in float32 here
    i = t.astype(jnp.int32)  # t >= 0, so truncation is floor
    f = t - i.astype(t.dtype)
    # value and slope of the cell, each by one clipped gather (cheaper on XLA:CPU than indexing)
    return jnp.take(table, i, mode="clip") + f * jnp.take(table[1:] - table[:-1], i, mode="clip")


def z_grid() -> np.ndarray:
    return np.linspace(-ZMAX, ZMAX, GRID + 1)


@quantiles.memoised(64)  # 64 tables of 4097 float64: 2 MiB at most
@diskcache.persistent  # and on disk, when the command line keeps them (mcflops.diskcache)
def log_quantile_table(d: Dist) -> np.ndarray:
    """log F^{-1}(Phi(z)) on the z grid, in float64 (lower half by ppf, upper half by isf for accuracy).

    Quantiles by :mod:`mcflops.priors.quantiles` (scipy.special; no scipy.stats on the run path), memoised per
    prior: a notebook that reruns a spec, or a sweep, builds each table once. The array is read-only.
    """
    from scipy.special import ndtr

    z = z_grid()
    lower = z <= 0
    x = np.empty_like(z)
    x[lower] = quantiles.ppf(d, ndtr(z[lower]))
    x[~lower] = quantiles.isf(d, ndtr(-z[~lower]))
    if not np.all(x > 0):
        raise ValueError(f"{d.family} prior reaches values <= 0; inputs of the compute model are positive")
    table = np.log(x)
    table.flags.writeable = False
    return table


@quantiles.memoised(64)  # immutable (JAX arrays): a rerun of a spec shares its samplers, no device copies
def make_sampler(d: Dist, dtype=jnp.float32) -> Sampler:
    """Compile a prior into its z -> centred log x map."""
    one = to_device(np.zeros((1,), dtype))
    if d.family == "point":
        if d.params["value"] <= 0:
            raise ValueError("point priors of the compute model must be > 0")
        return Sampler("const", math.log(d.params["value"]), to_device(0.0, dtype), to_device(0.0, dtype), one)
    if d.family == "lognormal" and d.low is None and d.high is None:
        return Sampler("affine", d.params["mu"], to_device(0.0, dtype), to_device(d.params["sigma"], dtype), one)
    table = log_quantile_table(d)
    center = float(table[GRID // 2])  # the median
    return Sampler("table", center, to_device(0.0, dtype), to_device(0.0, dtype), to_device(table - center, dtype))


def to_device(x, dtype=None) -> jax.Array:
    """``x`` (as ``dtype``) on the default device, converted on the host (NumPy rounds float64 to float32 as
    XLA does): ``jnp.asarray`` would compile a conversion program for every new shape."""
    return jax.device_put(np.asarray(x, dtype))


def sample(key: jax.Array, d: Dist, n: int) -> jax.Array:
    """n draws of x (float32) from a prior: convenience for tests and notebooks."""
    s = make_sampler(d)
    z = jax.random.normal(key, (n,), jnp.float32)
    return jnp.exp(s(z) + jnp.float32(0)) * math.exp(s.center) if s.kind != "affine" else jnp.exp(s.b * z + s.center)
