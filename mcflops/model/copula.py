"""Correlated inputs: a Gaussian copula on the standard-normal scores z of named inputs.

Every input is a map z -> log x (distributions.py), so correlating inputs is correlating their z's:
``z_corr = L z`` with ``L`` the lower Cholesky factor of the correlation matrix R (``L L^T = R``),
which keeps each input's marginal prior exactly and gives the pair a Gaussian copula with
normal-score correlation ``rho`` (Nelsen 2006, "An Introduction to Copulas", Sec. 2.3; the Cholesky
construction: Glasserman 2003, "Monte Carlo Methods in Financial Engineering", Sec. 2.3.3).

The prior file says::

    correlations:
      - between: [mfu, goodput]
        rho: 0.5                # correlation of the normal scores (the Gaussian copula's parameter)
        source: "..."
      - between: [mfu, tokens]
        spearman: -0.3          # or a rank correlation, converted: rho = 2 sin(pi rho_s / 6)

Spearman's rank correlation of a Gaussian copula is ``rho_s = (6/pi) asin(rho/2)`` (Kruskal 1958,
"Ordinal measures of association", JASA 53, Eq. 4.4), whatever the marginals. Validation is plain
Python (no JAX): names, ranges, duplicates, and positive definiteness of the whole matrix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from mcflops.errors import SpecError
from mcflops.spec.reader import line_of

ENTRY_KEYS = ("between", "rho", "spearman", "source")


def error_at(spec, message: str, node: Any = None, key: Any = None, field: str | None = None) -> SpecError:
    """A SpecError naming the spec's file, the line of ``node[key]`` when known, and the field."""
    return SpecError(message, path=getattr(spec, "path", None), line=line_of(node, key), field=field)


@dataclass(frozen=True)
class Copula:
    """The compiled copula: which inputs (static) and the Cholesky factor (a leaf)."""

    names: tuple[str, ...]
    chol: Any  # [k, k] float32 jax array, lower triangular


def _register() -> None:
    import jax

    jax.tree_util.register_dataclass(Copula, data_fields=["chol"], meta_fields=["names"])


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    rho: float  # normal-score correlation
    source: str | None = None


def parse(spec) -> tuple[Pair, ...]:
    """Validate ``correlations:`` (spec.extras) and return its pairs; () when absent."""
    node = spec.extras.get("correlations") if spec.extras else None
    if node is None:
        return ()
    raw = spec.raw if isinstance(spec.raw, Mapping) else {}
    if not isinstance(node, list):
        raise error_at(spec, "expected a list of {between: [input, input], rho: r}", raw, "correlations",
                       "correlations")
    uncertain = [n for n, d in spec.priors.items() if d.family != "point"]
    pairs: list[Pair] = []
    seen: set[frozenset] = set()
    for i, e in enumerate(node):
        f = f"correlations[{i}]"
        if not isinstance(e, Mapping):
            raise error_at(spec, "expected {between: [input, input], rho: r, source: ...}", node, i, f)
        for k in e:
            if k not in ENTRY_KEYS:
                raise error_at(spec, f"unknown key '{k}' (expected one of: {', '.join(ENTRY_KEYS)})", e, k,
                               f"{f}.{k}")
        b = e.get("between")
        if not isinstance(b, list) or len(b) != 2 or not all(isinstance(x, str) for x in b):
            raise error_at(spec, "expected between: [input, input], two input names", e,
                           "between" if "between" in e else None, f"{f}.between")
        if b[0] == b[1]:
            raise error_at(spec, f"an input cannot be correlated with itself ('{b[0]}')", e, "between",
                           f"{f}.between")
        for x in b:
            if x not in spec.priors:
                raise error_at(spec, f"'{x}' is not an input of this file (inputs: {', '.join(spec.priors)})",
                               e, "between", f"{f}.between")
            if x not in uncertain:
                raise error_at(spec, f"'{x}' is a point mass here; only uncertain inputs can be correlated "
                               f"({', '.join(uncertain)})", e, "between", f"{f}.between")
        if ("rho" in e) == ("spearman" in e):
            raise error_at(spec, "give exactly one of rho (normal-score correlation) or spearman (rank "
                           "correlation)", e, None, f)
        which = "rho" if "rho" in e else "spearman"
        from mcflops.numbers import parse_number

        r = parse_number(e[which])
        if r is None or not -1.0 < r < 1.0:
            raise error_at(spec, f"expected a number strictly between -1 and 1, got {e[which]!r}", e, which,
                           f"{f}.{which}")
        rho = r if which == "rho" else 2.0 * math.sin(math.pi * r / 6.0)  # Kruskal 1958: rho_s = 6/pi asin(rho/2)
        pair = frozenset(b)
        if pair in seen:
            raise error_at(spec, f"the pair {b[0]}, {b[1]} is given twice", e, "between", f"{f}.between")
        seen.add(pair)
        src = e.get("source")
        pairs.append(Pair(b[0], b[1], float(rho), None if src is None else str(src)))
    return tuple(pairs)


def matrix(spec, pairs: tuple[Pair, ...]) -> tuple[tuple[str, ...], np.ndarray]:
    """The inputs involved (in file order) and their normal-score correlation matrix; checks it is PD."""
    involved = {p.a for p in pairs} | {p.b for p in pairs}
    names = tuple(n for n in spec.priors if n in involved)
    R = np.eye(len(names))
    for p in pairs:
        i, j = names.index(p.a), names.index(p.b)
        R[i, j] = R[j, i] = p.rho
    eig = float(np.linalg.eigvalsh(R).min())
    if eig <= 1e-9:
        raw = spec.raw if isinstance(spec.raw, Mapping) else {}
        raise error_at(spec, f"these correlations cannot hold together: the correlation matrix of "
                       f"{', '.join(names)} is not positive definite (smallest eigenvalue {eig:.3g}); "
                       "weaken some of them", raw, "correlations", "correlations")
    return names, R


def from_spec(spec) -> Copula | None:
    """Validate and compile the spec's correlations (None when it has none)."""
    pairs = parse(spec)
    if not pairs:
        return None
    import jax.numpy as jnp

    names, R = matrix(spec, pairs)
    L = np.linalg.cholesky(R)
    return Copula(names, jnp.asarray(L, jnp.float32))


def apply(model, z: dict) -> dict:
    """Correlate the z's of the copula's inputs (z_corr = L z); other inputs pass through unchanged."""
    c = getattr(model, "copula", None)
    if c is None:
        return z
    import jax.numpy as jnp

    zs = jnp.stack([z[n] for n in c.names])
    zc = jnp.tensordot(c.chol, zs, axes=1)
    return {**z, **{n: zc[i] for i, n in enumerate(c.names)}}


def spearman(rho: float) -> float:
    """Rank correlation of a Gaussian copula with normal-score correlation rho (Kruskal 1958)."""
    return 6.0 / math.pi * math.asin(rho / 2.0)


_register()
