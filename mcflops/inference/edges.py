"""Posteriors that reach the end of a sampler's table: the data contradict the prior beyond what the model draws.

An input with a table sampler (model.samplers) is x = F^{-1}(Phi(z)) tabulated for z in [-ZMAX, ZMAX] and
held at its last value beyond: past the edge the map stops moving, so neither sampler can follow the data
any further into the prior's tail, however strongly they pull. NUTS then piles its draws against the edge
and its diagnostics pass (the chains agree on the wrong place); importance sampling's draws never get there
(|z| of 1e8 normal draws stays under 6.1). A posterior that the table represents faithfully has negligible
mass where the map stops; one that puts EDGE_SHARE of its draws within EDGE_BAND of the end has reached
it: the band's prior mass is Phi(-(ZMAX - EDGE_BAND)) = 3e-14 on each side, so it takes a likelihood
ratio of some 1e12 over the prior's bulk to put even 1% there, and the mass such a pull would have put
beyond the edge is missing. Such a posterior fails its checks. The map must still move across the band
(by EDGE_MOVE in log x): a bounded prior (uniform, PERT, a truncation) is at its bound long before the
edge, where holding the last value is exact, and its draws may sit there rightly.

Draws are read as centred logs (the table's values), so the check is the same for NUTS and importance
sampling, and with a copula (the table reads the correlated z).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from mcflops.model.samplers import GRID, ZMAX

EDGE_BAND = 0.5  # z units next to each end of the table
EDGE_SHARE = 0.01  # share of a posterior's draws in the band that fails the check
EDGE_MOVE = 1e-3  # log x still moving across the band by this much (0.1%): the prior has a tail there
_CELLS = int(round(EDGE_BAND * GRID / (2 * ZMAX)))  # table cells in the band


def edge_piles(model, names, post_d: np.ndarray) -> dict[str, dict[str, Any]]:
    """The inputs whose posterior draws pile at an end of their table: {name: {"side", "share", "z", "log_move"}}.

    ``names``: the tracked quantities in ``post_d``'s row order; ``post_d``: posterior draws [Q, K] (centred logs).
    """
    out: dict[str, dict[str, Any]] = {}
    for name, s in zip(model.inputs, model.samplers):
        if s.kind != "table" or name not in names:
            continue
        table = np.asarray(s.table, np.float64)
        d = np.asarray(post_d[list(names).index(name)], np.float64).ravel()
        d = d[np.isfinite(d)]
        if d.size == 0:
            continue
        for side, edge, inner in (("low", table[0], table[_CELLS]), ("high", table[-1], table[-1 - _CELLS])):
            move = abs(inner - edge)
            if not move >= EDGE_MOVE:
                continue
            share = float(np.mean(d <= inner if side == "low" else d >= inner))
            if share >= EDGE_SHARE and share > out.get(name, {}).get("share", 0.0):
                out[name] = {"side": side, "share": share, "z": (-1 if side == "low" else 1) * (ZMAX - EDGE_BAND),
                             "log_move": move, "value": math.exp(model.centers[name] + edge)}
    return out


def observed_distance(spec, stats: Mapping[str, Mapping]) -> dict[str, float]:
    """How many of its likelihood's sigmas each observed value sits from its posterior median."""
    out = {}
    for name, o in spec.observe.items():
        st = stats.get(name)
        if o.noise == "between" or not st or not st.get("p50", 0) > 0:
            continue
        if o.noise == "lognormal":
            out[name] = abs(math.log(st["p50"] / o.value)) / o.scale
        else:
            out[name] = abs(st["p50"] - o.value) / o.scale
    return out


def edge_reason(piles: Mapping[str, Mapping], distance: Mapping[str, float]) -> str:
    """The failure reason in the user's words: the data contradict the prior, and which input hit its edge."""
    from mcflops.numbers import format_number as fmt

    parts = [f"{n}'s draws pile at the {p['side']} end of its prior ({100 * p['share']:.0f}% of them at "
             f"z {'<=' if p['side'] == 'low' else '>='} {p['z']:+g}, {n} near {fmt(p['value'])})"
             for n, p in piles.items()]
    line = "the data contradict the prior: " + "; ".join(parts)
    far = [f"{n} sits {k:.0f} sigmas from its observed value" for n, k in distance.items() if k >= 3]
    if far:
        line += "; the posterior of " + ", ".join(far)
    return (line + f"; the sampler cannot follow the data past the prior's |z| = {ZMAX:g} (a tail probability of "
            f"{_tail(ZMAX):.0e}), so the posterior is the sampler's limit, not the prior's: widen the "
            f"prior{'s' if len(piles) > 1 else ''} of {' and '.join(piles)}, or check the observed figure")


def _tail(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))  # Phi(-z) (Abramowitz & Stegun 26.2.29)
