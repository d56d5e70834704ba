"""The prior file's ``pilot:`` block: measured throughput at a pilot scale on the run's stack, conditioning the
layout MFU prior (``mfu: {layout: ...}``). Plain Python and NumPy.

    pilot:
      - count: 512                    # accelerators in the pilot
        layout: {pp: 4}               # the fields where the pilot's layout differs from production's (optional)
        architecture: {preset: llama3.1-8b}   # the pilot's model where it is not production's (optional)
        tflops_per_gpu: 420           # one of: tflops_per_gpu, tokens_per_s_per_gpu, step_time_s
        sigma: 0.05                   # the measurement's log-scale error (optional, default 0.05)
        source: "our 512-GPU pilot, 2026-11, mean of steps 200-1200"

The measurement is an MFU counted with the architecture's FLOPs (attention included, as Megatron-LM and NeMo
report TFLOP/s per GPU): tflops_per_gpu x 1e12 / peak; tokens_per_s_per_gpu x the architecture's training FLOPs
per token / peak; step_time_s: the pilot's global batch x seq_len tokens per step over step_time_s x count
accelerators, then as tokens per second per GPU. The layout prior's Latin-hypercube efficiency draws are
shared by every layout and count it is evaluated at, so the pilot's predicted MFU and the production's are two
functions of one draw, and conditioning is importance weighting of the draws (Bayes' rule on a sample of the
prior; Smith & Gelfand 1992):

    w_i  proportional to  prod over pilots of  exp(-z^2 / 2),   z = (log m_obs - log m_pilot,i) / sqrt(sigma^2 + sigma_row^2)

(mcflops.priors.weighting; :func:`log_likelihood`). The draws carry only the part of the layout fit's residual
that one model's configurations on one stack share; each run also has its own (``sigma_row``, LayoutPrior.row_sigma,
mcflops.layoutfit.rowres), independent between the pilot and production: in the pilot's likelihood it widens the
measurement's error (both normal in log MFU, so their variances add), and production's MFU carries a fresh draw
of it (LayoutPrior.at). A pilot of production's very configuration (its count, layout and unstated settings) is
a measurement of production itself and shares its residual: for that configuration its likelihood is the
measurement's error alone on the draws with the residual, the ones production reads (:meth:`PilotedPrior.weights_at`). :class:`PilotedPrior` is the layout prior with those weights: at any count or layout
variant its MFU is the weighted quantiles of the same draws there, the posterior predictive, so `run`, `plan`,
the layout sweeps and the ladder all read the pilot through the one object; the held-out validation
(mcflops.layoutfit.pilots) weighs its pilots with the same :func:`log_likelihood`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from mcflops.errors import kind
from mcflops.layout import DRAWS, LayoutPrior
from mcflops.priors.table import KNOT_PROBS, table_dist
from mcflops.priors.weighting import effective_size, log_weights, normalised, weighted_quantiles
from mcflops.spec.fields import Fields
from mcflops.spec.layoutspec import SEQUENCE_BLIND

SIGMA = 0.05  # default log-scale error of a pilot's measured throughput: run-to-run spread of a few percent
MIN_ESS = 200  # below this the posterior predictive's table rests on too few draws: refused
MEASURES = ("tflops_per_gpu", "tokens_per_s_per_gpu", "step_time_s")
KEYS = ("count", "layout", "architecture", *MEASURES, "sigma", "source")
PROBS = (0.05, 0.5, 0.95)


@dataclass(frozen=True)
class Pilot:
    """One measured pilot: ``measure`` (one of :data:`MEASURES`) = ``value`` on ``count`` accelerators with the
    production layout changed by ``layout``; ``line``: where the file states it (None from the command line)."""

    count: int
    measure: str
    value: float
    sigma: float = SIGMA
    layout: tuple[tuple[str, Any], ...] = ()
    source: str | None = None
    line: int | None = field(default=None, compare=False)  # where the file states it: not what it means
    architecture: Any = None  # mcflops.spec.types.Architecture: the pilot's model where it is not production's

    def to_dict(self) -> dict[str, Any]:
        """The block's entry as :func:`parse_pilots` reads it back (every default filled in)."""
        out: dict[str, Any] = {"count": self.count}
        if self.layout:
            out["layout"] = dict(self.layout)
        if self.architecture is not None:
            out["architecture"] = {k: v for k, v in self.architecture.__dict__.items() if v is not None}
        out[self.measure] = self.value
        out["sigma"] = self.sigma
        if self.source:
            out["source"] = self.source
        return out

    def words(self) -> str:
        unit = {"tflops_per_gpu": "TFLOP/s per GPU", "tokens_per_s_per_gpu": "tokens/s per GPU",
                "step_time_s": "s per step"}[self.measure]
        lay = f", layout {', '.join(f'{k} {v}' for k, v in self.layout)}" if self.layout else ""
        a = self.architecture
        model = "" if a is None else f", model {a.preset or f'{a.layers} layers x {a.d_model}'}"
        return f"{self.count:,} accelerators at {self.value:g} {unit} (sigma {self.sigma:g}){lay}{model}"


@dataclass(frozen=True)
class PilotedPrior(LayoutPrior):
    """A :class:`LayoutPrior` conditioned on pilots: ``weights`` over its draws (the module docstring), and what
    each pilot measured and the model predicted there (``checks``). Its :meth:`at` is the posterior predictive."""

    pilots: tuple[Pilot, ...] = ()
    weights: Any = field(default=None, compare=False, repr=False)  # at the file's count and layout
    checks: tuple[Mapping[str, Any], ...] = field(default=(), compare=False, repr=False)
    evidence: tuple[Evidence, ...] = field(default=(), compare=False, repr=False)
    shared_weights: Any = field(default=None, compare=False, repr=False)  # no pilot on the evaluated configuration

    @property
    def ess(self) -> float:
        return effective_size(self.weights)

    def weights_at(self, count: int | None = None) -> np.ndarray:
        """The weights for production on ``count`` accelerators at this layout: :attr:`shared_weights` unless a
        pilot ran this very configuration, whose residual is then production's own (the module docstring)."""
        return _weights(self.evidence, self.row_sigma, _config(self, int(count or self.count)), self.shared_weights)

    def at(self, count: int | None = None, strict: bool = False) -> Any:
        key = ("at", int(count or self.count))
        if key not in self._cache:
            m = self.factor_draws(count)["mfu"]
            q = weighted_quantiles(m, self.weights_at(count), KNOT_PROBS)
            self._cache[key] = table_dist(KNOT_PROBS, q, source=self.describe())
        return self._cache[key]

    def describe(self) -> str:
        return (f"{LayoutPrior.describe(self)}; conditioned on a pilot ({'; '.join(p.words() for p in self.pilots)}): "
                f"posterior predictive, effective sample size {self.ess:,.0f} of {DRAWS:,}")

    def unconditioned(self) -> LayoutPrior:
        """The layout prior before the pilots (the same draws, unweighted)."""
        keep = {f.name: getattr(self, f.name) for f in dataclasses.fields(LayoutPrior) if f.name != "_cache"}
        return LayoutPrior(**keep, _cache={"draws": self.draws()})


@dataclass(frozen=True)
class Evidence:
    """One pilot as the weights read it: its measured MFU, its error, its configuration (:func:`_config`) and its
    model MFU on the shared draws and with its run's own residual (architecture FLOPs)."""

    observed: float
    sigma: float
    config: tuple
    shared: Any
    run: Any


def _config(lp: LayoutPrior, count: int) -> tuple:
    """What makes two runs the same configuration: the model, the count, the layout and what it leaves unstated."""
    return (lp.shape, int(count), lp.layout, lp.unknown, lp.mixed, lp.combos)


def _weights(evidence: Sequence[Evidence], row_sigma: float, config: tuple, shared: np.ndarray | None = None):
    """The pilots' weights for production at ``config``: each pilot's :func:`log_likelihood` on the shared draws,
    except a pilot of this very configuration, whose own residual is production's: its lognormal of ``sigma``
    alone on its draws with that residual (the same draws production reads). ``shared``: the weights with no
    pilot at ``config``, when known."""
    same = [e.config == config for e in evidence]
    if shared is not None and not any(same):
        return shared
    logw = np.zeros(DRAWS)
    for e, s in zip(evidence, same):
        logw += log_weights(e.observed, e.run, e.sigma) if s else log_likelihood(e.observed, e.shared, e.sigma, row_sigma)
    return normalised(logw)


def log_likelihood(observed: float, model_mfu: np.ndarray, sigma: float, row_sigma: float) -> np.ndarray:
    """A pilot's log weights on the shared draws: its measured MFU against each draw's model MFU (without the run's
    own residual), lognormal of log-scale sd sqrt(sigma^2 + row_sigma^2): the measurement's error and the pilot
    run's own residual, independent of production's (the module docstring)."""
    return log_weights(observed, model_mfu, math.hypot(sigma, row_sigma))


def observed_mfu(p: Pilot, at: LayoutPrior) -> float:
    """The pilot's MFU in the architecture's FLOPs (the module docstring's conversions)."""
    if p.measure == "tflops_per_gpu":
        return p.value * 1e12 / at.peak
    tok = p.value
    if p.measure == "step_time_s":  # tokens per step over the step's accelerator-seconds
        tok = at.layout.global_batch * at.shape.seq_len / (p.value * p.count)
    return tok * at.counts.training_flops_per_token / at.peak


def condition(prior: LayoutPrior, pilots: Sequence[Pilot]) -> PilotedPrior:
    """``prior`` with the pilots' weights. ValueError (with the pilot's index) when a pilot's layout cannot run
    on its count, its throughput is past the peak, or the pilots leave fewer than :data:`MIN_ESS` draws."""
    base = prior.unconditioned() if isinstance(prior, PilotedPrior) else prior
    evidence = []
    for i, p in enumerate(pilots):
        # the pilot's own configuration: its count (the unstated settings are chosen among those that run and fit
        # there, as a file of the pilot would choose them), its model and its layout
        at = base if p.count == base.count else dataclasses.replace(base, count=p.count, _cache={"draws": base.draws()})
        shape = None if p.architecture is None else p.architecture.shape()
        if shape is not None and shape.moe != base.shape.moe:  # the experts' efficiencies: a mixture of experts only
            raise PilotError(i, "architecture", f"the pilot's model is {_kind(shape)} and production's is "
                             f"{_kind(base.shape)}: a pilot measures the stack on a model of the same kind")
        try:
            if shape is not None:
                at = at.for_model(shape, p.architecture.counts(), **dict(p.layout))
            elif p.layout or at.count != base.count:
                at = at.variant(**dict(p.layout))
            why = at.runs_on(p.count)
            if why is not None:
                raise ValueError(why)
        except (ValueError, TypeError) as e:
            key = "layout" if p.layout else "architecture" if shape is not None else "count"
            raise PilotError(i, key, f"the pilot's layout on {p.count:,} accelerators: {e}") from None
        obs = observed_mfu(p, at)
        if not 0 < obs <= 1:
            raise PilotError(i, p.measure, f"{p.measure} {p.value:g} is {obs:.0%} of the accelerator's dense peak "
                             f"({base.peak / 1e12:g} TFLOP/s) in the architecture's FLOPs; expected a measured "
                             "throughput below it")
        # the architecture's FLOPs, on the shared draws (the run's own residual is in the likelihood) and with it
        shared = np.asarray(at.factor_draws(p.count, row=False)["mfu"], float) / at.counting
        run = np.asarray(at.factor_draws(p.count)["mfu"], float) / at.counting if base.row_sigma else shared
        evidence.append(Evidence(obs, p.sigma, _config(at, p.count), shared, run))
    every = _weights(evidence, base.row_sigma, ())  # no configuration matches (): every pilot on the shared draws
    here = _config(base, base.count)
    w = _weights(evidence, base.row_sigma, here, every)
    # each pilot's predicted MFU as its likelihood reads it at the file's configuration
    checks = [(p, e.observed, e.run if e.config == here else e.shared) for p, e in zip(pilots, evidence)]
    ess = effective_size(w)
    if ess < MIN_ESS:
        raise PilotError(None, None, f"the pilot leaves {ess:.0f} of the layout model's {DRAWS:,} draws (effective "
                         "sample size): the model cannot reach that throughput at that layout; check the pilot's "
                         "layout and measurement, or widen sigma")
    rows = tuple({"count": p.count, "measure": p.measure, "value": p.value, "sigma": p.sigma,
                  "layout": dict(p.layout), "observed_mfu": obs,
                  "predicted_prior": dict(zip(("p5", "p50", "p95"), np.quantile(pred, PROBS).tolist())),
                  "predicted_posterior": dict(zip(("p5", "p50", "p95"), weighted_quantiles(pred, w, PROBS).tolist()))}
                 for p, obs, pred in checks)
    keep = {f.name: getattr(base, f.name) for f in dataclasses.fields(LayoutPrior) if f.name != "_cache"}
    # a pilot keeps the file's architecture, its sequence length too: it measures what the layout model does not see
    # at long context, so the caveat that the model is blind to the sequence (mcflops.spec.layoutspec) is not the
    # piloted prior's
    keep["caveats"] = tuple(c for c in base.caveats if SEQUENCE_BLIND not in c)
    return PilotedPrior(**keep, _cache={"draws": base.draws()}, pilots=tuple(pilots), weights=w, checks=rows,
                        evidence=tuple(evidence), shared_weights=every)


def _kind(shape) -> str:
    return "a mixture of experts" if shape.moe else "dense"


class PilotError(ValueError):
    """A pilot the layout prior cannot take: ``index`` (None: the pilots together) and ``key`` say where."""

    def __init__(self, index: int | None, key: str | None, message: str):
        super().__init__(message)
        self.index, self.key, self.message = index, key, message


def parse_pilots(where: Fields, data: Mapping, dependent: Mapping[str, Any]) -> tuple[Pilot, ...]:
    """The validated ``pilot:`` block of ``data`` (``dependent``: the file's count-dependent priors, by now)."""
    from mcflops.spec.layoutspec import KEYS as LAYOUT_KEYS

    node = data["pilot"]
    example = "a list of pilots like - {count: 512, tflops_per_gpu: 420, source: \"...\"}"
    if not isinstance(node, list) or not node:
        raise where.error(f"expected {example}, got {kind(node)}", data, "pilot", "pilot")
    if not isinstance(dependent.get("mfu"), LayoutPrior):
        raise where.error("a pilot conditions the layout model: give priors.mfu as {layout: {tp: ..., pp: ..., "
                          "global_batch: ...}} (the production layout)", data, "pilot", "pilot")
    out = []
    for i, p in enumerate(node):
        f = f"pilot[{i}]"
        if not isinstance(p, Mapping):
            raise where.error(f"expected a mapping {{count: ..., tflops_per_gpu: ..., source: ...}}, got {kind(p)}",
                              node, i, f)
        where.keys(p, KEYS, f)
        if "count" not in p:
            raise where.error("missing count: (the pilot's accelerators)", node, i, f)
        count = int(where.number(p, "count", f"{f}.count", positive=True, integer=True))
        given = [k for k in MEASURES if k in p]
        if len(given) != 1:
            what = "missing" if not given else f"{' and '.join(given)}: give"
            raise where.error(f"{what} one measurement: {', '.join(MEASURES)}", node, i, f)
        value = where.number(p, given[0], f"{f}.{given[0]}", positive=True)
        sigma = where.number(p, "sigma", f"{f}.sigma", positive=True) if "sigma" in p else SIGMA
        if not (math.isfinite(value) and math.isfinite(sigma)):
            raise where.error("expected a finite number", p, given[0] if not math.isfinite(value) else "sigma", f)
        lay = where.mapping(p, "layout", f"{f}.layout", "layout: {tp, pp, ...} (the fields that differ from "
                            "production's)") if "layout" in p else {}
        where.keys(lay, LAYOUT_KEYS, f"{f}.layout", listing=f"expected: {', '.join(LAYOUT_KEYS)}")
        arch = _architecture(where, p, f) if "architecture" in p else None
        source = where.text(p, "source", f"{f}.source", "source: to be text")
        if not source or not source.strip():
            raise where.error("missing source: (who measured the pilot, and how)", node, i, f)
        out.append(Pilot(count, given[0], float(value), float(sigma),
                         tuple((str(k), _plain(v)) for k, v in lay.items()), source, where.line(node, i), arch))
    return tuple(out)


def _architecture(where: Fields, p: Mapping, f: str):
    """A pilot's ``architecture:``, read as the file's is (a preset, a config.json or the keys), its messages
    naming the pilot's field; one that does not state the MLP width cannot be counted, so it is refused."""
    from mcflops.errors import SpecError
    from mcflops.spec.machine import parse_architecture

    try:
        arch = parse_architecture(where, p)
    except SpecError as e:
        if type(e) is not SpecError or not e.field:  # a config.json's own mistake names that file: as it is
            raise
        raise SpecError(e.message, path=e.path, line=e.line, field=f"{f}.{e.field}") from None
    if arch.shape() is None:
        raise where.error("a pilot's model needs its MLP width (ffn), or a preset or hf_config", p, "architecture",
                          f"{f}.architecture")
    return arch


def apply(where: Fields, data: Mapping, pilots: Sequence[Pilot], prior: LayoutPrior) -> PilotedPrior:
    """:func:`condition`, its error at the file's line and field: the pilot's key, else the pilot, else the block."""
    try:
        return condition(prior, pilots)
    except PilotError as e:
        block = data["pilot"]
        if e.index is None:
            raise where.error(e.message, data, "pilot", "pilot") from None
        entry, fld = block[e.index], f"pilot[{e.index}]"
        if e.key in entry:
            raise where.error(e.message, entry, e.key, f"{fld}.{e.key}") from None
        raise where.error(e.message, block, e.index, fld) from None


def _plain(v: Any) -> Any:
    from mcflops.numbers import python_scalar

    v = python_scalar(v)
    return str(v) if isinstance(v, str) else v
