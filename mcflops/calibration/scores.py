"""Scoring a predictive distribution of a run's published hours against the figure: the PIT, interval
coverage, the error of the median, the width p95/p5 and two proper scores, all on log hours.

A predictive is tabulated on a grid of log hours (its CDF and density at each point), so the model and
the baselines are scored by one code path. Proper scores (Gneiting & Raftery 2007, JASA 102:359):
the log score log f(y) (their section 4.1) and the continuous ranked probability score
CRPS(F, y) = integral (F(x) - 1{x >= y})^2 dx (their eq. 20), here in log hours, so a CRPS of 0.1 is
about a 10% error; lower CRPS and higher log score are better.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class Predictive:
    """A predictive distribution of log hours on a grid: CDF and density at each grid point."""

    x: np.ndarray
    cdf: np.ndarray
    pdf: np.ndarray

    def quantile(self, p) -> np.ndarray:
        c = np.maximum.accumulate(self.cdf)
        return np.interp(np.asarray(p, float), c, self.x)

    def pit(self, y: float) -> float:
        return float(np.interp(y, self.x, self.cdf, left=0.0, right=1.0))

    def log_score(self, y: float) -> float:
        """log f(y); -inf where the predictive puts no density (outside its support)."""
        if y < self.x[0] or y > self.x[-1]:
            return -math.inf
        f = float(np.interp(y, self.x, self.pdf))
        return math.log(f) if f > 0 else -math.inf

    def crps(self, y: float) -> float:
        return crps_grid(self.x, self.cdf, y)


def crps_grid(x: np.ndarray, cdf: np.ndarray, y: float) -> float:
    """CRPS(F, y) = integral (F(x) - 1{x >= y})^2 dx (Gneiting & Raftery 2007, eq. 20) by the trapezoid rule on
    the grid, with y inserted as a node (F is 0 below the grid and 1 above it: a y off the grid adds the stretch
    between it and the grid's end, at integrand 1)."""
    x = np.asarray(x, float)
    f = np.interp(y, x, cdf, left=0.0, right=1.0)
    k = int(np.searchsorted(x, y))
    xs = np.concatenate([x[:k], [y], x[k:]])
    fs = np.concatenate([cdf[:k], [f], cdf[k:]])
    step = np.concatenate([np.zeros(k), [1.0], np.ones(x.size - k)])
    g = (fs - step) ** 2
    # the two sides of y are integrated separately: the step jumps at y
    left = np.trapezoid(np.append(g[:k], f ** 2), xs[:k + 1]) if k else 0.0
    right = np.trapezoid(np.concatenate([[(f - 1.0) ** 2], g[k + 1:]]), xs[k:])
    return float(left + right)


def crps_normal(mu: float, sd: float, y: float) -> float:
    """Closed form for N(mu, sd^2) (Gneiting & Raftery 2007, eq. 21 and below): sd (z (2 Phi(z) - 1) + 2 phi(z)
    - 1/sqrt(pi)), z = (y - mu)/sd. The oracle the grid CRPS is tested against."""
    z = (y - mu) / sd
    phi = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return sd * (z * math.erf(z / math.sqrt(2)) + 2 * phi - 1 / math.sqrt(math.pi))


@dataclass
class Scored:
    """One held-out run's prediction: its published hours against the predictive."""

    id: str
    fold: str
    kind: str
    published: float
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float
    pit: float
    log_score: float
    crps: float

    @property
    def covered_90(self) -> bool:
        return self.p5 <= self.published <= self.p95

    @property
    def covered_50(self) -> bool:
        return self.p25 <= self.published <= self.p75

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "log_score": _finite(self.log_score), "covered_50": self.covered_50,
                "covered_90": self.covered_90, "abs_log_error": abs(math.log(self.p50 / self.published)),
                "width": self.p95 / self.p5}


def score(run_id: str, fold: str, kind: str, log_published: float, pred: Predictive) -> Scored:
    q = np.exp(pred.quantile([0.05, 0.25, 0.5, 0.75, 0.95]))
    y = float(log_published)
    return Scored(run_id, fold, kind, float(math.exp(y)), *map(float, q), pred.pit(y), pred.log_score(y),
                  pred.crps(y))


def aggregate(rows: Sequence[Scored]) -> dict[str, Any]:
    """The split's scores: coverage of the 50% and 90% intervals, median |log(p50 / published)|, median
    p95/p5, mean CRPS and mean log score (None when a run falls outside a predictive's support)."""
    if not rows:
        return {"runs": 0}
    ls = [r.log_score for r in rows]
    return {"runs": len(rows), "coverage_50": float(np.mean([r.covered_50 for r in rows])),
            "coverage_90": float(np.mean([r.covered_90 for r in rows])),
            "median_abs_log_error": float(np.median([abs(math.log(r.p50 / r.published)) for r in rows])),
            "median_p95_over_p5": float(np.median([r.p95 / r.p5 for r in rows])),
            "crps": float(np.mean([r.crps for r in rows])),
            "log_score": _finite(float(np.mean(ls))),
            "outside_support": int(sum(not math.isfinite(v) for v in ls))}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None
