"""Quantile tables: a prior given by exact quantiles at fixed probabilities. No JAX here.

The recipes (``mcflops.priors.calibrated``, ``mcflops.priors.goodput``) compute a prior's quantiles at
the knots :data:`KNOT_PROBS`; :func:`table_dist` turns them into a mixture of uniforms between the
knots (a piecewise-linear CDF through them), a family the samplers already support.
"""

from __future__ import annotations

import math

import numpy as np

from mcflops.priors.dist import Dist


# Knot probabilities: 25 knots evenly spaced in normal score over [-3.72, 3.72] (p = 1e-4 .. 1 - 1e-4),
# plus the quartiles, the median and the 5/95% points, so that those are exact.
_Z = np.unique(np.round(np.concatenate([np.linspace(-3.719016485455709, 3.719016485455709, 25),
                                         [-1.6448536269514722, -0.6744897501960817, 0.0, 0.6744897501960817,
                                          1.6448536269514722]]), 12))
KNOT_PROBS = np.array([0.5 * math.erfc(-z / math.sqrt(2.0)) for z in _Z])

def table_dist(probs, values, source: str | None = None):
    """A quantile table as a mixture of uniforms: exact at the knots, linear CDF between them.

    Component k is uniform on [values[k], values[k+1]] with weight probs[k+1] - probs[k]; the first
    and last components also carry the tails beyond the outer knots (p < 1e-4 and p > 1 - 1e-4), so
    every inner knot stays exact.
    """
    p = np.asarray(probs, float)
    v = np.asarray(values, float)
    if np.ptp(v) <= 1e-12 * max(abs(float(v[0])), 1e-300):
        return Dist("point", {"value": float(np.median(v))}, source=source)
    keep = np.concatenate([[True], np.diff(v) > 1e-12 * np.abs(v[1:])])  # drop repeated knots
    p, v = p[keep], v[keep]
    w = np.diff(p)
    w[0] += p[0]
    w[-1] += 1.0 - p[-1]
    comps = tuple(Dist("uniform", {"low": float(a), "high": float(b)}) for a, b in zip(v[:-1], v[1:]))
    return Dist("mixture", {}, components=comps, weights=tuple(float(x) for x in w / w.sum()), source=source)


