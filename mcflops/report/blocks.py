"""The report's building blocks: inline text, paragraphs, tables, figures; numbers in a reader's units.

Blocks are plain data; :mod:`mcflops.report.markup` turns them into Markdown or HTML and escapes every
piece of text on the way (text from prior files and summary.json never becomes markup).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from mcflops.numbers import format_number

HEADLINE_FIGURE = "headline_gpu_hours.png"  # drawn by plots.report.headline
IMPLIED = "What the published figure implies"  # the posterior's section, named by the headline


class B(str):
    """Bold text."""


class C(str):
    """Code (a command, a file name, a field)."""


@dataclass
class P:
    parts: Sequence[Any]  # str (text), B (bold), C (code)
    cls: str | None = None  # "missing", "quote", "note"


@dataclass
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[Any]]  # each cell: a str or a list of inline parts
    num: frozenset[int] = frozenset()  # right-aligned (numeric) columns
    src: frozenset[int] = frozenset()  # long source-text columns
    caption: str | None = None
    stack: bool = False  # on a phone, each row becomes a stack of labelled cells (long text columns)


@dataclass
class Fig:
    name: str
    data: bytes
    caption: str


@dataclass
class Items:
    items: Sequence[Sequence[Any]]
    ordered: bool = False
    notes: bool = False  # each item is a note: the document states each note once (report.once)


@dataclass
class Sub:
    title: str


@dataclass
class Box:
    blocks: list
    cls: str = "headline"


@dataclass
class Section:
    id: str
    title: str
    blocks: list = field(default_factory=list)


@dataclass
class Document:
    title: str
    description: str
    meta: str
    sections: list[Section]


def missing(what: str, *more: Any) -> P:
    return P([f"Not computed: {what}", *more, "."], "missing")


# ---- numbers for a reader ---------------------------------------------------------------------


def num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def sig(x: float, d: int = 3) -> str:
    """d significant digits, trailing zeros kept: 28.0, 29.5, 0.0441, 123."""
    if abs(x) >= 10**d:
        return f"{x:,.0f}"
    t = f"{x:#.{d}g}"
    return t[:-1] if t.endswith(".") else t


def _parts(name: str, x: float, d: int) -> tuple[str, str, str]:
    """(prefix, number, unit suffix) of a quantity, in the units a reader expects."""
    if name == "gpu_hours":
        return "", f"{sig(x / 1e6, d)}M", ""  # accelerator-hours in millions
    if name in ("mfu", "goodput"):
        return "", f"{100 * x:.{max(d - 2, 1)}f}", "%"
    if name == "wall_days":
        return "", sig(x, d), " days"
    if name == "cost":
        return "$", format_number(x, d), ""
    if name == "price":
        return "$", f"{x:.2f}", "/h"
    if name == "energy_mwh":
        return "", f"{x:,.0f}" if x >= 100 else f"{x:.{d}g}", " MWh"
    if name == "power":  # watts per accelerator: 700 W, 1.2 kW (never "1.000K")
        return ("", f"{x / 1e3:.{d}g}", " kW") if x >= 999.5 else ("", f"{x:.{d}g}", " W")
    if name == "peak_flops":  # per accelerator in TFLOP/s, as datasheets give it: 989.4 TFLOP/s, 2,250 TFLOP/s
        t = x / 1e12
        return "", f"{t:,.0f}" if t >= 1e3 else f"{t:.{max(d, 4)}g}", " TFLOP/s"
    if name == "pue":
        return "", sig(x, d), ""
    return "", format_number(x, max(d, 3)), ""


def fmt(name: str, x: Any, d: int = 3) -> str:
    if not num(x):
        return "n/a"
    pre, core, suf = _parts(name, float(x), d)
    return f"{pre}{core}{suf}"


def interval(name: str, lo: Any, hi: Any, d: int = 3) -> str:
    """'25.6M–34.7M', '65.1–88.2 days', '35.1–45.0%'."""
    if not (num(lo) and num(hi)):
        return "n/a"
    p1, c1, s1 = _parts(name, float(lo), d)
    p2, c2, s2 = _parts(name, float(hi), d)
    return f"{p1}{c1}–{p2}{c2}{s2}" if s1 == s2 else f"{p1}{c1}{s1}–{p2}{c2}{s2}"


def ordinal(p: float) -> str:
    n = int(round(p))
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def stat(block: Any, name: str) -> dict | None:
    """The stats of one quantity (a dict with p5/p50/p95) or None."""
    d = block.get(name) if isinstance(block, Mapping) else None
    return d if isinstance(d, Mapping) and num(d.get("p50")) else None


def failed_checks(summary: Mapping) -> list[str] | None:
    """Why the run's posterior failed its checks (summary.json's posterior.checks), or None when it passed
    or there is none; a verdict without reasons still counts as failed."""
    post = summary.get("posterior")
    checks = post.get("checks") if isinstance(post, Mapping) else None
    if not isinstance(checks, Mapping) or checks.get("passed") is not False:
        return None
    why = checks.get("why")
    return [str(w) for w in why] if isinstance(why, list) and why else ["no reason recorded"]


def posterior_warning(why: Sequence[str]) -> P:
    """The warning a failed posterior opens with: what failed, and what not to quote."""
    return P([B("Warning: the posterior failed its checks"), f" ({'; '.join(why)}). Its numbers (the posterior "
              "MFU, goodput and every posterior column) are not reliable and should not be quoted; the prior "
              "predictive is unaffected."], "note")


def median_ci(name: str, st: Mapping | None) -> str:
    return f"{fmt(name, st['p50'])} (90%: {interval(name, st.get('p5'), st.get('p95'))})" if st else "n/a"


def label(name: str) -> str:
    return {"gpu_hours": "GPU-hours", "wall_days": "wall-clock days", "cost": "cost", "energy_mwh": "energy",
            "mfu": "MFU", "goodput": "goodput", "flops": "FLOPs", "tokens": "tokens (D)", "params": "parameters (N)",
            "peak_flops": "peak FLOP/s", "price": "price", "power": "power", "pue": "PUE"}.get(name, name)


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _count(run) -> int | None:
    spec = run.spec
    if spec is not None and spec.hardware.count:
        return int(spec.hardware.count)
    ch = run.summary.get("chain") or {}
    if num(ch.get("gpu_hours")) and num(ch.get("wall_days")) and ch["wall_days"] > 0:
        return int(round(ch["gpu_hours"] / ch["wall_days"] / 24.0))
    return None


def _accelerator(run) -> str:
    spec = run.spec
    if spec is not None and spec.hardware.accelerator:
        return f"{spec.hardware.accelerator} ({spec.hardware.precision})"
    return "accelerators"


# ---- figures ----------------------------------------------------------------------------------

_SENS = ("tornado", "sobol", "sweep", "fan", "plan", "sensitiv")
_POST = ("posterior", "prior", "ridge", "pair", "mfu", "goodput", "predictive", "density", "trace", "joint", "ppc")
_CAPTIONS = (("tornado", "Tornado: the median when one input moves to its p5 or p95, the others at their medians"),
             ("sobol", "Sobol indices: the share of the output's variance each input explains"),
             ("sweep", "Sweep (fan chart): output quantiles along a grid of one input, the rest sampled"),
             ("fan", "Sweep (fan chart): output quantiles along a grid of one input, the rest sampled"),
             ("plan", "Plan: probability of finishing against accelerator count"),
             ("ridge", "MFU against goodput under the posterior: the published figure fixes their product"),
             ("pair", "MFU against goodput under the posterior: the published figure fixes their product"),
             ("predictive", "GPU-hours: prior predictive and the published figure"),
             ("posterior", "Prior and posterior"))


def observes(run) -> bool:
    """The run is conditioned on something (an observation in summary.json or the prior file, or a
    posterior): otherwise it is a new run, and the report speaks of the priors alone."""
    s = run.summary
    spec_observes = bool(getattr(run.spec, "observe", None)) if run.spec is not None else False
    return bool(s.get("observed")) or bool(s.get("posterior")) or spec_observes


def headline_caption(run) -> str:
    """The headline figure's caption: what it shows for this run (a new run has no published figure)."""
    if not observes(run):
        return "GPU-hours under the priors alone (the prior predictive), in millions, with the napkin value"
    return "GPU-hours before (prior predictive) and after (posterior) the published figure, in millions"


def caption(name: str) -> str:
    low = name.lower()
    for key, text in _CAPTIONS:
        if key in low:
            return f"{text} ({name})"
    return name.rsplit(".", 1)[0].replace("_", " ").replace("-", " ").capitalize()


def _figs(run, words: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
    out = []
    for n in run.figures:
        low = n.lower()
        if n != HEADLINE_FIGURE and any(w in low for w in words) and not any(w in low for w in exclude):
            out.append(n)
    return out


def used_figures(run) -> set[str]:
    return {HEADLINE_FIGURE, "waterfall.png", *_figs(run, _SENS), *_figs(run, _POST, _SENS)}


def _fig_blocks(run, names: Sequence[str]) -> list:
    return [Fig(n, run.figures[n], caption(n)) for n in names]
