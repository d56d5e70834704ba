"""Prior families as data: parse what a prior file says into canonical parameters. No JAX here.

Each family accepts its natural parameters and, where it makes sense, a 90% interval ``[p5, p95]``
(Squiggle's ``a to b``). Canonical parameters:

=========== ============================ ==================================================
family      canonical                    accepted forms
=========== ============================ ==================================================
point       value                        ``405.9e9``, ``{point: 405.9e9}``
uniform     low, high                    ``[low, high]`` (the support), ``{low, high}``
normal      mean, sd (+ low/high)        ``[p5, p95]``, ``{mean, sd}``
lognormal   mu, sigma of log (+ low/high) ``[p5, p95]``, ``{median, sigma}``, ``{mu, sigma}``, ``{mean, sd}``
beta        a, b                         ``[p5, p95]``, ``{mean, sd}``, ``{a, b}``
triangular  low, mode, high              ``[low, mode, high]``, ``{low, mode, high}``
pert        low, mode, high, lamb        ``[low, mode, high]``, ``{low, mode, high, lambda}`` (lambda 4)
mixture     components, weights          ``{mixture: [<prior>, <prior>], weights: [0.7, 0.3]}``
=========== ============================ ==================================================

``low:``/``high:`` beside ``normal`` or ``lognormal`` truncate it; the interval or parameters describe
the distribution before truncation.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from mcflops.errors import kind
from mcflops.numbers import parse_number
from mcflops.priors.dist import MIN_TRUNCATED_MASS, Z95, Dist, truncated_mass
from mcflops.priors.fits import fit_beta_interval
from mcflops.spec.fields import Fields

FAMILIES = ("point", "uniform", "normal", "lognormal", "beta", "triangular", "pert", "mixture")
DIST_KEYS = FAMILIES + ("source", "low", "high", "weights")
WEIGHTS_TOLERANCE = 1e-9  # mixture weights sum to 1 within this (decimal weights like 0.1 x 10 sum to 1 - 1e-16)
_NAMED = {
    "uniform": (("low", "high"),),
    "normal": (("mean", "sd"),),
    "lognormal": (("median", "sigma"), ("mu", "sigma"), ("mean", "sd")),
    "beta": (("mean", "sd"), ("a", "b"), ("alpha", "beta")),
    "triangular": (("low", "mode", "high"),),
    "pert": (("low", "mode", "high"), ("low", "mode", "high", "lambda")),
}


def parse_dist(node: Any, field_: str, where: Fields, parent: Any = None, key: Any = None, *,
               depth: int = 0) -> Dist:
    """Parse one prior, ``parent[key]`` (its line) called ``field_``; errors name them (``where``: the file)."""
    line = where.line(parent, key) if parent is not None else None
    here = where.at(parent, key, field_)

    x = parse_number(node)
    if x is not None:
        return Dist("point", {"value": x}, line=line)
    if isinstance(node, list):
        raise here.error("a bare list is ambiguous: name the family, e.g. {lognormal: [p5, p95]} or "
                         "{uniform: [low, high]}")
    if not isinstance(node, Mapping):
        raise here.error(f"expected a number or a prior like {{beta: [0.3, 0.5]}}, got {kind(node)}")
    fams = [k for k in node if k in FAMILIES]
    here.keys(node, DIST_KEYS, what="family or key", listing=f"families: {', '.join(FAMILIES)}", per_key=False)
    if len(fams) != 1:
        raise here.error("expected exactly one family (" + ", ".join(FAMILIES) + f"), got {len(fams)}"
                         + (f": {', '.join(fams)}" if fams else ""))
    fam = fams[0]
    source = here.text(node, "source", expected="source: to be text")
    low = here.number(node, "low", expected="a number for low") if "low" in node else None
    high = here.number(node, "high", expected="a number for high") if "high" in node else None
    if (low is not None or high is not None) and fam not in ("normal", "lognormal"):
        raise here.error(f"low:/high: truncate normal or lognormal priors; {fam} has its own bounds", node,
                         "low" if "low" in node else "high")
    if "weights" in node and fam != "mixture":
        raise here.error("weights: belongs to a mixture", node, "weights")
    if low is not None and high is not None and not low < high:
        raise here.error(f"expected low < high, got low={low:g}, high={high:g}", node, "low")
    if fam == "lognormal" and low is not None and low < 0:
        raise here.error(f"a lognormal is positive; low must be >= 0, got {low:g}", node, "low")
    arg = node[fam]

    if fam == "mixture":
        if depth > 0:
            raise here.error("mixtures cannot be nested", node, fam)
        if not isinstance(arg, list) or len(arg) < 2:
            raise here.error("expected mixture: [<prior>, <prior>, ...] with at least two components", node, fam)
        comps = tuple(parse_dist(c, f"{field_}.mixture[{i}]", where, arg, i, depth=1) for i, c in enumerate(arg))
        w = node.get("weights")
        if w is None:
            weights = tuple(1.0 / len(comps) for _ in comps)
        else:
            if not isinstance(w, list) or len(w) != len(comps):
                raise here.error(f"expected {len(comps)} weights, one per component", node, "weights")
            ws = [parse_number(v) for v in w]
            if any(v is None or v < 0 for v in ws) or sum(ws) <= 0:
                raise here.error("expected non-negative weights with a positive sum", node, "weights")
            # Weights are probabilities: [0.7, 0.2] is more likely a lost 0.1 than a ratio to normalise. Each
            # is checked before summing, so that [1e308, 1e308] cannot overflow the sum.
            total = math.fsum(ws) if all(v <= 1 + WEIGHTS_TOLERANCE for v in ws) else math.inf
            if not abs(total - 1) <= WEIGHTS_TOLERANCE:
                shown = " + ".join(f"{v:g}" for v in ws) + (f" = {total:.10g}" if math.isfinite(total) else "")
                raise here.error(f"expected mixture weights that sum to 1, got {shown}", node, "weights")
            weights = tuple(v / sum(ws) for v in ws)
        return Dist("mixture", {}, components=comps, weights=weights, source=source, line=line)

    if fam == "point":
        v = parse_number(arg)
        if v is None:
            raise here.error(f"expected point: <number>, got {kind(arg)}", node, fam)
        return Dist("point", {"value": v}, source=source, line=line)

    vals = _args(fam, arg, node, here)
    params = _canonical(fam, vals, lambda m: here.error(m, node, fam))
    if low is not None or high is not None:
        kept = truncated_mass(fam, params, low, high)
        if not kept >= MIN_TRUNCATED_MASS:
            raise here.error(f"low:/high: [{_g(low)}, {_g(high)}] keeps almost none of this {fam} (a share of {kept:.1e}); "
                      "check the bounds against the distribution", node, "low" if low is not None else "high")
    return Dist(fam, params, low=low, high=high, source=source, line=line)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def _args(fam: str, arg: Any, node: Mapping, here: Fields) -> dict[str, float]:
    """Positional list or named mapping -> named values (positional names are 'p5', 'p95' or the bounds)."""
    if isinstance(arg, list):
        names = {"uniform": ("low", "high"), "triangular": ("low", "mode", "high"),
                 "pert": ("low", "mode", "high")}.get(fam, ("p5", "p95"))
        if len(arg) != len(names):
            what = "a 90% interval [p5, p95]" if names == ("p5", "p95") else "[" + ", ".join(names) + "]"
            raise here.error(f"expected {fam}: {what}, got {len(arg)} values", node, fam)
        return {n: here.number(arg, i, expected=f"a number for {n}") for i, n in enumerate(names)}
    if isinstance(arg, Mapping):
        forms = _NAMED[fam]
        keys = set(arg)
        for form in forms:
            if keys == set(form) or (fam == "pert" and keys == set(form)):
                return {k: here.number(arg, k, expected=f"a number for {k}") for k in form}
        options = " or ".join("{" + ", ".join(f) + "}" for f in forms)
        raise here.error(f"{fam} takes {options}" + ("" if fam in ("uniform", "triangular", "pert") else " or [p5, p95]")
                         + f"; got {{{', '.join(map(str, arg))}}}", node, fam)
    raise here.error(f"expected {fam}: [p5, p95] or named parameters, got {kind(arg)}", node, fam)


def _canonical(fam: str, v: dict[str, float], err) -> dict[str, float]:
    if "p5" in v:
        p5, p95 = v["p5"], v["p95"]
        if not p5 < p95:
            raise err(f"a 90% interval needs p5 < p95, got [{p5:g}, {p95:g}]")
    if fam == "uniform":
        if not v["low"] < v["high"]:
            raise err(f"expected low < high, got [{v['low']:g}, {v['high']:g}]")
        return {"low": v["low"], "high": v["high"]}
    if fam == "normal":
        if "p5" in v:
            return {"mean": (v["p5"] + v["p95"]) / 2, "sd": (v["p95"] - v["p5"]) / (2 * Z95)}
        if v["sd"] <= 0:
            raise err(f"expected sd > 0, got {v['sd']:g}")
        return {"mean": v["mean"], "sd": v["sd"]}
    if fam == "lognormal":
        if "p5" in v:
            if v["p5"] <= 0:
                raise err(f"a lognormal interval needs bounds > 0, got [{v['p5']:g}, {v['p95']:g}]")
            lo, hi = math.log(v["p5"]), math.log(v["p95"])
            return {"mu": (lo + hi) / 2, "sigma": (hi - lo) / (2 * Z95)}
        if "median" in v:
            if v["median"] <= 0 or v["sigma"] <= 0:
                raise err("expected median > 0 and sigma > 0")
            return {"mu": math.log(v["median"]), "sigma": v["sigma"]}
        if "mu" in v:
            if v["sigma"] <= 0:
                raise err(f"expected sigma > 0, got {v['sigma']:g}")
            return {"mu": v["mu"], "sigma": v["sigma"]}
        if v["mean"] <= 0 or v["sd"] <= 0:
            raise err("expected mean > 0 and sd > 0")
        s2 = math.log1p((v["sd"] / v["mean"]) ** 2)  # lognormal moments: var = (e^{s^2}-1) e^{2mu+s^2}
        return {"mu": math.log(v["mean"]) - s2 / 2, "sigma": math.sqrt(s2)}
    if fam == "beta":
        if "p5" in v:
            if not 0 < v["p5"] < v["p95"] < 1:
                raise err(f"a beta interval needs 0 < p5 < p95 < 1, got [{v['p5']:g}, {v['p95']:g}]")
            return fit_beta_interval(v["p5"], v["p95"], err)
        if "mean" in v:
            m, sd = v["mean"], v["sd"]
            if not 0 < m < 1 or sd <= 0:
                raise err(f"expected 0 < mean < 1 and sd > 0, got mean={m:g}, sd={sd:g}")
            if sd * sd >= m * (1 - m):
                raise err(f"no beta has mean {m:g} and sd {sd:g} (sd must be < sqrt(mean*(1-mean)) = "
                          f"{math.sqrt(m * (1 - m)):.3g})")
            k = m * (1 - m) / (sd * sd) - 1  # beta moments: var = m(1-m)/(a+b+1)
            return {"a": m * k, "b": (1 - m) * k}
        a, b = (v["a"], v["b"]) if "a" in v else (v["alpha"], v["beta"])
        if a <= 0 or b <= 0:
            raise err(f"expected a > 0 and b > 0, got a={a:g}, b={b:g}")
        return {"a": a, "b": b}
    # triangular, pert
    lo, mode, hi = v["low"], v["mode"], v["high"]
    if not (lo <= mode <= hi and lo < hi):
        raise err(f"expected low <= mode <= high and low < high, got [{lo:g}, {mode:g}, {hi:g}]")
    out = {"low": lo, "mode": mode, "high": hi}
    if fam == "pert":
        lam = v.get("lambda", 4.0)
        if lam <= 0:
            raise err(f"expected lambda > 0, got {lam:g}")
        out["lamb"] = lam
    return out


