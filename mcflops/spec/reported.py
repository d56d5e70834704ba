"""The prior file's ``reported:`` block: claims a source made about a quantity, checked against the posterior.

    reported:
      mfu: {between: [0.38, 0.43], source: "Llama 3 paper Table 4"}

Each key is an input with a prior in this file or one of its outputs; ``between: [low, high]`` with
0 <= low < high is the claimed range and ``source:`` says who claimed it. The posterior findings then
give the claim's prior and posterior probability; a file without the block gets no claim checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from mcflops.errors import closest
from mcflops.errors import kind as _kind
from mcflops.numbers import parse_number
from mcflops.spec.fields import Fields

KEYS = ("between", "source")


@dataclass(frozen=True)
class Reported:
    """One claim: ``name`` lies in [low, high], says ``source`` (``line``: where the file states it)."""

    name: str
    low: float
    high: float
    source: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"between": [self.low, self.high], "source": self.source}


def parse_reported(ctx: Fields, data: Mapping, spec) -> dict[str, Reported]:
    """The validated ``reported:`` block of ``data`` (empty without one); ``spec`` says what the file has."""
    if "reported" not in data:
        return {}
    node = ctx.mapping(data, "reported", "reported")
    allowed = list(spec.priors) + list(spec.outputs)
    out: dict[str, Reported] = {}
    for key in node:
        field_ = f"reported.{key}"
        if key not in allowed:
            raise ctx.error(f"cannot check a claim on '{key}'{closest(key, allowed)} (quantities here: "
                            f"{', '.join(allowed)})", node, key, field_)
        claim = ctx.mapping(node, key, field_)
        ctx.keys(claim, KEYS, field_)
        for k in KEYS:
            if k not in claim:
                what = "the claimed range [low, high]" if k == "between" else "who reported it"
                raise ctx.error(f"missing {k}: ({what})", node, key, field_)
        b = claim["between"]
        if not isinstance(b, list) or len(b) != 2:
            raise ctx.error(f"expected between: [low, high], got {_kind(b)}", claim, "between", f"{field_}.between")
        lo, hi = (parse_number(v) for v in b)
        if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
            raise ctx.error("expected two numbers in between: [low, high]", claim, "between", f"{field_}.between")
        if not 0 <= lo < hi:
            raise ctx.error(f"expected 0 <= low < high in between, got [{b[0]}, {b[1]}]", claim, "between",
                            f"{field_}.between")
        source = claim["source"]
        if not isinstance(source, str) or not source.strip():
            raise ctx.error(f"expected source: to be text, got {_kind(source)}", claim, "source", f"{field_}.source")
        out[key] = Reported(str(key), float(lo), float(hi), str(source), ctx.line(node, key))
    return out
