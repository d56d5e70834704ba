"""A JSON Schema (draft 2020-12) of the prior-file format, built from the same tables the loader uses.

It accepts every file the loader accepts, and refuses what a schema can say: unknown keys, wrong types, a
number outside its input's domain (MFU above 1, a PUE below 1, a negative count), one family per prior, the
recipes where they belong, the blocks a FLOPs convention or an observation needs. What it cannot say is the
loader's alone: comparisons between two values (p5 < p95, low <= mode <= high, weights one per component and
summing to 1), a number written as text checked against a bound (``-1M`` is refused, ``1e20`` as text is
not), and what needs arithmetic or the catalogue (a beta's sd against its mean, the 1e-15 tails, the outputs'
range, the precisions an accelerator has, the architecture's parameter count against ``params``).
"""

from __future__ import annotations

import re
from typing import Any

from mcflops import hardware
from mcflops.arch import hf
from mcflops.numbers import NUMBER_PATTERN
from mcflops.priors.goodput import FAILURE_KEYS, UNCERTAIN_OK
from mcflops.spec.compare import compare_schema
from mcflops.spec.correlations import ENTRY_KEYS
from mcflops.spec.grammar import _NAMED, DIST_KEYS, FAMILIES
from mcflops.spec.machine import ARCH_KEYS, HARDWARE_KEYS, MAX_ARCH
from mcflops.spec.observe import MIN_RELATIVE_SCALE, NOISES, OBS_KEYS
from mcflops.spec.options import PLAN_KEYS, SENSITIVITY_KEYS
from mcflops.spec.pilots import KEYS as PILOT_KEYS, MEASURES as PILOT_MEASURES
from mcflops.spec.reported import KEYS as CLAIM_KEYS
from mcflops.spec.types import CONVENTIONS, INPUTS, MAX_SAMPLES, OUTPUTS

_NUMBER = {"anyOf": [{"type": "number"}, {"type": "string", "pattern": NUMBER_PATTERN}],
           "description": "a number: 405.9e9, 1_000_000, 405B, 15.6T, 30.84M (suffixes in either case)"}
_UNSIGNED = NUMBER_PATTERN.replace("[+-]?", r"\+?", 1)  # text without a minus sign
_TEXT = {"type": ["string", "null"]}  # the loader reads a null source as no source


def _num(minimum: float | None = None, *, above: float | None = None, maximum: float | None = None,
         integer: bool = False, description: str | None = None) -> dict[str, Any]:
    """A number with bounds: checked on a YAML number; on text (``15.6T``) only its sign can be."""
    n: dict[str, Any] = {"type": "integer" if integer else "number"}
    for k, v in (("minimum", minimum), ("exclusiveMinimum", above), ("maximum", maximum)):
        if v is not None:
            n[k] = v
    lowest = minimum if minimum is not None else above
    text = {"type": "string", "pattern": _UNSIGNED if lowest is not None and lowest >= 0 else NUMBER_PATTERN}
    out: dict[str, Any] = {"anyOf": [n, text]}
    if description:
        out["description"] = description
    return out


def _items(item: dict[str, Any], n: int, desc: str) -> dict[str, Any]:
    return {"type": "array", "items": item, "minItems": n, "maxItems": n, "description": desc}


def _object(properties: dict[str, Any], required=()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


def _domain(name: str) -> dict[str, Any]:
    """The bounds of one input's values, as keyword arguments of :func:`_num`."""
    lo, hi, _, _ = INPUTS[name]
    return {"minimum": lo, **({"maximum": hi} if hi != float("inf") else {})}


def _family(fam: str, name: str) -> dict[str, Any]:
    """One family's parameters, positional or named, for input ``name``."""
    dom = _domain(name)
    pos = _num(**dom)  # a bound of the support
    anything, positive = _num(), _num(above=0)
    if fam in ("uniform", "triangular", "pert"):
        names = ("low", "high") if fam == "uniform" else ("low", "mode", "high")
        forms = [_items(pos, len(names), "[" + ", ".join(names) + "]")]
        for form in _NAMED[fam]:
            props = {k: pos for k in form}
            if "lambda" in form:
                props["lambda"] = positive
            forms.append(_object(props, form))
        return {"anyOf": forms}
    if fam == "normal":
        return {"anyOf": [_items(anything, 2, "90% interval [p5, p95]"),
                          _object({"mean": anything, "sd": positive}, ("mean", "sd"))]}
    if fam == "lognormal":
        return {"anyOf": [_items(positive, 2, "90% interval [p5, p95]"),
                          _object({"median": positive, "sigma": positive}, ("median", "sigma")),
                          _object({"mu": anything, "sigma": positive}, ("mu", "sigma")),
                          _object({"mean": positive, "sd": positive}, ("mean", "sd"))]}
    inside = {"anyOf": [{"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                        {"type": "string", "pattern": _UNSIGNED}]}
    return {"anyOf": [_items(inside, 2, "90% interval [p5, p95]"),
                      _object({"mean": inside, "sd": positive}, ("mean", "sd")),
                      _object({"a": positive, "b": positive}, ("a", "b")),
                      _object({"alpha": positive, "beta": positive}, ("alpha", "beta"))]}


def _prior(name: str, *, component: bool = False, ratio: bool = True) -> dict[str, Any]:
    """A prior of input ``name``: a number, one family (a mixture's components are not mixtures), or, for MFU
    and goodput, a recipe; any input may be a ratio to another file's (``ratio``: allow that form)."""
    lo, hi, _, meaning = INPUTS[name]
    point = _num(**_domain(name)) if name == "pue" else _num(above=0, **({"maximum": hi} if hi < float("inf")
                                                                           else {}))
    fams = [f for f in FAMILIES if not (component and f == "mixture") and not (f == "beta" and lo > 0)]
    props: dict[str, Any] = {f: _family(f, name) for f in fams if f not in ("point", "mixture")}
    props["point"] = point
    if "mixture" in fams:
        props["mixture"] = {"type": "array", "items": {"$ref": f"#/$defs/component_{name}"}, "minItems": 2}
    props.update(source=_TEXT, low=_num(lo), high=_num(**({"maximum": hi} if hi < float("inf") else {})),
                 weights={"type": "array", "items": _num(0, maximum=1)})
    props = {k: props[k] for k in DIST_KEYS if k in props}
    truncated = {"anyOf": [{"required": ["normal"]}, {"required": ["lognormal"]}]}
    rules: list[dict[str, Any]] = [
        # a normal reaches -inf: it needs a lower bound, and an upper one inside a bounded domain
        {"if": {"required": ["normal"]}, "then": {"required": ["low", *(["high"] if hi < float("inf") else [])]}}]
    if hi < float("inf") or lo > 0:
        rules.append({"if": {"required": ["lognormal"]},
                      "then": {"required": [*(["low"] if lo > 0 else []), *(["high"] if hi < float("inf") else [])]}})
    family = {"type": "object", "properties": props, "additionalProperties": False,
              "oneOf": [{"required": [f]} for f in fams],
              "dependentSchemas": {"low": truncated, "high": truncated, "weights": {"required": ["mixture"]}},
              "allOf": rules}
    forms: list[dict[str, Any]] = [point, family]
    if name == "mfu" and not component:
        forms.append({"$ref": "#/$defs/calibrated"})
        forms.append({"$ref": "#/$defs/layout"})
    if name == "goodput" and not component:
        forms.append({"$ref": "#/$defs/failures"})
    if ratio and not component:
        forms.append({"$ref": "#/$defs/ratio"})
    return {"anyOf": forms, "description": meaning}


def _recipes() -> dict[str, Any]:
    calibrated = _object({"calibrated": {"anyOf": [{"const": True},
                                                   _object({"org": {"type": ["string", "null"]},
                                                            "moe": {"type": "boolean"},
                                                            "year": {"type": "integer", "minimum": 2000,
                                                                     "maximum": 2100}})]},
                          "source": _TEXT}, ("calibrated",))
    calibrated["description"] = "the calibrated effective utilization (MFU x goodput): mcflops calibrate"

    def part(k: str) -> dict[str, Any]:
        if k not in UNCERTAIN_OK:  # count, checkpoint_interval_h: numbers
            return _num(above=0, integer=k == "count")
        value = _num(above=0) if k == "rate_per_gpu_hour" else _num(0)
        return {"anyOf": [value,
                          _object({"point": value, "source": _TEXT}, ("point",)),
                          _object({"lognormal": _family("lognormal", "params"), "source": _TEXT}, ("lognormal",)),
                          _object({"uniform": _family("uniform", "params"), "source": _TEXT}, ("uniform",))]}

    failures = _object({"failures": _object({k: part(k) for k in FAILURE_KEYS},
                                            ("rate_per_gpu_hour", "checkpoint_interval_h", "restart_h")),
                        "source": _TEXT}, ("failures",))
    failures["description"] = "goodput from failures and checkpointing (Daly 2006)"
    ratio = _object({"relative_to": {"type": "string", "minLength": 1}, "ratio": _prior("params", ratio=False),
                     "source": _TEXT}, ("relative_to", "ratio"))
    ratio["description"] = ("the input as another prior file's (relative_to, a path relative to this file) times "
                            "an independent ratio (a positive prior): mcflops compare draws it as A's draw x ratio")
    return {"calibrated": calibrated, "failures": failures, "ratio": ratio, "layout": _layout()}


def _layout() -> dict[str, Any]:
    """``mfu: {layout: {...}, efficiency: {...}, source: ...}`` (mcflops.spec.layoutspec)."""
    from mcflops.layout import FRACTIONS, OPTIONAL, OVERLAP_FLAGS, PARAMS, RECOMPUTE, SCHEDULES, load_fit
    from mcflops.layout.fit import stack_names
    from mcflops.spec.layoutspec import FLOAT_KEYS, INT_KEYS

    props: dict[str, Any] = {k: _num(0 if k == "zero" else 1, integer=True) for k in INT_KEYS}
    props["zero"] = {**props["zero"], "maximum": 3}
    props["grad_bytes"] = {"enum": [2, 4]}
    props.update({k: _num(above=0) for k in FLOAT_KEYS})
    unstated = ("unknown (the default): each draw takes the fastest of the settings that run and fit in memory, "
                "as an operator tunes it (mcflops.layout.unstated)")
    for k in ("vpp", "micro_batch"):
        props[k] = {"anyOf": [*props[k]["anyOf"], {"const": "unknown"}],
                    "description": unstated if k == "micro_batch" else f"under schedule: interleaved, {unstated}"}
    props.update(recompute={"enum": [*RECOMPUTE, "unknown"], "description": unstated}, schedule={"enum": list(SCHEDULES)},
                 sequence_parallel={"type": "boolean"}, fsdp={"type": "boolean"})
    props.update({k: {"enum": [True, False, "unknown"], "description": "overlap with compute; unknown (the default; "
                      "true for the data-parallel two with fsdp: true) mixes both settings 1:1"} for k in OVERLAP_FLAGS})
    # gemm and attention are fractions (as mfu), the others positive multiples (as tokens); a mixture is not offered
    eff = _object({p: {"$ref": "#/$defs/component_mfu" if p in FRACTIONS else "#/$defs/component_tokens"}
                   for p in (*PARAMS, *OPTIONAL)})
    residual = {**_num(0), "description": "the run's own log-MFU residual, a Student-t(4) scale (default: the "
                "shipped fit's row_residual; 0: none); a pilot does not learn it (mcflops.layoutfit.rowres)"}
    stack = {"enum": list(stack_names(load_fit())), "description": "a software stack the shipped fit has rows of: its "
             "fitted efficiencies and residual scale (default: a new stack's)"}
    out = _object({"layout": _object(props, ("global_batch",)), "stack": stack, "efficiency": eff, "residual": residual,
                   "source": _TEXT}, ("layout",))
    out["description"] = "MFU from the parallel layout: a step-time model over efficiency priors (mcflops.layout)"
    return out


def _accelerator() -> dict[str, Any]:
    """Every id and alias, as the catalogue matches them: any case, a run of spaces or underscores for '-',
    spaces around."""
    names = sorted({n for a in hardware.catalogue().values() for n in (a.id, *a.aliases)}, key=lambda s: (-len(s), s))

    def spelled(name: str) -> str:
        return "".join(r"(?:-|[\s_]+)" if c == "-" else f"[{c}{c.upper()}]" if c.isalpha() else
                       re.escape(c) for c in name)

    return {"type": "string", "pattern": r"^\s*(?:" + "|".join(spelled(n) for n in names) + r")\s*$",
            "description": "an accelerator of the catalogue (id or alias): " + ", ".join(hardware.catalogue())}


def _observation() -> dict[str, Any]:
    """A published figure: a bare number (> 0), ``{value, sigma}``, ``{value, noise: normal, sd}`` or
    ``{between: [lo, hi]}``. One schema for the number and the mapping, so that its properties stay visible."""
    props = {"value": _num(1e-300, maximum=1e300, description="the published figure (1e-300 to 1e300)"),
             "sigma": _num(MIN_RELATIVE_SCALE, maximum=5, description="relative error (lognormal sigma), default 0.05"),
             "sd": _num(above=0, description="absolute error"),
             "noise": {"enum": list(NOISES)},
             "between": _items(_num(0), 2, "[low, high]: uniform likelihood"),
             "source": _TEXT}
    return {"type": ["object", "number", "string"], "minimum": 1e-300, "maximum": 1e300, "pattern": _UNSIGNED,
            "properties": {k: props[k] for k in OBS_KEYS}, "additionalProperties": False,
            "anyOf": [{"not": {"type": "object"}}, {"required": ["value"]}, {"required": ["between"]}],
            "not": {"type": "object", "anyOf": [{"required": ["value", "between"]}, {"required": ["sigma", "sd"]}]}}


def json_schema() -> dict[str, Any]:
    inputs = {"enum": list(INPUTS)}
    quantities = list(OUTPUTS) + list(INPUTS)
    sweep = {"anyOf": [_items({"$ref": "#/$defs/number"}, 2, "[low, high]: a grid of `points` values"),
                       _closed({"values": {"type": "array", "items": {"$ref": "#/$defs/number"}, "minItems": 2}},
                               ("values",), required=["values"])]}
    sensitivity = _closed({
        "output": {"enum": list(OUTPUTS), "description": "the output to analyse (default gpu_hours)"},
        "sobol_samples": _num(1024, maximum=1 << 26, integer=True, description="Sobol base draws, 1024 to 2^26"),
        "points": _num(2, maximum=256, integer=True, description="grid points of a [low, high] sweep, 2 to 256"),
        "sweep": {"type": "object", "propertyNames": inputs, "additionalProperties": sweep}}, SENSITIVITY_KEYS)
    correlation = _closed({
        "between": {"type": "array", "items": inputs, "minItems": 2, "maxItems": 2},
        "rho": _num(above=-1, description="normal-score correlation, in (-1, 1)"),
        "spearman": _num(above=-1, description="rank correlation, in (-1, 1)"),
        "source": _TEXT}, ENTRY_KEYS, required=["between"])
    for k in ("rho", "spearman"):
        correlation["properties"][k]["anyOf"][0]["exclusiveMaximum"] = 1
    correlation["oneOf"] = [{"required": ["rho"]}, {"required": ["spearman"]}]
    plan = _closed({
        "deadline_days": _num(above=0, description="finish within this many days"),
        "prob": _num(above=0, description="probability each answer holds with, in (0, 1)"),
        "gpus": _num(above=0, integer=True, description="cluster size (default hardware.count)"),
        "budget_hours": _num(above=0, description="accelerator-hour budget"),
        "budget_usd": _num(above=0, description="dollar budget (needs a price prior)")}, PLAN_KEYS)
    plan["properties"]["prob"]["anyOf"][0]["exclusiveMaximum"] = 1
    claim = _closed({
        "between": _items(_num(0), 2, "[low, high]: the range a source reported"),
        "source": {"type": "string", "pattern": r"\S", "description": "who reported it"}}, CLAIM_KEYS,
        required=list(CLAIM_KEYS))
    arch_props: dict[str, Any] = {}
    for k in ARCH_KEYS:
        if k == "source":
            arch_props[k] = {}  # documentation: the loader does not read it
        elif k == "preset":
            arch_props[k] = {"enum": list(hf.presets())}
        elif k == "hf_config":
            arch_props[k] = {"type": "string", "minLength": 1, "description": "a Hugging Face config.json, "
                             "relative to the prior file"}
        elif k in ("tied_embeddings", "glu"):
            arch_props[k] = {"type": "boolean"}
        else:
            arch_props[k] = _num(0 if k in ("shared_experts", "dense_layers") else None,
                                 above=None if k in ("shared_experts", "dense_layers") else 0,
                                 maximum=MAX_ARCH, integer=True)
    shape = ["layers", "d_model", "heads", "seq_len", "vocab"]
    architecture = {**_object(arch_props), "anyOf": [{"required": ["preset"]}, {"required": ["hf_config"]},
                                                     {"required": shape}],
                    "not": {"required": ["preset", "hf_config"]},
                    "dependentRequired": {"hf_config": ["seq_len"]}}  # config.json's context is not it
    defs: dict[str, Any] = {"number": _NUMBER, **_recipes()}
    for name in INPUTS:
        defs[f"prior_{name}"] = _prior(name)
        defs[f"component_{name}"] = _prior(name, component=True)

    pilot_layout = {k: v for k, v in defs["layout"]["properties"]["layout"].items() if k != "required"}
    pilot = _closed({
        "count": _num(above=0, integer=True, description="accelerators in the pilot"),
        "layout": {**pilot_layout, "description": "the fields where the pilot's layout differs from production's"},
        "architecture": {**architecture, "description": "the pilot's model where it is not production's (a model "
                         "of the same kind, its MLP width stated or from a preset or config.json)"},
        "tflops_per_gpu": _num(above=0, description="measured TFLOP/s per GPU (the architecture's FLOPs)"),
        "tokens_per_s_per_gpu": _num(above=0, description="measured tokens per second per GPU"),
        "step_time_s": _num(above=0, description="measured seconds per step (the pilot's global batch)"),
        "sigma": _num(above=0, description="the measurement's log-scale error (default 0.05)"),
        "source": {"type": "string", "pattern": r"\S", "description": "who measured the pilot, and how"}},
        PILOT_KEYS, required=["count", "source"])
    pilot["oneOf"] = [{"required": [m]} for m in PILOT_MEASURES]

    def needs(condition: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
        return {"if": condition, "then": then}

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mcflops.dev/schema/prior-file.json",
        "title": "mcflops prior file",
        "type": "object",
        "required": ["name", "priors"],
        "additionalProperties": False,
        "$defs": defs,
        "properties": {
            "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", "not": {"pattern": r"\.\."}},
            "description": _TEXT,
            "seed": _num(0, maximum=2**63 - 1, integer=True),
            "samples": _num(1000, maximum=MAX_SAMPLES, integer=True),
            "hardware": {**_object({"accelerator": _accelerator(), "precision": {"enum": list(hardware.PRECISIONS)},
                                    "count": _num(above=0, integer=True)}),
                         "propertyNames": {"enum": list(HARDWARE_KEYS)}},
            "flops": {"enum": list(CONVENTIONS)},
            "architecture": architecture,
            "priors": {"type": "object", "additionalProperties": False, "required": ["tokens", "mfu"],
                       "properties": {k: {"$ref": f"#/$defs/prior_{k}", "description": v[3]}
                                      for k, v in INPUTS.items()}},
            "pilot": {"type": "array", "minItems": 1, "items": pilot,
                      "description": "measured throughput at a pilot scale: conditions mfu: {layout: ...}"},
            "observe": {"type": "object", "additionalProperties": False,
                        "properties": {k: _observation() for k in quantities}},
            "reported": {"type": "object", "additionalProperties": False,
                         "properties": {k: claim for k in quantities}},
            "sensitivity": sensitivity,
            "correlations": {"type": "array", "items": correlation},
            "plan": plan,
            "compare": compare_schema("#/$defs/number", {"enum": list(INPUTS)}),
        },
        "allOf": [
            # the catalogue gives the peak unless the file gives a peak_flops prior
            needs({"properties": {"priors": {"not": {"required": ["peak_flops"]}}}},
                  {"required": ["hardware"], "properties": {"hardware": {"required": ["accelerator"]}}}),
            # a pilot conditions the layout model: the mfu prior is a layout recipe
            needs({"required": ["pilot"]},
                  {"properties": {"priors": {"properties": {"mfu": {"type": "object", "required": ["layout"]}}}}}),
            needs({"required": ["flops"], "properties": {"flops": {"enum": ["palm", "megatron", "architecture"]}}},
                  {"required": ["architecture"]}),
            needs({"required": ["observe"], "properties": {"observe": {"required": ["cost"]}}},
                  {"properties": {"priors": {"required": ["price"]}}}),
            needs({"required": ["observe"], "properties": {"observe": {"required": ["wall_days"]}}},
                  {"required": ["hardware"], "properties": {"hardware": {"required": ["count"]}}}),
        ],
    }


def _closed(properties: dict[str, Any], keys, required: list[str] | None = None) -> dict[str, Any]:
    """An object with the loader's keys only (``keys``: its table; ``properties`` describe each, in its order)."""
    properties = {k: properties[k] for k in keys}  # a key the table has and this schema lacks: a KeyError here
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    return out
