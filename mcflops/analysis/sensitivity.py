"""Sensitivity: which assumption moves the estimate. Computation only (returns plain data).

- **Tornado, sweeps, rank correlations**: :mod:`mcflops.analysis.local`; with
  ``correlations:`` the tornado and sweeps condition on the moved input.
- **Sobol indices** (variance-based, Sobol 1993), first-order and total, by Saltelli sampling on the
  standard-normal scores z: matrices A and B (keys folded from the run key, blocks keyed by index) and
  AB_i = A with column i from B (Saltelli et al. 2010, "Variance based sensitivity analysis of model
  output", Table 2). First order: V_i = mean f(B) (f(AB_i) - f(A)) (ibid., Table 2 (b), Saltelli 2010);
  total: V_Ti = mean (f(A) - f(AB_i))^2 / 2 (ibid., Table 2 (f), Jansen 1999); V from f(A) and f(B)
  pooled. Each block of draws is reduced on the device to the sums of u = (f, f^2, P_i, T_i) and of
  u u^T, so memory stays flat; standard errors come from the delta method on those means (Janon
  et al. 2014, "Asymptotic normality and efficiency of two Sobol index estimators", ESAIM: P&S 18).
  Computed on log output (the default: the model is a product) and on the output itself.
  The indices assume independent inputs: with ``correlations:`` they are not reported.
- **Shapley effects** (:mod:`mcflops.shapley`; Owen 2014, Song et al. 2016): a partition of the variance
  that stays one with correlated inputs; reported with and without ``correlations:``.
- **Rank correlations** of each log input with the log output under the prior (and the posterior
  when the file observes something; the posterior's inputs are correlated, so Sobol indices would
  be wrong there).

What to analyse (output, Sobol draws, sweep grids) is the spec's ``sensitivity:`` block,
:class:`mcflops.spec.SensitivityOptions`, checked at load (``mcflops.spec.sensitivity_options`` adds
the command line's values).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.model.compute import Model, evaluate
from mcflops.analysis.local import rank_correlations, sweep, tornado
from mcflops.analysis.shapley import MAX_INPUTS, shapley, shapley_table
from mcflops.spec import SOBOL_BASE, SensitivityOptions

SOBOL_BLOCK = 1 << 16  # base draws per keyed block (part of the algorithm: changing it changes the draws)
_A_ID, _B_ID = engine.SOBOL_A, engine.SOBOL_B


# ----------------------------------------------------------------------------- Sobol core

def _draw(key: jax.Array, names: tuple[str, ...], block, size: int) -> dict[str, jax.Array]:
    """Independent standard normals per input, keyed like the engine: fold_in(fold_in(key, id(name)), block)."""
    return {n: engine.normals(jax.random.fold_in(jax.random.fold_in(key, engine.stable_id(n)), block), (size,))
            for n in names}


def _sobol_block(key, params, block, n_valid, f, names, static, size):
    """Sums of u = (mean f, mean f^2, P_1..P_p, T_1..T_p) and u u^T over one block (per output row)."""
    p = len(names)
    ZA = jnp.stack(list(_draw(jax.random.fold_in(key, _A_ID), names, block, size).values()))  # [p, size]
    ZB = jnp.stack(list(_draw(jax.random.fold_in(key, _B_ID), names, block, size).values()))

    def fz(Z):
        return f(params, {n: Z[i] for i, n in enumerate(names)}, *static)  # [m, size]

    # rows: A, B, then AB_i = A with column i from B; one loop over them, so f is traced once
    swap = jnp.eye(p, dtype=bool)[:, :, None]
    mats = jnp.concatenate([ZA[None], ZB[None], jnp.where(swap, ZB[None], ZA[None])])  # [p + 2, p, size]
    F = jax.lax.map(fz, mats)  # [p + 2, m, size]
    fA, fB, fAB = F[0], F[1], F[2:]
    P = fB[None] * (fAB - fA[None])  # Saltelli 2010, Table 2 (b)
    T = 0.5 * jnp.square(fA[None] - fAB)  # Jansen 1999, Table 2 (f)
    u = jnp.concatenate([(0.5 * (fA + fB))[None], (0.5 * (fA * fA + fB * fB))[None], P, T])  # [k, m, size]
    valid = (jnp.arange(size) < n_valid).astype(u.dtype)
    u = jnp.swapaxes(u, 0, 1) * valid[None, None, :]  # [m, k, size]
    return {"s": jnp.sum(u, axis=-1), "ss": jnp.einsum("mks,mls->mkl", u, u)}


@engine.program(static_argnames=("f", "names", "static", "size"))
def _sobol_call(key, params, blocks, n_valid, *, f, names, static, size):
    return jax.lax.map(lambda a: _sobol_block(key, params, a[0], a[1], f, names, static, size), (blocks, n_valid))


def sobol_sums(key: jax.Array, f: Callable, params: Any, names: tuple[str, ...], n: int, *, static: tuple = (),
               size: int = SOBOL_BLOCK, blocks_per_call: int = 8,
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Saltelli pass with n base draws of the inputs ``names``: float64 sums added in block order.

    ``f(params, z, *static)`` maps a dict of standard-normal columns (one per name, shape [size]) to
    [m, size] outputs (m >= 1 quantities analysed together). ``f`` and ``static`` must be hashable
    (a module-level function and a tuple): they key the jit compile, one per structure (calls take
    ``blocks_per_call`` blocks, the remainder one at a time: two shapes at most).
    """
    call = partial(_sobol_call, key, params, f=f, names=tuple(names), static=tuple(static), size=size)
    s, ss = engine.sum_blocks(call, n, size, blocks_per_call, progress)
    return {"n": n, "names": tuple(names), "s": s, "ss": ss}


def sobol_indices(sums: Mapping[str, Any], row: int = 0) -> dict[str, Any]:
    """First-order and total indices of output ``row`` with delta-method standard errors.

    Returns arrays ``first``, ``total``, ``first_se``, ``total_se`` (one per input), ``cov`` (the
    [2p, 2p] covariance of (first, total)), and the output ``variance``.
    """
    n = float(sums["n"])
    p = len(sums["names"])
    with np.errstate(over="ignore", invalid="ignore"):  # overflowed sums are caught below, not warned about
        ubar = sums["s"][row] / n
        sigma = sums["ss"][row] / n - np.outer(ubar, ubar)  # per-draw covariance of u
        mu, m2 = ubar[0], ubar[1]
        V = m2 - mu * mu
    if not (V > 0 and np.all(np.isfinite(sigma))):  # no variance, or linear-scale sums past float range
        nan = np.full(p, np.nan)
        return {"first": nan, "total": nan, "first_se": nan, "total_se": nan, "cov": np.full((2 * p, 2 * p), np.nan),
                "variance": float(V)}
    est = ubar[2:] / V  # (first_1..p, total_1..p)
    G = np.zeros((2 * p, 2 + 2 * p))
    G[:, 0] = 2.0 * mu * ubar[2:] / V**2  # d(U/V)/d mu, V = m2 - mu^2
    G[:, 1] = -ubar[2:] / V**2
    G[np.arange(2 * p), 2 + np.arange(2 * p)] = 1.0 / V
    cov = G @ sigma @ G.T / n  # delta method: Var(g(ubar)) = G Sigma G^T / n
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return {"first": est[:p], "total": est[p:], "first_se": se[:p], "total_se": se[p:], "cov": cov,
            "variance": float(V)}


def _model_f(model: Model, z: Mapping[str, jax.Array], output: str) -> jax.Array:
    """Rows: log output and output, each shifted by its value at the medians (indices are shift-free)."""
    d = evaluate(model, z)[output]
    d0 = evaluate(model, {k: jnp.zeros((), jnp.float32) for k in z})[output]
    return jnp.stack([d - d0, jnp.exp(d) - jnp.exp(d0)])


def sobol(key: jax.Array, model: Model, output: str = "gpu_hours", n: int = SOBOL_BASE,
          progress: Callable[[int, int], None] | None = None, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Sobol indices of the model's output on the log scale (``log``) and the natural one (``linear``)."""
    names = model.uncertain if names is None else tuple(names)
    t0 = time.perf_counter()
    sums = sobol_sums(key, _model_f, model, names, n, static=(output,), progress=progress)
    out: dict[str, Any] = {"names": names, "n": n, "evaluations": n * (len(names) + 2),
                           "seconds": time.perf_counter() - t0}
    for row, scale in enumerate(("log", "linear")):
        out[scale] = sobol_indices(sums, row)
    return out


def sobol_table(ix: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """``{input: {first, total, first_se, total_se}}`` for summary.json."""
    return {n: {k: float(ix[k][i]) for k in ("first", "total", "first_se", "total_se")} for i, n in enumerate(names)}


# ----------------------------------------------------------------------------- the whole analysis

def analyze(key: jax.Array, model: Model, sums, draws: Mapping[str, np.ndarray],
            posterior_draws: Mapping[str, np.ndarray] | None, opts: SensitivityOptions, *,
            progress: Callable[[int, int], None] | None = None, prior_part: dict[str, Any] | None = None,
            mfu_prior=None) -> dict[str, Any]:
    """Everything summary.json's ``sensitivity`` holds for an engine run ``sums`` of ``model`` with key ``key``:
    ``draws`` are its kept prior draws, ``posterior_draws`` the posterior's (None: no posterior), both in
    linear units by name; ``prior_part`` is what ``prior_analysis`` already gave for the same key;
    ``mfu_prior`` the spec's MFU prior (for the sweeps of a layout's fields)."""
    if prior_part is None:
        prior_part = prior_analysis(key, model, opts, progress=progress)
    out = {**prior_part, "notes": list(prior_part["notes"])}
    names, sweeps = tuple(n for n in model.uncertain if n in out["inputs"]), out.pop("sweeps")  # file order
    corr = {"prior": rank_correlations(model, sums, draws, opts.output, "prior", names)}
    if posterior_draws is not None:
        corr["posterior"] = rank_correlations(model, sums, posterior_draws, opts.output, "post", names)
        out["notes"].append(
            "under the posterior the inputs are correlated (the data pin down their product, e.g. MFU x goodput), "
            "so variance shares are not defined there; the posterior columns are rank and log correlations")
    out["correlations"] = corr
    out["sweeps"] = sweeps
    if opts.layout_sweeps and mfu_prior is not None:  # a layout MFU prior's fields, on the kept draws
        from mcflops.analysis.layoutsweep import layout_sweep

        out["layout_sweeps"] = {f: layout_sweep(f, vals, dists, mfu_prior, draws, opts.output, posterior_draws)
                                for f, vals, dists in opts.layout_sweeps}
    if model.copula is not None:
        out["notes"].append("with correlations the tornado moves one input with the others at their medians given "
                            "it, and sweeps draw the others given the swept value")
    return out


class Cancelled(Exception):
    """``prior_analysis`` was told to stop (its caller gave up on it: Ctrl-C, an error)."""


def prior_analysis(key: jax.Array, model: Model, opts: SensitivityOptions,
                   progress: Callable[[int, int], None] | None = None,
                   stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """The part of ``analyze`` that needs only the model and the key (tornado, Sobol, Shapley, sweeps): it
    does not wait for the posterior (``api.run`` computes it alongside). ``stop()`` true: raise Cancelled
    at the next stage or Sobol call."""

    def check(*done):  # also Sobol's progress callback: (blocks done, blocks)
        if stop is not None and stop():
            raise Cancelled
        if progress is not None and done:
            progress(*done)

    corr_in = model.copula is not None
    tor = tornado(model, opts.output)
    # inputs the output does not depend on (price for GPU-hours) have no swing when the others stay at their
    # medians: leave them out (with correlations the conditional tornado would move them through their partners)
    direct = tornado(model, opts.output, conditional=False) if corr_in else tor
    names = tuple(b["input"] for b in direct["inputs"] if b["at_p5"] != b["at_p95"])
    unused = [b["input"] for b in direct["inputs"] if b["input"] not in names]
    tor["inputs"] = [b for b in tor["inputs"] if b["input"] in names]
    out: dict[str, Any] = {"output": opts.output, "tornado": tor, "inputs": list(names), "unused": unused,
                           "notes": []}
    names = tuple(n for n in model.uncertain if n in names)  # file order
    out["sobol"] = out["shapley"] = None
    if not names:
        out["notes"].append(f"no uncertain input moves {opts.output}: nothing to attribute")
    elif corr_in:
        out["notes"].append(
            "correlations: make inputs dependent, and Sobol indices assume independent inputs (with dependence "
            "the first-order indices do not add up to the variance and can exceed the totals), so they are "
            "withheld: the Shapley effects line gives the shares of the variance, correlations allowed for")
    else:
        check()
        sob = sobol(key, model, opts.output, opts.sobol_samples, progress=check, names=names)
        out["sobol"] = sobol_table(sob["log"], names)
        out["sobol_linear"] = sobol_table(sob["linear"], names)
        if not np.isfinite(sob["linear"]["first"]).any() and np.isfinite(sob["log"]["first"]).any():
            out["notes"].append(f"the Sobol indices of {opts.output} itself (not its log) are withheld: its draws "
                                "span so many orders of magnitude that their sums of squares leave the float range; "
                                f"the log-scale indices give the shares")
        out["sobol_info"] = {"scale": f"log {opts.output}", "base_samples": sob["n"],
                             "evaluations": sob["evaluations"], "seconds": round(sob["seconds"], 3),
                             "estimators": "first: Saltelli 2010; total: Jansen 1999 (Saltelli et al. 2010, "
                             "Table 2)", "se": "delta method",
                             "sum_first": float(np.sum(sob["log"]["first"])),
                             "sum_first_linear": float(np.sum(sob["linear"]["first"]))}
    if names and len(names) <= MAX_INPUTS:
        check()
        sh = shapley(key, model, opts.output, names=names)
        out["shapley"] = shapley_table(sh["log"], names)
        out["shapley_linear"] = shapley_table(sh["linear"], names)
        out["shapley_info"] = {
            "scale": f"log {opts.output}", "correlated": sh["correlated"], "outer_samples": sh["n"],
            "inner_samples": 3, "evaluations": sh["evaluations"], "seconds": round(sh["seconds"], 3),
            "estimator": "exact subset enumeration, cost E[Var(Y | X_-J)] (Song, Nelson & Staum 2016, Algorithm 1, "
            "N_I = 3), conditional draws of the Gaussian copula's z's", "se": "delta method",
            "sums_to_one": "by construction (efficiency of the Shapley value)"}
    elif names:
        out["notes"].append(f"{len(names)} inputs move {opts.output}: Shapley effects by exact enumeration "
                            f"stop at {MAX_INPUTS}")
    out["sweeps"] = {}
    for name, vals in opts.sweeps:
        check()
        out["sweeps"][name] = sweep(key, model, name, vals, opts.output)
    return out
