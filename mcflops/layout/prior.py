"""The layout MFU prior: the step-time model (:mod:`mcflops.layout.model`) over the efficiency priors, as a
quantile table at any accelerator count, with its factors for the waterfall. NumPy only: no JAX here.

The efficiency parameters are independent priors; the MFU's quantiles come from a fixed Latin hypercube
(McKay, Beckman & Conover 1979: each parameter's n draws one per stratum of probability 1/n, strata paired at
random; NumPy's PCG64 with a fixed seed, so the same file gives the same table) mapped through each prior's
quantile function, so every count sees the same parameter draws (common random numbers: the plan curve is
smooth in the count). The engine samples the table like any quantile-table prior.

A published GPU-hours figure constrains the MFU, and the factors only through their product. Their
posterior is therefore the prior conditional on the MFU, reweighted by the MFU's posterior / prior ratio:
:func:`Waterfall` bins the hypercube's draws by the MFU's prior quantiles and gives each bin the share of the
engine's posterior MFU draws that fall in it (:func:`posterior_weights`).

An overlap flag the file leaves ``unknown`` is one more dimension of the hypercube: a Bernoulli(1/2) flag per
draw, balanced (exactly half the draws on, in a fixed random order independent of the other dimensions), so
the table is the equal-weight mixture of the flag's two settings. The 1/2 is a prior choice (no setting is
favoured), not a measurement. A ``recompute``, ``vpp`` or ``micro_batch`` the file leaves unstated is a choice
the run has still to make: each draw takes, of the joint settings that run and fit in memory, the one with the
highest MFU for that draw's efficiencies and flags (:mod:`mcflops.layout.unstated` says why).

The run's own residual (``row_sigma``: the part of the layout fit's residual a run does not share with the same
model's other configurations on its stack; mcflops.layoutfit.rowres) is the last: each draw's GEMM efficiency moved by row_sigma x a
Student-t(ROW_DF) draw of a fixed stream of its own, folded in to first order as the fit's shared part is
(logit eta + row_sigma t / (1 - eta); mcflops.layoutfit.predictive.predictive). The efficiency draws without it
(:meth:`LayoutPrior.draws`) are what every layout and count shares and what a pilot conditions; the MFU a prior
reports (:meth:`LayoutPrior.at`) carries it. At row_sigma 0 every draw is as before.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from mcflops.hostrng import generator
from mcflops.layout.memory import Memory, memory
from mcflops.layout.model import ATTENTION, ELEMENTWISE, OPTIONAL, PARAMS, Layout, Terms, factor_names, factors, problem, terms
from mcflops.layout.moe import MOE_FLAGS, MOE_KEYS, MOE_PARAMS
from mcflops.layout.unstated import combinations
from mcflops.priors.dist import Dist
from mcflops.priors.quantiles import ppf
from mcflops.priors.table import KNOT_PROBS, table_dist

DRAWS = 1 << 16  # Latin-hypercube points
_SEED = 20240723  # fixed: a file's table is a function of the file
ROW_DF = 4.0  # the run's residual's Student-t degrees of freedom: the layout fit's (mcflops.layoutfit.fit.DF)


@lru_cache(maxsize=4)
def _unit(n_params: int, n: int) -> np.ndarray:
    rng = generator(_SEED)
    strata = np.stack([rng.permutation(n) for _ in range(n_params)], axis=1)
    return (strata + rng.random((n, n_params))) / n


@lru_cache(maxsize=2)
def _unit_moe(n_params: int, n: int) -> np.ndarray:
    """The MoE parameters' own hypercube (a seed of its own, as every stream here: a dense layout's draws are
    untouched by them, and they are independent of the run's residual's, :func:`_row_t`)."""
    rng = generator(_SEED + 4)
    strata = np.stack([rng.permutation(n) for _ in range(n_params)], axis=1)
    return (strata + rng.random((n, n_params))) / n


@lru_cache(maxsize=2)
def _unit_ew(n: int) -> np.ndarray:
    """The elementwise multiplier's own stratified column (a seed of its own: the other draws are untouched)."""
    rng = generator(_SEED + 5)
    return (rng.permutation(n) + rng.random(n)) / n


@lru_cache(maxsize=2)
def _unit_att(n: int) -> np.ndarray:
    """The attention core's efficiency's own stratified column (a seed of its own, as the elementwise multiplier's)."""
    rng = generator(_SEED + 6)
    return (rng.permutation(n) + rng.random(n)) / n


@lru_cache(maxsize=4)
def _bits(k: int, n: int) -> np.ndarray:
    """k balanced Bernoulli(1/2) columns over n draws: each exactly half on, independently permuted."""
    rng = generator(_SEED + 1)
    return np.stack([rng.permutation(np.arange(n) < n // 2) for _ in range(k)], axis=1)


def shipped_row_sigma() -> float:
    """The run's own residual the shipped fit measured (layout_fit.json's ``row_residual``; 0 where it has none)."""
    from mcflops.layout.fit import load_fit

    return float(load_fit().get("row_residual", {}).get("sigma", 0.0))


@lru_cache(maxsize=2)
def _row_t(n: int) -> np.ndarray:
    """n Student-t(ROW_DF) draws for the run's own residual: a stream of its own, so the other draws stay as they are."""
    return generator(_SEED + 3).standard_t(ROW_DF, n)


@dataclass(frozen=True)
class LayoutPrior:
    """``mfu: {layout: ...}`` as the file wrote it, re-solvable at any accelerator count."""

    layout: Layout
    shape: Any  # mcflops.arch.Shape
    counts: Any  # mcflops.arch.Counts
    peak: float  # dense peak FLOP/s at the file's precision
    capacity_gb: float | None
    efficiency: Mapping[str, Dist]  # PARAMS -> prior
    counting: float  # the convention's FLOPs per token / the architecture's (MFU in the file's units)
    count: int  # the file's accelerator count
    source: str | None = None
    accelerator: str | None = None
    unknown: tuple[str, ...] = ()  # overlap flags the file left unknown: each on in half the draws (module docstring)
    mixed: tuple[str, ...] = ()  # recompute / vpp / micro_batch the file left unstated (mcflops.layout.unstated)
    combos: tuple[tuple, ...] = ()  # joint settings that run and fit (a draw takes its fastest); ``layout``: the first
    tight: bool = False  # the combos fit only within the activation estimate's error
    row_sigma: float = 0.0  # the run's own residual, a Student-t scale on log MFU (module docstring)
    stack: str | None = None  # the fitted software stack whose priors the file reads (None: a new stack's)
    caveats: tuple[str, ...] = ()  # what the priors could not be for this file (the spec says why), in the notes
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def draws(self) -> dict[str, np.ndarray]:
        """The efficiency parameters' Latin-hypercube draws (the same at every count)."""
        if "draws" not in self._cache:
            from scipy.special import ndtr, ndtri

            # each quantile function on a grid in normal score, interpolated: a beta's quantile costs a root search
            # per point (65,536 of them: a quarter of a second); the grid's step of 0.008 sd keeps it to ~1e-6
            grid = np.linspace(-8.0, 8.0, 2049)

            def column(p, u):
                return np.interp(ndtri(u), grid, np.asarray(ppf(self.efficiency[p], ndtr(grid)), float))

            u = _unit(len(PARAMS), DRAWS)
            out = {p: column(p, u[:, i]) for i, p in enumerate(PARAMS)}
            if ELEMENTWISE in self.efficiency:  # the memory-bound operations' multiplier (model.elementwise_share)
                out[ELEMENTWISE] = column(ELEMENTWISE, _unit_ew(DRAWS))
            if ATTENTION in self.efficiency:  # the attention core's relative efficiency (model.attention_slowdown)
                out[ATTENTION] = column(ATTENTION, _unit_att(DRAWS))
            if all(p in self.efficiency for p in MOE_PARAMS):  # a mixture of experts (mcflops.layout.moe)
                u = _unit_moe(len(MOE_PARAMS), DRAWS)
                out.update({p: column(p, u[:, i]) for i, p in enumerate(MOE_PARAMS)})
            self._cache["draws"] = out
        return self._cache["draws"]

    def run_draws(self) -> dict[str, np.ndarray]:
        """:meth:`draws` with the run's own residual folded into GEMM efficiency (the module docstring)."""
        if self.row_sigma == 0:
            return self.draws()
        if "run_draws" not in self._cache:
            d = self.draws()
            g = np.clip(d["gemm"], 1e-12, 1 - 1e-12)
            logit = np.log(g / (1 - g)) + self.row_sigma * _row_t(DRAWS) / (1 - g)
            self._cache["run_draws"] = {**d, "gemm": 1 / (1 + np.exp(-logit))}
        return self._cache["run_draws"]

    def terms(self, count: int | None = None) -> Terms:
        return terms(self.layout, self.shape, self.counts, self.peak, float(count or self.count))

    def factor_draws(self, count: int | None = None, row: bool = True) -> dict[str, np.ndarray]:
        """Each factor's draws, ``counting`` (a constant) and ``mfu`` (their product, the file's units); ``row``
        False: without the run's own residual (the shared draws a pilot conditions)."""
        f = self._factors(count, row)
        out = dict(f)
        m = np.ones_like(f["gemm"])
        for name in factor_names(f):
            m = m * f[name]
        out["mfu"] = m * self.counting
        return out

    def flag_draws(self) -> dict[str, np.ndarray]:
        """Each unknown overlap flag's draws (bool, aligned with :meth:`draws`)."""
        if not self.unknown:
            return {}
        bits = _bits(len(self.unknown), DRAWS)
        return {k: bits[:, j] for j, k in enumerate(self.unknown)}

    def setting_draws(self, count: int | None = None) -> np.ndarray:
        """Which of :attr:`combos` each draw takes at ``count`` (int, aligned with :meth:`draws`; zeros without
        a mixture): the fastest for that draw's efficiencies."""
        return self._best(count)[1]

    def _factors(self, count: int | None, row: bool = True) -> dict[str, np.ndarray]:
        return self._best(count, row)[0]

    def _best(self, count: int | None, row: bool = True) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The factors with each unknown flag at its draw's setting (a mixture) and the mixed fields at the joint
        setting that is fastest for the draw (a choice), and which setting that is per draw."""
        d = self.run_draws() if row else self.draws()
        n = float(count or self.count)
        if not self.unknown and len(self.combos) <= 1:
            return factors(self.terms(count), d), np.zeros(DRAWS, np.int64)
        flags = self.flag_draws()
        code = np.zeros(DRAWS, np.int64)
        for j, k in enumerate(self.unknown):
            code |= flags[k].astype(np.int64) << j
        out: dict[str, np.ndarray] = {}
        choice = np.zeros(DRAWS, np.int64)
        for c in np.unique(code):  # each setting of the unknown flags on its own draws
            idx = np.flatnonzero(code == c)
            sub = {p: v[idx] for p, v in d.items()}
            best, speed = None, None
            for i, combo in enumerate(self.combos or ((),)):
                lay = dataclasses.replace(self.layout, **{k: bool(c >> j & 1) for j, k in enumerate(self.unknown)},
                                          **dict(zip(self.mixed, combo)))
                fc = factors(terms(lay, self.shape, self.counts, self.peak, n), sub)
                m = np.prod([fc[name] for name in factor_names(fc)], axis=0)
                if best is None:
                    best, speed = fc, m
                    continue
                faster = m > speed  # ties keep the first listed (the candidates' order)
                best = {name: np.where(faster, v, best[name]) for name, v in fc.items()}
                speed = np.where(faster, m, speed)
                choice[idx[faster]] = i
            for name, v in best.items():
                out.setdefault(name, np.empty(DRAWS))[idx] = v
        return out, choice

    def at(self, count: int | None = None, strict: bool = False) -> Dist:
        """The MFU prior on ``count`` accelerators (default: the file's count), as a quantile table."""
        key = ("at", int(count or self.count))
        if key not in self._cache:
            m = self.factor_draws(count)["mfu"]
            if strict and not (np.all(np.isfinite(m)) and np.all(m > 0) and np.all(m <= 1)):
                raise ValueError(f"the layout's MFU leaves (0, 1] (between {np.nanmin(m):.3g} and "
                                 f"{np.nanmax(m):.3g}); check the efficiency priors")
            q = np.quantile(m, KNOT_PROBS)
            self._cache[key] = table_dist(KNOT_PROBS, q, source=self.describe())
        return self._cache[key]

    def variant(self, **changes) -> "LayoutPrior":
        """The same prior with layout fields changed (a sweep's point); ValueError when that layout cannot run
        or cannot fit in memory. The efficiency draws are shared (common random numbers)."""
        lay = dataclasses.replace(self.layout, **changes)
        if "vpp" in changes and "schedule" not in changes:
            lay = dataclasses.replace(lay, schedule="interleaved" if lay.vpp > 1 else
                                      ("1f1b" if lay.schedule == "interleaved" else lay.schedule))
        mixed = tuple(k for k in self.mixed if k not in changes)
        if "vpp" in mixed and lay.schedule != "interleaved":  # virtual stages only interleave
            mixed, lay = tuple(k for k in mixed if k != "vpp"), dataclasses.replace(lay, vpp=1)
        if mixed:
            combos, tight = combinations(lay, self.shape, self.count, mixed, self.memory_of())
            if not combos:
                raise ValueError(f"no setting of the unstated {', '.join(mixed)} runs and fits in memory")
            lay = dataclasses.replace(lay, **dict(zip(mixed, combos[0])))
        else:
            combos, tight = (), False
        bad = problem(lay, self.shape, self.count)
        if bad is not None:
            raise ValueError(bad[1])
        out = dataclasses.replace(self, layout=lay, unknown=tuple(k for k in self.unknown if k not in changes),
                                  mixed=mixed, combos=combos, tight=tight, _cache={"draws": self.draws()})
        mem = out.memory()
        if mem is not None and mem.cannot_fit:
            raise ValueError(f"needs {mem.total / 1e9:.0f} GB per accelerator, more than its {mem.capacity / 1e9:.0f} GB")
        return out

    def for_model(self, shape, counts, **changes) -> "LayoutPrior":
        """The same prior for another model on the same accelerators and stack (a pilot of a smaller model), with
        layout fields changed as :meth:`variant` changes them: its MFU in the architecture's FLOPs (``counting``
        1), the unstated settings chosen among those that run and fit it. ValueError as :meth:`variant`. The
        efficiency draws are shared."""
        out = dataclasses.replace(self, shape=shape, counts=counts, counting=1.0, _cache={"draws": self.draws()})
        return out.variant(**changes)

    def runs_on(self, count: int) -> str | None:
        """Why this layout cannot run on ``count`` accelerators (None: it can): the loader's rules (:func:`problem`,
        with the smallest micro-batch an unstated one may take) and a whole number of micro-batches per step on every
        replica, global_batch = micro_batch x dp x m, which Megatron-LM requires (its
        core/num_microbatches_calculator.py refuses any other global batch)."""
        lay = self._smallest()
        bad = problem(lay, self.shape, int(count))
        if bad is not None:
            return bad[1]
        if lay.ep > 1 and count % (lay.tp * lay.pp * lay.ep):  # experts split over ep within the data-parallel ranks
            return (f"{count:,} accelerators are not a multiple of tp x pp x ep = {lay.tp * lay.pp * lay.ep} "
                    "(Megatron-Core's expert-parallel groups)")
        dp = round(lay.data_parallel(count))
        if lay.global_batch % (lay.micro_batch * dp):
            return (f"global_batch {lay.global_batch:,} is not a whole number of micro-batches on dp = {dp:,} "
                    f"(micro_batch x dp = {lay.micro_batch * dp:,} does not divide it)")
        return None

    def runnable_counts(self) -> list[int]:
        """Every accelerator count this layout runs on (:meth:`runs_on`), ascending: tp x pp x cp times each dp
        that divides global_batch / micro_batch (and, with experts, makes the count a multiple of tp x pp x ep); the
        file's own count only, when it states dp."""
        lay = self._smallest()
        if lay.dp is not None:
            return [g for g in [lay.tp * lay.pp * lay.cp * lay.dp] if self.runs_on(g) is None]
        per, unit = lay.global_batch // lay.micro_batch, lay.tp * lay.pp * lay.cp
        divisors = {d for i in range(1, math.isqrt(per) + 1) if per % i == 0 for d in (i, per // i)}
        return [unit * d for d in sorted(divisors) if self.runs_on(unit * d) is None]

    def _smallest(self) -> Layout:
        """The layout with the smallest micro-batch among its settings (an unstated micro-batch takes several)."""
        if "micro_batch" not in self.mixed or not self.combos:
            return self.layout
        j = self.mixed.index("micro_batch")
        return dataclasses.replace(self.layout, micro_batch=min(c[j] for c in self.combos))

    def memory_of(self):
        """Memory per accelerator of another layout of this model on the file's count (None: no capacity known)."""
        if self.capacity_gb is None:
            return None
        return lambda lay: memory(lay, self.shape, self.counts, self.capacity_gb, float(self.count))

    def layout_fields(self) -> dict:
        """The layout's fields, the expert-only ones (mcflops.layout.moe) left out for a dense model."""
        lay = dataclasses.asdict(self.layout)
        return lay if self.shape.moe else {k: v for k, v in lay.items() if k not in (*MOE_FLAGS, *MOE_KEYS)}

    def to_dict(self) -> dict:
        """The recipe back, every default filled in (what the resolved prior file writes; it loads back into
        the same prior)."""
        lay = {k: v for k, v in self.layout_fields().items() if v is not None}
        lay.update({k: "unknown" for k in (*self.unknown, *self.mixed)})
        out = {"layout": lay, "efficiency": {p: self.efficiency[p].to_dict()
                                             for p in (*PARAMS, *OPTIONAL, *MOE_PARAMS) if p in self.efficiency}}
        if self.row_sigma or shipped_row_sigma():  # written whenever it could differ from the default it loads with
            out["residual"] = self.row_sigma
        if self.stack:
            out["stack"] = self.stack
        if self.source:
            out["source"] = self.source
        return out

    def memory(self, count: int | None = None) -> Memory | None:
        if self.capacity_gb is None:
            return None
        return memory(self.layout, self.shape, self.counts, self.capacity_gb, float(count or self.count))

    def describe(self) -> str:
        lo = self.layout
        said = {k: "unknown" if k in self.mixed else getattr(lo, k) for k in ("vpp", "micro_batch", "recompute")}
        parts = [f"tp {lo.tp}", f"pp {lo.pp}" + (f" x vpp {said['vpp']}" if lo.vpp > 1 else ""),
                 f"dp {lo.dp if lo.dp is not None else 'count / (tp pp cp)'}"]
        parts += [f"{k} {getattr(lo, k)}" for k in ("cp", "ep") if getattr(lo, k) > 1]
        text = (f"layout MFU ({', '.join(parts)}; micro-batch {said['micro_batch']}, global batch {lo.global_batch} "
                f"sequences; recompute {said['recompute']}; {lo.schedule}; ZeRO {lo.zero}): mcflops.layout step-time model")
        if self.unknown:
            text += f"; overlap unknown ({', '.join(self.unknown)}: on and off mixed 1:1)"
        if self.mixed:
            text += (f"; unstated {', '.join(self.mixed)}: per draw the fastest of the {len(self.combos)} joint "
                     "setting(s) that fit")
        if self.stack:
            text += f"; the {self.stack} stack's fitted efficiencies and residual"
        if self.row_sigma:
            text += f"; the run's own residual, Student-t({ROW_DF:g}) of scale {self.row_sigma:g} on log MFU"
        return f"{self.source} | {text}" if self.source else text

    def notes(self, count: int | None = None) -> list[str]:
        """What the layout does at ``count`` that a reviewer should know."""
        tm = self.terms(count)
        lo, out = self.layout, []
        n = int(count or self.count)
        if tm.micro_batches < 1:
            out.append(f"layout at {n:,} accelerators: the global batch of {lo.global_batch:,} sequences gives "
                       f"{tm.micro_batches:.2f} micro-batches per replica: {1 - tm.busy:.0%} of the data-parallel "
                       "replicas have no work (raise global_batch or lower dp)")
        elif lo.pp > 1 and tm.micro_batches < lo.pp:
            out.append(f"layout at {n:,} accelerators: {tm.micro_batches:.1f} micro-batches on {lo.pp} pipeline "
                       f"stages: the bubble is {tm.bubble:.0%} of compute time")
        dom = lo.nvlink_domain or 0
        if lo.tp > dom:
            out.append(f"layout: tensor parallelism {lo.tp} spans more than one NVLink domain ({dom}): its "
                       "all-reduces cross the network")
        for k in self.unknown:
            out.append(f"layout: {k} is unknown: the MFU prior mixes it on and off with equal weight (a prior "
                       "choice; state it to narrow the prior)")
        per = np.bincount(self.setting_draws(count), minlength=len(self.combos)) if len(self.combos) > 1 else None
        for j, k in enumerate(self.mixed):
            vals = list(dict.fromkeys(c[j] for c in self.combos))  # the candidates' order
            said = ", ".join(str(v) for v in vals)
            fit = ", only within the activation estimate's error" if self.tight else ""
            if len(vals) == 1:
                out.append(f"layout: {k} is not stated: {said}, the only setting that runs and fits in memory{fit}")
            else:
                taken: dict[Any, int] = {}  # draws per value of this field, over the joint settings they took
                for combo, c in zip(self.combos, per):
                    taken[combo[j]] = taken.get(combo[j], 0) + int(c)
                top = max(taken, key=taken.get)
                out.append(f"layout: {k} is not stated: each draw takes the fastest of {said} (the settings that run "
                           f"and fit in memory{fit}), as an operator tunes it ({top} in {taken[top] / DRAWS:.0%} of "
                           "the draws); state it to narrow the prior")
        mem = self.memory(count)
        if mem is not None and mem.headroom < 0:
            out.append(f"layout: an estimated {mem.total / 1e9:.1f} GB per accelerator ({mem.states / 1e9:.1f} GB model "
                       f"states, {mem.activations / 1e9:.1f} GB activations) exceeds its {mem.capacity / 1e9:.0f} GB: "
                       "within the activation estimate's error (about 30%), but check the recompute setting")
        elif mem is not None and mem.headroom < 0.1 * mem.capacity:
            out.append(f"layout: {mem.total / 1e9:.1f} GB per accelerator of {mem.capacity / 1e9:.0f} GB "
                       "(model states and activations; before workspace and fragmentation)")
        return out + list(self.caveats)
