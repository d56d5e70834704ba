"""Samplers: every prior as a map from a standard normal z to log x. Pure JAX at sampling time.

Each input is drawn as ``x = F^{-1}(Phi(z))`` with ``z ~ N(0, 1)``: one representation serves the
prior predictive, importance sampling, Saltelli's Sobol matrices (columns of z) and a Gaussian
copula (correlate the z's). The map is exact for point and lognormal priors (``log x = mu + sigma z``);
for every other family it is a table of ``log F^{-1}(Phi(z))`` on a uniform z grid, built once with
the quantile functions of :mod:`mcflops.quantiles` (memoised per prior) and read back by linear
interpolation. ``jax.random.beta`` is a rejection sampler (about 1M draws/s on a 2-core CPU); the table
costs one gather, and its quantile error is below 1e-5 relative (tests/test_distributions.py checks every
family against scipy.stats).

Values are centred: the kernel works with ``d = log x - center`` (float32 is exact enough for
deviations of order sigma), and the float64 centre stays on the host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from . import quantiles
from .dists import Dist

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


def scipy_dist(d: Dist):
    """The scipy.stats distribution a prior stands for: the tests' oracle (off the run path, which uses
    :mod:`mcflops.quantiles`: importing scipy.stats costs ~1 s)."""
    from scipy import stats

    p = d.params
    if d.family == "point":
        return _Point(p["value"])
    if d.family == "uniform":
        return stats.uniform(p["low"], p["high"] - p["low"])
    if d.family == "normal":
        if d.low is None and d.high is None:
            return stats.norm(p["mean"], p["sd"])
        lo = -np.inf if d.low is None else (d.low - p["mean"]) / p["sd"]
        hi = np.inf if d.high is None else (d.high - p["mean"]) / p["sd"]
        return stats.truncnorm(lo, hi, loc=p["mean"], scale=p["sd"])
    if d.family == "lognormal":
        if d.low is None and d.high is None:
            return stats.lognorm(p["sigma"], scale=math.exp(p["mu"]))
        return _TruncLognormal(p["mu"], p["sigma"], d.low, d.high)
    if d.family == "beta":
        return stats.beta(p["a"], p["b"])
    if d.family == "triangular":
        lo, mode, hi = p["low"], p["mode"], p["high"]
        return stats.triang((mode - lo) / (hi - lo), loc=lo, scale=hi - lo)
    if d.family == "pert":
        # PERT (Vose 2008): Beta(1 + lam (m-a)/(b-a), 1 + lam (b-m)/(b-a)) on [a, b]
        lo, mode, hi, lam = p["low"], p["mode"], p["high"], p["lamb"]
        return stats.beta(1 + lam * (mode - lo) / (hi - lo), 1 + lam * (hi - mode) / (hi - lo), loc=lo, scale=hi - lo)
    if d.family == "mixture":
        return _Mixture([scipy_dist(c) for c in d.components], d.weights)
    raise ValueError(f"unknown family {d.family}")


class _Point:
    def __init__(self, v: float):
        self.v = v

    def ppf(self, u):
        return np.full(np.shape(u), self.v, dtype=float)

    isf = ppf

    def cdf(self, x):
        return (np.asarray(x) >= self.v).astype(float)

    def mean(self):
        return self.v

    def std(self):
        return 0.0


class _TruncLognormal:
    """log x ~ truncated normal: the lognormal truncated to [low, high]."""

    def __init__(self, mu, sigma, low, high):
        from scipy import stats

        a = -np.inf if not low else (math.log(low) - mu) / sigma
        b = np.inf if high is None else (math.log(high) - mu) / sigma
        self._t = stats.truncnorm(a, b, loc=mu, scale=sigma)

    def ppf(self, u):
        return np.exp(self._t.ppf(u))

    def isf(self, u):
        return np.exp(self._t.isf(u))

    def cdf(self, x):
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            return self._t.cdf(np.log(np.maximum(x, 0)))

    def pdf(self, x):
        x = np.asarray(x, dtype=float)
        return self._t.pdf(np.log(x)) / x

    def mean(self):
        from scipy import integrate

        return integrate.quad(lambda u: self.ppf(u), 0, 1, limit=200)[0]

    def std(self):
        from scipy import integrate

        m2 = integrate.quad(lambda u: self.ppf(u) ** 2, 0, 1, limit=200)[0]
        return math.sqrt(max(m2 - self.mean() ** 2, 0.0))


class _Mixture:
    """A finite mixture; quantiles by inverting the CDF on a dense grid (in normal-score space)."""

    def __init__(self, comps, weights):
        self.comps, self.w = comps, np.asarray(weights, float)
        lo = min(float(c.ppf(1e-14)) for c in comps)
        hi = max(float(c.isf(1e-14)) for c in comps)
        pos = lo > 0
        grid = np.geomspace(lo, hi, 1 << 16) if pos else np.linspace(lo, hi, 1 << 16)
        from scipy.special import ndtri

        cdf = np.clip(self.cdf(grid), 1e-300, None)
        sf = np.clip(self.sf(grid), 1e-300, None)
        zs = np.where(cdf < 0.5, ndtri(cdf), -ndtri(sf))
        keep = np.concatenate([[True], np.diff(zs) > 1e-12])
        self._z, self._x = zs[keep], grid[keep]

    def cdf(self, x):
        return sum(w * c.cdf(x) for w, c in zip(self.w, self.comps))

    def sf(self, x):
        return sum(w * (1.0 - c.cdf(x)) if not hasattr(c, "sf") else w * c.sf(x) for w, c in zip(self.w, self.comps))

    def pdf(self, x):
        return sum(w * c.pdf(x) for w, c in zip(self.w, self.comps))

    def ppf(self, u):
        from scipy.special import ndtri

        return np.interp(ndtri(np.asarray(u, float)), self._z, self._x)

    def isf(self, u):
        return self.ppf(1.0 - np.asarray(u, float))

    def mean(self):
        return float(sum(w * c.mean() for w, c in zip(self.w, self.comps)))

    def std(self):
        m = self.mean()
        m2 = sum(w * (c.std() ** 2 + c.mean() ** 2) for w, c in zip(self.w, self.comps))
        return math.sqrt(max(m2 - m * m, 0.0))


@quantiles.memoised(64)  # 64 tables of 4097 float64: 2 MiB at most
def log_quantile_table(d: Dist) -> np.ndarray:
    """log F^{-1}(Phi(z)) on the z grid, in float64 (lower half by ppf, upper half by isf for accuracy).

    Quantiles by :mod:`mcflops.quantiles` (scipy.special; no scipy.stats on the run path), memoised per
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
    one = jnp.zeros((1,), dtype)
    if d.family == "point":
        if d.params["value"] <= 0:
            raise ValueError("point priors of the compute model must be > 0")
        return Sampler("const", math.log(d.params["value"]), jnp.asarray(0.0, dtype), jnp.asarray(0.0, dtype), one)
    if d.family == "lognormal" and d.low is None and d.high is None:
        return Sampler("affine", d.params["mu"], jnp.asarray(0.0, dtype), jnp.asarray(d.params["sigma"], dtype), one)
    table = log_quantile_table(d)
    center = float(table[GRID // 2])  # the median
    return Sampler("table", center, jnp.asarray(0.0, dtype), jnp.asarray(0.0, dtype),
                   jnp.asarray(table - center, dtype))


def sample(key: jax.Array, d: Dist, n: int) -> jax.Array:
    """n draws of x (float32) from a prior: convenience for tests and notebooks."""
    s = make_sampler(d)
    z = jax.random.normal(key, (n,), jnp.float32)
    return jnp.exp(s(z) + jnp.float32(0)) * math.exp(s.center) if s.kind != "affine" else jnp.exp(s.b * z + s.center)
