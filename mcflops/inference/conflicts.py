"""Observations that no prior draw can explain, and which priors stand behind them."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from mcflops import chain
from mcflops.engine import summary
from mcflops.errors import SpecError


def behind(spec, name: str) -> tuple[list[str], list[str]]:
    """(uncertain, fixed) inputs that an observed quantity depends on."""
    deps = [d for d in chain.depends(name, spec.flops) if d in spec.priors]
    return [d for d in deps if d in spec.uncertain], [d for d in deps if d not in spec.uncertain]


def _prior_range(sums, centers: Mapping[str, float], name: str) -> tuple[float, float]:
    """Smallest and largest prior draw of a quantity (to a histogram bin), or its fixed value."""
    if name not in sums.names:
        v = math.exp(centers[name])
        return v, v
    i = sums.names.index(name)
    h = np.asarray(sums.prior["hist"][i])
    nz = np.flatnonzero(h > 0)
    lo = sums.lo[i] + (max(nz[0], 1) - 1) * sums.width[i]
    hi = sums.lo[i] + min(nz[-1], len(h) - 2) * sums.width[i]
    return math.exp(centers[name] + lo), math.exp(centers[name] + hi)


def conflicts(spec, centers: Mapping[str, float], sums) -> list[str]:
    """One line per observation that lies outside every prior draw (naming the priors behind it)."""
    from mcflops.numbers import format_number as fmt

    out = []
    for i, (name, o) in enumerate(spec.observe.items()):
        a, b = _prior_range(sums, centers, name)
        unc, fixed = behind(spec, name)
        priors = (f"the prior{'s' if len(unc) > 1 else ''} of {', '.join(unc)}" if unc else "no uncertain input")
        if fixed:
            priors += f" (with {', '.join(fixed)} fixed)"
        if o.noise == "between":
            if sums.inside[i] > 0:
                continue
            where = f"[{fmt(o.low)}, {fmt(o.high)}]"
        else:
            pct = summary.percentile_of(sums, i)
            if 0.0 < pct < 100.0:
                continue
            where = fmt(o.value)
        out.append(f"observe.{name} {where} lies outside every prior draw of {name} "
                   f"({fmt(a)} to {fmt(b)}, set by {priors})")
    return out


def no_draw_error(spec, centers: Mapping[str, float], sums, lik) -> SpecError:
    """The one-line error when no prior draw has a positive likelihood."""
    lines = conflicts(spec, centers, sums)
    # the line of the first observation named (the loader kept each observation's line): the file's line to fix
    named = [o.line for n, o in spec.observe.items() if any(t.startswith(f"observe.{n} ") for t in lines)]
    line = named[0] if named else next(iter(spec.observe.values())).line if spec.observe else None
    if not lines:
        inside = ", ".join(f"{n} {float(sums.inside[i] / sums.n):.3g}" for i, n in enumerate(lik.names)
                           if lik.kinds[i] == "between")
        lines = [f"the observations {', '.join(lik.names)} are each possible, but no prior draw satisfies all of "
                 f"them together (prior probability inside each interval: {inside})"]
    return SpecError("no prior draw can explain the observations: " + "; ".join(lines)
                     + "; widen those priors or check the observed values", path=spec.path, line=line,
                     field="observe")


SCOPE_RANGE = (1.0, 99.0)  # a published figure outside the prior's 1-99% range: the two disagree


def scope_warnings(spec, sums) -> list[str]:
    """One warning per observation the prior predictive puts in its outer 1% on either side (or an interval
    it gives under 1% of its mass): the figure and the priors disagree, most often because the figure counts
    something else (pre-training only, every stage, downtime) than the priors do."""
    from mcflops.numbers import format_number as fmt

    out = []
    for i, (name, o) in enumerate(spec.observe.items()):
        if o.noise == "between":
            inside = float(sums.inside[i] / sums.n)
            if inside >= SCOPE_RANGE[0] / 100:
                continue
            where = f"[{fmt(o.low)}, {fmt(o.high)}] holds {100 * inside:.2g}% of the prior predictive"
        else:
            pct = summary.percentile_of(sums, i)
            if SCOPE_RANGE[0] <= pct <= SCOPE_RANGE[1]:
                continue
            where = f"{fmt(o.value)} sits at the {pct:.1f}th percentile of the prior predictive"
        out.append(f"WARNING: the published {name} {where}, outside its 1-99% range: the priors and the figure "
                   f"disagree; check the figure's scope (which stages, which hardware, downtime included) and the "
                   f"priors behind it ({', '.join(behind(spec, name)[0]) or 'none uncertain'}) before reading the "
                   "posterior")
    return out
