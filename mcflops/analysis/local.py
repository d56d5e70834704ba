"""Local and graphical sensitivity: tornado, sweeps, rank correlations (used by :mod:`mcflops.analysis.sensitivity`).

- **Tornado**: each uncertain input at its p5 and its p95 (z = -/+1.645) through ``model.evaluate`` (so
  PaLM's nonlinear attention term counts); sorted by swing. The others sit at their medians (z = 0), or,
  when the file declares ``correlations:``, at their *conditional* medians given the moved input: the z's
  are jointly normal with unit variances, so z_o | z_j is normal with mean Sigma_oj z_j (Anderson 2003,
  "An Introduction to Multivariate Statistical Analysis", Theorem 2.5.1), and each input's map z -> log x
  is increasing, so its conditional median is the map at that mean.
- **Sweeps** (``sensitivity: {sweep: {mfu: [0.30, 0.45]}}``): the output's quantiles along a grid of one
  input, the others sampled; the same draws at every grid point (common random numbers). With
  correlations the others are drawn from their conditional distribution given the swept value:
  z_o | z_j = c ~ N(Sigma_oj c, Sigma_oo - Sigma_oj Sigma_jo) (ibid.), c the swept value's normal score.
- **Rank correlations** of each log input with the log output: Pearson on logs over every draw
  (importance-weighted sums of the engine) and Spearman on the kept draws.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.model.samplers import GRID, ZMAX, to_device
from mcflops.model.compute import Model, evaluate, outputs
from mcflops.analysis.shapley import conditional as conditional_map
from mcflops.model.copula import z_correlation

SWEEP_SAMPLES = 1 << 16  # draws per grid point (the same draws at every point)
Z95 = 1.6448536269514722  # Phi^{-1}(0.95): an input's p5 and p95 are z = -/+Z95
_SWEEP_ID = engine.SWEEP
QPROBS = (0.05, 0.25, 0.5, 0.75, 0.95)
QNAMES = ("p5", "p25", "p50", "p75", "p95")

_evaluate = engine.program(evaluate)


def tornado(model: Model, output: str = "gpu_hours", conditional: bool | None = None) -> dict[str, Any]:
    """Output with each uncertain input at its p5 and p95, the others at their (conditional) medians.

    ``conditional`` (default: when the model has correlations) moves the others to their medians given
    the moved input; without correlations both readings are the same numbers."""
    names = model.uncertain
    cond = model.copula is not None if conditional is None else bool(conditional)
    S = z_correlation(model, names) if cond else np.eye(len(names))
    rows = 2 * len(names) + 1
    Z = np.zeros((len(names), rows), np.float32)
    for j in range(len(names)):
        Z[:, 1 + 2 * j], Z[:, 2 + 2 * j] = -Z95 * S[:, j], Z95 * S[:, j]  # conditional medians: Sigma_oj z_j
    Z += np.float32(0.0)  # no negative zeros
    z = {n: jax.device_put(Z[i]) for i, n in enumerate(names)}
    v = jax.device_get(_evaluate(model, z)) if names else {output: np.zeros(1)}
    c = model.centers
    y = np.exp(c[output] + np.asarray(v[output], np.float64))
    base = float(y[0])
    bars = []
    for j, n in enumerate(names):
        lo_x, hi_x = (float(np.exp(c[n] + float(v[n][r]))) for r in (1 + 2 * j, 2 + 2 * j))
        lo_y, hi_y = float(y[1 + 2 * j]), float(y[2 + 2 * j])
        bars.append({"input": n, "input_p5": lo_x, "input_p95": hi_x, "at_p5": lo_y, "at_p95": hi_y,
                     "swing": abs(hi_y - lo_y), "swing_rel": abs(hi_y - lo_y) / base})
    bars.sort(key=lambda b: -b["swing"])
    out: dict[str, Any] = {"output": output, "base": base, "inputs": bars}
    if cond:
        out["conditional"] = True
    return out


@engine.program(static_argnames=("name", "output", "size"))
def _sweep_call(key, model, vals, *, name, output, size):
    z = engine.draw_z(jax.random.fold_in(key, _SWEEP_ID), model, jnp.uint32(0), size)
    v = evaluate(model, z)
    d = {n: v[n] for n in model.inputs}

    def at(x):
        return outputs(model, {**d, name: jnp.broadcast_to(x, (size,))})[output]

    Y = jax.vmap(at)(vals)  # [G, size]
    q = jnp.quantile(Y, jnp.asarray(QPROBS, jnp.float32), axis=1)  # [5, G]
    return q, jnp.log(jnp.mean(jnp.exp(Y), axis=1))


@engine.program(static_argnames=("names", "name", "output", "size"))
def _sweep_cond_call(key, model, vals, zc, shift, B, *, names, name, output, size):
    """As _sweep_call, the others drawn given z_name = zc[g]: z = shift zc[g] + B e, the same e at each g."""
    e = engine.draw_z(jax.random.fold_in(key, _SWEEP_ID), model, jnp.uint32(0), size)  # independent: no copula
    E = jnp.stack([e[n] for n in names])  # [p, size]
    base = B @ E

    def at(x, c):
        Z = base + shift[:, None] * c
        d = evaluate(model, {n: Z[i] for i, n in enumerate(names)})
        return outputs(model, {**{n: d[n] for n in model.inputs}, name: jnp.broadcast_to(x, (size,))})[output]

    Y = jax.vmap(at)(vals, zc)  # [G, size]
    q = jnp.quantile(Y, jnp.asarray(QPROBS, jnp.float32), axis=1)  # [5, G]
    return q, jnp.log(jnp.mean(jnp.exp(Y), axis=1))


def normal_score(model: Model, name: str, centred: np.ndarray) -> np.ndarray:
    """z with sampler(z) = centred log value: the inverse of the input's map (affine, or the table's)."""
    s = model.sampler(name)
    if s.kind == "affine":
        return (np.asarray(centred, np.float64) - float(s.a)) / float(s.b)
    table = np.asarray(s.table, np.float64)
    return np.interp(centred, table, np.linspace(-ZMAX, ZMAX, GRID + 1))  # the table is increasing in z


def sweep(key: jax.Array, model: Model, name: str, values, output: str = "gpu_hours",
          n: int = SWEEP_SAMPLES) -> dict[str, Any]:
    """Quantiles of the output with ``name`` fixed at each value, the rest sampled (same draws at each);
    with correlations the rest are drawn given the fixed value."""
    vals = np.asarray(values, np.float64)
    centred = np.log(vals) - model.centers[name]
    cvals = to_device(centred, np.float32)
    if model.copula is None:
        q, lmean = jax.device_get(_sweep_call(key, model, cvals, name=name, output=output, size=n))
    else:
        names = model.uncertain
        free = np.array([m != name for m in names])
        A, B = conditional_map(z_correlation(model, names), free)  # z = A[:, j] z_j + B e
        zc = jnp.asarray(normal_score(model, name, centred), jnp.float32)
        shift = jnp.asarray(A[:, names.index(name)], jnp.float32)
        plain = dataclasses.replace(model, copula=None)
        q, lmean = jax.device_get(_sweep_cond_call(key, plain, cvals, zc, shift, jnp.asarray(B, jnp.float32),
                                                   names=names, name=name, output=output, size=n))
    c = model.centers[output]
    out: dict[str, Any] = {"input": name, "output": output, "values": vals.tolist(), "samples": n}
    for k, row in zip(QNAMES, np.asarray(q, np.float64)):
        out[k] = np.exp(c + row).tolist()
    out["mean"] = np.exp(c + np.asarray(lmean, np.float64)).tolist()
    out["p50_vs_first"] = (np.asarray(out["p50"]) / out["p50"][0]).tolist()
    if model.copula is not None:
        out["conditional"] = True
    return out


def _ranks(x: np.ndarray) -> np.ndarray:
    r = np.empty(len(x))
    r[np.argsort(x, kind="stable")] = np.arange(len(x))
    return r


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (Pearson on ranks; continuous draws have no ties)."""
    return float(np.corrcoef(_ranks(np.asarray(x)), _ranks(np.asarray(y)))[0, 1])


def rank_correlations(model: Model, sums, draws: Mapping[str, np.ndarray] | None, output: str, which: str,
                      inputs=None) -> dict[str, Any] | None:
    """Pearson (log, every draw of the engine run ``sums``, weighted under ``which``: "prior" or "post") and
    Spearman (``draws``, linear units by name) of each uncertain input with the output."""
    from mcflops.engine import summary

    if sums is None or (which == "post" and sums.post is None):
        return None
    names = list(sums.names)
    if output not in names:
        return None
    C = summary.correlation(sums, which)
    j = names.index(output)
    ins = [n for n in model.uncertain if inputs is None or n in inputs]
    out: dict[str, Any] = {"pearson_log": {n: float(C[names.index(n), j]) for n in ins}}
    if draws and output in draws:
        out["spearman"] = {n: spearman(draws[n], draws[output]) for n in ins if n in draws}
        out["spearman_draws"] = int(len(draws[output]))
    return out
