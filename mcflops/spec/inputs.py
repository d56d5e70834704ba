"""The ``priors:`` block: one prior per input of the model, inside the input's domain; the defaults a file
may leave out (goodput 1, the catalogue's peak and TDP, PUE 1)."""

from __future__ import annotations

import math
from typing import Mapping

from mcflops.priors.dist import Dist, support, tail_quantiles
from mcflops.spec import notes, recipes
from mcflops.spec.fields import Fields
from mcflops.spec.grammar import parse_dist
from mcflops.spec.types import INPUTS, Hardware

MAX_LOG_INPUT = 100 * math.log(10)  # every input's extreme draws within 1e-100..1e100


def parse_priors(where: Fields, data: Mapping, flops: str, params_optional: bool = False) -> dict[str, Dist | None]:
    """The file's priors in file order; None stands for a recipe ({calibrated: ...}, {failures: ...}),
    resolved by :func:`resolve_recipes` once the hardware is known, or a ratio ({relative_to: ...}, resolved by
    mcflops.spec.ratio). ``params_optional``: the architecture counts them."""
    node = where.mapping(data, "priors", "priors")
    where.keys(node, INPUTS, "priors", what="input", listing=f"inputs: {', '.join(INPUTS)}")
    priors: dict[str, Dist | None] = {}
    for key in node:
        if recipes.is_derived(node[key]) or (isinstance(node[key], Mapping) and "relative_to" in node[key]):
            priors[key] = None  # keeps the file's order
            continue
        dist = parse_dist(node[key], f"priors.{key}", where, node, key)
        check_domain(where, key, dist, node)
        flat = notes.spread_error(key, dist)
        if flat:
            raise where.error(flat, node, key, f"priors.{key}")
        priors[key] = dist
    required = ("tokens", "mfu") if flops in ("megatron", "architecture") or params_optional \
        else ("params", "tokens", "mfu")
    for req in required:
        if req not in priors:
            raise where.error(f"missing required prior '{req}' ({INPUTS[req][3]})", data, "priors", f"priors.{req}")
    return priors


def resolve_recipes(where: Fields, data: Mapping, priors: dict[str, Dist | None], hardware: Hardware,
                    arch=None) -> dict:
    """Turn the recipes into priors (they need the hardware and the other priors), in place; returns the
    count-dependent ones that resolved to a re-solvable object (a layout's MFU)."""
    node = data["priors"]
    dependent = {}
    for key in [k for k, d in priors.items() if d is None]:
        got = recipes.resolve(where, key, node, priors, hardware, data, arch)
        if not isinstance(got, Dist):
            dependent[key], got = got, got.at()
        priors[key] = got
        check_domain(where, key, priors[key], node)
    return dependent


def fill_defaults(priors: dict[str, Dist], hardware: Hardware, flops: str, calibrated: bool = False) -> None:
    """The priors a file may leave out, in place: what a missing input means. Their sources say so, and the
    notes (:mod:`mcflops.spec.notes`) read them. ``calibrated``: the mfu prior is the calibrated effective
    utilization, which already holds the downtime goodput would."""
    if "goodput" not in priors:
        priors["goodput"] = Dist("point", {"value": 1.0},
                                 source=notes.DEFAULT_GOODPUT_CALIBRATED if calibrated else notes.DEFAULT_GOODPUT)
    if hardware.peak_flops is not None and "peak_flops" not in priors:
        priors["peak_flops"] = Dist("point", {"value": hardware.peak_flops},
                                    source=notes.peak_source(hardware.accelerator, hardware.precision))
    if hardware.tdp_w is not None and "power" not in priors:
        priors["power"] = Dist("point", {"value": hardware.tdp_w}, source=notes.tdp_source(hardware.accelerator))
    if "power" in priors and "pue" not in priors:
        priors["pue"] = Dist("point", {"value": 1.0}, source=notes.DEFAULT_PUE)
    if flops in ("megatron", "architecture"):
        priors.pop("params", None)  # these conventions' count is set by the architecture alone


def check_domain(where: Fields, name: str, dist: Dist, node: Mapping) -> None:
    """The prior stays in the input's domain, and its 1e-15 tails within 1e-100..1e100."""
    lo, hi, _, meaning = INPUTS[name]
    s_lo, s_hi = support(dist)
    bad_low = s_lo < lo or (s_lo == lo and dist.family == "point")
    if name == "pue":
        bad_low = s_lo < lo
    if bad_low or s_hi > hi:
        rng = f"[{lo:g}, {hi:g}]" if name == "pue" else f"(0, {hi:g}]"
        hint = " (bound it with low:/high:, or use beta for a fraction)" if dist.family in ("normal", "lognormal") \
            else ""
        if INPUTS[name][2] == "fraction" and 2 <= s_lo and s_hi <= 100:  # a percentage where a fraction goes
            hint = (f"; did you mean {s_hi / 100:.2f}?" if dist.family == "point" else
                    f"; a fraction, not a percentage: did you mean [{s_lo / 100:.2f}, {s_hi / 100:.2f}]?")
        raise where.error(f"{meaning} must stay in {rng}, but this {dist.family} prior reaches "
                          f"[{s_lo:g}, {s_hi:g}]{hint}", node, name, f"priors.{name}")
    t_lo, t_hi = tail_quantiles(dist)  # what the sampler's table will hold at z = -8 and z = 8
    if not (t_lo > 0 and math.isfinite(t_hi)) or max(abs(math.log(t_lo)), abs(math.log(t_hi))) > MAX_LOG_INPUT:
        raise where.error(f"this {dist.family} prior reaches [{t_lo:.3g}, {t_hi:.3g}] in its 1e-15 tails; "
                          f"{meaning} must stay positive and within 1e-100..1e100 (check the units and the "
                          "parameters)", node, name, f"priors.{name}")
