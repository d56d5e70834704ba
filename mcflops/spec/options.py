"""The ``sensitivity:`` and ``plan:`` blocks, checked at load; the command line's values through the same checks.

A file's block becomes :class:`SensitivityOptions` / :class:`PlanOptions` on the Spec. A command line
that overrides some of them (``--output``, ``--sweep``, ``--deadline-days``, ...) asks
:func:`sensitivity_options` / :func:`plan_options` for new options: the file's block (as written) and
the command line's values are checked together, the same way, and an error names the flag.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from mcflops.errors import kind
from mcflops.numbers import parse_number
from mcflops.spec.fields import Fields
from mcflops.spec.resolved import plain
from mcflops.spec.types import INPUTS, SOBOL_BASE, SWEEP_POINTS, PlanOptions, SensitivityOptions, Spec

SENSITIVITY_KEYS = ("output", "sobol_samples", "points", "sweep")
PLAN_KEYS = ("deadline_days", "prob", "gpus", "budget_hours", "budget_usd")


def flag(arg: str) -> str:
    """The command-line flag of an option's Python argument: how an error names it unless the caller (the
    API) names its own arguments."""
    return {"sweeps": "--sweep"}.get(arg, "--" + arg.replace("_", "-"))


# ----------------------------------------------------------------------------- sensitivity:

def sensitivity_block(where: Fields, data: Mapping, spec: Spec) -> SensitivityOptions:
    """The file's ``sensitivity:`` block (``spec``: the file's priors and outputs, known by now)."""
    if "sensitivity" not in data:
        return SensitivityOptions()
    return _sensitivity(where, data, spec)


def sensitivity_options(spec: Spec, *, output: str | None = None,
                        sweeps: list[str] | Mapping[str, Any] | None = None, points: int | None = None,
                        sobol_samples: int | None = None, label: Callable[[str], str] = flag) -> SensitivityOptions:
    """The spec's sensitivity options, with the command line's values (None: the file's). ``sweeps`` are
    ``mfu=0.30:0.45`` (a grid of ``points`` values) or ``mfu=0.40,0.30`` (those values), or a mapping in the
    file's own terms (``{"mfu": [0.30, 0.45]}``, ``{"mfu": {"values": [0.4, 0.3]}}``, ``{"pp": [8, 16]}``).
    ``label`` names an argument in an error (default: its command-line flag)."""
    if output is None and not sweeps and points is None and sobol_samples is None:
        return spec.sensitivity
    return _sensitivity(Fields(spec.path), {"sensitivity": spec.sensitivity.written}, spec, output=output,
                        sweeps=sweeps, points=points, sobol_samples=sobol_samples, label=label)


def _sensitivity(where: Fields, parent: Mapping, spec: Spec, *, output: str | None = None,
                 sweeps: list[str] | Mapping[str, Any] | None = None, points: int | None = None,
                 sobol_samples: int | None = None, label: Callable[[str], str] = flag) -> SensitivityOptions:
    node = parent.get("sensitivity")
    node = {} if node is None else node
    if not isinstance(node, Mapping):
        raise where.error("expected a mapping (output, sobol_samples, points, sweep)", parent, "sensitivity",
                          "sensitivity")
    where.keys(node, SENSITIVITY_KEYS, "sensitivity")
    here = where.at(node, "output" if "output" in node else None, "sensitivity.output") if output is None \
        else Fields(where.path, field=label("output"))
    out = node.get("output", "gpu_hours") if output is None else output
    if out not in spec.outputs:
        raise here.error(f"'{out}' is not an output of this file (outputs: {', '.join(spec.outputs)})")
    p = _whole(where, node, "points", points, SWEEP_POINTS, 2, 256, "grid points in [2, 256]", label)
    n = _whole(where, node, "sobol_samples", sobol_samples, SOBOL_BASE, 1024, 1 << 26,
               "base draws in [1024, 2^26]", label)
    grid: dict[str, tuple[float, ...]] = {}
    layout_grid: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
    sw = node.get("sweep", {})
    if not isinstance(sw, Mapping):
        raise where.error("expected sweep: {input: [low, high]}", node, "sweep", "sensitivity.sweep")
    for name in sw:
        here = where.at(sw, name, f"sensitivity.sweep.{name}")
        if _is_layout_field(spec, str(name)):
            raw = sw[name]["values"] if isinstance(sw[name], Mapping) and set(sw[name]) == {"values"} else sw[name]
            layout_grid[str(name)] = _layout_values(here, spec, str(name), raw)
            continue
        grid[str(name)] = _sweep_values(here, spec, str(name), sw[name], p)
    given = sweeps.items() if isinstance(sweeps, Mapping) else ()
    for name, raw in given:  # the API's mapping, in the file's terms (or a command line's text per input)
        here = Fields(where.path, field=f"{label('sweeps')}[{name!r}]")
        if not isinstance(name, str):
            raise here.error(f"expected an input's name, got {kind(name)}")
        if isinstance(raw, str):  # "0.30:0.45" or "0.40,0.30", as after --sweep mfu=
            if _is_layout_field(spec, name):
                layout_grid[name] = _layout_values(here, spec, name, raw.split(","))
            else:
                grid[name] = _sweep_arg(here, spec, f"{name}={raw}", p)[1]
        elif _is_layout_field(spec, name):
            raw = raw["values"] if isinstance(raw, Mapping) and set(raw) == {"values"} else raw
            layout_grid[name] = _layout_values(here, spec, name, raw)
        else:
            grid[name] = _sweep_values(here, spec, name, raw, p)
    for text in (() if isinstance(sweeps, Mapping) else sweeps or ()):
        here = Fields(where.path, field=label("sweeps"))
        if not isinstance(text, str):
            raise here.error(f"expected text like mfu=0.30:0.45, got {kind(text)}")
        name, _, rest = text.partition("=")
        if _is_layout_field(spec, name.strip()) and rest:
            layout_grid[name.strip()] = _layout_values(here, spec, name.strip(), rest.split(","))
            continue
        name, vals = _sweep_arg(here, spec, text, p)
        grid[name] = vals
    return SensitivityOptions(out, n, p, tuple(grid.items()), written=plain(parent.get("sensitivity")),
                              layout_sweeps=tuple((k, v, d) for k, (v, d) in layout_grid.items()))


def _is_layout_field(spec: Spec, name: str) -> bool:
    from mcflops.layout import SWEEPABLE

    return name in SWEEPABLE and hasattr(spec.count_dependent.get("mfu"), "variant")


def _layout_values(here: Fields, spec: Spec, name: str, raw: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """A layout field's listed values (``pp=8,16``), each checked by building the layout's MFU prior there."""
    from mcflops.layout import OVERLAP_FLAGS, RECOMPUTE, SCHEDULES

    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        raise here.error(f"expected the values of layout field {name} to sweep, e.g. {name}=8,16 (a list of two or more)")
    vals: list[Any] = []
    for v in raw:
        if name in ("recompute", "schedule"):
            allowed = RECOMPUTE if name == "recompute" else SCHEDULES
            if str(v).strip() not in allowed:
                raise here.error(f"expected {name} values among {', '.join(allowed)}, got {v!r}")
            vals.append(str(v).strip())
        elif name in OVERLAP_FLAGS:
            b = v if isinstance(v, bool) else {"true": True, "false": False}.get(str(v).strip().lower())
            if b is None:
                raise here.error(f"expected true or false for layout field {name}, got {v!r}")
            vals.append(b)
        else:
            x = parse_number(v.strip() if isinstance(v, str) else v)
            if x is None or x != int(x) or x < (0 if name == "zero" else 1):
                raise here.error(f"expected whole numbers for layout field {name}, got {v!r}")
            vals.append(int(x))
    lp = spec.count_dependent["mfu"]
    dists = []
    for v in vals:
        try:
            dists.append(lp.variant(**{name: v}).at())
        except ValueError as e:
            raise here.error(f"layout {name} = {v}: {e}") from None
    return tuple(vals), tuple(dists)


def _whole(where: Fields, node: Mapping, key: str, cli: Any, default: int, lo: int, hi: int, what: str,
           label: Callable[[str], str] = flag) -> int:
    """A whole number in [lo, hi]: the command line's (``--points``), else the file's, else the default."""
    here = where.at(node, key, f"sensitivity.{key}") if cli is None else Fields(where.path, field=label(key))
    v = node.get(key, default) if cli is None else cli
    x = parse_number(v)
    if x is None or x != int(x) or not lo <= x <= hi:
        raise here.error(f"expected a whole number of {what}, got {v!r}")
    return int(x)


def _sweep_values(here: Fields, spec: Spec, name: str, raw: Any, points: int) -> tuple[float, ...]:
    """Grid of one sweep: [lo, hi] -> `points` evenly spaced values; {values: [...]} -> those values."""
    if name not in spec.priors:
        why = f"no '{name}' input in this file" if name in INPUTS else f"unknown input '{name}'"
        raise here.error(f"cannot sweep {why} (inputs here: {', '.join(spec.priors)})")
    explicit = isinstance(raw, Mapping) and set(raw) == {"values"}
    vals = raw["values"] if explicit else raw
    if not isinstance(vals, (list, tuple)) or len(vals) < 2 or (not explicit and len(vals) != 2):
        raise here.error("expected [low, high] (a grid of `points` values) or {values: [v1, v2, ...]}")
    xs = [parse_number(v) for v in vals]
    if any(x is None for x in xs):
        raise here.error(f"expected numbers, got {list(vals)}")
    lo_dom, hi_dom, _, meaning = INPUTS[name]
    for x in xs:
        if not (x > 0 and x <= hi_dom and x >= lo_dom):
            rng = f"[{lo_dom:g}, {hi_dom:g}]" if lo_dom > 0 else f"(0, {hi_dom:g}]"
            raise here.error(f"{name} ({meaning}) must be in {rng}, got {x:g}")
    if explicit:
        return tuple(float(x) for x in xs)
    if not xs[0] < xs[1]:
        raise here.error(f"expected low < high, got [{xs[0]:g}, {xs[1]:g}]")
    return tuple(float(x) for x in np.linspace(xs[0], xs[1], points))


def _sweep_arg(here: Fields, spec: Spec, text: str, points: int) -> tuple[str, tuple[float, ...]]:
    """A command-line sweep: ``mfu=0.30:0.45`` (a grid) or ``mfu=0.40,0.30`` (those values)."""
    name, sep, rest = text.partition("=")
    if not sep or not rest:
        raise here.error(f"expected INPUT=LOW:HIGH or INPUT=V1,V2,..., got '{text}'")
    raw: Any = rest.split(":") if ":" in rest else {"values": rest.split(",")}
    return name.strip(), _sweep_values(here, spec, name.strip(), raw, points)


# ----------------------------------------------------------------------------- plan:

def plan_block(where: Fields, data: Mapping, spec: Spec) -> PlanOptions:
    """The file's ``plan:`` block (``spec``: the file's priors, known by now)."""
    if "plan" not in data:
        return PlanOptions()
    return _plan(where, data, spec, {})


def plan_options(spec: Spec, *, deadline_days: Any = None, prob: Any = None, gpus: Any = None,
                 budget_hours: Any = None, budget_usd: Any = None, label: Callable[[str], str] = flag) -> PlanOptions:
    """The spec's plan options, with the command line's values (numbers or their text, ``2M``; None: the
    file's). ``label`` names an argument in an error (default: its command-line flag)."""
    cli = {"deadline_days": deadline_days, "prob": prob, "gpus": gpus, "budget_hours": budget_hours,
           "budget_usd": budget_usd}
    if all(v is None for v in cli.values()):
        return spec.plan
    return _plan(Fields(spec.path), {"plan": spec.plan.written}, spec, cli, label)


def _plan(where: Fields, parent: Mapping, spec: Spec, cli: Mapping[str, Any],
          label: Callable[[str], str] = flag) -> PlanOptions:
    node = parent.get("plan")
    node = {} if node is None else node
    if not isinstance(node, Mapping):
        raise where.error(f"expected a mapping ({', '.join(PLAN_KEYS)})", parent, "plan", "plan")
    where.keys(node, PLAN_KEYS, "plan")
    vals: dict[str, Any] = {}
    for k in PLAN_KEYS:
        from_cli = cli.get(k) is not None
        v = cli[k] if from_cli else node.get(k)
        if v is None:
            continue
        here = Fields(where.path, field=label(k)) if from_cli else where.at(node, k, f"plan.{k}")
        x = parse_number(v)
        if x is None or x <= 0:
            raise here.error(f"expected a number > 0, got {v!r}")
        if k == "prob" and not x < 1:
            raise here.error(f"expected a probability strictly between 0 and 1, got {v!r}")
        if k == "gpus":
            if x != int(x):
                raise here.error(f"expected a whole number of accelerators, got {v!r}")
            x = int(x)
        vals[k] = x
    if "budget_usd" in vals and "price" not in spec.priors:
        here = Fields(where.path, field=label("budget_usd")) if cli.get("budget_usd") is not None \
            else where.at(node, "budget_usd", "plan.budget_usd")
        raise here.error("a dollar budget needs a `price` prior (USD per accelerator-hour) in the file")
    return PlanOptions(**vals, written=plain(parent.get("plan")))
