"""The ``observe:`` block: published figures (a value with its error, or an interval) that condition the priors."""

from __future__ import annotations

import math
from typing import Mapping

from mcflops.errors import closest, kind
from mcflops.numbers import parse_number
from mcflops.priors.dist import support
from mcflops.spec.fields import Fields
from mcflops.spec.types import INPUTS, OUTPUTS, Observation, Spec

OBS_KEYS = ("value", "sigma", "sd", "noise", "between", "source")
# the smallest relative error an observation may state: the float32 likelihood squares deviations over it
# (float32 overflows past 3.4e38, so a scale much under 1e-19 of the value is no longer a number there)
MIN_RELATIVE_SCALE = 1e-12
NOISES = ("lognormal", "normal")


def parse_observations(where: Fields, data: Mapping, spec: Spec) -> dict[str, Observation]:
    """The observed outputs and inputs (``spec``: what this file can compute, known by now)."""
    node = where.mapping(data, "observe", "observe")
    allowed = list(spec.outputs) + [n for n in spec.priors]
    out: dict[str, Observation] = {}
    for key in node:
        field_ = f"observe.{key}"
        if key not in allowed:
            every = list(OUTPUTS) + list(INPUTS)
            why = ""
            if key in OUTPUTS:
                why = {"wall_days": " (needs hardware.count)", "cost": " (needs a price prior)",
                       "energy_mwh": " (needs a power prior or an accelerator with a TDP)"}.get(key, "")
            elif key in INPUTS:
                why = " (it has no prior in this file)"
            raise where.error(f"cannot observe '{key}'{why}{closest(key, every) if not why else ''} "
                              f"(observable here: {', '.join(allowed)})", node, key, field_)
        o = node[key]
        if not isinstance(o, Mapping):
            x = parse_number(o)
            if x is None:
                raise where.error(f"expected {{value: ..., sigma: ...}} or {{between: [lo, hi]}}, got {kind(o)}",
                                  node, key, field_)
            if x <= 0:
                raise where.error(f"an observed {key} must be > 0, got {o}", node, key, field_)
            o = {"value": x}
        where.keys(o, OBS_KEYS, field_)
        source = where.text(o, "source", f"{field_}.source", "source: to be text")
        line = where.line(node, key)
        if "between" in o:
            out[key] = _between(where.at(o, "between", field_), key, o, spec, source, line)
            continue
        if "value" not in o:
            raise where.error("missing value (the published figure)", o, None, field_)
        value = where.number(o, "value", f"{field_}.value")
        if value <= 0:
            raise where.error(f"an observed {key} must be > 0, got {o['value']}", o, "value", f"{field_}.value")
        noise = o.get("noise", "lognormal")
        if noise not in NOISES:
            raise where.error(f"unknown noise '{noise}'{closest(noise, NOISES)} (expected lognormal or normal; "
                              "use between: [lo, hi] for an interval)", o, "noise", f"{field_}.noise")
        if "sd" in o and "sigma" in o:
            raise where.error("give sigma (relative) or sd (absolute), not both", o, "sd", field_)
        if "sd" in o:
            scale = where.number(o, "sd", f"{field_}.sd", positive=True)
            if noise == "lognormal":
                scale = math.sqrt(math.log1p((scale / value) ** 2))  # lognormal sigma with this sd at the value
        else:
            sigma = where.number(o, "sigma", f"{field_}.sigma", positive=True) if "sigma" in o else 0.05
            if sigma > 5:
                raise where.error(f"expected a relative sigma (0.05 = 5%), got {o['sigma']}", o, "sigma",
                                  f"{field_}.sigma")
            scale = sigma if noise == "lognormal" else sigma * value
        rel = scale if noise == "lognormal" else scale / value
        if not rel >= MIN_RELATIVE_SCALE:  # the likelihood is evaluated in float32: (d / scale)^2 overflows
            name = "sd" if "sd" in o else "sigma"
            raise where.error(f"a relative error of {rel:.3g} is below what the likelihood resolves in float32 "
                              f"(at least {MIN_RELATIVE_SCALE:g}; a figure known to 4 digits is about 3e-4)",
                              o, name, f"{field_}.{name}")
        out[key] = Observation(key, noise, value, scale, None, None, source, line)
    return out


def _between(here: Fields, key: str, o: Mapping, spec: Spec, source: str | None, line: int | None) -> Observation:
    """``between: [lo, hi]``: a uniform likelihood on an interval."""
    b = o["between"]
    if "value" in o:
        raise here.error("give either value (with sigma/sd) or between: [lo, hi], not both")
    if not isinstance(b, list) or len(b) != 2:
        raise here.error(f"expected between: [low, high], got {kind(b)}")
    lo, hi = (parse_number(v) for v in b)
    if lo is None or hi is None:
        raise here.error("expected two numbers in between: [low, high]")
    if not 0 <= lo < hi:
        raise here.error(f"expected 0 <= low < high in between, got [{b[0]}, {b[1]}]")
    if key in spec.priors:  # an input: its prior's support is known here, exactly
        s_lo, s_hi = support(spec.priors[key])
        if hi < s_lo or lo > s_hi:
            raise here.error(f"between: [{b[0]}, {b[1]}] excludes every value its prior allows "
                             f"([{s_lo:g}, {s_hi:g}]): no draw could explain it")
    return Observation(key, "between", None, None, lo, hi, source, line)
