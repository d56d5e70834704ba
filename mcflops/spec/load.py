"""Prior file (YAML) -> validated, frozen :class:`Spec`. Plain Python: no JAX here.

Validation is eager and speaks to the user: every error is a :class:`SpecError` naming the file,
the line, the field and what was expected (DESIGN.md, example 3). Every block is checked here, at
load: what a run, an analysis or a plan reads from a Spec has been checked.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Mapping

from mcflops import chain
from mcflops.errors import SpecError, closest, kind
from mcflops.spec.compare import compare_block
from mcflops.priors.dist import tail_quantiles
from mcflops.spec.correlations import correlations_block
from mcflops.spec.evidence import evidence_notes
from mcflops.spec.fields import Fields
from mcflops.spec.inputs import fill_defaults, parse_priors, resolve_recipes
from mcflops.spec import recipes
from mcflops.spec.machine import params_from_architecture, parse_architecture, parse_hardware
from mcflops.spec.notes import spec_notes, units_note
from mcflops.spec.observe import parse_observations
from mcflops.spec.options import plan_block, sensitivity_block
from mcflops.spec.pilots import apply as apply_pilots, parse_pilots
from mcflops.spec.plain import check_plain
from mcflops.spec.ratio import resolve_ratios
from mcflops.spec.reader import check_texts, read_yaml
from mcflops.spec.recipes import count_dependent
from mcflops.spec.reported import parse_reported
from mcflops.spec.types import CONVENTIONS, MAX_SAMPLES, Spec

# The top-level keys, in the order resolved_dict writes them. A new block: its key here, a module that
# parses it into a frozen value (a Spec field), and a line in _build and in resolved_dict.
TOP_KEYS = ("name", "description", "seed", "samples", "hardware", "flops", "architecture", "priors", "pilot",
            "observe", "reported", "sensitivity", "correlations", "plan", "compare")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # fullmatch: `$` would let a final newline through
MAX_LOG_OUTPUT = 300 * math.log(10)  # every output's within 1e-300..1e300 (float64 holds 1.8e308)


def load_spec(source: str | Path | Mapping, *, path: str | None = None) -> Spec:
    """Load and validate a prior file (a path) or an already-parsed mapping (a notebook's dict).

    Floating-point overflow while resolving a prior (absurd parameters of a recipe) is not printed as
    a numpy warning: the checks that follow (domain, tails, output range) turn its inf/0 into the one
    line naming the field.
    """
    import numpy as np

    with np.errstate(all="ignore"):
        if isinstance(source, Mapping):
            check_plain(source, path or "<dict>")  # before any walk: a dict inside itself would never end
            check_texts(source, path or "<dict>")  # a file's text is checked as it is read (with its line)
            return _build(source, Fields(path or "<dict>"))
        if not isinstance(source, (str, os.PathLike)):
            raise SpecError(f"expected a prior file's path or a mapping, got {kind(source)}",
                            field="mcflops.load_spec(source=)")
        p = Path(source)
        return _build(read_yaml(p), Fields(str(source)))


def _build(data: Mapping, where: Fields) -> Spec:
    if not isinstance(data, Mapping):
        raise where.error(f"expected a mapping at the top level, got {kind(data)}")
    where.keys(data, TOP_KEYS, "")
    for req in ("name", "priors"):
        if req not in data:
            raise where.error(f"missing required key '{req}'", data, None, req)

    name = data["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise where.error("expected a name of letters, digits, '.', '_' or '-' (it names the output folder), "
                          f"got {kind(name)}", data, "name", "name")
    description = (where.text(data, "description", "description") or "") if data.get("description") else ""
    seed = _seed(where, data) if "seed" in data else 0
    if seed >= 2**63:
        raise where.error("expected a seed below 2**63", data, "seed", "seed")
    samples = int(where.number(data, "samples", "samples", integer=True)) if "samples" in data \
        else 1_000_000
    check_samples(samples, where.error, data, "samples")

    flops = data.get("flops", "6nd")
    if flops not in CONVENTIONS:
        raise where.error(f"unknown FLOPs convention '{flops}'{closest(flops, CONVENTIONS)} "
                          f"(expected one of: {', '.join(CONVENTIONS)})", data, "flops", "flops")
    arch = parse_architecture(where, data) if "architecture" in data else None
    if flops in ("palm", "megatron", "architecture") and arch is None:
        raise where.error(f"flops: {flops} needs an `architecture:` block (layers, d_model, heads, seq_len, vocab)",
                          data, "flops", "flops")
    if flops == "architecture" and arch.shape() is None:
        raise where.error("flops: architecture counts FLOPs from the architecture: give its MLP width (ffn), or a "
                          "preset or hf_config", data, "flops", "flops")

    priors = parse_priors(where, data, flops, params_optional=arch is not None and arch.shape() is not None)
    ratios = resolve_ratios(where, data, priors, load_spec)  # {relative_to: FILE, ratio: ...}: FILE's prior x ratio
    params_from_architecture(where, data, arch, priors)
    hardware = parse_hardware(where, data, priors)
    dependent = resolve_recipes(where, data, priors, hardware, arch)
    pilots = parse_pilots(where, data, dependent) if "pilot" in data else ()
    if pilots:  # the layout prior's draws reweighted by the pilots: its MFU is the posterior predictive
        dependent["mfu"] = apply_pilots(where, data, pilots, dependent["mfu"])
        priors["mfu"] = dependent["mfu"].at()
    fill_defaults(priors, hardware, flops, calibrated=recipes.is_calibrated(data["priors"].get("mfu")))

    spec = Spec(name=name, description=description, seed=seed, samples=samples, hardware=hardware, flops=flops,
                architecture=arch, priors=priors, observe={}, path=where.path, pilots=pilots,
                notes=spec_notes(priors, hardware.accelerator, hardware.precision)
                + tuple(x for x in (units_note(flops, arch, priors),) if x)
                + tuple(evidence_notes(data["priors"], priors, hardware.accelerator, hardware.precision, flops,
                                       _moe(data))))
    _check_output_range(where, spec, data)
    observe = parse_observations(where, data, spec) if "observe" in data else {}
    _check_observed_range(where, observe, data)
    return Spec(**{**spec.__dict__, "observe": observe,
                   "sensitivity": sensitivity_block(where, data, spec),
                   "correlations": correlations_block(where, data, spec),
                   "plan": plan_block(where, data, spec),
                   "compare": compare_block(where, data, spec, ratios),
                   "count_dependent": {**count_dependent(where, data, hardware), **dependent},
                   "reported": parse_reported(where, data, spec)})


def _moe(data: Mapping) -> bool:
    """Whether the file's architecture is a mixture of experts (the calibrated prior's MoE covariate)."""
    arch = data.get("architecture")
    return bool(isinstance(arch, Mapping) and arch.get("experts"))


def check_samples(samples: int, error, node=None, key=None) -> None:
    """Refuse sample counts that are too small to summarise or too large to finish."""
    if samples < 1000:
        raise error(f"expected at least 1000 samples (quantiles and their errors need them), got {samples}",
                    node, key, "samples")
    if samples > MAX_SAMPLES:
        raise error(f"{samples:.3g} samples would take hours (~{samples / 3e7 / 3600:.1f} h at 30M draws/s); "
                    f"the limit is {MAX_SAMPLES:.0e}", node, key, "samples")


def _check_output_range(ctx: Fields, spec: Spec, node: Mapping) -> None:
    """Refuse priors whose extreme draws would overflow an output (a units mistake, e.g. tokens in 1e30).

    Outputs are signed sums of input logs (chain.py), so their extremes are sums of the inputs' extremes.
    """
    r = {n: tuple(math.log(v) for v in tail_quantiles(d)) for n, d in spec.priors.items()}
    for out, (lo, hi) in chain.log_bounds(spec.flops, spec.architecture, r, spec.hardware.count).items():
        if max(abs(lo), abs(hi)) > MAX_LOG_OUTPUT:
            extreme = max(r, key=lambda n: max(abs(r[n][0]), abs(r[n][1])))
            e10 = [x / math.log(10) for x in (lo, hi)]
            raise ctx.error(f"these priors let {out} reach [1e{e10[0]:.0f}, 1e{e10[1]:.0f}] in their 1e-15 tails, "
                            "beyond what a float holds; "
                            f"check the units and spreads (most extreme input: {extreme})", node, "priors", "priors")


def _check_observed_range(ctx: Fields, observe: Mapping, node: Mapping) -> None:
    """A published figure within 1e-300..1e300, as every output is (5e-324 passes every other check and
    then leaves the chain's implied MFU undefined)."""
    for name, o in observe.items():
        for v in (o.value, o.low, o.high):
            if v is not None and not (math.exp(-MAX_LOG_OUTPUT) <= abs(v) <= math.exp(MAX_LOG_OUTPUT)):
                raise ctx.error(f"expected a published figure between 1e-300 and 1e300, got {v:.3g}",
                                node["observe"], name, f"observe.{name}")


def _seed(where, data) -> int:
    """The seed exactly: a YAML integer is taken as it is (through a float, 2**53 + 1 would become 2**53
    and 2**63 - 1 would round up to 2**63); other spellings (1e6, 1M) go through the number parser."""
    raw = data["seed"]
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 0:
            raise where.error(f"expected a number >= 0, got {raw}", data, "seed", "seed")
        return int(raw)
    return int(where.number(data, "seed", "seed", integer=True, minimum=0))
