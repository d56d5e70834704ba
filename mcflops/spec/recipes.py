"""Prior forms that are recipes, not families: ``mfu: {calibrated: ...}`` and ``goodput: {failures: ...}``.

They need the file's hardware and other priors, so they are parsed once those are known (load.py) and
turned into quantile tables (``mcflops.priors.table``) by the host-side formulas of
``mcflops.priors.calibrated`` (the shipped calibration fit) and ``mcflops.priors.goodput`` (Daly 2006).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from mcflops.errors import closest
from mcflops.numbers import parse_number
from mcflops.priors.calibrated import FIT_FILE, accelerator_family, load_fit, log_u_quantiles, predictive
from mcflops.priors.dist import Dist
from mcflops.priors.goodput import FAILURE_KEYS, UNCERTAIN_OK, failures_prior
from mcflops.priors.table import KNOT_PROBS, table_dist
from mcflops.spec.grammar import parse_dist

def is_derived(node: Any) -> bool:
    """True for the recipe forms {calibrated: ...} and {failures: ...}."""
    return isinstance(node, Mapping) and ("calibrated" in node or "failures" in node)


def resolve(ctx, name: str, parent: Mapping, priors: Mapping, hardware, data: Mapping):
    """Turn a recipe form into a Dist, once the file's hardware and other priors are known."""
    node = parent[name]
    field_ = f"priors.{name}"
    if "calibrated" in node and "failures" in node:
        raise ctx.error("give either calibrated: or failures:, not both", parent, name, field_)
    if "failures" in node:
        if name != "goodput":
            raise ctx.error("failures: is a goodput prior (goodput: {failures: {...}})", parent, name, field_)
        from mcflops.spec.recipes import failures_dist

        return failures_dist(node, field_, ctx, parent, name, hardware.count)
    if name != "mfu":
        raise ctx.error("calibrated: is an mfu prior (mfu: {calibrated: true}): the calibrated "
                        "effective utilization", parent, name, field_)
    return _calibrated(ctx, node, field_, parent, priors, hardware, data)


def _calibrated(ctx, node: Mapping, field_: str, parent: Mapping, priors: Mapping, hardware, data: Mapping):
    def err(message: str, where: Any = None, k: Any = None):
        return ctx.error(message, where if where is not None else parent, k if where is not None else "mfu",
                         field_)

    extra = [k for k in node if k not in ("calibrated", "source")]
    if extra:
        raise err(f"unknown key '{extra[0]}' beside calibrated: (expected calibrated: and source:)", node, extra[0])
    opt = node["calibrated"]
    if opt is True:
        opt = {}
    if not isinstance(opt, Mapping):
        raise err("expected calibrated: true or calibrated: {org: <name>, moe: true|false}", node, "calibrated")
    for k in opt:
        if k not in ("org", "moe"):
            raise err(f"unknown key '{k}' in calibrated: (expected org, moe)", opt, k)
    if "moe" in opt and not isinstance(opt["moe"], bool):
        raise err("expected moe: true or false", opt, "moe")
    org = opt.get("org")
    if org is not None and not isinstance(org, str):
        raise err("expected org: <name> (e.g. Meta)", opt, "org")
    source = node.get("source")
    if source is not None and not isinstance(source, str):
        raise err("expected source: to be text", node, "source")

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

    fit = load_fit()
    mean, sd, shift, sigma = predictive(fit, params, hardware.accelerator, moe, org)
    q = log_u_quantiles(mean, sd, shift, sigma, KNOT_PROBS)
    u = np.minimum(np.exp(q), 1.0 - 1e-9)
    fam = accelerator_family(hardware.accelerator)
    who = f"org {org}" if org in fit["orgs"] else (f"new org ({org} is not in the data)" if org else "a new org")
    i5, i50, i95 = (int(np.argmin(abs(KNOT_PROBS - x))) for x in (0.05, 0.5, 0.95))
    s = (f"calibrated effective utilization (MFU x goodput) for a run like this: {who}, {hardware.accelerator} "
         f"({fam}{'' if fam in fit['families'] else ', a family not in the data'}), N {params:.4g}, "
         f"{'MoE' if moe else 'dense'}; posterior predictive of the model fitted to {fit['n_runs']} published "
         f"runs (mcflops/data/{FIT_FILE}, {fit['fit_id']}): p5/p50/p95 {u[i5]:.3f}/{u[i50]:.3f}/{u[i95]:.3f}")
    return table_dist(KNOT_PROBS, u, source=f"{source} | {s}" if source else s)


def failures_dist(node: Any, field_: str, ctx, parent: Any, key: Any, hardware_count: int | None):
    """Parse ``goodput: {failures: {...}, source: ...}`` and turn it into a goodput prior.

    ``rate_per_gpu_hour``, ``checkpoint_write_h`` and ``restart_h`` may be numbers or priors (at most
    one of them a prior, lognormal or uniform); ``count`` defaults to ``hardware.count``;
    ``checkpoint_interval_h`` is a number; ``checkpoint_write_h`` defaults to 0. Goodput decreases in
    each uncertain input, so its quantile at p is G(input quantile at 1 - p): exact at the knots of a
    quantile table (:func:`mcflops.priors.goodput.failures_prior`).
    """
    from mcflops.priors.dist import Dist

    def err(message: str, where: Any = None, k: Any = None):
        return ctx.error(message, where if where is not None else parent, k if where is not None else key, field_)

    extra = [k for k in node if k not in ("failures", "source")]
    if extra:
        raise err(f"unknown key '{extra[0]}' beside failures: (expected failures: and source:)", node, extra[0])
    source = node.get("source")
    if source is not None and not isinstance(source, str):
        raise err("expected source: to be text", node, "source")
    f = node["failures"]
    if not isinstance(f, Mapping):
        raise err("expected failures: {rate_per_gpu_hour, count, checkpoint_interval_h, checkpoint_write_h, "
                  "restart_h}", node, "failures")
    for k in f:
        if k not in FAILURE_KEYS:
            raise err(f"unknown key '{k}'{closest(k, FAILURE_KEYS)} (expected: {', '.join(FAILURE_KEYS)})", f, k)
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
        d: Dist = parse_dist(f[k], f"{field_}.failures.{k}", ctx, f, k)
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

    try:
        return failures_prior(values, uncertain, source)
    except ValueError as e:  # the formula left (0, 1] over this prior
        raise err(f"failures: {e}", node, "failures") from None
