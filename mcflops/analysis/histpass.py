"""Blocked histograms of per-draw rows: the planning pass's reduction. Computation only.

The same draws as ``mcflops run`` (engine.draw_z with the run key and the engine's block size) are
reduced, block by block on the device, to log-space histograms; every answer of ``analysis.plan`` and
``analysis.compare`` is a quantile or CDF value of one of them (Hyndman & Fan 1996 type-4
interpolation of the binned CDF: ``engine.hist_quantiles_within``, ``engine.hist_cdf_at``, the engine's own
readers). What is the engine's is used as it is: its keyed draws, its bins (``engine.NBINS``, binned by
``engine.hist_index``), its block loop (``engine.each_block``) and its program store (``engine.program``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.errors import SpecError

PILOT = 1 << 16
_PILOT_ID = engine.PLAN_PILOT

def _block(key, params, lik, bins, block, n_valid, rows, static, size, sub, nbins):
    """One block's weighted histograms of the rows; ``bins``: (lo, 1 / width, thresholds) per row.

    Only the sub-blocks that hold draws are drawn (``rows(..., block, at, sub, ...)``: draws at .. at + sub - 1
    of the block) and binned, as in the engine's kernel. The rest of the block stays zero-weight padding: the
    sums run over the whole block as one reduction each, so they add the same float32 terms in the same order
    as reducing the whole block's draws, and the scatter adds each bin's weights in draw order, as before."""
    lo, inv, thr = bins
    f32 = jnp.float32
    q = lo.shape[0]
    held = (n_valid + (sub - 1)) // sub
    cols = jnp.arange(sub, dtype=jnp.int32)

    def draw(s, acc):
        X, L = acc
        at = s * sub
        x, ll = rows(key, params, lik, block, at, sub, *static)
        X = jax.lax.dynamic_update_slice(X, x.astype(f32), (0, at))
        if lik is not None:
            L = jax.lax.dynamic_update_slice(L, jnp.where(at + cols < n_valid, ll, -jnp.inf), (at,))
        return X, L

    X, ll = jax.lax.fori_loop(0, held, draw, (jnp.zeros((q, size), f32), jnp.full((size,), -jnp.inf, f32)))
    valid = jnp.arange(size) < n_valid
    if lik is None:
        w, m = valid.astype(f32), f32(0.0)
    else:
        m = jnp.max(ll)
        w = jnp.exp(ll - jnp.where(jnp.isfinite(m), m, 0.0))

    def scatter(s, hist):
        x = jax.lax.dynamic_slice(X, (0, s * sub), (q, sub))
        ws = jax.lax.dynamic_slice(w, (s * sub,), (sub,))
        idx = engine.hist_index(x, lo, inv, nbins)
        return hist.at[idx.reshape(-1)].add(jnp.broadcast_to(ws[None, :], x.shape).reshape(-1))

    hist = jax.lax.fori_loop(0, held, scatter, jnp.zeros(q * (nbins + 2), f32)).reshape(q, nbins + 2)
    W = jnp.broadcast_to(w[None, :], X.shape)
    return {"hist": hist, "m": m, "s0": jnp.sum(w), "s0w2": jnp.sum(w * w),
            "min": jnp.min(jnp.where(valid[None, :], X, jnp.inf), axis=1),
            "max": jnp.max(jnp.where(valid[None, :], X, -jnp.inf), axis=1),
            "above": jnp.sum(jnp.where(X > thr[:, None], W, 0.0), axis=1),
            "below": jnp.sum(jnp.where(X < thr[:, None], W, 0.0), axis=1)}


# engine.program: a second process (the CLI's plan and compare) loads these executables instead of tracing,
# lowering and compiling them again; ``rows`` and ``static`` key them (module-level functions and tuples).
@engine.program(static_argnames=("rows", "static", "size", "sub", "nbins"))
def _hist_call(key, params, lik, bins, blocks, n_valid, *, rows, static, size, sub, nbins):
    return jax.lax.map(lambda a: _block(key, params, lik, bins, a[0], a[1], rows, static, size, sub, nbins),
                       (blocks, n_valid))


@engine.program(static_argnames=("rows", "static"))
def _pilot_call(key, params, *, rows, static):
    X, _ = rows(jax.random.fold_in(key, _PILOT_ID), params, None, jnp.uint32(0), None, PILOT, *static)
    return jnp.stack([jnp.min(X, axis=1), jnp.max(X, axis=1)])


def reduce(key: jax.Array, rows: Callable, params: Any, lik, n: int, *, static: tuple = (),
           thresholds=None, size: int = engine.BLOCK, blocks_per_call: int = 1,
           progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Histograms (float64, blocks added in order) of the rows ``rows(key, params, lik, block, at, size, *static)``
    (draws at .. at + size - 1 of block ``block``; ``at`` None: from the block's first draw). Calls take
    ``blocks_per_call`` blocks (``engine.each_block``); the sums do not depend on it.

    With a likelihood the weights are exp(log-likelihood), rescaled block by block to the running
    maximum (the engine's scheme), so the histograms are the importance-weighted posterior's.
    """
    pilot = np.asarray(jax.device_get(_pilot_call(key, params, rows=rows, static=static)), np.float64)
    span = np.maximum(pilot[1] - pilot[0], 1e-6)
    lo, width = pilot[0] - 0.5 * span, 2.0 * span / engine.NBINS
    q = len(lo)
    thr = np.zeros(q) if thresholds is None else np.asarray(thresholds, np.float64)
    acc: dict[str, Any] | None = None
    log_max = -np.inf
    mn, mx = np.full(q, np.inf), np.full(q, -np.inf)
    bins = tuple(jnp.asarray(x, jnp.float32) for x in (lo, 1.0 / width, thr))

    def call(blocks, n_valid):
        return _hist_call(key, params, lik, bins, blocks, n_valid, rows=rows, static=static, size=size,
                          sub=min(engine.SUB, size), nbins=engine.NBINS)

    for _, out in engine.each_block(call, n, size, blocks_per_call, progress):
        blk = {k: np.asarray(v, np.float64) for k, v in out.items()}
        mn, mx = np.minimum(mn, blk["min"]), np.maximum(mx, blk["max"])
        m = float(blk["m"])
        if np.isfinite(m) and float(blk["s0"]) > 0:
            new = max(m, log_max)
            scale_new, scale_old = math.exp(m - new), (math.exp(log_max - new) if np.isfinite(log_max) else 0.0)
            parts = ("hist", "s0", "above", "below")
            blk2 = {k: blk[k] * scale_new for k in parts}
            blk2["s0w2"] = blk["s0w2"] * scale_new**2
            if acc is None:
                acc = blk2
            else:
                acc = {k: acc[k] * (scale_old**2 if k == "s0w2" else scale_old) + blk2[k] for k in acc}
            log_max = new
    if acc is None:
        raise SpecError("no draw can explain the observations (every likelihood is zero)", field="observe")
    acc.update(lo=lo, width=width, min=mn, max=mx, n=n)
    return acc


def quantiles(h: Mapping[str, Any], row: int, probs) -> np.ndarray:
    """Quantiles of row ``row`` (centred log), clamped to the exact min and max of the draws."""
    return engine.hist_quantiles_within(h["hist"][row], h["lo"][row], h["width"][row], probs, h["min"][row],
                                        h["max"][row])


def cdf(h: Mapping[str, Any], row: int, x) -> np.ndarray:
    """P(row <= x) from the histogram (linear within bins)."""
    return engine.hist_cdf_at(h["hist"][row], h["lo"][row], h["width"][row], x)
