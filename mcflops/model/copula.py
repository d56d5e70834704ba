"""Correlated inputs: a Gaussian copula on the standard-normal scores z of named inputs.

Every input is a map z -> log x (samplers.py), so correlating inputs is correlating their z's:
``z_corr = L z`` with ``L`` the lower Cholesky factor of the correlation matrix R (``L L^T = R``),
which keeps each input's marginal prior exactly and gives the pair a Gaussian copula with
normal-score correlation ``rho`` (Nelsen 2006, "An Introduction to Copulas", Sec. 2.3; the Cholesky
construction: Glasserman 2003, "Monte Carlo Methods in Financial Engineering", Sec. 2.3.3).

The prior file's ``correlations:`` block (its grammar, and the check that R is positive definite) is
read at load: ``mcflops.spec.correlations``; here it is compiled. Spearman's rank correlation of a
Gaussian copula is ``rho_s = (6/pi) asin(rho/2)`` (Kruskal 1958, "Ordinal measures of association",
JASA 53, Eq. 4.4), whatever the marginals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mcflops.spec import Spec, correlation_matrix


@dataclass(frozen=True)
class Copula:
    """The compiled copula: which inputs (static) and the Cholesky factor (a leaf)."""

    names: tuple[str, ...]
    chol: Any  # [k, k] float32 jax array, lower triangular


def _register() -> None:
    import jax

    jax.tree_util.register_dataclass(Copula, data_fields=["chol"], meta_fields=["names"])


def from_spec(spec: Spec) -> Copula | None:
    """Compile the spec's correlations (checked at load; None when it has none)."""
    if not spec.correlations:
        return None
    from mcflops.model.samplers import to_device  # JAX, imported when a spec has correlations

    names, R = correlation_matrix(spec.priors, spec.correlations)
    L = np.linalg.cholesky(R)
    return Copula(names, to_device(L, np.float32))


def apply(model, z: dict) -> dict:
    """Correlate the z's of the copula's inputs (z_corr = L z); other inputs pass through unchanged."""
    c = getattr(model, "copula", None)
    if c is None:
        return z
    import jax.numpy as jnp

    zs = jnp.stack([z[n] for n in c.names])
    zc = jnp.tensordot(c.chol, zs, axes=1)
    return {**z, **{n: zc[i] for i, n in enumerate(c.names)}}


def z_correlation(model, names: tuple[str, ...]) -> np.ndarray:
    """The correlation matrix (float64) of the z's of ``names`` as the model draws them: the file's matrix
    (``spec.correlation_matrix``) on the copula's inputs, read back from the compiled factor, and the identity
    elsewhere (the analyses that condition on some inputs need it over theirs, in their order)."""
    S = np.eye(len(names))
    c = getattr(model, "copula", None)
    if c is None:
        return S
    L = np.asarray(c.chol, np.float64)
    R = L @ L.T
    sd = np.sqrt(np.diag(R))
    R = R / np.outer(sd, sd)  # the float32 factor leaves the diagonal 1 +- 1e-7: rescale it exactly
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j and a in c.names and b in c.names:
                S[i, j] = R[c.names.index(a), c.names.index(b)]
    return S


def spearman(rho: float) -> float:
    """Rank correlation of a Gaussian copula with normal-score correlation rho (Kruskal 1958)."""
    return 6.0 / math.pi * math.asin(rho / 2.0)


_register()
