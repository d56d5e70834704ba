"""An MFU prior set by hand, read against the published runs: a WARNING when its median
MFU x goodput falls outside the 90% band of published runs on the same accelerator generation, naming the
comparable runs; and a WARNING when the calibrated prior has no run on the file's chip and forecasts it from
others. Before, a guess outside everything published, or a fallback, was said only in a source string.

The band is the calibrated prior's (mcflops.priors.calibrated: the hierarchical fit to
mcflops/data/published_runs.yaml, the posterior predictive of effective utilization u = MFU x goodput for a
new run on that accelerator at that size), so it is compared with the hand-set MFU times the hand-set
goodput. It is measured against the dense 16-bit peak in 6ND units, so the comparison is made only where the
file's prior is too (precision bf16 or fp16, flops 6nd), and only for a generation with published runs;
a calibrated prior that falls back for a chip without runs says so as a WARNING of its own.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

from mcflops.priors.dist import Dist

USED = "mfu: {calibrated: true}"  # the prior that puts this band in place of the hand-set one


def evidence_notes(node: Mapping[str, Any], priors: Mapping[str, Dist], accelerator: str | None,
                   precision: str, flops: str, moe: bool) -> list[str]:
    """The notes for the file's mfu prior against the published runs (module docstring). ``node``: the
    file's ``priors:`` mapping as written (which recipe, if any, made the mfu prior)."""
    from mcflops.spec import recipes

    written = node.get("mfu")
    mfu = priors.get("mfu")
    if mfu is None or accelerator is None:
        return []
    if recipes.is_calibrated(written):
        return _fallback(mfu, accelerator)
    if recipes.is_derived(written) or precision not in ("bf16", "fp16") or flops != "6nd":
        return []  # a layout prior has its own account; other units are not the band's
    return _against_band(priors, accelerator, moe)


def _fallback(mfu: Dist, accelerator: str) -> list[str]:
    src = mfu.source or ""
    if "no published run on" not in src:
        return []
    from mcflops.priors.calibrated import describe

    why = src[src.index("no published run on"):].split(";")[0]
    return [f"WARNING: priors.mfu: {why}, so the calibrated prior for the {accelerator} is a forecast from "
            f"other chips ({describe(mfu) or 'see its source'}); a pilot measurement on the {accelerator} "
            "would say more than any published run can"]


def _against_band(priors: Mapping[str, Dist], accelerator: str, moe: bool) -> list[str]:
    from mcflops.priors.calibrated import FAMILY, accelerator_family
    from mcflops.priors.quantiles import median

    if accelerator not in FAMILY:
        return []
    p = priors.get("params")
    if p is None:
        return []
    band = published_band(accelerator, float(median(p)), bool(moe))
    if band is None:  # no published run on this generation: nothing to read the guess against
        return []
    p5, p50, p95, n, near = band
    g = priors.get("goodput")
    m50 = float(median(priors["mfu"]))
    g50 = float(median(g)) if g is not None else 1.0
    u = m50 * g50
    if p5 <= u <= p95:
        return []  # inside: the guess is one the published runs allow; the report's MFU context shows where
    what = (f"MFU x goodput at their medians, {u:.3f} ({m50:.3f} x {g50:.3f}),"
            if g is not None and g50 != 1.0 else f"MFU at its median, {u:.3f} (no downtime),")
    fam = accelerator_family(accelerator)
    side = "above" if u > p95 else "below"
    runs = (f"; comparable published runs ({fam}, {'MoE' if moe else 'dense'}, within 3x the parameters): "
            + ", ".join(f"{i} {v:.3f}" for i, v in near)) if near else ""
    return [f"WARNING: priors.mfu: {what} is {side} the 90% band of published runs on {fam} for a run like this: "
            f"median {p50:.3f}, 90% [{p5:.3f}, {p95:.3f}] (the calibrated prior, fit to {n} runs){runs}; GPU-hours "
            f"read {'optimistic' if side == 'above' else 'pessimistic'} unless this run will "
            f"{'beat' if side == 'above' else 'trail'} them; {USED} uses that band as the prior"]


def published_band(accelerator: str, params: float, moe: bool):
    """(p5, p50, p95) of the calibrated prior's u for a run like this (no organisation), the fit's number of
    runs, and the published runs on the same generation, dense or MoE alike, within 3x the parameters, with
    their implied u; None where the fit has no run on this generation. Kept on disk (mcflops/diskcache.py): it costs
    the calibrated prior's quantile solve and a read of the runs, and a `validate` should not pay it twice."""
    from mcflops.diskcache import kept

    if not (params > 0 and math.isfinite(params)):
        return None
    return kept("mcflops.spec.evidence.published_band", f"{accelerator} {params!r} {moe}",
                lambda: _band(accelerator, params, moe))


def _band(accelerator: str, params: float, moe: bool):
    from mcflops.priors.calibrated import accelerator_family, calibrated_prior, load_fit

    fit = load_fit()
    fam = accelerator_family(accelerator)
    if fam not in fit["families"]:
        return None
    u, _ = calibrated_prior(fit, params, accelerator, moe, None, [0.05, 0.5, 0.95])
    near = [(i, u_run) for i, acc, run_moe, active, u_run in _implied()
            if accelerator_family(acc) == fam and run_moe == moe and 1 / 3 <= active / params <= 3]
    return float(u[0]), float(u[1]), float(u[2]), int(fit["n_runs"]), tuple(sorted(near, key=lambda x: x[1]))


def published_hours() -> tuple[tuple[str, str, float], ...]:
    """(id, accelerator, GPU-hours) of each published run: what a file that observes a run's hours may name
    (analysis.context). Kept on disk as :func:`published_band` is: the YAML parse is most of its cost."""
    from mcflops.diskcache import kept

    return kept("mcflops.spec.evidence.published_hours", "", _hours)


def _hours() -> tuple[tuple[str, str, float], ...]:
    return tuple((r["id"], r["accelerator"], float(r["hours"])) for r in _runs()["runs"]
                 if isinstance(r.get("hours"), (int, float)))


@functools.cache
def _runs() -> Mapping[str, Any]:
    """published_runs.yaml, parsed once per process (the file ships with the package)."""
    import importlib.resources

    from ruamel.yaml import YAML

    text = importlib.resources.files("mcflops").joinpath("data", "published_runs.yaml").read_text("utf-8")
    return YAML(typ="safe", pure=True).load(text)


@functools.cache
def _implied() -> tuple[tuple[str, str, bool, float, float], ...]:
    """(id, accelerator, moe, active parameters, implied u) of each published run with a catalogued peak: read
    once per process, since the file ships with the package and every load of a prior file may ask (the
    YAML parse costs more than the rest of a load)."""
    data = _runs()
    peak = data["peak_flops_dense_bf16"]
    # implied u = 6 N D / (P H 3600), as published_runs.yaml defines it (Kaplan et al. 2020, C = 6ND)
    return tuple((r["id"], r["accelerator"], bool(r["moe"]), float(r["params_active"]),
                  6 * r["params_active"] * r["tokens"] / (peak[r["accelerator"]] * r["hours"] * 3600))
                 for r in data["runs"] if r["accelerator"] in peak)
