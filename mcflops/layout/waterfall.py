"""The layout's waterfall: from the accelerator's peak to the FLOP/s achieved while training, one step per factor
of the layout prior (:class:`mcflops.layout.prior.LayoutPrior`), prior and, given the engine's posterior MFU draws,
posterior. NumPy only."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from mcflops.layout.model import factor_names
from mcflops.layout.prior import LayoutPrior


@dataclass(frozen=True)
class Waterfall:
    """Peak -> achieved -> delivered FLOP/s, each factor's prior and (with posterior MFU draws) posterior."""

    peak: float
    factors: Mapping[str, Mapping[str, Mapping[str, float]]]  # factor -> {"prior": q, "posterior": q}
    steps: tuple[tuple[str, float, float], ...]  # (label, FLOP/s before, after) at the factors' medians
    levels: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)  # FLOP/s after each step

    def to_dict(self) -> dict:
        return {"peak_flops": self.peak, "factors": {k: dict(v) for k, v in self.factors.items()},
                "steps": [{"label": a, "before": b, "after": c} for a, b, c in self.steps],
                "levels": {k: dict(v) for k, v in self.levels.items()}}


QUANTS = {"p5": 0.05, "p50": 0.5, "p95": 0.95}


def _wq(x: np.ndarray, w: np.ndarray | None) -> dict[str, float]:
    if w is None:
        return {k: float(v) for k, v in zip(QUANTS, np.quantile(x, list(QUANTS.values())))}
    o = np.argsort(x)
    c = np.cumsum(w[o])
    c /= c[-1]
    return {k: float(x[o][min(np.searchsorted(c, p), len(x) - 1)]) for k, p in QUANTS.items()}


def posterior_weights(prior_mfu: np.ndarray, posterior_mfu: np.ndarray, bins: int = 200) -> np.ndarray:
    """Weights on the prior draws that turn them into draws from the posterior: each bin of the prior's
    quantiles gets the posterior's share of draws in it (the MFU's posterior / prior ratio, piecewise)."""
    edges = np.quantile(prior_mfu, np.linspace(0.0, 1.0, bins + 1))
    edges[0], edges[-1] = -np.inf, np.inf
    which = np.clip(np.searchsorted(edges, prior_mfu, side="right") - 1, 0, bins - 1)
    post = np.bincount(np.clip(np.searchsorted(edges, posterior_mfu, side="right") - 1, 0, bins - 1),
                       minlength=bins).astype(float)
    prior = np.bincount(which, minlength=bins).astype(float)
    ratio = np.divide(post, prior, out=np.zeros(bins), where=prior > 0)
    return ratio[which]


def waterfall(prior: LayoutPrior, count: int | None = None, posterior_mfu=None, goodput=None) -> Waterfall:
    """The factors' 90% intervals and medians, prior and (given the engine's posterior MFU draws) posterior;
    ``goodput``: its median, the last step (achieved -> delivered)."""
    f = prior.factor_draws(count)
    w = None if posterior_mfu is None else posterior_weights(f["mfu"], np.asarray(posterior_mfu, float))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in (*factor_names(f), "mfu"):
        out[name] = {"prior": _wq(f[name], None)}
        if w is not None:
            out[name]["posterior"] = _wq(f[name], w)
    use = "posterior" if w is not None else "prior"
    steps, level = [], prior.peak
    levels: dict[str, dict[str, dict[str, float]]] = {}
    cum = np.full(f["gemm"].shape, prior.peak)
    names = [*factor_names(f), *(["counting"] if prior.counting != 1.0 else [])]
    for name in names:
        factor = prior.counting if name == "counting" else out[name][use]["p50"]
        cum = cum * (prior.counting if name == "counting" else f[name])
        levels[name] = {"prior": _wq(cum, None), **({"posterior": _wq(cum, w)} if w is not None else {})}
        steps.append((name, level, level * factor))
        level *= factor
    if goodput is not None and math.isfinite(goodput):
        steps.append(("goodput", level, level * goodput))
    return Waterfall(prior.peak, out, tuple(steps), levels)
