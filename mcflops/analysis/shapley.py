"""Shapley effects: each input's share of the output's variance, with or without correlated inputs.

Definition (Owen 2014, "Sobol' indices and Shapley value", SIAM/ASA JUQ 2:245-251; Song, Nelson &
Staum 2016, "Shapley effects for global sensitivity analysis: theory and computation", SIAM/ASA JUQ
4:1060-1083, Eq. 4 with their cost c(J) = E[Var(Y | X_{-J})])::

    Sh_i = sum_{J not containing i} |J|! (d - |J| - 1)! / d!  (c(J + i) - c(J)) / Var(Y)

With c(empty) = 0 and c(all) = Var(Y) the effects sum to 1 by construction (efficiency of the Shapley
value); Sh_i >= 0 because c grows with J. Unlike Sobol indices they stay a partition of the variance
when inputs are dependent (Iooss & Prieur 2019, "Shapley effects for sensitivity analysis with
correlated inputs", JUQ 9:493-514). Under independence S_i <= Sh_i <= ST_i, and Sh_i is the first-order
share plus an equal split of each interaction among its members (Owen 2014, Theorem 1).

Inputs live in z-space (every input is a map from a standard normal z to log x; a Gaussian copula
correlates the z's with matrix Sigma), so X_J given X_{-J} is Gaussian in z with mean
Sigma_{J,-J} Sigma_{-J,-J}^{-1} z_{-J} and covariance the Schur complement
Sigma_JJ - Sigma_{J,-J} Sigma_{-J,-J}^{-1} Sigma_{-J,J} (Anderson 2003, "An Introduction to
Multivariate Statistical Analysis", Theorem 2.5.1).

Estimator (Song et al. 2016, Algorithm 1, exact subset enumeration, N_I = 3 inner draws): for each
outer draw z ~ N(0, Sigma) and every non-empty subset J, three values of z_J given z_{-J} (z's own z_J
and two conditional redraws; all three are i.i.d. given z_{-J}), and the unbiased sample variance of
f at them. Per draw the subsets share the outer draw and the two noise vectors (common random
numbers); f runs on the three together: 3 (2^d - 1) evaluations per outer draw, one trace of f. Each
block of draws is reduced on the device to the sums of q = (W v, v_all) and q q^T (W: the Shapley
weights; v: the per-subset sample variances); the effect is the ratio (W c) / c(all) and its standard
error comes from the delta method on those i.i.d. per-draw means (as :func:`mcflops.sensitivity.sobol_indices`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from functools import partial
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.model.compute import Model, evaluate
from mcflops.model.copula import z_correlation

SHAPLEY_BLOCK = 1 << 16  # outer draws per keyed block (part of the algorithm: changing it changes the draws)
SHAPLEY_OUTER = 1 << 16  # default outer draws N_O ...
SHAPLEY_EVALS = 1 << 22  # ... fewer when N_O 3 (2^d - 1) would exceed this many evaluations
MAX_INPUTS = 10  # 2^d subsets: beyond this, exact enumeration is too dear
_ID = engine.SHAPLEY


def conditional(Sigma: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """z' = A z + B e redraws z[free] given z[~free] (e ~ N(0, I)); z[~free] is kept.

    Gaussian conditioning (Anderson 2003, Theorem 2.5.1): mean K z_fixed with K = S_ff' S_f'f'^{-1},
    covariance S_ff - K S_f'f, whose Cholesky factor goes in B.
    """
    d = len(Sigma)
    f, k = np.flatnonzero(free), np.flatnonzero(~free)
    A, B = np.zeros((d, d)), np.zeros((d, d))
    A[np.ix_(k, k)] = np.eye(len(k))
    if len(f) == 0:
        return A, B
    if len(k):
        K = np.linalg.solve(Sigma[np.ix_(k, k)], Sigma[np.ix_(k, f)]).T  # Sigma_fk Sigma_kk^{-1}
        A[np.ix_(f, k)] = K
        C = Sigma[np.ix_(f, f)] - K @ Sigma[np.ix_(k, f)]
    else:
        C = Sigma[np.ix_(f, f)]
    B[np.ix_(f, f)] = np.linalg.cholesky(0.5 * (C + C.T))
    return A, B


def weights(d: int) -> np.ndarray:
    """W [d, 2^d - 1]: Sh_i Var(Y) = W[i] . c, c over the non-empty subsets (mask m at column m - 1).

    Song et al. 2016, Eq. 4: weight |J|! (d - |J| - 1)! / d! on c(J + i) - c(J) for J not containing i;
    c(empty) = 0 drops out.
    """
    W = np.zeros((d, (1 << d) - 1))
    for i in range(d):
        for J in range(1 << d):
            if J >> i & 1:
                continue
            s = J.bit_count()
            w = math.factorial(s) * math.factorial(d - s - 1) / math.factorial(d)
            W[i, (J | 1 << i) - 1] += w
            if J:
                W[i, J - 1] -= w
    return W


def structure(Sigma: np.ndarray) -> dict[str, np.ndarray]:
    """Per-subset conditional maps (A, B), the weights and Sigma's Cholesky factor, as float32 arrays."""
    d = len(Sigma)
    AB = [conditional(Sigma, np.array([(m >> i) & 1 for i in range(d)], bool)) for m in range(1, 1 << d)]
    return {"A": np.stack([a for a, _ in AB]).astype(np.float32), "B": np.stack([b for _, b in AB]).astype(np.float32),
            "W": weights(d).astype(np.float32), "L": np.linalg.cholesky(Sigma).astype(np.float32)}


def _block(key, params, st, block, n_valid, f, names, static, size):
    """Sums of q = (W v, v_all) and q q^T over one block of outer draws (per output row)."""
    d = len(names)
    E = engine.normals(jax.random.fold_in(jax.random.fold_in(key, _ID), block), (d, 3, size))  # one RNG call
    z0 = st["L"] @ E[:, 0]  # [d, size], z ~ N(0, Sigma)
    E12 = jnp.concatenate([E[:, 1], E[:, 2]], axis=1)  # [d, 2 size]
    z0two = jnp.concatenate([z0, z0], axis=1)

    def fz(Z):
        return f(params, {n: Z[i] for i, n in enumerate(names)}, *static)  # [m, columns]

    def per_subset(ab):
        A, B = ab
        F = fz(jnp.concatenate([z0, A @ z0two + B @ E12], axis=1))  # z0 and two redraws of z_J given z_-J
        f0, f1, f2 = F[:, :size], F[:, size:2 * size], F[:, 2 * size:]
        mean = (f0 + f1 + f2) / 3.0
        return 0.5 * (jnp.square(f0 - mean) + jnp.square(f1 - mean) + jnp.square(f2 - mean))  # unbiased, N_I = 3

    v = jax.lax.map(per_subset, (st["A"], st["B"]))  # [K, m, size]
    q = jnp.concatenate([jnp.einsum("ik,kms->mis", st["W"], v), v[-1][:, None, :]], axis=1)  # [m, d + 1, size]
    valid = (jnp.arange(size) < n_valid).astype(q.dtype)
    q = q * valid[None, None, :]
    return {"s": jnp.sum(q, axis=-1), "ss": jnp.einsum("mks,mls->mkl", q, q)}


@engine.program(static_argnames=("f", "names", "static", "size"))
def _call(key, params, st, blocks, n_valid, *, f, names, static, size):
    return jax.lax.map(lambda a: _block(key, params, st, a[0], a[1], f, names, static, size), (blocks, n_valid))


def default_outer(d: int) -> int:
    """Outer draws for d inputs: SHAPLEY_OUTER, fewer (a multiple of 1024) to stay within SHAPLEY_EVALS."""
    return int(min(SHAPLEY_OUTER, max(1024, SHAPLEY_EVALS // (3 * ((1 << d) - 1)) // 1024 * 1024)))


def shapley_sums(key: jax.Array, f: Callable, params: Any, names: tuple[str, ...], Sigma: np.ndarray, n: int, *,
                 static: tuple = (), size: int = SHAPLEY_BLOCK, blocks_per_call: int = 8,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Double-loop pass with n outer draws of the z's of ``names`` (correlation ``Sigma``).

    ``f(params, z, *static)`` maps a dict of z columns to [m, columns] outputs, as for
    :func:`mcflops.sensitivity.sobol_sums` (same hashing rules: one compile per structure).
    """
    d = len(names)
    if not 1 <= d <= MAX_INPUTS:
        raise ValueError(f"Shapley effects by exact enumeration need 1 to {MAX_INPUTS} inputs, got {d}")
    st = {k: jax.device_put(v) for k, v in structure(np.asarray(Sigma, np.float64)).items()}
    size = min(size, max(1024, n))
    call = partial(_call, key, params, st, f=f, names=tuple(names), static=tuple(static), size=size)
    s, ss = engine.sum_blocks(call, n, size, blocks_per_call, progress)
    return {"n": n, "names": tuple(names), "s": s, "ss": ss}


def shapley_effects(sums: Mapping[str, Any], row: int = 0) -> dict[str, Any]:
    """Effects of output ``row`` with delta-method standard errors: ``effect``, ``se``, ``cov``, ``variance``."""
    n = float(sums["n"])
    d = len(sums["names"])
    qbar = sums["s"][row] / n
    sigma = sums["ss"][row] / n - np.outer(qbar, qbar)  # per-draw covariance of q
    V = qbar[d]  # c(all) = E[sample variance of 3 i.i.d. draws] = Var(Y)
    if not V > 0:
        nan = np.full(d, np.nan)
        return {"effect": nan, "se": nan, "cov": np.full((d, d), np.nan), "variance": float(V)}
    est = qbar[:d] / V
    # The delta method on the d numerators alone: per draw sum_i (W v)_i = v_all (efficiency holds for any cost
    # function, so W's rows sum to the full set's column), hence est_i = m_i / sum_j m_j and
    # d est_i / d m_j = (delta_ij - est_i) / V. Written with v_all as a coordinate of its own, the se of an
    # effect near 1 is the difference of two nearly equal terms of float32 sums (Var(m_i) - 2 Cov(m_i, v_all)
    # + Var(v_all), with m_i ~ v_all), and came out as rounding noise (12% apart between two builds of XLA);
    # here it is the variance of the other inputs' numerators, with nothing to cancel.
    G = (np.eye(d) - est[:, None]) / V
    # an output spread over tens of orders of magnitude overflows entries of the second moments (inf in sigma,
    # met by a zero of G): a standard error that this leaves NaN is null in summary.json, not NumPy's warning
    with np.errstate(invalid="ignore", over="ignore"):
        cov = G @ sigma[:d, :d] @ G.T / n  # delta method: Var(g(qbar)) = G Sigma G^T / n
        se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return {"effect": est, "se": se, "cov": cov, "variance": float(V)}


def _model_f(model: Model, z: Mapping[str, jax.Array], output: str) -> jax.Array:
    """Rows: log output and output / its median - 1 (outputs are centred at the inputs' medians, so the
    log output is 0 there; the effects are free of shift and scale)."""
    y = evaluate(model, z)[output]
    return jnp.stack([y, jnp.expm1(y)])


def shapley(key: jax.Array, model: Model, output: str = "gpu_hours", n: int | None = None,
            names: tuple[str, ...] | None = None,
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Shapley effects of the model's output on the log scale (``log``) and the natural one (``linear``),
    under the model's copula (independent inputs without one)."""
    names = model.uncertain if names is None else tuple(names)
    n = default_outer(len(names)) if n is None else int(n)
    t0 = time.perf_counter()
    Sigma = z_correlation(model, names)
    plain = dataclasses.replace(model, copula=None)  # correlations enter through Sigma: one compile either way
    sums = shapley_sums(key, _model_f, plain, names, Sigma, n, static=(output,), progress=progress)
    out: dict[str, Any] = {"names": names, "n": n, "evaluations": n * 3 * ((1 << len(names)) - 1),
                           "correlated": bool(np.any(Sigma != np.eye(len(names)))),
                           "seconds": time.perf_counter() - t0}
    for row, scale in enumerate(("log", "linear")):
        out[scale] = shapley_effects(sums, row)
    return out


def shapley_table(ix: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """``{input: {effect, se}}`` for summary.json."""
    return {n: {"effect": float(ix["effect"][i]), "se": float(ix["se"][i])} for i, n in enumerate(names)}
