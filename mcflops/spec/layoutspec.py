"""``mfu: {layout: {...}, efficiency: {...}, source: ...}``: the MFU prior from the parallel layout.

The layout's fields are numbers, names and flags (:class:`mcflops.layout.Layout`). An overlap flag is
``true``, ``false`` or ``unknown``; ``unknown``, also what an unstated flag gets, makes the prior the
equal-weight mixture of both settings (:class:`mcflops.layout.LayoutPrior`; the 1/2 is a prior choice): a
file that does not say how its stack overlaps gets that uncertainty rather than a guess. Under ``fsdp: true``
the data-parallel two are on unless stated (FSDP's prefetch and asynchronous reduce-scatter are its design,
Zhao et al. 2023, Sec. 3.3). ``recompute``, ``micro_batch`` and, under ``schedule: interleaved``, ``vpp`` left
unstated (or written ``unknown``) are mixed the same way over the settings that run and fit in memory
(:mod:`mcflops.layout.unstated`); the resolved file writes them ``unknown``. ``efficiency:`` may override any of
the efficiency priors (:data:`mcflops.layout.PARAMS`), which default to the shipped fit
(``mcflops/data/layout_fit.json``): a new software stack's, or with ``stack:`` one the fit has rows of (its fitted
efficiencies and its own residual scale: sharper where the stack is known, as wide as its rows say it is). The model needs the architecture's shape (its MLP width) and the
accelerator's peak, memory and bandwidths (the catalogue's, or ``nvlink_gb_s``/``nvlink_domain``/
``network_gb_s`` in the layout). A layout that cannot hold the model in the accelerator's memory, in any
setting of what it leaves unstated, is refused.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping

from mcflops import chain
from mcflops import hardware as catalogue
from mcflops.errors import kind
from mcflops.layout import ACTIVATION_ERROR, FRACTIONS, OPTIONAL, OVERLAP_FLAGS, PARAMS, RECOMPUTE, SCHEDULES, Layout, LayoutPrior, \
    load_fit, overlap_defaults, problem
from mcflops.layout.compute import attention_share
from mcflops.layout.fit import accelerator_priors, stack_entry, stack_names
from mcflops.layout.moe import MOE_FLAGS, MOE_KEYS, MOE_PARAMS, PRIORS as MOE_PRIORS, ROUTERS
from mcflops.layout.prior import shipped_row_sigma
from mcflops.layout.unstated import MIXABLE, candidates, combinations, leanest
from mcflops.numbers import parse_number
from mcflops.priors.quantiles import median, ppf
from mcflops.spec.fields import Fields
from mcflops.spec.grammar import parse_dist

INT_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "zero", "grad_bytes",
            "nvlink_domain", "etp")
FLOAT_KEYS = ("nvlink_gb_s", "network_gb_s", "hbm_gb_s", "capacity_factor")
BOOL_KEYS = ("sequence_parallel", "fsdp", "recompute_moe", *OVERLAP_FLAGS, *MOE_FLAGS)
KEYS = (*INT_KEYS, *FLOAT_KEYS, "recompute", "schedule", "router", *BOOL_KEYS)
# a mixture of experts' own fields (mcflops.layout.moe): refused for a dense model
EXPERT_KEYS = (*MOE_KEYS, *MOE_FLAGS)
UNKNOWN = "unknown"  # an overlap flag's third value: both settings, equal weight
_FIT_PATH = str(Path(__file__).resolve().parents[1] / "data" / "layout_fit.json")


def parse_layout(node: Mapping, here: Fields, priors: Mapping, hardware, data: Mapping, arch) -> LayoutPrior:
    """Parse the recipe into a :class:`LayoutPrior` at the file's count (checks the memory there)."""
    here.keys(node, ("layout", "stack", "efficiency", "residual", "source"), where=" beside layout:",
              listing="expected layout:, stack:, efficiency:, residual: and source:", per_key=False)
    err = here.error
    lay = here.mapping(node, "layout", expected="layout: {tp, pp, dp, cp, ep, vpp, micro_batch, global_batch, "
                       "recompute, schedule, zero}", got=False)
    here.keys(lay, KEYS, listing=f"expected: {', '.join(KEYS)}", per_key=False)
    source = here.text(node, "source", expected="source: to be text", got=False)
    if arch is None or arch.shape() is None:
        raise err("mfu: {layout: ...} needs an architecture: block with its MLP width (ffn), or a preset")
    if hardware.accelerator is None:
        raise err("mfu: {layout: ...} needs hardware.accelerator (its memory and bandwidths)")
    if not hardware.count:
        raise err("mfu: {layout: ...} needs hardware.count (the data-parallel degree follows from it)")
    acc = catalogue.get(hardware.accelerator)
    moe = arch.shape().moe
    if not moe and any(k in lay for k in EXPERT_KEYS):
        k = next(k for k in EXPERT_KEYS if k in lay)
        raise err(f"layout.{k} is for a mixture of experts (architecture.experts)", lay, k)

    vals: dict[str, Any] = {}
    for k in INT_KEYS:
        if k in lay and not (k in MIXABLE and lay[k] == UNKNOWN):
            low = 0 if k == "zero" else 1
            x = parse_number(lay[k])
            if x is None or x != int(x) or x < low:
                also = " or unknown" if k in MIXABLE else ""
                raise err(f"expected layout.{k}: a whole number >= {low}{also}, got {lay[k]!r}", lay, k)
            vals[k] = int(x)
    for k in FLOAT_KEYS:
        if k in lay:
            x = parse_number(lay[k])
            if x is None or (x < 1.0 if k == "capacity_factor" else x <= 0):
                what = "a number >= 1" if k == "capacity_factor" else "a number > 0 (GB/s)"
                raise err(f"expected layout.{k}: {what}, got {lay[k]!r}", lay, k)
            vals[k] = float(x)
    for k, allowed in (("recompute", (*RECOMPUTE, UNKNOWN)), ("schedule", SCHEDULES), ("router", ROUTERS)):
        if k in lay:
            if lay[k] not in allowed:
                raise err(f"expected layout.{k}: one of {', '.join(allowed)}, got {lay[k]!r}", lay, k)
            if lay[k] != UNKNOWN:
                vals[k] = str(lay[k])
    for k in BOOL_KEYS:
        if k in (*OVERLAP_FLAGS, *MOE_FLAGS) and lay.get(k) == UNKNOWN:
            continue
        if k in lay and not isinstance(lay[k], bool):
            also = ", false or unknown" if k in (*OVERLAP_FLAGS, *MOE_FLAGS) else " or false"
            raise err(f"expected layout.{k}: true{also}, got {kind(lay[k])}", lay, k)
    # unstated overlap flags: unknown (mixed), except the data-parallel two under FSDP, on by its design
    by_design = {k: v for k, v in overlap_defaults(True).items() if v} if lay.get("fsdp") else {}
    flags = {k: lay.get(k, by_design.get(k, UNKNOWN)) for k in OVERLAP_FLAGS}
    if moe:  # unstated: unknown, except DualPipe's all-to-all overlap, its design (DeepSeek-V3 Sec. 3.2.1)
        design = {"ep_comm_overlap": True} if lay.get("schedule") == "dualpipe" else {}
        flags.update({k: lay.get(k, design.get(k, UNKNOWN)) for k in MOE_FLAGS})
    unknown = tuple(k for k in (*OVERLAP_FLAGS, *MOE_FLAGS) if flags.get(k) == UNKNOWN)
    vals.update({k: v is True for k, v in flags.items()})
    if lay.get("fsdp"):
        if vals.get("zero", 3) != 3:
            raise err("layout: fsdp: true is ZeRO stage 3 (fully sharded); leave zero out or set zero: 3", lay, "zero")
        vals["zero"] = 3
    for k in ("sequence_parallel", "recompute_moe"):
        if k in lay:
            vals[k] = bool(lay[k])
    if "global_batch" not in vals:
        raise err("layout: missing global_batch (sequences per optimizer step)", lay, None)
    if vals.get("zero", 1) > 3:
        raise err(f"expected layout.zero: 0, 1, 2 or 3, got {vals['zero']}", lay, "zero")
    if vals.get("grad_bytes", 4) not in (2, 4):
        raise err(f"expected layout.grad_bytes: 2 (bf16) or 4 (fp32), got {vals['grad_bytes']}", lay, "grad_bytes")
    if (vals.get("vpp", 1) > 1 or lay.get("vpp") == UNKNOWN) and "schedule" not in vals:
        vals["schedule"] = "interleaved"
    if lay.get("vpp") == UNKNOWN and vals["schedule"] != "interleaved":
        raise err(f"layout: vpp: unknown is the virtual stages of schedule: interleaved, not {vals['schedule']}",
                  lay, "vpp")
    # unstated: mixed over what runs and fits (mcflops.layout.unstated); the schedule's vpp only when interleaved
    mixed = tuple(k for k in MIXABLE if k not in vals and (k != "vpp" or vals.get("schedule") == "interleaved"))
    shape, counts = arch.shape(), arch.counts()
    n = hardware.count
    layout = Layout(**vals)
    # the smallest setting of each mixed field stands in until the memory check picks the settings that fit: a
    # problem it has (too few layers to interleave, too small a batch for one sequence per replica) every one has
    layout = dataclasses.replace(layout, **{k: (candidates(k, layout, shape, n) or (2,))[0] for k in mixed})
    bad = problem(layout, shape, n)
    if bad is not None:
        raise err(f"layout: {bad[1]}", lay, bad[0] if bad[0] in lay else None)

    for k in ("nvlink_gb_s", "nvlink_domain", "network_gb_s", "hbm_gb_s"):
        if k not in vals:
            v = getattr(acc, k, None)
            if v is None and k == "hbm_gb_s" and not moe:  # a dense model's memory-bound term is left out (a caveat)
                continue
            if v is None:
                raise err(f"layout: the catalogue has no {k} for {acc.id}; give layout.{k}", lay, None)
            layout = dataclasses.replace(layout, **{k: v})
    stack = _stack(node, here)
    eff = _efficiency(node, here, acc.id, moe, hardware.precision, stack)
    try:
        peak = acc.peak(hardware.precision)
    except catalogue.HardwareError as x:
        raise err(f"layout: {x}") from None
    conv = chain.CONVENTIONS[data.get("flops", "6nd")]
    n_med = median(priors["params"]) if priors.get("params") is not None else None
    counting = conv.per_token(arch, n_med) / counts.training_flops_per_token
    prior = LayoutPrior(layout, shape, counts, peak, acc.memory_gb, eff, counting, n, source, acc.id, unknown,
                        row_sigma=_residual(node, here, stack),
                        caveats=_caveats(node, acc.id, hardware.precision, stack, layout.hbm_gb_s is None,
                                         attention_share(counts), "attention" in eff),
                        stack=stack)
    if mixed:
        mem_of = prior.memory_of()
        combos, tight = combinations(layout, shape, n, mixed, mem_of)
        if combos:
            prior = dataclasses.replace(prior, layout=dataclasses.replace(layout, **dict(zip(mixed, combos[0]))),
                                        mixed=mixed, combos=combos, tight=tight)
        elif mem_of is not None:  # none fits: the message is the leanest setting's
            prior = dataclasses.replace(prior, layout=leanest(layout, shape, n, mixed, mem_of))
    mem = prior.memory()
    if mem is not None and mem.cannot_fit:
        d = mem.to_dict()
        raise err(f"layout: needs {d['total_gb']:.1f} GB per accelerator ({mem.states / 1e9:.1f} GB model states, "
                  f"{d['activations_gb']:.1f} GB activations, at least {mem.activations * (1 - ACTIVATION_ERROR) / 1e9:.1f} "
                  f"within the estimate's error) but {acc.id} has {d['capacity_gb']:.0f} GB; raise tp/pp, shard with "
                  "zero, or recompute activations", lay, None)
    try:
        prior.at(strict=True)
    except ValueError as x:
        raise err(f"layout: {x}") from None
    return prior


def _stack(node: Mapping, here: Fields) -> str | None:
    """``stack:``, a software stack the shipped fit has rows of (None where the file states none)."""
    if "stack" not in node:
        return None
    names = stack_names(load_fit())
    x = node["stack"]
    if not isinstance(x, str) or x not in names:
        raise here.error(f"expected stack: one of the fitted stacks ({', '.join(names) or 'none shipped'}), got {x!r}; "
                         "leave it out for a stack the fit has no rows of", node, "stack", f"{here.field}.stack")
    return x


# the attention core's share of the training FLOPs (mcflops.layout.compute.attention_share) past which a layout prior
# without the attention term says it reads fast, and past which it warns: the bands where runs held out of the fit
# fell below their prior's 5th percentile more often than 5% of the time (about one in nine), and about half of the time
# (benchmarks/RESULTS.md, "Held-out series")
LONG_CONTEXT_NOTE, LONG_CONTEXT_WARNING = 0.2, 0.4
SEQUENCE_BLIND = "the model does not see the sequence length"  # the caveat's mark (a pilot drops it: spec.pilots)


def _caveats(node: Mapping, acc_id: str, precision: str | None, stack: str | None = None,
             no_hbm: bool = False, share: float = 0.0, attention: bool = False) -> tuple[str, ...]:
    """What the shipped priors cannot say for this file: an FP8 run on an accelerator whose FP8 GEMM efficiency the
    fit does not export (for the file's stack, or a new one) reads the BF16 family's against the FP8 peak; an
    accelerator without an HBM bandwidth leaves the memory-bound operations' time out; a long sequence (the
    attention core ``share`` of the FLOPs) without the attention term (``attention``: the priors have it) reads fast."""
    out = []
    if share >= LONG_CONTEXT_NOTE and not attention:
        level = "WARNING: " if share >= LONG_CONTEXT_WARNING else ""
        out.append(f"{level}layout: the attention core is {share:.0%} of this run's training FLOPs, and the shipped "
                   f"layout fit has no term for it ({SEQUENCE_BLIND}). Runs like this one, "
                   "held out of the fit, measured below the prior's 5th percentile "
                   f"{'about half' if share >= LONG_CONTEXT_WARNING else 'more often than 5%'} of the time "
                   "(benchmarks/RESULTS.md, 'Held-out series'): read this MFU as optimistic, or state "
                   "efficiency.attention, the attention kernels' efficiency relative to the GEMMs (what the "
                   "benchmark rows measure of it: RESULTS, 'The attention core's term')")
    gemm_given = isinstance(node.get("efficiency"), Mapping) and "gemm" in node["efficiency"]
    if precision == "fp8" and not gemm_given and f"{acc_id}/fp8" not in stack_entry(load_fit(), stack)["accelerator"]:
        out.append(f"layout: GEMM efficiency on {acc_id} in fp8 is the shipped BF16 prior taken against the FP8 peak: "
                   "the fit exports no FP8 GEMM efficiency for it; state efficiency.gemm for an FP8 run to set it")
    if no_hbm:
        out.append(f"layout: the catalogue has no HBM bandwidth for {acc_id}, so the memory-bound operations' time "
                   "(normalisation, activations, residual adds) is left out and the MFU reads high; give "
                   "layout.hbm_gb_s to include it")
    return tuple(out)


def _residual(node: Mapping, here: Fields, stack: str | None = None) -> float:
    """``residual:``, the run's own residual (a Student-t scale on log MFU, >= 0; LayoutPrior.row_sigma): the
    shipped fit's ``row_residual`` (the stated stack's own) unless the file gives one (0: none, every run's residual
    shared)."""
    if "residual" not in node:
        return float(stack_entry(load_fit(), stack)["residual"]) if stack else shipped_row_sigma()
    x = node["residual"]
    v = None if isinstance(x, bool) else parse_number(x)
    if v is None or not math.isfinite(v) or v < 0:
        raise here.error(f"expected residual: a number >= 0 (the run's own log-MFU residual scale), got {x!r}",
                         node, "residual", f"{here.field}.residual")
    return float(v)


def _efficiency(node: Mapping, here: Fields, acc_id: str, moe: bool = False, precision: str | None = None,
                stack: str | None = None) -> dict:
    fit = stack_entry(load_fit(), stack)
    # the MoE priors: the fit's where it has them, else the module's first-principles ones (mcflops.layout.moe)
    defaults = {**(MOE_PRIORS if moe else {}), **fit["default"], **accelerator_priors(fit, acc_id, precision)}
    names = (*PARAMS, *OPTIONAL, *(MOE_PARAMS if moe else ()))
    fit_where = Fields(_FIT_PATH)
    # the elementwise multiplier and the attention core's efficiency where the shipped fit has them (a fit from before
    # a term has none: the model then leaves that term out, unless the file states it)
    out = {p: parse_dist(defaults[p], f"layout_fit.{p}", fit_where, defaults, p) for p in names
           if p not in OPTIONAL or p in defaults}
    out = {p: dataclasses.replace(d, source=defaults[p].get("source")) for p, d in out.items()}
    if "efficiency" in node:
        eff = here.mapping(node, "efficiency", expected="efficiency: {" + ", ".join(names) + "}", got=False)
        here.keys(eff, names, listing=f"expected: {', '.join(names)}", per_key=False)
        for p in eff:
            d = parse_dist(eff[p], f"{here.field}.efficiency.{p}", here, eff, p)
            lo = float(ppf(d, 1e-9))
            if not lo > 0 or (p in FRACTIONS and float(ppf(d, 1 - 1e-9)) > 1):
                raise here.error(f"efficiency.{p}: expected a prior on {'(0, 1]' if p in FRACTIONS else '(0, inf)'}, "
                                 f"got {d.describe()}", eff, p)
            out[p] = d
    return out

