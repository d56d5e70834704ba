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




def weighted_summary(x: np.ndarray, logw: np.ndarray, probs) -> dict:
    """Self-normalised importance-sampling summary of draws ``x`` with log-weights ``logw``: mean, sd, the 4th
    central moment, quantiles (the weighted CDF, interpolated), Kish's ESS and each statistic's MCSE:
    sd / sqrt(ESS), sqrt(mu4 - sd^4) / (2 sd sqrt(ESS)), sqrt(p (1 - p) / ESS) / f(q_p) (Serfling 1980,
    Sec. 2.3.3; the density f from quantiles 0.01 either side)."""
    w = np.exp(logw - logw.max())
    w /= w.sum()
    ess = 1.0 / float(np.sum(w * w))  # Kish 1965, Sec. 11.7
    mean = float(np.sum(w * x))
    c = x - mean
    var = float(np.sum(w * c * c))
    mu4 = float(np.sum(w * c**4))
    order = np.argsort(x, kind="stable")
    xs, cdf = x[order], np.cumsum(w[order]) - 0.5 * w[order]

    def q(p):
        return np.interp(p, cdf, xs)

    sd = math.sqrt(var)
    out = {"mean": mean, "sd": sd, "mu4": mu4, "ess": ess, "mcse_mean": sd / math.sqrt(ess),
           "mcse_sd": math.sqrt(max(mu4 - var * var, 0.0)) / (2 * sd * math.sqrt(ess))}
    for k, p in probs.items():
        out[k] = float(q(p))
        inv_f = float(q(p + 0.01) - q(p - 0.01)) / 0.02
        out[f"mcse_{k}"] = math.sqrt(p * (1 - p) / ess) * inv_f
    return out


def gpu_hours_importance(spec, value: float, sigma: float, n: int, seed: int, names) -> dict:
    """The posterior of ``names`` (inputs or "gpu_hours") given a lognormal observation of GPU-hours, by plain
    importance sampling from the priors as scipy.stats distributions (:func:`scipy_dist`), the prior as proposal.

    GPU-hours = 6 N D / (peak x MFU x goodput x 3600) (Kaplan et al. 2020, C = 6ND; the 6nd convention); the
    likelihood log y ~ N(log hours, sigma^2). Returns ``{name: draws}`` and the log-weights under "logw", of
    the draws with log-weight above -40 only (log-weights are <= 0 and reach ~0 for a value inside the prior: the
    rest weigh less than n e^-40 of the largest in all).
    Drawn in chunks of 2^20 (memory)."""
    rng = np.random.default_rng(seed)
    logs = {}
    for name in ("params", "peak_flops"):
        logs[name] = math.log(float(scipy_dist(spec.priors[name]).ppf(0.5)))
        if spec.priors[name].family != "point":
            raise ValueError(f"the oracle expects {name} fixed")
    dists = {name: scipy_dist(spec.priors[name]) for name in ("tokens", "mfu", "goodput")}
    const = math.log(6.0) + logs["params"] - logs["peak_flops"] - math.log(3600.0)
    parts: dict[str, list] = {k: [] for k in (*names, "logw")}
    for start in range(0, n, 1 << 20):
        m = min(1 << 20, n - start)
        x = {k: d.rvs(size=m, random_state=rng) for k, d in dists.items()}
        log_h = const + np.log(x["tokens"]) - np.log(x["mfu"]) - np.log(x["goodput"])
        logw = -0.5 * ((math.log(value) - log_h) / sigma) ** 2
        keep = logw > -40.0  # log-weights are <= 0, so a dropped draw weighs < e^-40 of any kept one near 0
        parts["logw"].append(logw[keep])
        for k in names:
            parts[k].append(np.exp(log_h[keep]) if k == "gpu_hours" else x[k][keep])
    return {k: np.concatenate(v) for k, v in parts.items()}
