"""The validated spec as frozen values, and the tables that say what a prior file may name. Plain Python."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from mcflops import chain
from mcflops.arch import SHAPE_KEYS, Counts, Shape, counts
from mcflops.priors.dist import Dist
from mcflops.spec.compare import CompareOptions
from mcflops.spec.reported import Reported
from mcflops.spec.resolved import resolved_dict

# Inputs of the compute model: (lower, upper, open_lower) domain, unit, meaning.
INPUTS: dict[str, tuple[float, float, str, str]] = {
    "params": (0.0, math.inf, "parameters", "N, parameters (active parameters for MoE)"),
    "tokens": (0.0, math.inf, "tokens", "D, training tokens"),
    "mfu": (0.0, 1.0, "fraction", "model FLOPs utilization while training"),
    "goodput": (0.0, 1.0, "fraction", "share of wall-clock time spent on useful training"),
    "peak_flops": (0.0, math.inf, "FLOP/s", "dense peak FLOP/s per accelerator"),
    "price": (0.0, math.inf, "USD/accelerator-hour", "price per accelerator-hour"),
    "power": (0.0, math.inf, "W", "average power per accelerator"),
    "pue": (1.0, math.inf, "ratio", "datacenter power usage effectiveness"),
}
OUTPUTS: dict[str, tuple[str, str]] = {
    "flops": ("FLOP", "training FLOPs"),
    "gpu_hours": ("accelerator-hours", "accelerator-hours (GPU- or chip-hours)"),
    "wall_days": ("days", "wall-clock days on hardware.count accelerators"),
    "cost": ("USD", "cost at the price prior"),
    "energy_mwh": ("MWh", "energy at the power (default TDP) and PUE priors"),
}
CONVENTIONS = tuple(chain.CONVENTIONS)  # the FLOPs conventions a file may name: chain.py defines them
MAX_SAMPLES = 10**10
SOBOL_BASE = 1 << 16  # default base draws N; a Saltelli pass evaluates the model N (p + 2) times
SWEEP_POINTS = 16


@dataclass(frozen=True)
class Hardware:
    accelerator: str | None
    precision: str
    count: int | None
    peak_flops: float | None  # from the catalogue; None when a peak_flops prior is given instead
    tdp_w: float | None


@dataclass(frozen=True)
class Architecture:
    """The ``architecture:`` block. The first eight fields are what the ``palm`` and ``megatron`` conventions
    read; the rest, set only when the block states its MLP width (``ffn``, or a preset or config.json), let
    :mod:`mcflops.arch` count its parameters (None: the count's default, not written back)."""

    layers: int
    d_model: int
    heads: int
    seq_len: int
    vocab: int
    ffn: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    tied_embeddings: bool | None = None
    glu: bool | None = None
    experts: int | None = None
    experts_active: int | None = None
    shared_experts: int | None = None
    moe_ffn: int | None = None
    dense_layers: int | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    preset: str | None = None
    hf_config: str | None = None  # as the file wrote it (relative to the prior file)

    def shape(self) -> Shape | None:
        """The shape :func:`mcflops.arch.counts` counts, or None when the block does not state the MLP width."""
        if self.ffn is None:
            return None
        return Shape(**{k: v for k, v in self.__dict__.items() if k in SHAPE_KEYS and v is not None})

    def counts(self) -> Counts | None:
        s = self.shape()
        return None if s is None else counts(s)


@dataclass(frozen=True)
class Observation:
    name: str
    noise: str  # "lognormal" | "normal" | "between"
    value: float | None  # the published figure (None for `between`)
    scale: float | None  # sigma of log (lognormal) or sd (normal)
    low: float | None = None
    high: float | None = None
    source: str | None = None
    line: int | None = None


# `written`: the block as the file gave it, in plain data (None: not in the file). resolved_dict writes it
# back, so that a file's resolved form and its hash keep the user's spelling (1M, a spearman, a [low, high]
# sweep); the command line's overrides leave it alone (they are not in the file).

@dataclass(frozen=True)
class SensitivityOptions:
    """The ``sensitivity:`` block: which output to analyse, Sobol base draws, sweep grids."""

    output: str = "gpu_hours"
    sobol_samples: int = SOBOL_BASE
    points: int = SWEEP_POINTS
    sweeps: tuple[tuple[str, tuple[float, ...]], ...] = ()  # (input, grid values)
    written: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    # (layout field, values, the MFU prior at each value): a layout MFU prior's fields swept
    layout_sweeps: tuple[tuple[str, tuple[Any, ...], tuple[Any, ...]], ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class PlanOptions:
    """The ``plan:`` block: the planning questions and the probability their answers hold with."""

    deadline_days: float | None = None
    prob: float = 0.9
    gpus: int | None = None  # default: hardware.count
    budget_hours: float | None = None
    budget_usd: float | None = None
    written: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Correlation:
    """One entry of ``correlations:``: the normal-score correlation of two uncertain inputs."""

    a: str
    b: str
    rho: float  # normal-score correlation (a spearman: converted)
    source: str | None = None
    written: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Spec:
    """A prior file, every block validated: what a run, an analysis and a plan read."""

    name: str
    description: str
    seed: int
    samples: int
    hardware: Hardware
    flops: str
    architecture: Architecture | None
    priors: Mapping[str, Dist]
    observe: Mapping[str, Observation]
    sensitivity: SensitivityOptions = field(default_factory=SensitivityOptions)
    correlations: tuple[Correlation, ...] = ()
    plan: PlanOptions = field(default_factory=PlanOptions)
    reported: Mapping[str, Reported] = field(default_factory=dict)  # claims to check against the posterior
    compare: CompareOptions = field(default_factory=CompareOptions)  # how `compare A B` couples B's inputs
    path: str | None = None
    # priors re-solvable at another accelerator count (name -> an object with .at(count) -> Dist and
    # .notes(count) -> list[str], e.g. priors.goodput.Failures); what the planning questions re-solve
    count_dependent: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # what the file leaves to the defaults and the priors that look like mistakes (mcflops.spec.notes), one line
    # each: computed at load, shown after the tables, in summary.json's notes and in the report's assumptions
    notes: tuple[str, ...] = ()
    # the ``pilot:`` block (mcflops.spec.pilots.Pilot each): measured throughput that conditions the layout prior,
    # already folded into priors["mfu"] and count_dependent["mfu"]; kept to be written back
    pilots: tuple[Any, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs this spec can compute (cost needs a price, days a count, energy a power): the napkin
        chain's outputs whose every term the file has."""
        return chain.available(self.priors, self.hardware.count)

    @property
    def uncertain(self) -> tuple[str, ...]:
        """Inputs that are not point masses, in file order."""
        return tuple(n for n, d in self.priors.items() if d.family != "point")

    def digest(self) -> str:
        """A hash of the resolved spec (seed and samples included): what made an output, the same on every
        machine. The resolved spec holds numbers solved here (a beta's shape from its mean and sd, a
        lognormal's mu from its interval), whose last bits move with NumPy's SIMD path and patch release;
        each number is hashed at HASH_DIGITS significant digits, far above that noise (measured at 2e-15
        relative) and far below any change of what the file says."""
        blob = json.dumps(_canonical(resolved_dict(self)), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


HASH_DIGITS = 10  # a float64's solved value varies in its 15th-16th digit between machines


def _canonical(x: Any) -> Any:
    """``x`` with every float written at HASH_DIGITS significant digits (an integer stays exact)."""
    if isinstance(x, dict):
        return {k: _canonical(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    if isinstance(x, float):
        return format(x, f".{HASH_DIGITS - 1}e") if math.isfinite(x) else repr(x)
    return x
