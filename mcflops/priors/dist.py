"""What a prior is, as a value: :class:`Dist` (a family, its canonical parameters, an optional truncation and
its source), its support, the mass a truncation keeps, and the extremes the samplers can reach. No JAX and no
parsing: the prior-file grammar that builds a Dist is :mod:`mcflops.spec.grammar`.

Canonical parameters: point ``value``; uniform ``low, high``; normal ``mean, sd``; lognormal ``mu, sigma`` (of
log x); beta ``a, b``; triangular ``low, mode, high``; pert ``low, mode, high, lamb``; mixture ``components,
weights``. ``low``/``high`` on a normal or lognormal truncate it (the parameters describe it before truncation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping


Z95 = 1.6448536269514722  # standard normal 95% quantile: a [p5, p95] interval spans 2 * Z95 sd
@dataclass(frozen=True)
class Dist:
    """A validated prior: family, canonical parameters, optional truncation, its source."""

    family: str
    params: Mapping[str, float]
    low: float | None = None
    high: float | None = None
    components: tuple["Dist", ...] = ()
    weights: tuple[float, ...] = ()
    source: str | None = None
    line: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Canonical, resolved form (readable back by :func:`parse_dist`)."""
        if self.family == "mixture":
            d: dict[str, Any] = {"mixture": [c.to_dict() for c in self.components], "weights": list(self.weights)}
        elif self.family == "point":
            d = {"point": self.params["value"]}
        else:
            p = dict(self.params)
            if self.family == "pert":
                p["lambda"] = p.pop("lamb")
            d = {self.family: p}
        if self.low is not None:
            d["low"] = self.low
        if self.high is not None:
            d["high"] = self.high
        if self.source:
            d["source"] = self.source
        return d

    def describe(self) -> str:
        """One short human line: 'beta(a=106, b=159)', 'lognormal 90% [15T, 16.8T]'."""
        from mcflops.numbers import format_number as f

        p = self.params
        if self.family == "point":
            return f(p["value"])
        if self.family == "lognormal":
            s = f"lognormal 90% [{f(math.exp(p['mu'] - Z95 * p['sigma']))}, {f(math.exp(p['mu'] + Z95 * p['sigma']))}]"
        elif self.family == "normal":
            s = f"normal(mean {f(p['mean'])}, sd {f(p['sd'])})"
        elif self.family == "mixture":
            s = "mixture(" + ", ".join(f"{w:.2g}: {c.describe()}" for w, c in zip(self.weights, self.components)) + ")"
        else:
            s = f"{self.family}(" + ", ".join(f"{k}={f(v)}" for k, v in p.items()) + ")"
        if self.low is not None or self.high is not None:
            s += f" on [{f(self.low) if self.low is not None else '-inf'}, {f(self.high) if self.high is not None else 'inf'}]"
        return s


def support(d: Dist) -> tuple[float, float]:
    """The closed hull of the support."""
    p = d.params
    if d.family == "point":
        return p["value"], p["value"]
    if d.family in ("uniform", "triangular", "pert"):
        return p["low"], p["high"]
    if d.family == "beta":
        return 0.0, 1.0
    if d.family == "mixture":
        parts = [support(c) for c in d.components]
        return min(a for a, _ in parts), max(b for _, b in parts)
    lo = 0.0 if d.family == "lognormal" else -math.inf
    if d.low is not None:
        lo = max(lo, d.low)
    hi = math.inf if d.high is None else d.high
    return lo, hi


# The samplers' tables span z in [-8, 8] (mcflops.model.samplers.ZMAX): the extreme values a prior can produce are
# its quantiles at Phi(-8) and Phi(8). scipy.special.ndtr(-8) = 6.22e-16.
TAIL_U = 6.220960574271785e-16


def tail_quantiles(d: Dist) -> tuple[float, float]:
    """The prior's quantiles at Phi(-8) and Phi(8) (float64): the extremes the samplers produce.

    The same functions as the sampler tables' (``quantiles.ppf``/``isf``; no JAX, no scipy.stats: the spec
    layer's rule), memoised per prior; tests/test_properties.py checks them against the tables' ends.
    """
    from mcflops.priors.quantiles import tails

    return tails(d, TAIL_U)


MIN_TRUNCATED_MASS = 1e-6  # a truncation keeping less than this (beyond ~4.8 sd) is a mistake, not a prior


def truncated_mass(fam: str, p: Mapping[str, float], low: float | None, high: float | None) -> float:
    """Probability that the untruncated normal/lognormal falls in [low, high] (erfc tails: no cancellation)."""
    if fam == "normal":
        loc, scale = p["mean"], p["sd"]
        a = -math.inf if low is None else (low - loc) / scale
        b = math.inf if high is None else (high - loc) / scale
    else:
        loc, scale = p["mu"], p["sigma"]
        a = -math.inf if low is None or low <= 0 else (math.log(low) - loc) / scale
        if high is not None and high <= 0:
            return 0.0
        b = math.inf if high is None else (math.log(high) - loc) / scale

    def upper(x: float) -> float:  # P(Z > x) = erfc(x / sqrt 2) / 2 (Abramowitz & Stegun 26.2.29)
        return 0.5 * math.erfc(x / math.sqrt(2.0))

    if a > 0:
        return upper(a) - upper(b)
    return upper(-b) - upper(-a) if b < 0 else 1.0 - upper(b) - upper(-a)


