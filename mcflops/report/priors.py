"""How the report states a prior in words: a fixed value in its unit (700 W, 405.9B), a prior derived by a
recipe (a parallel layout's MFU, a failures model's goodput, the calibrated prior) or any long mixture by its
quantiles and where it comes from, never as its list of mixture components; anything else as the prior file
wrote it (``Dist.describe``).

Reads the resolved spec only; the quantiles are the prior's own (priors.quantiles.ppf), not Monte Carlo ones.
"""

from __future__ import annotations

from typing import Any

from mcflops.numbers import format_number
from mcflops.priors import calibrated
from mcflops.report.blocks import fmt, interval

LONG_MIXTURE = 4  # a mixture of more parts than this is a quantile table: stated by its quantiles (the same
# rule as analysis.scenarios', which summarises compare.json's priors; that module brings JAX, so not imported)

_UNITS = ("power", "pue", "peak_flops", "price", "mfu", "goodput")  # quantities blocks.fmt puts in units


def value(name: str, x: Any) -> str:
    """A fixed value in the quantity's unit: '700 W', '1.10', '989.4 TFLOP/s', '405.9B'."""
    return fmt(name, x, 4 if name in ("peak_flops",) else 3) if name in _UNITS else format_number(float(x), 4)


def quantiles(d) -> tuple[float, float, float]:
    """The prior's p5, median and p95 (exact: the prior's quantile function)."""
    from mcflops.priors.quantiles import ppf

    q = ppf(d, [0.05, 0.5, 0.95])
    return float(q[0]), float(q[1]), float(q[2])


def recipe(name: str, spec) -> str | None:
    """What a count-dependent prior is derived from, in words; None for a prior the file states itself."""
    r = (getattr(spec, "count_dependent", None) or {}).get(name)
    if r is None:
        return None
    count = getattr(r, "count", None) or getattr(spec.hardware, "count", None)
    at = f" at {int(count):,} accelerators" if count else ""
    lo = getattr(r, "layout", None)
    if lo is not None:
        parts = [f"{k} {getattr(lo, k)}" for k in ("tp", "pp", "vpp", "cp", "ep") if getattr(lo, k, None) not in
                 (None, 1) or k in ("tp", "pp")]
        if getattr(lo, "global_batch", None):
            parts.append(f"global batch {lo.global_batch:,}")
        return f"derived from the parallel layout ({', '.join(parts)}) by the step-time model{at}"
    return f"derived from the failures model{at}"


def words(name: str, d, spec=None) -> str:
    """The prior column of the assumptions table."""
    if d.family == "point":
        return value(name, d.params["value"])
    short = calibrated.describe(d)
    if short:  # the calibrated prior names itself (effective utilization, the runs it was fitted on)
        return short
    how = recipe(name, spec) if spec is not None else None
    long = d.family == "mixture" and len(d.components) > LONG_MIXTURE
    if how is None and not long:
        return d.describe()
    lo, mid, hi = quantiles(d)
    what = how or f"a quantile table ({len(d.components)} parts)"
    return f"{what}: median {fmt(name, mid)}, 90% {interval(name, lo, hi)}"


_DERIVED = {"layout": "derived from its parallel layout", "failures": "derived from its failures model",
            "calibrated": calibrated.LABEL + ", the calibrated prior"}


def summarized(name: str, summary: Any, text: Any) -> str:
    """A prior from compare.json (analysis.scenarios' ``summary``: a fixed value, or a derived prior's
    quantiles): in a reader's units; ``text`` (the prior as written) when there is no summary."""
    if not isinstance(summary, dict):
        return "absent" if text is None else str(text)
    if "value" in summary:
        return value(name, summary["value"])
    what = _DERIVED.get(summary.get("derived")) or f"a quantile table ({summary.get('parts') or '?'} parts)"
    return (f"{what}: median {fmt(name, summary.get('p50'))}, "
            f"90% {interval(name, summary.get('p5'), summary.get('p95'))}")
