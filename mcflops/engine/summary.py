"""The engine's result (``Sums``) and reading it: effective sample size, the histograms' CDF and
quantiles, moments, Monte Carlo errors.

Computation only: returns plain dicts of floats (the CLI prints them, the report renders them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

NBINS = 4096  # histogram bins per quantity (+ one underflow and one overflow bin): every histogram of a pass
QUANTILES = {"p5": 0.05, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95}


@dataclass
class Sums:
    """Float64 sums over all blocks, added in a fixed order (groups of blocks on the device, the groups on
    the host: what ``engine.run`` returns)."""

    n: int
    names: tuple[str, ...]
    lo: np.ndarray
    width: np.ndarray
    prior: dict[str, np.ndarray]
    first: np.ndarray  # [Q, KEEP] the first draws (prior sample)
    post: dict[str, np.ndarray] | None = None
    log_max: float = -np.inf  # max log-likelihood over draws (the reference of post sums)
    below: np.ndarray | None = None
    inside: np.ndarray | None = None
    top: np.ndarray | None = None  # the largest log-likelihoods of the pool's draws, ascending (PSIS tail)
    pool: int = 0  # draws the PSIS tail and the reservoir are taken from (engine.pool_subblocks)
    reservoir: dict[str, np.ndarray] | None = None
    blocks: int = 0
    rows: dict | None = None  # the extra rows an analysis asked for (engine.run's extra=; engine.run_rows)
    extra: dict = field(default_factory=dict)


def ess(s0: float, s0w2: float) -> float:
    """Kish's effective sample size of importance weights: (sum w)^2 / sum w^2 (Kish 1965, "Survey
    Sampling", Sec. 11.7), from their sum ``s0`` and sum of squares ``s0w2``."""
    return s0 * s0 / s0w2 if s0w2 > 0 else 0.0


def hist_cdf(hist: np.ndarray, lo: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """The bin edges of a histogram (underflow bin, bins of ``width`` from ``lo``, overflow bin) and its
    CDF at them: the share of the weight below each edge (the under/overflow bins lie outside the edges)."""
    nb = len(hist) - 2
    edges = lo + width * np.arange(nb + 1)
    return edges, np.concatenate([[hist[0]], hist[0] + np.cumsum(hist[1:-1])]) / hist.sum()


def hist_quantiles(hist: np.ndarray, lo: float, width: float, probs) -> np.ndarray:
    """Quantiles (in the histogram's variable) by linear interpolation of the binned CDF.

    Bin 0 collects values below ``lo`` and the last bin those above the range; a quantile that
    falls there is returned as NaN rather than guessed.
    """
    # hist_cdf's values, summed from bin 0 on: the same CDF but for the last bits when bin 0 holds weight
    # (inputs' exact bin probabilities), in the order the stored summaries were computed with
    cum = np.cumsum(hist) / hist.sum()
    out = []
    for p in np.atleast_1d(probs):
        i = int(np.searchsorted(cum, p, side="left"))
        if i == 0 or i >= len(hist) - 1:
            out.append(np.nan)
            continue
        prev = cum[i - 1]
        frac = (p - prev) / max(cum[i] - prev, 1e-300)
        out.append(lo + (i - 1 + frac) * width)
    return np.asarray(out)


def hist_quantiles_within(hist: np.ndarray, lo: float, width: float, probs, lo_x: float, hi_x: float) -> np.ndarray:
    """``hist_quantiles`` clamped to [lo_x, hi_x], the least and largest draw: a quantile in the under/overflow
    bin is the nearer extreme instead of NaN, and a histogram of one value (hi_x <= lo_x) gives it."""
    probs = np.atleast_1d(np.asarray(probs, np.float64))
    if hi_x <= lo_x:
        return np.full(len(probs), lo_x)
    qs = hist_quantiles(hist, lo, width, probs)
    return np.clip(np.where(np.isnan(qs), np.where(probs < 0.5, lo_x, hi_x), qs), lo_x, hi_x)


def hist_cdf_at(hist: np.ndarray, lo: float, width: float, x) -> np.ndarray:
    """P(X <= x) from a histogram (``hist_cdf``, linear within bins): below ``lo`` the underflow bin's share,
    past the last edge one minus the overflow bin's."""
    edges, cum = hist_cdf(hist, lo, width)
    return np.interp(np.asarray(x, np.float64), edges, cum, left=cum[0], right=1.0 - hist[-1] / hist.sum())


# below this sd of log x, x's sd comes from the log moments (quantity_stats): there the float32 sums' error
# in E[y^2] - E[y]^2 (it grows as 1 / sd^2) is several percent, the log moments' Monte Carlo error a
# fraction of one; above it the sums are as good or better (RESULTS.md, "Near-degenerate outputs")
NARROW_LOG_SD = 1e-3


def quantity_stats(s: Mapping[str, np.ndarray], i: int, center: float, lo: float, width: float,
                   n_eff: float, exact: bool = False) -> dict[str, float]:
    """mean, sd, p5..p95 and the Monte Carlo standard error of the median of quantity i (``exact``: its
    e^d moments are the distribution's own, not sums of draws)."""
    s0 = float(s["s0"])
    m1 = s["s1y"][i] / s0
    m2 = s["s2y"][i] / s0
    scale = math.exp(center)
    out = {"mean": float(m1 * scale), "sd": float(math.sqrt(max(m2 - m1 * m1, 0.0)) * scale)}
    q = hist_quantiles(s["hist"][i], lo, width, [*QUANTILES.values(), 0.4, 0.6])
    for k, v in zip(QUANTILES, q):
        out[k] = float(math.exp(center + v))
    # MCSE of the median (delta method): sqrt(p(1-p)/n) / f(median), with the log-density at the
    # median estimated from the 40-60% quantile spacing: f ~ 0.2 / (q60 - q40).
    spread = q[-1] - q[-2]
    se_log = 0.5 / math.sqrt(max(n_eff, 1.0)) * spread / 0.2 if spread > 0 else 0.0
    out["mcse_p50"] = float(out["p50"] * se_log)
    ml = s["s1d"][i] / s0
    out["log_mean"] = float(center + ml)
    out["log_sd"] = float(math.sqrt(max(s["s2d"][i] / s0 - ml * ml, 0.0)))
    if not exact and 0.0 < out["log_sd"] < NARROW_LOG_SD:
        # a near-degenerate quantity: E[y^2] - E[y]^2 of y = e^d cancels in the float32 block sums (it gave
        # sd 0, or far too large), while the centred d's moments do not; the delta method, sd(e^d) ~ E[e^d]
        # sd(d) (1 + O(sd(d)^2)), is then the more accurate
        out["sd"] = float(out["mean"] * out["log_sd"])
    return out


def summarize(sums: Sums, centers: Mapping[str, float], which: str = "prior") -> dict[str, dict[str, float]]:
    """Per-quantity summaries of the prior (or the importance-weighted posterior) pass."""
    s = sums.prior if which == "prior" else sums.post
    if which == "prior":
        n_eff = float(sums.n)
    else:
        n_eff = ess(float(s["s0"]), float(s["s0w2"]))
    exact = sums.extra.get("exact_moments", frozenset()) if which == "prior" else frozenset()
    return {name: quantity_stats(s, i, centers[name], sums.lo[i], sums.width[i], n_eff, name in exact)
            for i, name in enumerate(sums.names)}


def correlation(sums: Sums, which: str = "post") -> np.ndarray:
    """Correlation matrix of the centred logs under the prior or posterior weights."""
    s = sums.prior if which == "prior" else sums.post
    s0 = float(s["s0"])
    mean = s["s1d"] / s0
    cov = s["cross"] / s0 - np.outer(mean, mean)
    sd = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    return cov / np.outer(sd, sd)


def percentile_of(sums: Sums, i: int) -> float:
    """The prior-predictive percentile (0-100) of observation i: share of draws below the value."""
    return float(100.0 * sums.below[i] / sums.n)
