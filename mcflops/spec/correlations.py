"""The ``correlations:`` block: pairs of uncertain inputs and the normal-score correlation of a Gaussian copula.

The prior file says::

    correlations:
      - between: [mfu, goodput]
        rho: 0.5                # correlation of the normal scores (the Gaussian copula's parameter)
        source: "..."
      - between: [mfu, tokens]
        spearman: -0.3          # or a rank correlation, converted: rho = 2 sin(pi rho_s / 6)

Spearman's rank correlation of a Gaussian copula is ``rho_s = (6/pi) asin(rho/2)`` (Kruskal 1958,
"Ordinal measures of association", JASA 53, Eq. 4.4), whatever the marginals. Checked at load: names,
ranges, duplicates, and that the whole matrix is positive definite (so that its Cholesky factor,
``mcflops.model.copula``, exists).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import numpy as np

from mcflops.numbers import parse_number
from mcflops.spec.fields import Fields
from mcflops.spec.resolved import plain
from mcflops.spec.types import Correlation, Spec

ENTRY_KEYS = ("between", "rho", "spearman", "source")


def correlations_block(where: Fields, data: Mapping, spec: Spec) -> tuple[Correlation, ...]:
    """The file's ``correlations:`` entries (``spec``: the file's priors, known by now); () when absent."""
    node = data.get("correlations")
    if node is None:
        return ()
    if not isinstance(node, list):
        raise where.error("expected a list of {between: [input, input], rho: r}", data, "correlations",
                          "correlations")
    uncertain = spec.uncertain
    pairs: list[Correlation] = []
    seen: set[frozenset] = set()
    for i, e in enumerate(node):
        f = f"correlations[{i}]"
        if not isinstance(e, Mapping):
            raise where.error("expected {between: [input, input], rho: r, source: ...}", node, i, f)
        where.keys(e, ENTRY_KEYS, f)
        here = where.at(e, "between", f"{f}.between")
        b = e.get("between")
        if not isinstance(b, list) or len(b) != 2 or not all(isinstance(x, str) for x in b):
            raise here.error("expected between: [input, input], two input names", e,
                             "between" if "between" in e else None)
        if b[0] == b[1]:
            raise here.error(f"an input cannot be correlated with itself ('{b[0]}')")
        for x in b:
            if x not in spec.priors:
                raise here.error(f"'{x}' is not an input of this file (inputs: {', '.join(spec.priors)})")
            if x not in uncertain:
                raise here.error(f"'{x}' is a point mass here; only uncertain inputs can be correlated "
                                 f"({', '.join(uncertain)})")
        if ("rho" in e) == ("spearman" in e):
            raise where.error("give exactly one of rho (normal-score correlation) or spearman (rank "
                              "correlation)", e, None, f)
        which = "rho" if "rho" in e else "spearman"
        r = parse_number(e[which])
        if r is None or not -1.0 < r < 1.0:
            raise where.error(f"expected a number strictly between -1 and 1, got {e[which]!r}", e, which,
                              f"{f}.{which}")
        rho = r if which == "rho" else 2.0 * math.sin(math.pi * r / 6.0)  # Kruskal 1958: rho_s = 6/pi asin(rho/2)
        pair = frozenset(b)
        if pair in seen:
            raise here.error(f"the pair {b[0]}, {b[1]} is given twice")
        seen.add(pair)
        src = e.get("source")
        pairs.append(Correlation(str(b[0]), str(b[1]), float(rho), None if src is None else str(src), written=plain(e)))
    out = tuple(pairs)
    if out:
        names, R = correlation_matrix(spec.priors, out)
        eig = float(np.linalg.eigvalsh(R).min())
        if eig <= 1e-9:
            raise where.error(f"these correlations cannot hold together: the correlation matrix of "
                              f"{', '.join(names)} is not positive definite (smallest eigenvalue {eig:.3g}); "
                              "weaken some of them", data, "correlations", "correlations")
    return out


def correlation_matrix(inputs: Iterable[str], pairs: tuple[Correlation, ...]) -> tuple[tuple[str, ...], np.ndarray]:
    """The correlated inputs (in the order of ``inputs``, the file's) and their normal-score correlation matrix."""
    involved = {p.a for p in pairs} | {p.b for p in pairs}
    names = tuple(n for n in inputs if n in involved)
    R = np.eye(len(names))
    for p in pairs:
        i, j = names.index(p.a), names.index(p.b)
        R[i, j] = R[j, i] = p.rho
    return names, R
