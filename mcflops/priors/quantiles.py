"""Quantiles, CDFs and survival functions of every prior family: NumPy and scipy.special only.

The run path needs a prior's quantiles (the samplers' tables, the spec's tail check, the napkin chain's
medians) but not scipy.stats nor scipy.optimize (both slow to import). This module sits below the
spec layer: no JAX, and no other mcflops module (``d`` is a ``mcflops.priors.dist.Dist``). ``ppf(d, u)`` is
accurate for small ``u`` and ``isf(d, q)`` for small ``q`` (each works on the side of the distribution
where nothing cancels), down to u = Phi(-8) = 6.2e-16 and beyond; tests/priors/test_quantiles.py checks every
family against scipy.stats.

Formulas:

- normal: x = mean + sd Phi^-1(u) (Phi^-1 = scipy.special.ndtri); truncated to [a, b] (standard units),
  x = Phi^-1(Phi(a) + u (Phi(b) - Phi(a))) (Johnson, Kotz & Balakrishnan 1994, "Continuous Univariate
  Distributions" vol. 1, Ch. 13, truncated normal), written with the upper-tail function S(x) = Phi(-x) when the
  interval lies in the upper tail, so that neither the sum nor the mass cancels.
- lognormal: log x is the (truncated) normal above.
- beta: x = I^-1_u(a, b) (betaincinv) and, for the upper tail, the inverse of the complemented
  incomplete beta 1 - I_x(a, b) = q (betainccinv) (Abramowitz & Stegun 26.5; DiDonato & Morris 1992).
- PERT: Beta(1 + lam (m - lo)/(hi - lo), 1 + lam (hi - m)/(hi - lo)) on [lo, hi] (Vose 2008, "Risk
  Analysis: A Quantitative Guide", 3rd ed.).
- triangular: F(x) = (x - lo)^2 / ((hi - lo)(m - lo)) below the mode, 1 - (hi - x)^2 / ((hi - lo)(hi - m))
  above (Johnson, Kotz & Balakrishnan 1995, vol. 2, Ch. 26), inverted in closed form.
- mixture: F = sum_i w_i F_i; its u-quantile lies between the components' u-quantiles (F is their
  weighted average); safeguarded Newton on normal scores inside that bracket (``_mixture_quantile``).
"""

from __future__ import annotations

import math
from functools import lru_cache, wraps

import numpy as np

from mcflops.diskcache import dist_key, persistent

_SQRT1_2 = 0.7071067811865476  # 1/sqrt(2): Phi(x) = (1 + erf(x/sqrt 2))/2 (A&S 26.2.29)


def ppf(d, u) -> np.ndarray:
    """The u-quantile F^-1(u) (accurate for small u)."""
    return _quantile(d, np.asarray(u, np.float64), upper=False)


def isf(d, q) -> np.ndarray:
    """The upper q-quantile: x with P(X > x) = q (accurate for small q)."""
    return _quantile(d, np.asarray(q, np.float64), upper=True)


def cdf(d, x) -> np.ndarray:
    """P(X <= x)."""
    return _dist_fn(d, np.asarray(x, np.float64), upper=False)


def sf(d, x) -> np.ndarray:
    """P(X > x) (accurate where it is small)."""
    return _dist_fn(d, np.asarray(x, np.float64), upper=True)


# ------------------------------------------------------------------------------------ normal family

def _std_normal_bounds(d) -> tuple[float, float, float, float]:
    """loc, scale and the truncation [a, b] in standard units (of log x for a lognormal)."""
    p = d.params
    if d.family == "normal":
        loc, scale, f = p["mean"], p["sd"], float
    else:
        loc, scale, f = p["mu"], p["sigma"], math.log
    a = -math.inf if d.low is None or (f is math.log and d.low == 0) else (f(d.low) - loc) / scale
    b = math.inf if d.high is None else (f(d.high) - loc) / scale
    return loc, scale, a, b


def _tnorm_mass(a: float, b: float) -> float:
    """Phi(b) - Phi(a), on the side where it does not cancel."""
    from scipy.special import erf, ndtr

    if a > 0:
        return ndtr(-a) - ndtr(-b)
    if b < 0:
        return ndtr(b) - ndtr(a)
    return 0.5 * (erf(b * _SQRT1_2) - erf(a * _SQRT1_2))  # a <= 0 <= b: a sum of two non-negative terms


# Each end of [a, b] is worked from with Phi below 0 and with S(x) = Phi(-x) above 0: the small side,
# where neither the sums nor the differences cancel.

def _tnorm_quantile(a: float, b: float, u: np.ndarray, upper: bool) -> np.ndarray:
    """Standard normal truncated to [a, b]: ppf(u) (from a) or isf(u) (from b)."""
    from scipy.special import ndtr, ndtri

    mass = _tnorm_mass(a, b)
    if upper:  # S(x) = S(b) + u mass
        return -ndtri(ndtr(-b) + u * mass) if b >= 0 else ndtri(ndtr(b) - u * mass)
    return -ndtri(ndtr(-a) - u * mass) if a > 0 else ndtri(ndtr(a) + u * mass)  # Phi(x) = Phi(a) + u mass


def _tnorm_fn(a: float, b: float, z: np.ndarray, upper: bool) -> np.ndarray:
    """Standard normal truncated to [a, b]: cdf(z) (from a) or sf(z) (from b)."""
    from scipy.special import ndtr

    mass = _tnorm_mass(a, b)
    if upper:
        out = (ndtr(-z) - ndtr(-b)) / mass if b >= 0 else (ndtr(b) - ndtr(z)) / mass
    else:
        out = (ndtr(-a) - ndtr(-z)) / mass if a > 0 else (ndtr(z) - ndtr(a)) / mass
    return np.clip(out, 0.0, 1.0)


# ------------------------------------------------------------------------------------ the families

def _pert_ab(p) -> tuple[float, float]:
    lo, mode, hi, lam = p["low"], p["mode"], p["high"], p["lamb"]
    return 1 + lam * (mode - lo) / (hi - lo), 1 + lam * (hi - mode) / (hi - lo)  # Vose 2008


def _triangular_std(u: np.ndarray, c: float) -> np.ndarray:
    """F^-1(u) of the triangular on [0, 1] with mode c, as sums of non-negative terms.

    Below the mode sqrt(c u); above it 1 - sqrt((1 - c)(1 - u)) = (c + u (1 - c)) / (1 + sqrt((1 - c)(1 - u)))
    (multiplied through by the conjugate, so that nothing cancels near 0 when c = 0).
    """
    with np.errstate(invalid="ignore"):
        below = np.sqrt(c * u)
        above = (c + u * (1.0 - c)) / (1.0 + np.sqrt((1.0 - c) * (1.0 - u)))
    return np.where(u < c, below, above)


def _quantile(d, u: np.ndarray, upper: bool) -> np.ndarray:
    p = d.params
    fam = d.family
    with np.errstate(all="ignore"):
        if fam == "point":
            return np.full(u.shape, p["value"], dtype=np.float64)
        if fam == "uniform":
            w = p["high"] - p["low"]
            return p["high"] - u * w if upper else p["low"] + u * w
        if fam in ("normal", "lognormal"):
            loc, scale, a, b = _std_normal_bounds(d)
            z = _tnorm_quantile(a, b, u, upper)
            return loc + scale * z if fam == "normal" else np.exp(loc + scale * z)
        if fam in ("beta", "pert"):  # imported here: a point or a uniform needs no scipy.special
            from scipy.special import betainccinv, betaincinv
        if fam == "beta":
            return betainccinv(p["a"], p["b"], u) if upper else betaincinv(p["a"], p["b"], u)
        if fam == "pert":
            a, b = _pert_ab(p)
            y = betainccinv(a, b, u) if upper else betaincinv(a, b, u)
            return p["low"] + (p["high"] - p["low"]) * y
        if fam == "triangular":
            lo, mode, hi = p["low"], p["mode"], p["high"]
            c = (mode - lo) / (hi - lo)
            if upper:  # the mirror image: hi - x is triangular on [0, hi - lo] with mode hi - mode
                return hi - (hi - lo) * _triangular_std(u, 1.0 - c)
            return lo + (hi - lo) * _triangular_std(u, c)
    if fam == "mixture":
        return _mixture_quantile(d, u, upper)
    raise ValueError(f"unknown family {fam}")


def _dist_fn(d, x: np.ndarray, upper: bool) -> np.ndarray:
    p = d.params
    fam = d.family
    with np.errstate(all="ignore"):
        if fam == "point":
            return (x < p["value"] if upper else x >= p["value"]).astype(np.float64)
        if fam == "uniform":
            w = p["high"] - p["low"]
            return np.clip((p["high"] - x) / w if upper else (x - p["low"]) / w, 0.0, 1.0)
        if fam in ("normal", "lognormal"):
            loc, scale, a, b = _std_normal_bounds(d)
            t = x if fam == "normal" else np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), -np.inf)
            return _tnorm_fn(a, b, (t - loc) / scale, upper)
        if fam in ("beta", "pert"):
            from scipy.special import betainc, betaincc

            if fam == "beta":
                a, b, y = p["a"], p["b"], x
            else:
                (a, b), y = _pert_ab(p), (x - p["low"]) / (p["high"] - p["low"])
            y = np.clip(y, 0.0, 1.0)
            if not upper:
                return betainc(a, b, y)
            # 1 - I_y(a, b) = I_{1-y}(b, a) (A&S 26.5.2) where 1 - y is exact (y >= 1/2, Sterbenz): scipy's
            # betaincc is much slower than betainc
            hi = y >= 0.5
            out = np.empty(np.shape(y))
            out[hi] = betainc(b, a, 1.0 - y[hi])
            out[~hi] = betaincc(a, b, y[~hi])
            return out
        if fam == "triangular":
            lo, mode, hi = p["low"], p["mode"], p["high"]
            w = hi - lo
            left = np.where(x <= lo, 0.0, (x - lo) ** 2 / (w * (mode - lo)))  # F below the mode
            right = np.where(x >= hi, 0.0, (hi - x) ** 2 / (w * (hi - mode)))  # 1 - F above it
            below = x < mode
            if upper:
                return np.clip(np.where(below, 1.0 - left, right), 0.0, 1.0)
            return np.clip(np.where(below, left, 1.0 - right), 0.0, 1.0)
    if fam == "mixture":
        return sum(w * _dist_fn(c, x, upper) for c, w in zip(d.components, d.weights) if w > 0)
    raise ValueError(f"unknown family {fam}")


def pdf(d, x) -> np.ndarray:
    """The density (a point mass counts 0)."""
    return _pdf(d, np.asarray(x, np.float64))


def _pdf(d, x: np.ndarray) -> np.ndarray:
    from scipy.special import betaln

    p = d.params
    fam = d.family
    with np.errstate(all="ignore"):
        if fam == "point":
            return np.zeros_like(x)
        if fam == "uniform":
            return np.where((x >= p["low"]) & (x <= p["high"]), 1.0 / (p["high"] - p["low"]), 0.0)
        if fam in ("normal", "lognormal"):
            loc, scale, a, b = _std_normal_bounds(d)
            t = x if fam == "normal" else np.log(np.where(x > 0, x, np.nan))
            z = (t - loc) / scale
            f = np.exp(-0.5 * z * z) / (math.sqrt(2 * math.pi) * scale * _tnorm_mass(a, b))
            f = np.where((z >= a) & (z <= b), f, 0.0)
            return np.nan_to_num(f if fam == "normal" else f / x)
        if fam in ("beta", "pert"):
            if fam == "beta":
                a, b, y, w = p["a"], p["b"], x, 1.0
            else:
                (a, b), w = _pert_ab(p), p["high"] - p["low"]
                y = (x - p["low"]) / w
            f = np.exp((a - 1) * np.log(y) + (b - 1) * np.log1p(-y) - betaln(a, b)) / w  # A&S 26.1.33
            return np.where((y > 0) & (y < 1), f, 0.0)
        if fam == "triangular":
            lo, mode, hi = p["low"], p["mode"], p["high"]
            f = np.where(x < mode, 2 * (x - lo) / ((hi - lo) * (mode - lo)), 2 * (hi - x) / ((hi - lo) * (hi - mode)))
            return np.where((x >= lo) & (x <= hi), np.nan_to_num(f), 0.0)
    if fam == "mixture":
        return sum(w * _pdf(c, x) for c, w in zip(d.components, d.weights) if w > 0)
    raise ValueError(f"unknown family {fam}")


# ------------------------------------------------------------------------------------ mixtures

_SIGN = np.int64(-(2**63))


def _key(x: np.ndarray) -> np.ndarray:
    """float64 -> int64, order-preserving (IEEE 754 sign-magnitude to two's complement); -0.0 and 0.0 -> 0."""
    i = np.ascontiguousarray(x, np.float64).view(np.int64)
    return np.where(i < 0, _SIGN - i, i)


def _unkey(k: np.ndarray) -> np.ndarray:
    return np.where(k < 0, _SIGN - k, k).astype(np.int64).view(np.float64)


def _mid(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The float halfway between lo and hi in the order of float64 bit patterns (a bisection in log |x|)."""
    lo_k, hi_k = _key(lo), _key(hi)
    return _unkey((lo_k >> 1) + (hi_k >> 1) + (lo_k & hi_k & 1))  # floor((lo + hi) / 2) without overflow


def _mixture_quantile(d, u: np.ndarray, upper: bool) -> np.ndarray:
    """Solve F(x) = u (or S(x) = q) by safeguarded Newton between the components' quantiles.

    Always on the small side: ppf(u) for u > 1/2 is isf(1 - u) (1 - u is exact there, Sterbenz) and
    isf(q) for q > 1/2 is ppf(1 - q). F is the weighted average of the F_i, so F(min_i x_i(u)) <= u <=
    F(max_i x_i(u)): a bracket. Newton runs on the normal scores Phi^-1(F(x)) - Phi^-1(u) in log x
    (x when the bracket is not positive), where a lognormal's tail is a straight line; a step that
    leaves the bracket becomes a bisection in the order of the float64 values (bit patterns as integers:
    a bisection in log x), which alone ends on adjacent floats within 64 steps (the safeguard of
    Press et al. 2007, "Numerical Recipes" 3rd ed., Sec. 9.4, rtsafe).
    """
    shape = u.shape
    u = u.reshape(-1)
    far = u > 0.5
    x = np.empty_like(u)
    x[~far] = _mixture_solve(d, u[~far], upper)
    x[far] = _mixture_solve(d, 1.0 - u[far], not upper)
    return x.reshape(shape)


def _mixture_solve(d, u: np.ndarray, upper: bool) -> np.ndarray:
    from scipy.special import ndtri

    parts = [(c, w) for c, w in zip(d.components, d.weights) if w > 0]
    qs = np.stack([_quantile(c, u, upper) for c, _ in parts])
    lo, hi = qs.min(axis=0), qs.max(axis=0)  # lo <= x <= hi, in either tail
    open_ = _key(hi) - _key(lo) > 1
    if any(c.family == "point" for c, _ in parts):  # F may reach u at lo already (an atom there)
        at_lo = sum(w * _dist_fn(c, lo, upper) for c, w in parts)
        hi = np.where(at_lo <= u if upper else at_lo >= u, lo, hi)
        open_ &= _key(hi) - _key(lo) > 1
    x = np.where(open_, _mid(lo, hi), hi)
    i = np.flatnonzero(open_)  # the quantiles still to solve
    z_u = ndtri(u)
    sign = -1.0 if upper else 1.0  # d/dx of Phi^-1(S(x)) is -f / phi
    for it in range(130):
        if i.size == 0:
            break
        xi = x[i]
        with np.errstate(all="ignore"):
            prob = sum(w * _dist_fn(c, xi, upper) for c, w in parts)
            dens = sum(w * _pdf(c, xi) for c, w in parts)
            past = prob <= u[i] if upper else prob >= u[i]  # xi is at or above the quantile
            hi[i] = np.where(past, xi, hi[i])
            lo[i] = np.where(past, lo[i], xi)
            zi = ndtri(prob)
            g, dg = zi - z_u[i], sign * dens / (np.exp(-0.5 * zi * zi) * 0.3989422804014327)  # phi(z)
            pos = lo[i] > 0
            new = np.where(pos, xi * np.exp(-g / (xi * dg)), xi - g / dg)  # Newton in log x, or in x
        ok = np.isfinite(new)
        # a Newton step below 1e-11 |x| leaves an error of order its square (quadratic convergence): stop
        converged = ok & (np.abs(new - xi) <= 1e-11 * np.abs(xi))
        adjacent = _key(hi[i]) - _key(lo[i]) <= 1  # bisection's end: hi is the least x at or above
        inside = ok & (new > lo[i]) & (new < hi[i]) & (it < 60)  # else bisect (always, after 60 steps)
        x[i] = np.where(converged, np.clip(new, lo[i], hi[i]),
                        np.where(adjacent, hi[i], np.where(inside, new, _mid(lo[i], hi[i]))))
        i = i[~(converged | adjacent)]
    return x


# ------------------------------------------------------------------------------------ memoised per prior

class _Keyed:
    """A prior hashed and compared by :func:`dist_key`."""

    __slots__ = ("d", "key")

    def __init__(self, d):
        self.d, self.key = d, dist_key(d)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Keyed) and self.key == other.key


def memoised(maxsize: int):
    """``functools.lru_cache`` for a function of a prior (and hashable arguments), keyed by :func:`dist_key`:
    a notebook that reruns a spec, or a sweep, computes each prior's result once."""

    def decorate(fn):
        cached = lru_cache(maxsize=maxsize)(lambda k, *args: fn(k.d, *args))

        @wraps(fn)
        def wrapper(d, *args):
            return cached(_Keyed(d), *args)

        wrapper.cache_info, wrapper.cache_clear = cached.cache_info, cached.cache_clear
        return wrapper

    return decorate


@memoised(256)
@persistent
def median(d) -> float:
    """float(ppf(d, 0.5)), memoised per prior."""
    return float(ppf(d, 0.5))


@memoised(256)
@persistent
def central(d) -> tuple[float, float, float]:
    """(ppf(d, 0.05), ppf(d, 0.5), ppf(d, 0.95)) as floats, memoised per prior."""
    return tuple(float(ppf(d, q)) for q in (0.05, 0.5, 0.95))


@memoised(256)
@persistent
def tails(d, u: float) -> tuple[float, float]:
    """(ppf(d, u), isf(d, u)) as floats, memoised per prior."""
    return float(ppf(d, u)), float(isf(d, u))
