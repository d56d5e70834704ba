"""The planning questions when an input depends on the accelerator count. Computation only.

A prior file's ``count_dependent`` priors (``Spec.count_dependent``: the failures goodput today, whose
job MTBF is 1 / (rate x count)) are re-solved at every count G a question tries. Hours then depend on
G, so "accelerators for a deadline D at probability p" is a fixed point: the smallest integer G with

    P(hours(G) / (24 G) <= D) >= p,        hours(G) with goodput(G) (and any other count-dependent input)

found by evaluating that probability on grids of counts, each grid one pass over the run's draws
(engine.draw_z with the run key and the engine's block size: common random numbers across G, so the
estimated curve is a deterministic function of G for the draws). Each pass counts, per G, the (weighted)
draws within the deadline: an exact Monte Carlo estimate, no histogram. The same z maps to the same
input quantile at every G (each prior is a quantile map of z), so a draw keeps its failure rate, its
restart time and everything else when G changes; only what the count changes is re-solved.

The throughput G x goodput(G) rises and then falls (the job fails every 1 / (rate G) hours), so the
probability need not reach p at any G: then the answer is the count that comes closest, and a note.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.model import GRID, Model, Sampler, evaluate, make_sampler, outputs, z_grid
from mcflops.priors.dist import Dist
from mcflops.spec import Spec

GRID_POINTS = 48  # counts per pass
WIDE = 32.0  # the first grid spans the closed-form answer / WIDE .. x WIDE
EXTEND = 3  # times a grid is widened (by WIDE^2) before the probability is called unreachable


def spec_at(spec: Spec, count: int) -> Spec:
    """``spec`` as a file written for ``count`` accelerators would load: hardware.count and every
    count-dependent prior re-solved there (priors in the file's order)."""
    dep = spec.count_dependent
    priors = {n: (dep[n].at(int(count)) if n in dep else d) for n, d in spec.priors.items()}
    return dataclasses.replace(spec, priors=priors, hardware=dataclasses.replace(spec.hardware, count=int(count)))


def _log_quantiles(d: Dist, z: np.ndarray) -> np.ndarray:
    """log F^{-1}(Phi(z)) of prior ``d``: exact for a point, by linear interpolation for a quantile table
    (mixture of abutting uniforms: a piecewise-linear CDF), by the sampler's table otherwise (a root search
    per grid point, some 0.1 s a prior: the tables of a pass would take seconds)."""
    from scipy.special import ndtr

    if d.family == "point":
        return np.full(z.shape, math.log(d.params["value"]))
    comps = d.components
    if d.family == "mixture" and all(c.family == "uniform" for c in comps) and \
            all(a.params["high"] == b.params["low"] for a, b in zip(comps[:-1], comps[1:])):
        knots = np.asarray([c.params["low"] for c in comps] + [comps[-1].params["high"]])
        cum = np.concatenate([[0.0], np.cumsum(d.weights)])
        cum /= cum[-1]
        return np.log(np.interp(ndtr(z), cum, knots))
    s = make_sampler(d)
    return np.asarray(s.table, np.float64) + s.center if s.kind == "table" else float(s.a) + s.center + 0 * z


def _tables(spec: Spec, model: Model, counts) -> jax.Array:
    """(K, inputs, GRID + 1): each count-dependent input's centred log quantile map at each count, as a
    table on the samplers' z grid, relative to the model's (the file's) centre."""
    z = z_grid()
    out = np.empty((len(counts), len(spec.count_dependent), GRID + 1))
    for k, g in enumerate(counts):
        for i, name in enumerate(spec.count_dependent):
            out[k, i] = _log_quantiles(spec.count_dependent[name].at(int(g)), z) - model.centers[name]
    return jnp.asarray(out, jnp.float32)


def _block(key, model, lik, tables, thr, block, n_valid, names, size):
    """One block: per count, the weight of draws whose hours at that count are within its threshold."""
    z = engine.draw_z(key, model, block, size)
    v = evaluate(model, z)
    valid = jnp.arange(size) < n_valid
    if lik is None:
        w, m = valid.astype(jnp.float32), jnp.float32(0.0)
    else:  # the engine's scheme: weights rescaled to the block's maximum log-likelihood
        ll = jnp.where(valid, engine.log_likelihood(lik, v), -jnp.inf)
        m = jnp.max(ll)
        w = jnp.exp(ll - jnp.where(jnp.isfinite(m), m, 0.0))
    d = {n: v[n] for n in model.inputs}
    zero = jnp.zeros((size,), jnp.float32)
    # the observation weights come from the file's model; only the hours move with the count

    def one(args):
        tab, t = args
        dk = {**d, **{n: Sampler("table", 0.0, zero[0], zero[0], tab[i])(z.get(n, zero))
                      for i, n in enumerate(names)}}
        h = outputs(model, dk)["gpu_hours"]
        return jnp.sum(jnp.where(h <= t, w, 0.0))

    return {"below": jax.lax.map(one, (tables, thr)), "s0": jnp.sum(w), "s0w2": jnp.sum(w * w), "m": m}


# engine.program: a second process (the CLI's plan) loads the executable instead of compiling it again
@engine.program(static_argnames=("names", "size"))
def _within_call(key, model, lik, tables, thr, blocks, n_valid, *, names, size):
    return jax.lax.map(lambda a: _block(key, model, lik, tables, thr, a[0], a[1], names, size), (blocks, n_valid))


def prob_within(key, spec: Spec, model: Model, lik, n: int, days: float, counts) -> tuple[np.ndarray, float]:
    """P(hours(G) / (24 G) <= days) at each G of ``counts`` (at most GRID_POINTS of them; prior, or importance-weighted posterior
    with ``lik``), and the effective sample size of the weights."""
    asked = len(counts)
    # padded to GRID_POINTS counts (the last repeated): one compiled program for every pass
    counts = np.asarray(list(counts) + [counts[-1]] * (GRID_POINTS - asked), np.int64)
    tables = _tables(spec, model, counts)
    thr = jnp.asarray(np.log(24.0 * days * counts) - model.centers["gpu_hours"], jnp.float32)
    names = tuple(spec.count_dependent)
    size = min(engine.BLOCK, n)  # draw i of a block comes from counter i: a shorter block is a prefix of it
    below, s0, s0w2, log_max = np.zeros(len(counts)), 0.0, 0.0, -math.inf

    def call(blocks, n_valid):
        return _within_call(key, model, lik, tables, thr, blocks, n_valid, names=names, size=size)

    for _, out in engine.each_block(call, n, size, 1):
        bl, s, s2, m = (np.asarray(out[k], np.float64) for k in ("below", "s0", "s0w2", "m"))
        m = float(m)
        if not (math.isfinite(m) and float(s) > 0):
            continue
        new = max(m, log_max)
        a_new, a_old = math.exp(m - new), (math.exp(log_max - new) if math.isfinite(log_max) else 0.0)
        below, s0, s0w2 = below * a_old + bl * a_new, s0 * a_old + float(s) * a_new, \
            s0w2 * a_old**2 + float(s2) * a_new**2
        log_max = new
    if s0 <= 0:
        return np.zeros(asked), 0.0
    return below[:asked] / s0, engine.ess(s0, s0w2)


class Curve:
    """P(done within ``days``) as a function of the count, evaluated lazily and remembered."""

    def __init__(self, key, spec: Spec, model: Model, lik, n: int, days: float):
        self.args = (key, spec, model, lik, n, days)
        self.p: dict[int, float] = {}
        self.ess = float(n)

    def __call__(self, counts) -> np.ndarray:
        new = sorted({int(g) for g in counts} - set(self.p))
        for i in range(0, len(new), GRID_POINTS):
            part = new[i:i + GRID_POINTS]
            pr, self.ess = prob_within(*self.args, part)
            self.p.update(zip(part, pr.tolist()))
        return np.asarray([self.p[int(g)] for g in counts])


class Counts:
    """The accelerator counts a plan may answer: every whole number, or only ``allowed`` (a layout runs on
    multiples of tp x pp x cp whose dp divides the global batch: :meth:`LayoutPrior.runnable_counts`). The
    search walks their positions: ``index`` of the smallest allowed count >= g, ``at`` the count at a position."""

    def __init__(self, allowed=None):
        self.allowed = None if allowed is None else np.asarray(sorted(set(allowed)), np.int64)
        self.first = 1 if self.allowed is None else int(self.allowed[0])
        self.last = None if self.allowed is None else int(self.allowed[-1])
        self.base = 1 if self.allowed is None else 0  # the first count's position

    def index(self, g: float) -> int:
        if self.allowed is None:
            return max(math.ceil(g - 1e-9), 1)
        return int(min(np.searchsorted(self.allowed, g - 1e-9), len(self.allowed) - 1))

    def at(self, i: int) -> int:
        return int(i) if self.allowed is None else int(self.allowed[int(i)])

    def grid(self, lo: float, hi: float, points: int = GRID_POINTS) -> list[int]:
        """About ``points`` counts, geometric from lo to hi, each moved up to the next allowed count."""
        return sorted({self.at(self.index(g)) for g in np.geomspace(max(lo, 1.0), max(hi, 1.0), points)})


def runnable(spec: Spec) -> Counts:
    """The counts every count-dependent prior of ``spec`` can be solved at (a failures model: any)."""
    allowed = None
    for dep in spec.count_dependent.values():
        counts = getattr(dep, "runnable_counts", None)
        if counts is not None:
            mine = set(counts())
            allowed = mine if allowed is None else allowed & mine
    return Counts(allowed)


def fixed_point(curve: Curve, p: float, start: float, counts: Counts | None = None) -> dict[str, Any]:
    """The smallest allowed count G with curve(G) >= p, searched from ``start`` (the closed-form answer at the
    file's count): a wide geometric grid, widened while the answer is not bracketed, then finer grids of positions
    inside the bracket. ``gpus`` None when no count tried reaches p (``best_gpus``: the closest)."""
    counts = Counts() if counts is None else counts
    lo, hi = max(start / WIDE, 1.0), max(start * WIDE, 2.0)
    for _ in range(EXTEND + 1):
        grid = counts.grid(lo, hi)
        pr = curve(grid)
        ok = np.nonzero(pr >= p)[0]
        if len(ok) and (ok[0] > 0 or grid[0] == counts.first):
            break
        if len(ok):  # already reached at the grid's lowest count: look below
            lo, hi = max(grid[0] / WIDE**2, 1.0), grid[0]
        elif int(np.argmax(pr)) == len(grid) - 1 and grid[-1] != counts.last:  # still rising at its top: look above
            lo, hi = grid[-1], grid[-1] * WIDE**2
        else:  # the probability peaks inside the grid below p, or the layout runs on no larger count
            break
    else:
        ok = np.nonzero(pr >= p)[0]
    if not len(ok):
        seen = sorted(curve.p)
        best = max(seen, key=lambda g: curve.p[g])
        if curve.p[best] <= 0:  # no draw finishes at any count tried: no count to name
            return {"gpus": None, "best_gpus": None, "best_prob": 0.0, "tried": [seen[0], seen[-1]]}
        i = seen.index(best)  # the peak, once more between its neighbours
        curve(counts.grid(seen[max(i - 1, 0)], seen[min(i + 1, len(seen) - 1)]))
        seen = sorted(curve.p)
        best = max(seen, key=lambda g: curve.p[g])
        if curve.p[best] >= p:  # a finer grid found a count that reaches p after all: search below it
            return fixed_point(curve, p, best, counts)
        return {"gpus": None, "best_gpus": best, "best_prob": curve.p[best]}
    b = counts.index(grid[ok[0]])
    a = counts.index(grid[ok[0] - 1]) if ok[0] > 0 else counts.base - 1
    shift = 1 - counts.base  # positions from 1, for the geometric grid
    while b - a > 1:  # the first position at or above p lies in (a, b]
        inner = sorted({int(i) for i in np.round(np.geomspace(a + 1 + shift, b + shift, min(GRID_POINTS, b - a))) - shift})
        pr = curve([counts.at(i) for i in inner])
        first = int(np.nonzero(pr >= p)[0][0]) if np.any(pr >= p) else len(inner) - 1
        b, a = inner[first], (inner[first - 1] if first > 0 else a)
    g = counts.at(b)
    fewer = counts.at(b - 1) if b > counts.base else None
    return {"gpus": g, "prob_at_gpus": curve.p[g], "fewer_gpus": fewer,
            "prob_one_fewer": curve.p.get(fewer) if fewer is not None else None}


def curve_points(curve: Curve, answer: int | None, points: int, counts: Counts | None = None) -> tuple[list[int], list[float]]:
    """The plan curve: ``points`` counts from where P is about 0.005 to where it is about 0.999 (or peaks),
    read from the counts the search evaluated, then evaluated on that geometric grid (allowed counts only)."""
    counts = Counts() if counts is None else counts
    seen = sorted(curve.p)
    pr = np.asarray([curve.p[g] for g in seen])
    peak = seen[int(np.argmax(pr))]
    below = [g for g, q in zip(seen, pr) if q <= 0.005 and g <= peak]
    above = [g for g, q in zip(seen, pr) if q >= 0.999 and g >= peak]
    lo = below[-1] if below else seen[0]
    hi = above[0] if above else max(peak, answer or 0, lo + 1) if pr.max() > 0 else seen[-1]
    grid = counts.grid(lo, hi, points)
    return grid, curve(grid).tolist()


def notes(spec: Spec, counts: Mapping[str, int | None]) -> list[str]:
    """What each count-dependent prior says about the counts the answers name (the regime notes of the
    failures model: goodput under 0.5, a checkpoint interval far from Daly's optimum), without repeats."""
    out: list[str] = []
    for g in dict.fromkeys(c for c in counts.values() if c):
        for dep in spec.count_dependent.values():
            out += [x for x in dep.notes(int(g)) if x not in out]
    return out


def median_at(spec: Spec, name: str, count: int) -> float:
    """The median of count-dependent prior ``name`` on ``count`` accelerators."""
    from mcflops.priors import quantiles

    return float(quantiles.ppf(spec.count_dependent[name].at(int(count)), np.asarray([0.5]))[0])

