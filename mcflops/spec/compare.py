"""The ``compare:`` block: how `mcflops compare A B` draws B's inputs against A's, when B says so.

    compare:
      couple: {mfu: 0.7}    # rank (Spearman) correlation of A's and B's MFU draws, in [-1, 1]

An input with identical priors in both files shares its draws anyway; one whose priors differ is drawn
independently unless coupled here or by ``--couple`` (which adds to this block and overrides it). An input
written as a ratio to A (``mfu: {relative_to: A.yaml, ratio: <prior>}``, mcflops.spec.ratio) is A's draw
times the ratio's; its forms travel in :attr:`CompareOptions.ratios`.
Checked at load against this file (an uncertain input, a correlation in [-1, 1]); whether the input is
uncertain in A too is checked when the two files meet (``mcflops.analysis.compare``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from mcflops.numbers import parse_number
from mcflops.spec.fields import Fields
from mcflops.spec.resolved import plain

COMPARE_KEYS = ("couple",)


@dataclass(frozen=True)
class CompareOptions:
    """The ``compare:`` block: {input: rank correlation} as pairs, each with its line in the file."""

    couple: tuple[tuple[str, float], ...] = ()
    lines: tuple[int | None, ...] = ()
    written: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    ratios: tuple[Any, ...] = ()  # mcflops.spec.ratio.Ratio: the inputs written as a ratio to another file's

    def ratio(self, name: str):
        """The ratio form of input ``name``, or None."""
        return next((r for r in self.ratios if r.name == name), None)


def compare_block(where: Fields, data: Mapping, spec, ratios: tuple = ()) -> CompareOptions:
    """The file's ``compare:`` block (``spec``: the file's priors, known by now; ``ratios``: its ratio priors)."""
    if "compare" not in data:
        return CompareOptions(ratios=tuple(ratios))
    node = where.mapping(data, "compare", "compare", "a mapping (couple: {input: rank correlation})")
    where.keys(node, COMPARE_KEYS, "compare")
    couple = node.get("couple") or {}
    if not isinstance(couple, Mapping):
        raise where.error("expected couple: {input: rank correlation}, e.g. {mfu: 0.7}", node, "couple",
                          "compare.couple")
    pairs, lines = [], []
    for name, raw in couple.items():
        here = where.at(couple, name, f"compare.couple.{name}")
        d = spec.priors.get(name)
        if d is None or d.family == "point":
            state = "not an input of this file" if d is None else "a point value here"
            raise here.error(f"{name} is {state}: only an uncertain input can be coupled")
        rho = parse_number(raw)
        if rho is None or not -1.0 <= rho <= 1.0:
            raise here.error(f"expected a rank correlation between -1 and 1, got {raw!r}")
        if any(r.name == name for r in ratios):
            raise here.error(f"{name} is a ratio to A (relative_to:): its draws are A's times the ratio's, so it "
                             "cannot also be coupled")
        pairs.append((str(name), float(rho)))
        lines.append(here.line(couple, name))
    return CompareOptions(tuple(pairs), tuple(lines), written=plain(node), ratios=tuple(ratios))


def compare_schema(number_ref: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The block in the JSON Schema (``number_ref``: the schema's number; ``inputs``: its input-name enum)."""
    return {"type": "object", "additionalProperties": False, "properties": {
        "couple": {"type": "object", "propertyNames": inputs, "additionalProperties": {"$ref": number_ref},
                   "description": "rank correlation of A's and B's draws of an input, in [-1, 1]"}}}
