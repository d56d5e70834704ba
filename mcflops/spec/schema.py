"""A JSON Schema (draft 2020-12) of the prior-file format, built from the same tables the loader uses."""

from __future__ import annotations

from typing import Any

from mcflops import hardware
from mcflops.spec.grammar import FAMILIES, _NAMED
from mcflops.spec.load import ARCH_KEYS, CONVENTIONS, HARDWARE_KEYS, INPUTS, NOISES, OUTPUTS

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
    obs = {"type": "object", "additionalProperties": False, "properties": {
        "value": {"$ref": "#/$defs/number", "description": "the published figure"},
        "sigma": {"$ref": "#/$defs/number", "description": "relative error (lognormal sigma), default 0.05"},
        "sd": {"$ref": "#/$defs/number", "description": "absolute error"},
        "noise": {"enum": list(NOISES)},
        "between": _pair("[low, high]: uniform likelihood"),
        "source": {"type": "string"}}}
    claim = {"type": "object", "additionalProperties": False, "required": ["between", "source"], "properties": {
        "between": _pair("[low, high]: the range a source reported"),
        "source": {"type": "string", "description": "who reported it"}}}
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
                             "properties": {k: ({"type": "string"} if k == "source" else {"$ref": "#/$defs/number"})
                                            for k in ARCH_KEYS}},
            "priors": {"type": "object", "additionalProperties": False,
                       "properties": {k: {"$ref": "#/$defs/prior", "description": v[3]} for k, v in INPUTS.items()}},
            "observe": {"type": "object", "additionalProperties": False,
                        "properties": {k: obs for k in list(OUTPUTS) + list(INPUTS)}},
            "reported": {"type": "object", "additionalProperties": False,
                         "properties": {k: claim for k in list(OUTPUTS) + list(INPUTS)}},
            "sensitivity": {"type": "object"},
            "correlations": {},
            "plan": {"type": "object"},
        },
    }
