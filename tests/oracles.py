"""Oracles the tests compare against: each prior as the scipy.stats distribution it stands for.

Test-only: the run path uses :mod:`mcflops.priors.quantiles` (scipy.special), never scipy.stats, whose
import costs about a second.
"""

from __future__ import annotations

import math

import numpy as np

from mcflops.priors.dist import Dist


def scipy_dist(d: Dist):
    """The scipy.stats distribution a prior stands for: the tests' oracle (off the run path, which uses
    :mod:`mcflops.priors.quantiles`)."""
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


