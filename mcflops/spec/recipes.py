"""Prior forms that are recipes, not families: ``mfu: {calibrated: ...}`` and ``goodput: {failures: ...}``.

They need the file's hardware and other priors, so they are parsed once those are known and
turned into quantile tables (``mcflops.priors.table``) by the host-side formulas of
``mcflops.priors.calibrated`` (the shipped calibration fit) and ``mcflops.priors.goodput`` (Daly 2006).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from mcflops.numbers import parse_number
from mcflops.priors.calibrated import calibrated_prior, load_fit
from mcflops.priors.dist import Dist
from mcflops.priors.goodput import FAILURE_KEYS, UNCERTAIN_OK, Failures
from mcflops.priors.table import KNOT_PROBS, table_dist
from mcflops.spec.fields import Fields
from mcflops.spec.grammar import parse_dist
from mcflops.spec.layoutspec import parse_layout


def is_derived(node: Any) -> bool:
    """True for the recipe forms {calibrated: ...}, {failures: ...} and {layout: ...}."""
    return isinstance(node, Mapping) and ("calibrated" in node or "failures" in node or "layout" in node)


def is_calibrated(node: Any) -> bool:
    """The calibrated effective utilization (MFU x goodput), which already holds the downtime."""
    return isinstance(node, Mapping) and "calibrated" in node


def resolve(where: Fields, name: str, parent: Mapping, priors: Mapping, hardware, data: Mapping, arch=None):
    """Turn a recipe form into a Dist, once the file's hardware and other priors are known; a layout gives
    its :class:`mcflops.layout.LayoutPrior` (re-solvable at any count) instead."""
    node = parent[name]
    here = where.at(parent, name, f"priors.{name}")
    given = [k for k in ("calibrated", "failures", "layout") if k in node]
    if len(given) > 1:
        raise here.error(f"give one of calibrated:, failures: or layout:, not {' and '.join(given)}")
    if "layout" in node:
        if name != "mfu":
            raise here.error("layout: is an mfu prior (mfu: {layout: {tp: ..., pp: ..., global_batch: ...}})")
        return parse_layout(node, here, priors, hardware, data, arch)
    if "failures" in node:
        if name != "goodput":
            raise here.error("failures: is a goodput prior (goodput: {failures: {...}})")
        return failures_dist(node, here, hardware.count)
    if name != "mfu":
        raise here.error("calibrated: is an mfu prior (mfu: {calibrated: true}): the calibrated "
                         "effective utilization")
    return _calibrated(here, node, priors, hardware, data)


def _calibrated(here: Fields, node: Mapping, priors: Mapping, hardware, data: Mapping) -> Dist:
    here.keys(node, ("calibrated", "source"), where=" beside calibrated:", listing="expected calibrated: and source:",
              per_key=False)
    opt = node["calibrated"]
    if opt is True:
        opt = {}
    if not isinstance(opt, Mapping):
        raise here.error("expected calibrated: true or calibrated: {org: <name>, moe: true|false}", node, "calibrated")
    here.keys(opt, ("org", "moe", "year"), where=" in calibrated:", listing="expected org, moe, year", per_key=False)
    if "moe" in opt and not isinstance(opt["moe"], bool):
        raise here.error("expected moe: true or false", opt, "moe")
    year = opt.get("year")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int) or not 2000 <= year <= 2100):
        raise here.error("expected year: the calendar year of the run, e.g. 2026", opt, "year")
    org = here.text(opt, "org", expected="org: <name> (e.g. Meta)", got=False)
    source = here.text(node, "source", expected="source: to be text", got=False)
    err = here.error

    g = priors.get("goodput")  # None here: a goodput recipe not resolved yet, still a goodput prior
    if "goodput" in priors and (g is None or not (g.family == "point" and g.params["value"] == 1.0)):
        raise err("mfu: {calibrated: true} is a prior on effective utilization (MFU x goodput, calibrated on "
                  "published hours that include downtime); remove the goodput prior, or give mfu its own prior")
    if data.get("flops", "6nd") != "6nd":
        raise err("the calibrated prior is in 6ND units (like implied_mfu in published_runs.yaml); "
                  "use flops: 6nd, or give mfu its own prior")
    if hardware.accelerator is None or "peak_flops" in priors:
        raise err("the calibrated prior needs hardware.accelerator (and no peak_flops prior): "
                  "the accelerator is one of its covariates")
    if hardware.precision not in ("bf16", "fp16"):
        raise err(f"the calibrated prior is against the dense 16-bit peak (published runs in FP8, like "
                  f"DeepSeek-V3, are measured against BF16 too); set hardware.precision: bf16, not "
                  f"{hardware.precision}")
    p = priors.get("params")
    if p is None or p.family not in ("point", "lognormal"):
        raise err("the calibrated prior needs priors.params as a number or a lognormal prior "
                  "(its median is a covariate)")
    params = p.params["value"] if p.family == "point" else math.exp(p.params["mu"])
    if "moe" in opt:
        moe = opt["moe"]
    else:
        arch = data.get("architecture")
        moe = bool(isinstance(arch, Mapping) and arch.get("experts"))

    # kept on disk (mcflops.diskcache; the fit ships with the package, whose bytes key every entry): its quantile
    # solve is most of a calibrated file's load, and `mcflops run`'s MFU in context loads one for every file
    from mcflops.diskcache import kept

    acc = hardware.accelerator
    u, s = kept("mcflops.spec.recipes.calibrated", f"{params!r} {acc} {moe} {org!r} {year!r}",
                lambda: calibrated_prior(load_fit(), params, acc, moe, org, KNOT_PROBS, year=year))
    return table_dist(KNOT_PROBS, u, source=f"{source} | {s}" if source else s)


def count_dependent(where: Fields, data: Mapping, hardware) -> dict[str, Failures]:
    """The priors that depend on the accelerator count, re-solvable at another one (the planning questions):
    ``goodput: {failures: ...}`` (already checked by :func:`resolve`)."""
    node = data["priors"]
    if not (isinstance(node.get("goodput"), Mapping) and "failures" in node["goodput"]):
        return {}
    return {"goodput": parse_failures(node["goodput"], where.at(node, "goodput", "priors.goodput"), hardware.count)}


def failures_dist(node: Any, here: Fields, hardware_count: int | None) -> Dist:
    """``goodput: {failures: {...}, source: ...}`` as a goodput prior at the file's count
    (:func:`parse_failures`); a goodput that leaves (0, 1], or is effectively zero, is refused here."""
    failures = parse_failures(node, here, hardware_count)  # its SpecError already names the file, line and field
    try:
        return failures.at(strict=True)
    except ValueError as e:  # the formula left (0, 1] over this prior, or the job cannot finish
        raise here.error(f"failures: {e}", node, "failures") from None


def parse_failures(node: Any, here: Fields, hardware_count: int | None) -> Failures:
    """Parse ``goodput: {failures: {...}, source: ...}`` and turn it into a goodput prior.

    ``rate_per_gpu_hour``, ``checkpoint_write_h`` and ``restart_h`` may be numbers or priors (at most
    one of them a prior, lognormal or uniform); ``count`` defaults to ``hardware.count``;
    ``checkpoint_interval_h`` is a number; ``checkpoint_write_h`` defaults to 0. Goodput decreases in
    each uncertain input, so its quantile at p is G(input quantile at 1 - p): exact at the knots of a
    quantile table (:func:`mcflops.priors.goodput.failures_prior`). ``here``: the prior's place in the file.
    """
    err = here.error
    here.keys(node, ("failures", "source"), where=" beside failures:", listing="expected failures: and source:",
              per_key=False)
    source = here.text(node, "source", expected="source: to be text", got=False)
    f = here.mapping(node, "failures", expected="failures: {rate_per_gpu_hour, count, checkpoint_interval_h, "
                     "checkpoint_write_h, restart_h}", got=False)
    here.keys(f, FAILURE_KEYS, listing=f"expected: {', '.join(FAILURE_KEYS)}", per_key=False)
    for req in ("rate_per_gpu_hour", "checkpoint_interval_h", "restart_h"):
        if req not in f:
            raise err(f"failures: missing {req}", f, None)

    values: dict[str, Any] = {}
    for k in ("count", "checkpoint_interval_h"):
        if k not in f:
            continue
        x = parse_number(f[k])
        if x is None or x <= 0 or (k == "count" and x != int(x)):
            what = "a whole number > 0" if k == "count" else "a number > 0 (hours)"
            raise err(f"expected {k}: {what}, got {f[k]!r}", f, k)
        values[k] = x
    if "count" not in values:
        if not hardware_count:
            raise err("failures: give count (accelerators in the job) or hardware.count", f, None)
        values["count"] = float(hardware_count)
    uncertain = None
    for k in UNCERTAIN_OK:
        if k not in f:
            values[k] = 0.0  # only checkpoint_write_h can be absent
            continue
        d: Dist = parse_dist(f[k], f"{here.field}.failures.{k}", here, f, k)
        if d.family == "point":
            if d.params["value"] < 0 or (k == "rate_per_gpu_hour" and d.params["value"] <= 0):
                raise err(f"expected {k} > 0, got {d.params['value']:g}", f, k)
            values[k] = d.params["value"]
            continue
        if uncertain is not None:
            raise err(f"failures: at most one uncertain input (both {uncertain[0]} and {k} are priors); "
                      "give the others as numbers", f, k)
        if d.family not in ("lognormal", "uniform") or d.low is not None or d.high is not None:
            raise err(f"failures: {k} may be a number, a lognormal or a uniform prior (got {d.family})", f, k)
        if d.family == "uniform" and d.params["low"] < 0:
            raise err(f"expected {k} >= 0, got uniform low {d.params['low']:g}", f, k)
        uncertain = (k, d)

    return Failures(values, uncertain, source)
