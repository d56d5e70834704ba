"""A pilot measurement on the command line (``--pilot count=512,tflops_per_gpu=420``, optionally with
``tokens_per_s_per_gpu`` or ``step_time_s`` instead, ``sigma``, the measurement's log-scale error, layout
fields that differ from production's, and ``preset``, the pilot's model where it is not production's), parsed
and applied as the prior file's ``pilot:`` block is: the conditioning (importance weights on the layout prior's
shared efficiency draws, the production MFU their posterior predictive) and its formula are
:mod:`mcflops.spec.pilots`'. Parsing and plain data only."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from mcflops.errors import UsageError
from mcflops.spec.pilots import MEASURES, SIGMA, Pilot

NUMBERS = ("count", *MEASURES, "sigma")
PILOT = {"arg": "pilots", "flag": "--pilot"}  # how a pilot's mistake names it: ladder(pilots=), the CLI's --pilot


def key_values(text: str, arg: str, flag: str | None = None) -> dict[str, Any]:
    """``tp=8,pp=8,recompute=selective,fsdp=true`` as a mapping: whole numbers as int, other numbers as float,
    true/false as bool, the rest as text (each field is checked where it is used). ``arg``, ``flag``: the
    argument (and its command-line flag) a mistake is named by."""
    from mcflops.numbers import parse_number

    out: dict[str, Any] = {}
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise UsageError(f"expected KEY=VALUE like tp=8, got '{part}'", arg=arg, flag=flag)
        x = parse_number(value)
        out[key] = (value.lower() == "true" if value.lower() in ("true", "false") else
                    int(x) if x is not None and math.isfinite(x) and x == int(x) else x if x is not None else value)
    return out


def parse_pilot(text: str) -> dict[str, Any]:
    """One ``--pilot`` option: count and one measurement (tflops_per_gpu, tokens_per_s_per_gpu or step_time_s;
    required), sigma, and layout fields for the pilot's layout where it differs from production's (checked when
    the layout is applied), as the ``pilot:`` block's entries are (mcflops.spec.pilots)."""
    fields = key_values(text, PILOT["arg"], PILOT["flag"])
    if "count" not in fields:
        raise UsageError(f"missing count= (e.g. count=512,tflops_per_gpu=420), got '{text}'", **PILOT)
    given = [k for k in MEASURES if k in fields]
    if len(given) != 1:
        what = "missing" if not given else f"{' and '.join(given)}: give"
        raise UsageError(f"{what} one measurement= of {', '.join(MEASURES)} (e.g. count=512,tflops_per_gpu=420), "
                         f"got '{text}'", **PILOT)
    for k in NUMBERS:
        if k in fields:
            x = fields[k]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0 or not math.isfinite(x):
                raise UsageError(f"expected {k}= a number > 0, got {x!r}", **PILOT)
    if fields["count"] != int(fields["count"]):
        raise UsageError(f"expected count= a whole number, got {fields['count']!r}", **PILOT)
    from mcflops.spec.layoutspec import KEYS

    unknown = [k for k in fields if k not in (*NUMBERS, "preset", *KEYS)]
    if unknown:
        raise UsageError(f"unknown field {unknown[0]}= (expected count, one of {', '.join(MEASURES)}, sigma, preset "
                         f"and layout fields: {', '.join(KEYS)})", **PILOT)
    out = {"count": int(fields.pop("count")), given[0]: float(fields.pop(given[0])),
           "sigma": float(fields.pop("sigma", SIGMA))}
    if "preset" in fields:
        out["preset"] = str(fields.pop("preset"))
        _architecture(out["preset"])  # checked here, where an unknown name is this option's mistake
    return {**out, "layout": fields}


def _architecture(name: str):
    """The pilot's model from a preset (mcflops/data/architectures.json), as ``architecture: {preset: NAME}``."""
    from mcflops.arch import hf
    from mcflops.errors import SpecError
    from mcflops.spec.types import Architecture

    try:
        return Architecture(**hf.preset(name), preset=name)
    except SpecError as e:
        raise UsageError(f"preset={name}: {e.message}", **PILOT) from None


def to_pilot(p: Mapping[str, Any]) -> Pilot:
    """A parsed ``--pilot`` (:func:`parse_pilot`) as the spec's :class:`~mcflops.spec.pilots.Pilot`."""
    (measure,) = [k for k in MEASURES if k in p]
    return Pilot(int(p["count"]), measure, float(p[measure]), float(p.get("sigma", SIGMA)),
                 tuple((p.get("layout") or {}).items()), p.get("source"),
                 architecture=_architecture(p["preset"]) if p.get("preset") else None)


def words(p: Mapping[str, Any]) -> str:
    """A parsed pilot in a few words (the ladder's rung label)."""
    return to_pilot(p).words()


def condition(prior, pilots: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The layout prior ``prior`` conditioned on ``pilots`` (parsed by :func:`parse_pilot`;
    :func:`mcflops.spec.pilots.condition`): the conditioned prior (re-solvable at any count, its table the posterior
    predictive), its table at the file's count (a Dist), the weights' effective sample size, and each pilot's
    measured and predicted MFU before and after (the check that the fit reproduces it)."""
    from mcflops.layout import DRAWS
    from mcflops.spec.pilots import PilotError, condition as weigh

    try:
        res = weigh(prior, [to_pilot(p) for p in pilots])
    except PilotError as e:
        raise UsageError(e.message if e.index is None or len(pilots) == 1 else f"pilot {e.index + 1}: {e.message}",
                        **PILOT) from None
    return {"prior": res, "dist": res.at(), "ess": res.ess, "draws": DRAWS, "pilots": [dict(c) for c in res.checks],
            "source": res.describe()}
