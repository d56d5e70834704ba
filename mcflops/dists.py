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
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import closest
from .errors import kind as _kind
from .numbers import parse_number

Z95 = 1.6448536269514722  # standard normal 95% quantile: a [p5, p95] interval spans 2 * Z95 sd
FAMILIES = ("point", "uniform", "normal", "lognormal", "beta", "triangular", "pert", "mixture")
DIST_KEYS = FAMILIES + ("source", "low", "high", "weights")
_NAMED = {
    "uniform": (("low", "high"),),
    "normal": (("mean", "sd"),),
    "lognormal": (("median", "sigma"), ("mu", "sigma"), ("mean", "sd")),
    "beta": (("mean", "sd"), ("a", "b"), ("alpha", "beta")),
    "triangular": (("low", "mode", "high"),),
    "pert": (("low", "mode", "high"), ("low", "mode", "high", "lambda")),
}


@dataclass(frozen=True)
class Dist:
    """A validated prior: family, canonical parameters, optional truncation, its source."""

    family: str
    params: Mapping[str, float]
    low: float | None = None
    high: float | None = None
    components: tuple["Dist", ...] = ()
    weights: tuple[float, ...] = ()
    source: str | None = None
    line: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Canonical, resolved form (readable back by :func:`parse_dist`)."""
        if self.family == "mixture":
            d: dict[str, Any] = {"mixture": [c.to_dict() for c in self.components], "weights": list(self.weights)}
        elif self.family == "point":
            d = {"point": self.params["value"]}
        else:
            p = dict(self.params)
            if self.family == "pert":
                p["lambda"] = p.pop("lamb")
            d = {self.family: p}
        if self.low is not None:
            d["low"] = self.low
        if self.high is not None:
            d["high"] = self.high
        if self.source:
            d["source"] = self.source
        return d

    def describe(self) -> str:
        """One short human line: 'beta(a=106, b=159)', 'lognormal 90% [15T, 16.8T]'."""
        from .numbers import format_number as f

        p = self.params
        if self.family == "point":
            return f(p["value"])
        if self.family == "lognormal":
            s = f"lognormal 90% [{f(math.exp(p['mu'] - Z95 * p['sigma']))}, {f(math.exp(p['mu'] + Z95 * p['sigma']))}]"
        elif self.family == "normal":
            s = f"normal(mean {f(p['mean'])}, sd {f(p['sd'])})"
        elif self.family == "mixture":
            s = "mixture(" + ", ".join(f"{w:.2g}: {c.describe()}" for w, c in zip(self.weights, self.components)) + ")"
        else:
            s = f"{self.family}(" + ", ".join(f"{k}={f(v)}" for k, v in p.items()) + ")"
        if self.low is not None or self.high is not None:
            s += f" on [{f(self.low) if self.low is not None else '-inf'}, {f(self.high) if self.high is not None else 'inf'}]"
        return s


def support(d: Dist) -> tuple[float, float]:
    """The closed hull of the support."""
    p = d.params
    if d.family == "point":
        return p["value"], p["value"]
    if d.family in ("uniform", "triangular", "pert"):
        return p["low"], p["high"]
    if d.family == "beta":
        return 0.0, 1.0
    if d.family == "mixture":
        parts = [support(c) for c in d.components]
        return min(a for a, _ in parts), max(b for _, b in parts)
    lo = 0.0 if d.family == "lognormal" else -math.inf
    if d.low is not None:
        lo = max(lo, d.low)
    hi = math.inf if d.high is None else d.high
    return lo, hi


# The samplers' tables span z in [-8, 8] (distributions.ZMAX): the extreme values a prior can produce are
# its quantiles at Phi(-8) and Phi(8). scipy.special.ndtr(-8) = 6.22e-16.
TAIL_U = 6.220960574271785e-16


def tail_quantiles(d: Dist) -> tuple[float, float]:
    """The prior's quantiles at Phi(-8) and Phi(8) (float64): the extremes the samplers produce.

    The same functions as the sampler tables' (``quantiles.ppf``/``isf``; no JAX, no scipy.stats: the spec
    layer's rule), memoised per prior; tests/test_properties.py checks them against the tables' ends.
    """
    from .quantiles import tails

    return tails(d, TAIL_U)


def parse_dist(node: Any, field_: str, ctx, parent: Any = None, key: Any = None, *, depth: int = 0) -> Dist:
    """Parse one prior. ``ctx`` is the spec loader's context (it makes the one-line errors)."""
    line = ctx.line(parent, key) if parent is not None else None

    def err(message: str, where: Any = None, k: Any = None):
        return ctx.error(message, where if where is not None else parent, k if where is not None else key, field_)

    x = parse_number(node)
    if x is not None:
        return Dist("point", {"value": x}, line=line)
    if isinstance(node, list):
        raise err("a bare list is ambiguous: name the family, e.g. {lognormal: [p5, p95]} or {uniform: [low, high]}")
    if not isinstance(node, Mapping):
        raise err(f"expected a number or a prior like {{beta: [0.3, 0.5]}}, got {_kind(node)}")
    fams = [k for k in node if k in FAMILIES]
    unknown = [k for k in node if k not in DIST_KEYS]
    if unknown:
        k = unknown[0]
        raise err(f"unknown family or key '{k}'{closest(k, DIST_KEYS)} (families: {', '.join(FAMILIES)})", node, k)
    if len(fams) != 1:
        raise err("expected exactly one family (" + ", ".join(FAMILIES) + f"), got {len(fams)}"
                  + (f": {', '.join(fams)}" if fams else ""))
    fam = fams[0]
    source = node.get("source")
    if source is not None and not isinstance(source, str):
        raise err(f"expected source: to be text, got {_kind(source)}", node, "source")
    source = None if source is None else str(source)
    low = _num(node, "low", err) if "low" in node else None
    high = _num(node, "high", err) if "high" in node else None
    if (low is not None or high is not None) and fam not in ("normal", "lognormal"):
        raise err(f"low:/high: truncate normal or lognormal priors; {fam} has its own bounds", node,
                  "low" if "low" in node else "high")
    if "weights" in node and fam != "mixture":
        raise err("weights: belongs to a mixture", node, "weights")
    if low is not None and high is not None and not low < high:
        raise err(f"expected low < high, got low={low:g}, high={high:g}", node, "low")
    if fam == "lognormal" and low is not None and low < 0:
        raise err(f"a lognormal is positive; low must be >= 0, got {low:g}", node, "low")
    arg = node[fam]

    if fam == "mixture":
        if depth > 0:
            raise err("mixtures cannot be nested", node, fam)
        if not isinstance(arg, list) or len(arg) < 2:
            raise err("expected mixture: [<prior>, <prior>, ...] with at least two components", node, fam)
        comps = tuple(parse_dist(c, f"{field_}.mixture[{i}]", ctx, arg, i, depth=1) for i, c in enumerate(arg))
        w = node.get("weights")
        if w is None:
            weights = tuple(1.0 / len(comps) for _ in comps)
        else:
            if not isinstance(w, list) or len(w) != len(comps):
                raise err(f"expected {len(comps)} weights, one per component", node, "weights")
            ws = [parse_number(v) for v in w]
            if any(v is None or v < 0 for v in ws) or sum(ws) <= 0:
                raise err("expected non-negative weights with a positive sum", node, "weights")
            weights = tuple(v / sum(ws) for v in ws)
        return Dist("mixture", {}, components=comps, weights=weights, source=source, line=line)

    if fam == "point":
        v = parse_number(arg)
        if v is None:
            raise err(f"expected point: <number>, got {_kind(arg)}", node, fam)
        return Dist("point", {"value": v}, source=source, line=line)

    vals = _args(fam, arg, node, err)
    params = _canonical(fam, vals, lambda m: err(m, node, fam))
    if low is not None or high is not None:
        kept = truncated_mass(fam, params, low, high)
        if not kept >= MIN_TRUNCATED_MASS:
            raise err(f"low:/high: [{_g(low)}, {_g(high)}] keeps almost none of this {fam} (a share of {kept:.1e}); "
                      "check the bounds against the distribution", node, "low" if low is not None else "high")
    return Dist(fam, params, low=low, high=high, source=source, line=line)


MIN_TRUNCATED_MASS = 1e-6  # a truncation keeping less than this (beyond ~4.8 sd) is a mistake, not a prior


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def truncated_mass(fam: str, p: Mapping[str, float], low: float | None, high: float | None) -> float:
    """Probability that the untruncated normal/lognormal falls in [low, high] (erfc tails: no cancellation)."""
    if fam == "normal":
        loc, scale = p["mean"], p["sd"]
        a = -math.inf if low is None else (low - loc) / scale
        b = math.inf if high is None else (high - loc) / scale
    else:
        loc, scale = p["mu"], p["sigma"]
        a = -math.inf if low is None or low <= 0 else (math.log(low) - loc) / scale
        if high is not None and high <= 0:
            return 0.0
        b = math.inf if high is None else (math.log(high) - loc) / scale

    def upper(x: float) -> float:  # P(Z > x) = erfc(x / sqrt 2) / 2 (Abramowitz & Stegun 26.2.29)
        return 0.5 * math.erfc(x / math.sqrt(2.0))

    if a > 0:
        return upper(a) - upper(b)
    return upper(-b) - upper(-a) if b < 0 else 1.0 - upper(b) - upper(-a)


def _num(node: Mapping, key: str, err) -> float:
    x = parse_number(node[key])
    if x is None:
        raise err(f"expected a number for {key}, got {_kind(node[key])}", node, key)
    return x


def _args(fam: str, arg: Any, node: Mapping, err) -> dict[str, float]:
    """Positional list or named mapping -> named values (positional names are 'p5', 'p95' or the bounds)."""
    if isinstance(arg, list):
        names = {"uniform": ("low", "high"), "triangular": ("low", "mode", "high"),
                 "pert": ("low", "mode", "high")}.get(fam, ("p5", "p95"))
        if len(arg) != len(names):
            what = "a 90% interval [p5, p95]" if names == ("p5", "p95") else "[" + ", ".join(names) + "]"
            raise err(f"expected {fam}: {what}, got {len(arg)} values", node, fam)
        out = {}
        for i, (n, v) in enumerate(zip(names, arg)):
            x = parse_number(v)
            if x is None:
                raise err(f"expected a number for {n}, got {_kind(v)}", arg, i)
            out[n] = x
        return out
    if isinstance(arg, Mapping):
        forms = _NAMED[fam]
        keys = set(arg)
        for form in forms:
            if keys == set(form) or (fam == "pert" and keys == set(form)):
                out = {}
                for k in form:
                    x = parse_number(arg[k])
                    if x is None:
                        raise err(f"expected a number for {k}, got {_kind(arg[k])}", arg, k)
                    out[k] = x
                return out
        options = " or ".join("{" + ", ".join(f) + "}" for f in forms)
        raise err(f"{fam} takes {options}" + ("" if fam in ("uniform", "triangular", "pert") else " or [p5, p95]")
                  + f"; got {{{', '.join(map(str, arg))}}}", node, fam)
    raise err(f"expected {fam}: [p5, p95] or named parameters, got {_kind(arg)}", node, fam)


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


def fit_beta_interval(p5: float, p95: float, err=None) -> dict[str, float]:
    """The beta whose 5% and 95% quantiles are p5 and p95.

    Levenberg-Marquardt (Nocedal & Wright 2006, "Numerical Optimization", Sec. 10.3) in t = (log a, log b)
    on relative residuals: log x_p(a, b) - log(target) for a target below 1/2, log(1 - x_p(a, b)) -
    log(1 - target) above it, where 1 - x_p(a, b) = x_{1-p}(b, a) (I_x(a, b) = 1 - I_{1-x}(b, a),
    Abramowitz & Stegun 26.5.2): no quantile loses digits next to 0 or 1. x_p by scipy.special.betaincinv;
    Jacobian by central differences, step 1e-5 in t (truncation and rounding errors ~1e-10 relative: the
    last steps, Newton's once mu is small, still converge to the last bits). Start: the beta with the
    moments of the normal of the same 90% interval. No scipy.optimize (~0.9 s to import).
    """
    import numpy as np
    from scipy.special import betaincinv

    side = np.array([p5 >= 0.5, p95 >= 0.5])  # which end each target is measured from
    target = np.log(np.where(side, 1.0 - np.array([p5, p95]), [p5, p95]))  # 1 - p is exact for p >= 1/2
    probs = np.array([0.05, 0.95])

    def resid(t):  # t: (..., 2) log-parameters -> (..., 2) residuals
        t = np.asarray(t, np.float64)
        a, b = np.exp(t[..., :1]), np.exp(t[..., 1:])
        with np.errstate(all="ignore"):
            x = np.where(side, betaincinv(b, a, 1.0 - probs), betaincinv(a, b, probs))
            return np.log(x) - target

    def size(r):
        return float(np.max(np.abs(r))) if np.all(np.isfinite(r)) else math.inf

    m, sd = (p5 + p95) / 2, (p95 - p5) / (2 * Z95)
    k = max(m * (1 - m) / sd / sd - 1, 0.5)  # beta moments: var = m(1-m)/(a+b+1)
    t = np.log([m * k, (1 - m) * k]) if math.isfinite(k) else np.zeros(2)
    r = resid(t)
    h, mu = 1e-5, 1e-3
    shifts = np.array([[h, 0.0], [-h, 0.0], [0.0, h], [0.0, -h]])
    for _ in range(500):
        rr = resid(t + shifts)
        jac = np.column_stack([(rr[0] - rr[1]) / (2 * h), (rr[2] - rr[3]) / (2 * h)])  # d r_i / d t_j
        if not np.all(np.isfinite(jac)):
            break
        jtj, grad = jac.T @ jac, jac.T @ r
        while mu < 1e12:
            try:
                step = np.linalg.solve(jtj + mu * np.diag(np.diag(jtj) + 1e-300), -grad)  # Marquardt's scaling
            except np.linalg.LinAlgError:
                step = np.full(2, np.nan)
            step *= min(1.0, 1.0 / np.max(np.abs(step)))  # at most a factor e in a or b per step
            r_new = resid(t + step)
            if np.all(np.isfinite(step)) and size(r_new) < size(r):
                break
            mu *= 4.0
        else:
            break  # no step lowers the residual: converged (or no beta fits)
        t, r, mu = t + step, r_new, max(mu / 8.0, 1e-12)
        if size(r) <= 2e-16 or (mu < 1e-6 and np.max(np.abs(step)) < 1e-13):  # Newton's regime: quadratic
            break
    a, b = (float(x) for x in np.exp(t))
    if not size(r) <= 1e-9:  # both quantiles to 1e-9 relative (of p or 1 - p, whichever is smaller)
        msg = f"no beta has 5% and 95% quantiles [{p5:g}, {p95:g}]"
        if err is None:
            raise ValueError(msg)
        raise err(msg)
    return {"a": a, "b": b}
