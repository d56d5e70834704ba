"""Extra rows: per-draw quantities an analysis asks a pass for beside the engine's own (plan's GPU-hours per
token, compare's log B / A, the scenarios' quantities), reduced in the same blocks, by the same program.

An analysis names its rows by a function ``fn(key, params, lik, block, at, size, *static) -> (X, ll)``: X the
[rows, size] centred logs of draws at .. at + size - 1 of block ``block`` (the engine's keyed draws,
``draw_z``), ll their log-likelihood (None: the prior). ``extra`` makes the request (a pilot of PILOT draws
of a stream of its own sets the bins); ``engine.run(..., extra=)`` reduces it beside the run's own sums,
``engine.run_rows`` alone. Each block adds, per row, a histogram of ``NBINS`` bins (``hist_index``), the weight
above and below a threshold (exact counts, not read off a histogram), the least and largest draw, and the
weights' sum and sum of squares; the posterior's weights are relative to a running maximum, as the engine's
(``weights``). The readers (``row_quantiles``, ``row_cdf``) are the engine's histogram readers, clamped to the
draws' extremes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcflops.engine.programs import program
from mcflops.engine.streams import PLAN_PILOT
from mcflops.engine.summary import NBINS, hist_cdf_at, hist_quantiles_within

PILOT = 1 << 16  # draws of the pilot that sets the rows' bins
W_FLOOR = -40.0  # log-weights this far below the running maximum count as 0 (see weights)


def weights(ll, m, ok):
    """Importance weights relative to the running maximum m (also the factor that rescales earlier sums when
    m grows), those under e^W_FLOOR set to 0: their squares and products would be float32 subnormals, which
    x86 handles far slower (a sharp observation makes many of them), and all of them together weigh under
    n e^-40 = 4e-8 (n = 1e10) of the largest."""
    r = ll - jnp.where(ok, m, 0.0)
    return jnp.where(r > W_FLOOR, jnp.exp(r), 0.0)


@dataclass(frozen=True)
class Extra:
    """A request for extra rows: ``fn`` and ``static`` (what the compiled program depends on), ``params`` and
    ``lik`` (its arguments), and the rows' bins from ``lo`` (centred log) in bins of ``width``, with the
    thresholds ``thr`` the weight above and below is counted at."""

    fn: Callable
    static: tuple
    params: Any
    lik: Any
    lo: np.ndarray
    width: np.ndarray
    thr: np.ndarray

    @property
    def q(self) -> int:
        return len(self.lo)

    @property
    def weighted(self) -> bool:
        """Whether the rows are weighted by a likelihood (the rows' function gives one)."""
        return self.lik is not None

    def args(self) -> tuple:
        """The compiled program's arguments: params, lik and the bins (lo, 1 / width, thresholds) in float32."""
        return (self.params, self.lik, *(jnp.asarray(x, jnp.float32) for x in (self.lo, 1.0 / self.width, self.thr)))


# engine.program: a second process (the CLI's plan and compare) loads the executable instead of tracing it again;
# ``fn`` and ``static`` key it (module-level functions and tuples)
@program(static_argnames=("fn", "static"))
def _pilot_call(key, params, *, fn, static):
    X, _ = fn(jax.random.fold_in(key, PLAN_PILOT), params, None, jnp.uint32(0), None, PILOT, *static)
    return jnp.stack([jnp.min(X, axis=1), jnp.max(X, axis=1)])


def extra(key: jax.Array, fn: Callable, params: Any, lik: Any = None, *, static: tuple = (),
          thresholds=None) -> Extra:
    """The request for rows ``fn`` (see the module's text): bins over twice the pilot's range, centred on it, so
    that the run's draws fall inside but for their far tails (the under- and overflow bins, and the extremes)."""
    pilot = np.asarray(jax.device_get(_pilot_call(key, params, fn=fn, static=static)), np.float64)
    span = np.maximum(pilot[1] - pilot[0], 1e-6)
    lo, width = pilot[0] - 0.5 * span, 2.0 * span / NBINS
    thr = np.zeros(len(lo)) if thresholds is None else np.asarray(thresholds, np.float64)
    return Extra(fn=fn, static=tuple(static), params=params, lik=lik, lo=lo, width=width, thr=thr)


def fields(q: int, nbins: int) -> dict[str, tuple[int, ...]]:
    """The rows' additive sums, by field, with their shapes (``tree.fields``' section "x")."""
    return {"hist": (q, nbins + 2), "s0": (), "s0w2": (), "above": (q,), "below": (q,)}


def init(q: int, nbins: int, weighted: bool) -> dict:
    """A block's rows before its first draw: zero sums, the running maximum (0 for the prior's unit weights),
    the extremes."""
    f32, zq = jnp.float32, jnp.zeros((q,), jnp.float32)
    return {"x": {"hist": jnp.zeros((q * (nbins + 2),), f32), "s0": jnp.zeros((), f32), "s0w2": jnp.zeros((), f32),
                  "above": zq, "below": zq},
            "xm": jnp.full((), -jnp.inf if weighted else 0.0, f32),
            "xmin": jnp.full((q,), jnp.inf, f32), "xmax": jnp.full((q,), -jnp.inf, f32)}


def step(acc: Mapping, fn: Callable, static: tuple, xargs: tuple, key, block, at, sub: int, n_valid,
         index: Callable, nbins: int) -> dict:
    """Draws at .. at + sub - 1 of the block added to the rows' sums (``index``: the kernel's ``hist_index``)."""
    params, lik, lo, inv, thr = xargs
    f32 = jnp.float32
    X, ll = fn(key, params, lik, block, at, sub, *static)
    # a barrier materialises the rows (and their log-likelihood) once: XLA would otherwise re-run the draws
    # inside each of their consumers (the bins, the thresholds' shares, the extremes)
    X, ll = jax.lax.optimization_barrier((X.astype(f32), ll))
    valid = (at + jnp.arange(sub, dtype=jnp.int32)) < n_valid
    x = acc["x"]
    if ll is None:  # the prior: unit weights, counts exact in float32 (a block's 2^20 draws < 2^24)
        w, m, scale = valid.astype(f32), acc["xm"], None
    else:
        ll = jnp.where(valid, ll, -jnp.inf)
        m = jnp.maximum(acc["xm"], jnp.max(ll))
        ok = jnp.isfinite(m)
        w, scale = weights(ll, m, ok), weights(acc["xm"], m, ok)  # earlier sums to the new maximum
        x = {k: v * (scale * scale if k == "s0w2" else scale) for k, v in x.items()}
    idx = index(X, lo, inv, nbins)
    hist = x["hist"]
    for r in range(X.shape[0]):  # one scatter per row: the weights need no q-fold copy
        hist = hist.at[idx[r]].add(w, mode="promise_in_bounds")
    W = w[None, :]
    new = {"hist": hist, "s0": x["s0"] + jnp.sum(w), "s0w2": x["s0w2"] + jnp.sum(w * w),
           "above": x["above"] + jnp.sum(jnp.where(X > thr[:, None], W, 0.0), axis=1),
           "below": x["below"] + jnp.sum(jnp.where(X < thr[:, None], W, 0.0), axis=1)}
    return {"x": new, "xm": m,
            "xmin": jnp.minimum(acc["xmin"], jnp.min(jnp.where(valid[None, :], X, jnp.inf), axis=1)),
            "xmax": jnp.maximum(acc["xmax"], jnp.max(jnp.where(valid[None, :], X, -jnp.inf), axis=1))}


def row_quantiles(h: Mapping[str, Any], row: int, probs) -> np.ndarray:
    """Quantiles of row ``row`` (centred log) of ``engine.run_rows``' result, clamped to the least and largest draw."""
    return hist_quantiles_within(h["hist"][row], h["lo"][row], h["width"][row], probs, h["min"][row], h["max"][row])


def row_cdf(h: Mapping[str, Any], row: int, x) -> np.ndarray:
    """P(row <= x) from the row's histogram (linear within bins)."""
    return hist_cdf_at(h["hist"][row], h["lo"][row], h["width"][row], x)
