"""A ratio prior: one input of this file as another file's draw of the same input times a ratio.

    priors:
      mfu:
        relative_to: h100.yaml          # the file `mcflops compare h100.yaml THIS` compares against (A)
        ratio: {lognormal: [1.0, 1.3]}  # this file's mfu / A's mfu: a positive prior, independent of A's draw
        source: "..."

In `mcflops compare A B` the input is A's draw times an independent ratio draw, so B / A for that input is the
ratio prior exactly (``mcflops.analysis.compare``). Alone (`mcflops run B`, plan, sensitivity), the file is
resolved against the file ``relative_to`` names (a path relative to this file): the input's prior is the
distribution of A's prior times the ratio, the product of two independent positive variables, computed here
as a quantile table (``mcflops.priors.table``):

    P(X_A R <= t) = E_z[F_R(t / Q_A(Phi(z)))],   z ~ N(0, 1)

by quadrature on a uniform z grid (the integrand is smooth in z; beyond |z| = 8 the mass is 6e-16), each
knot solved by bisection in log t (the upper half from the survival functions, which keep their accuracy
where they are small). A product that leaves the input's domain (an MFU above 1) with probability over
:data:`MAX_OUTSIDE` is refused: the ratio is too wide for A's prior.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from mcflops.priors import quantiles
from mcflops.priors.dist import Dist, support, tail_quantiles
from mcflops.priors.table import KNOT_PROBS, table_dist
from mcflops.spec.fields import Fields
from mcflops.spec.grammar import parse_dist
from mcflops.spec.inputs import check_domain
from mcflops.spec.notes import DEFAULT_GOODPUT, DEFAULT_GOODPUT_CALIBRATED, DEFAULT_PUE
from mcflops.spec.types import INPUTS

RATIO_KEYS = ("relative_to", "ratio", "source")
MAX_OUTSIDE = 1e-6  # a product outside the input's domain more often than this: the ratio is too wide
_Z = np.linspace(-8.0, 8.0, 1201)  # quadrature nodes over A's normal score (a smooth integrand: dz 0.013 is ample)
_W = np.exp(-0.5 * _Z**2) / np.exp(-0.5 * _Z**2).sum()
_LOADING: ContextVar[tuple[str, ...]] = ContextVar("mcflops_ratio_loading", default=())  # files being resolved


@dataclass(frozen=True)
class Ratio:
    """``{relative_to: FILE, ratio: <prior>}`` on input ``name``: A's file (as written, and resolved) and the
    ratio's prior; ``line``: the input's line in this file."""

    name: str
    relative_to: str
    path: str
    ratio: Dist
    line: int | None = None

    def describe(self) -> str:
        return f"{self.name} of {self.relative_to} x {self.ratio.describe()}"


def is_ratio(node: Any) -> bool:
    return isinstance(node, Mapping) and "relative_to" in node


def parse_ratio(where: Fields, parent: Mapping, name: str) -> Ratio:
    """The ratio form of ``parent[name]``, checked (the file exists, the ratio is a positive prior); A's file
    is not read here."""
    node = parent[name]
    here = where.at(parent, name, f"priors.{name}")
    here.keys(node, RATIO_KEYS, where=" beside relative_to:", listing="expected relative_to:, ratio: and source:",
              per_key=False)
    rel = here.text(node, "relative_to", expected="relative_to: the path of the prior file compared against (A)")
    if not rel:
        raise here.error("expected relative_to: the path of the prior file compared against (A)", node, "relative_to")
    base = Path(where.path).parent if where.path and not where.path.startswith("<") else Path.cwd()
    target = (base / rel).resolve()
    if not target.is_file():
        raise here.error(f"relative_to: {rel} is not a file (looked for {target}); the path is relative to this "
                         "file", node, "relative_to", f"priors.{name}.relative_to")
    if "ratio" not in node:
        raise here.error("expected ratio: <prior> beside relative_to: (this file's value over A's, e.g. "
                         "{lognormal: [1.0, 1.3]})", node, "relative_to")
    ratio = parse_dist(node["ratio"], f"priors.{name}.ratio", here, node, "ratio")
    lo, _ = support(ratio)
    low_tail = tail_quantiles(ratio)[0] if ratio.family != "point" else ratio.params["value"]
    if lo < 0 or not low_tail > 0 or (ratio.family == "point" and ratio.params["value"] <= 0):
        raise here.error(f"expected a positive prior for the ratio (lognormal, a beta, a uniform above 0, ...), "
                         f"but this {ratio.family} reaches {min(lo, low_tail):g}", node, "ratio",
                         f"priors.{name}.ratio")
    return Ratio(str(name), rel, str(target), ratio, here.line(parent, name))


def resolve_ratios(where: Fields, data: Mapping, priors: dict, load: Callable[[Path], Any]) -> tuple[Ratio, ...]:
    """Resolve every ratio prior of the file, in place: A's prior of the input (``load``: the prior-file loader)
    times the ratio, as a quantile table. Returns the ratio forms (what `mcflops compare` draws from)."""
    node = data["priors"]
    out = []
    for name in [k for k, d in priors.items() if d is None and is_ratio(node[k])]:
        r = parse_ratio(where, node, name)
        priors[name] = ratio_dist(where, node, r, load)
        check_domain(where, name, priors[name], node)
        out.append(r)
    return tuple(out)


def ratio_dist(where: Fields, parent: Mapping, r: Ratio, load: Callable[[Path], Any]) -> Dist:
    """The ratio form ``r`` of ``parent[r.name]`` as a prior: A's prior of the input times the ratio; one line
    naming the field when A lacks the input or the product leaves the input's domain."""
    name = r.name
    here = where.at(parent, name, f"priors.{name}")
    own = str(Path(where.path).resolve()) if where.path and not where.path.startswith("<") else where.path
    chain = _LOADING.get()
    if r.path in (*chain, own):
        raise here.error(f"relative_to: {r.relative_to} leads back to this file (a cycle of ratio priors)",
                         parent[name], "relative_to", f"priors.{name}.relative_to")
    token = _LOADING.set((*chain, own))
    try:
        a = load(Path(r.path))
    finally:
        _LOADING.reset(token)
    da = a.priors.get(name)
    if da is None or da.source in (DEFAULT_GOODPUT, DEFAULT_GOODPUT_CALIBRATED, DEFAULT_PUE):
        state = "has no" if da is None else "leaves to its default the"
        raise here.error(f"relative_to: {r.relative_to} {state} {name} prior: a ratio needs A's own prior of the "
                         "same input", parent[name], "relative_to", f"priors.{name}.relative_to")
    lo, hi, _, meaning = INPUTS[name]
    outside = outside_mass(da, r.ratio, lo, hi)
    if outside > MAX_OUTSIDE:
        bound = f"(0, {hi:g}]" if name != "pue" else f"[{lo:g}, {hi:g}]"
        raise here.error(f"{name} of {r.relative_to} times this ratio leaves {bound} with probability "
                         f"{outside:.2g} ({meaning}); narrow the ratio or bound it (low:/high:)", parent[name], "ratio",
                         f"priors.{name}.ratio")
    user = here.text(parent[name], "source", expected="source: to be text")
    what = f"{name} of {r.relative_to} ({da.describe()}) x ratio {r.ratio.describe()}, as a quantile table"
    return product_dist(da, r.ratio, source=f"{user} | {what}" if user else what)


def _fn(d: Dist, x: np.ndarray, upper: bool) -> np.ndarray:
    """F(x) or S(x) of a prior, a point included (a step)."""
    if d.family == "point":
        v = d.params["value"]
        return (x < v).astype(float) if upper else (x >= v).astype(float)
    return quantiles.sf(d, x) if upper else quantiles.cdf(d, x)


def _nodes(d: Dist) -> np.ndarray:
    """A's quantiles at the quadrature nodes (lower half by ppf, upper half by isf)."""
    if d.family == "point":
        return np.full_like(_Z, d.params["value"])
    u = 0.5 * np.array([math.erfc(-z / math.sqrt(2.0)) for z in _Z])
    x = quantiles.ppf(d, u)
    up = _Z > 0
    x[up] = quantiles.isf(d, 1.0 - u[up])
    return x


def outside_mass(a: Dist, r: Dist, lo: float, hi: float) -> float:
    """P(X_A R < lo) + P(X_A R > hi) (lo 0: only the upper side)."""
    x = _nodes(a)
    p = 0.0
    if lo > 0:
        p += float(_W @ _fn(r, lo / x, upper=False))
    if math.isfinite(hi):
        p += float(_W @ _fn(r, hi / x, upper=True))
    return p


def product_dist(a: Dist, r: Dist, source: str | None = None) -> Dist:
    """The distribution of X_A R (independent, both positive) as a quantile table at :data:`KNOT_PROBS`."""
    if a.family == "point" and r.family == "point":
        return Dist("point", {"value": a.params["value"] * r.params["value"]}, source=source)
    if a.family == "point" or r.family == "point":  # a scaled prior: its own quantiles, times the constant
        d, c = (r, a.params["value"]) if a.family == "point" else (a, r.params["value"])
        q = np.where(KNOT_PROBS <= 0.5, quantiles.ppf(d, KNOT_PROBS), quantiles.isf(d, 1.0 - KNOT_PROBS))
        return table_dist(KNOT_PROBS, c * q, source=source)
    x = _nodes(a)
    (la, ha), (lr, hr) = tail_quantiles(a), tail_quantiles(r)
    lo = np.full(KNOT_PROBS.shape, math.log(la * lr))
    hi = np.full(KNOT_PROBS.shape, math.log(ha * hr))
    for upper in (False, True):  # the lower knots from the CDFs, the upper ones from the survival functions
        k = KNOT_PROBS > 0.5 if upper else KNOT_PROBS <= 0.5
        target = 1.0 - KNOT_PROBS[k] if upper else KNOT_PROBS[k]
        a_, b_ = lo[k], hi[k]
        for _ in range(48):  # bisection in log t: the bracket (under 100 in log) shrinks below 1e-12
            mid = 0.5 * (a_ + b_)
            f = _fn(r, np.exp(mid)[:, None] / x[None, :], upper=upper) @ _W
            above = f > target if upper else f < target  # the knot lies above mid
            a_, b_ = np.where(above, mid, a_), np.where(above, b_, mid)
        lo[k], hi[k] = a_, b_
    return table_dist(KNOT_PROBS, np.exp(0.5 * (lo + hi)), source=source)
