"""A JSON Schema (draft 2020-12) of the prior-file format, built from the same tables the loader uses."""

from __future__ import annotations

from typing import Any

from mcflops import hardware
from mcflops.spec.compare import compare_schema
from mcflops.spec.correlations import ENTRY_KEYS
from mcflops.spec.grammar import FAMILIES, _NAMED
from mcflops.spec.machine import ARCH_KEYS, HARDWARE_KEYS
from mcflops.spec.observe import NOISES, OBS_KEYS
from mcflops.spec.options import PLAN_KEYS, SENSITIVITY_KEYS
from mcflops.spec.types import CONVENTIONS, INPUTS, OUTPUTS

_NUMBER = {"anyOf": [{"type": "number"},
                     {"type": "string", "pattern": r"^[+-]?[0-9][0-9_]*(\.[0-9_]*)?([eE][+-]?[0-9]+)?\s*[kKMBGTP]?$"}],
           "description": "a number: 405.9e9, 1_000_000, 405B, 15.6T, 30.84M"}


def _pair(desc: str, n: int = 2) -> dict[str, Any]:
    return {"type": "array", "items": {"$ref": "#/$defs/number"}, "minItems": n, "maxItems": n, "description": desc}


def _family(fam: str) -> dict[str, Any]:
    positional = {"uniform": _pair("[low, high]"), "triangular": _pair("[low, mode, high]", 3),
                  "pert": _pair("[low, mode, high]", 3)}.get(fam, _pair("90% interval [p5, p95]"))
    named = [{"type": "object", "properties": {k: {"$ref": "#/$defs/number"} for k in form},
              "required": list(form), "additionalProperties": False} for form in _NAMED[fam]]
    return {"anyOf": [positional, *named]}


def json_schema() -> dict[str, Any]:
    prior_props: dict[str, Any] = {f: _family(f) for f in FAMILIES if f not in ("point", "mixture")}
    prior_props["point"] = {"$ref": "#/$defs/number"}
    prior_props["mixture"] = {"type": "array", "items": {"$ref": "#/$defs/prior"}, "minItems": 2}
    prior_props.update(source={"type": "string", "description": "where this prior comes from"},
                       low={"$ref": "#/$defs/number", "description": "truncate normal/lognormal below"},
                       high={"$ref": "#/$defs/number", "description": "truncate normal/lognormal above"},
                       weights={"type": "array", "items": {"$ref": "#/$defs/number"}})
    prior = {"anyOf": [{"$ref": "#/$defs/number"},
                       {"type": "object", "properties": prior_props, "additionalProperties": False,
                        "minProperties": 1}]}
    obs = _closed({
        "value": {"$ref": "#/$defs/number", "description": "the published figure"},
        "sigma": {"$ref": "#/$defs/number", "description": "relative error (lognormal sigma), default 0.05"},
        "sd": {"$ref": "#/$defs/number", "description": "absolute error"},
        "noise": {"enum": list(NOISES)},
        "between": _pair("[low, high]: uniform likelihood"),
        "source": {"type": "string"}}, OBS_KEYS)
    inputs = {"enum": list(INPUTS)}
    sweep = {"anyOf": [_pair("[low, high]: a grid of `points` values"),
                       _closed({"values": {"type": "array", "items": {"$ref": "#/$defs/number"}, "minItems": 2}},
                               ("values",), required=["values"])]}
    sensitivity = _closed({
        "output": {"enum": list(OUTPUTS), "description": "the output to analyse (default gpu_hours)"},
        "sobol_samples": {"$ref": "#/$defs/number", "description": "Sobol base draws, 1024 to 2^26"},
        "points": {"$ref": "#/$defs/number", "description": "grid points of a [low, high] sweep, 2 to 256"},
        "sweep": {"type": "object", "propertyNames": inputs, "additionalProperties": sweep}}, SENSITIVITY_KEYS)
    correlation = _closed({
        "between": {"type": "array", "items": inputs, "minItems": 2, "maxItems": 2},
        "rho": {"$ref": "#/$defs/number", "description": "normal-score correlation, in (-1, 1)"},
        "spearman": {"$ref": "#/$defs/number", "description": "rank correlation, in (-1, 1)"},
        "source": {"type": "string"}}, ENTRY_KEYS, required=["between"])
    correlation["oneOf"] = [{"required": ["rho"]}, {"required": ["spearman"]}]
    plan = _closed({
        "deadline_days": {"$ref": "#/$defs/number", "description": "finish within this many days"},
        "prob": {"$ref": "#/$defs/number", "description": "probability each answer holds with, in (0, 1)"},
        "gpus": {"$ref": "#/$defs/number", "description": "cluster size (default hardware.count)"},
        "budget_hours": {"$ref": "#/$defs/number", "description": "accelerator-hour budget"},
        "budget_usd": {"$ref": "#/$defs/number", "description": "dollar budget (needs a price prior)"}}, PLAN_KEYS)
    claim = _closed({
        "between": _pair("[low, high]: the range a source reported"),
        "source": {"type": "string", "description": "who reported it"}}, ("between", "source"),
        required=["between", "source"])
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mcflops.dev/schema/prior-file.json",
        "title": "mcflops prior file",
        "type": "object",
        "required": ["name", "priors"],
        "additionalProperties": False,
        "$defs": {"number": _NUMBER, "prior": prior},
        "properties": {
            "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"},
            "description": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "samples": {"$ref": "#/$defs/number"},
            "hardware": {"type": "object", "additionalProperties": False, "properties": {
                "accelerator": {"enum": list(hardware.catalogue())},
                "precision": {"enum": list(hardware.PRECISIONS)},
                "count": {"$ref": "#/$defs/number"}}, "propertyNames": {"enum": list(HARDWARE_KEYS)}},
            "flops": {"enum": list(CONVENTIONS)},
            "architecture": {"type": "object", "additionalProperties": False,
                             "properties": {k: ({"type": "string"} if k in ("source", "preset", "hf_config")
                                                else {"type": "boolean"} if k in ("tied_embeddings", "glu")
                                                else {"$ref": "#/$defs/number"}) for k in ARCH_KEYS}},
            "priors": {"type": "object", "additionalProperties": False,
                       "properties": {k: {"$ref": "#/$defs/prior", "description": v[3]} for k, v in INPUTS.items()}},
            "observe": {"type": "object", "additionalProperties": False,
                        "properties": {k: obs for k in list(OUTPUTS) + list(INPUTS)}},
            "reported": {"type": "object", "additionalProperties": False,
                         "properties": {k: claim for k in list(OUTPUTS) + list(INPUTS)}},
            "sensitivity": sensitivity,
            "correlations": {"type": "array", "items": correlation},
            "plan": plan,
            "compare": compare_schema("#/$defs/number", inputs),
        },
    }


def _closed(properties: dict[str, Any], keys, required: list[str] | None = None) -> dict[str, Any]:
    """An object with the loader's keys only (``keys``: its table; ``properties`` describe each, in its order)."""
    properties = {k: properties[k] for k in keys}  # a key the table has and this schema lacks: a KeyError here
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    return out
