"""Prior file (YAML) -> validated, frozen :class:`Spec`. Plain Python: no JAX here.

Validation is eager and speaks to the user: every error is a :class:`SpecError` naming the file,
the line, the field and what was expected (DESIGN.md, example 3).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mcflops.spec import recipes
from mcflops import hardware as hw
from mcflops.spec.grammar import DIST_KEYS, parse_dist
from mcflops.priors.dist import Dist, support, tail_quantiles
from mcflops.errors import SpecError, closest
from mcflops.errors import kind as _kind
from mcflops.numbers import parse_number
from mcflops.spec.reader import _check_keys, _Ctx, _mapping, _number, read_yaml
from mcflops.spec.reported import Reported, parse_reported

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
CONVENTIONS = ("6nd", "palm", "megatron")
TOP_KEYS = ("name", "description", "seed", "samples", "hardware", "flops", "architecture", "priors",
            "observe", "reported", "sensitivity", "correlations", "plan")
HARDWARE_KEYS = ("accelerator", "precision", "count")
ARCH_KEYS = ("layers", "d_model", "heads", "kv_heads", "head_dim", "seq_len", "vocab", "ffn", "experts",
             "experts_active", "source")
OBS_KEYS = ("value", "sigma", "sd", "noise", "between", "source")
NOISES = ("lognormal", "normal")
MAX_SAMPLES = 10**10
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class Hardware:
    accelerator: str | None
    precision: str
    count: int | None
    peak_flops: float | None  # from the catalogue; None when a peak_flops prior is given instead
    tdp_w: float | None


@dataclass(frozen=True)
class Architecture:
    layers: int
    d_model: int
    heads: int
    seq_len: int
    vocab: int
    ffn: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None


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


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    seed: int
    samples: int
    hardware: Hardware
    flops: str
    architecture: Architecture | None
    priors: Mapping[str, Dist]
    observe: Mapping[str, Observation]
    reported: Mapping[str, Reported] = field(default_factory=dict)  # claims to check against the posterior
    extras: Mapping[str, Any] = field(default_factory=dict)  # sensitivity/correlations/plan, validated by their owners
    path: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The outputs this spec can compute (cost needs a price, days a count, energy a power)."""
        out = ["flops", "gpu_hours"]
        if self.hardware.count:
            out.append("wall_days")
        if "price" in self.priors:
            out.append("cost")
        if "power" in self.priors:
            out.append("energy_mwh")
        return tuple(out)

    @property
    def uncertain(self) -> tuple[str, ...]:
        """Inputs that are not point masses, in file order."""
        return tuple(n for n, d in self.priors.items() if d.family != "point")

    def digest(self) -> str:
        """A hash of the resolved spec (seed and samples included): what made an output."""
        blob = json.dumps(resolved_dict(self), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def load_spec(source: str | Path | Mapping, *, path: str | None = None) -> Spec:
    """Load and validate a prior file (a path) or an already-parsed mapping (a notebook's dict).

    Floating-point overflow while resolving a prior (absurd parameters of a recipe) is not printed as
    a numpy warning: the checks that follow (domain, tails, output range) turn its inf/0 into the one
    line naming the field.
    """
    import numpy as np

    with np.errstate(all="ignore"):
        if isinstance(source, Mapping):
            return _build(source, _Ctx(path or "<dict>"))
        p = Path(source)
        return _build(read_yaml(p), _Ctx(str(source)))


def _build(data: Mapping, ctx: _Ctx) -> Spec:
    if not isinstance(data, Mapping):
        raise ctx.error(f"expected a mapping at the top level, got {_kind(data)}")
    _check_keys(ctx, data, TOP_KEYS, "")
    for req in ("name", "priors"):
        if req not in data:
            raise ctx.error(f"missing required key '{req}'", data, None, req)

    name = data["name"]
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise ctx.error("expected a name of letters, digits, '.', '_' or '-' (it names the output folder), "
                        f"got {_kind(name)}", data, "name", "name")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise ctx.error(f"expected text, got {_kind(description)}", data, "description", "description")
    description = str(description)  # ruamel's folded/literal strings are str subclasses
    seed = int(_number(ctx, data, "seed", "seed", integer=True, minimum=0)) if "seed" in data else 0
    if seed >= 2**63:
        raise ctx.error("expected a seed below 2**63", data, "seed", "seed")
    samples = int(_number(ctx, data, "samples", "samples", integer=True)) if "samples" in data \
        else 1_000_000
    check_samples(samples, ctx.error, data, "samples")

    flops = data.get("flops", "6nd")
    if flops not in CONVENTIONS:
        raise ctx.error(f"unknown FLOPs convention '{flops}'{closest(flops, CONVENTIONS)} "
                        f"(expected one of: {', '.join(CONVENTIONS)})", data, "flops", "flops")
    arch = _architecture(ctx, data) if "architecture" in data else None
    if flops in ("palm", "megatron") and arch is None:
        raise ctx.error(f"flops: {flops} needs an `architecture:` block (layers, d_model, heads, seq_len, vocab)",
                        data, "flops", "flops")

    priors_node = _mapping(ctx, data["priors"], data, "priors", "priors")
    priors: dict[str, Dist] = {}
    for key in priors_node:
        if key not in INPUTS:
            raise ctx.error(f"unknown input '{key}'{closest(key, INPUTS)} (inputs: {', '.join(INPUTS)})",
                            priors_node, key, f"priors.{key}")
        if recipes.is_derived(priors_node[key]):  # {calibrated: ...} / {failures: ...}: resolved below
            priors[key] = None  # keeps the file's order
            continue
        dist = parse_dist(priors_node[key], f"priors.{key}", ctx, priors_node, key)
        _check_domain(ctx, key, dist, priors_node)
        priors[key] = dist
    required = ("tokens", "mfu") if flops == "megatron" else ("params", "tokens", "mfu")
    for req in required:
        if req not in priors:
            raise ctx.error(f"missing required prior '{req}' ({INPUTS[req][3]})", data, "priors", f"priors.{req}")

    hardware = _hardware(ctx, data, priors)
    for key in [k for k, d in priors.items() if d is None]:  # recipes that need hardware and params
        priors[key] = recipes.resolve(ctx, key, priors_node, priors, hardware, data)
        _check_domain(ctx, key, priors[key], priors_node)
    if "goodput" not in priors:
        priors["goodput"] = Dist("point", {"value": 1.0}, source="default: no downtime (goodput 1)")
    if hardware.peak_flops is not None and "peak_flops" not in priors:
        priors["peak_flops"] = Dist("point", {"value": hardware.peak_flops},
                                    source=f"catalogue: {hardware.accelerator} {hardware.precision} dense peak")
    if hardware.tdp_w is not None and "power" not in priors:
        priors["power"] = Dist("point", {"value": hardware.tdp_w}, source=f"catalogue: {hardware.accelerator} TDP")
    if "power" in priors and "pue" not in priors:
        priors["pue"] = Dist("point", {"value": 1.0}, source="default: accelerator power only (PUE 1)")
    if flops == "megatron":
        priors.pop("params", None)  # the megatron count is set by the architecture alone

    spec = Spec(name=name, description=description, seed=seed, samples=samples, hardware=hardware, flops=flops,
                architecture=arch, priors=priors, observe={}, path=ctx.path, raw=data,
                extras={k: data[k] for k in ("sensitivity", "correlations", "plan") if k in data})
    _check_output_range(ctx, spec, data)
    observe = _observations(ctx, data, spec) if "observe" in data else {}
    return Spec(**{**spec.__dict__, "observe": observe, "reported": parse_reported(ctx, data, spec)})


def check_samples(samples: int, error, node=None, key=None) -> None:
    """Refuse sample counts that are too small to summarise or too large to finish."""
    if samples < 1000:
        raise error(f"expected at least 1000 samples (quantiles and their errors need them), got {samples}",
                    node, key, "samples")
    if samples > MAX_SAMPLES:
        raise error(f"{samples:.3g} samples would take hours (~{samples / 3e7 / 3600:.1f} h at 30M draws/s); "
                    f"the limit is {MAX_SAMPLES:.0e}", node, key, "samples")


def _hardware(ctx: _Ctx, data: Mapping, priors: Mapping[str, Dist]) -> Hardware:
    node = data.get("hardware")
    if node is None:
        if "peak_flops" not in priors:
            raise ctx.error("missing `hardware:` (accelerator and precision), or give a `peak_flops` prior",
                            data, None, "hardware")
        return Hardware(None, "bf16", None, None, None)
    node = _mapping(ctx, node, data, "hardware", "hardware")
    _check_keys(ctx, node, HARDWARE_KEYS, "hardware")
    count = None
    if "count" in node:
        count = int(_number(ctx, node, "count", "hardware.count", positive=True, integer=True))
    precision = node.get("precision", "bf16")
    if precision not in hw.PRECISIONS:
        raise ctx.error(f"unknown precision '{precision}'{closest(precision, hw.PRECISIONS)} "
                        f"(expected one of: {', '.join(hw.PRECISIONS)})", node, "precision", "hardware.precision")
    if "accelerator" not in node:
        if "peak_flops" not in priors:
            raise ctx.error("missing hardware.accelerator (or a peak_flops prior)", node, None, "hardware.accelerator")
        return Hardware(None, precision, count, None, None)
    acc_id = node["accelerator"]
    try:
        acc = hw.get(str(acc_id))
    except hw.HardwareError as e:
        raise ctx.error(str(e), node, "accelerator", "hardware.accelerator") from None
    peak = None
    if "peak_flops" not in priors:
        try:
            peak = acc.peak(precision)
        except hw.HardwareError as e:
            raise ctx.error(str(e), node, "precision", "hardware.precision") from None
    return Hardware(acc.id, precision, count, peak, acc.tdp_w)


def _architecture(ctx: _Ctx, data: Mapping) -> Architecture:
    node = _mapping(ctx, data["architecture"], data, "architecture", "architecture")
    _check_keys(ctx, node, ARCH_KEYS, "architecture")
    vals: dict[str, int] = {}
    for k in ARCH_KEYS:
        if k in node and k not in ("source", "experts", "experts_active"):
            x = _number(ctx, node, k, f"architecture.{k}", positive=True, integer=True)
            if x > MAX_ARCH:
                raise ctx.error(f"expected at most {MAX_ARCH:.0e}, got {node[k]}", node, k, f"architecture.{k}")
            vals[k] = int(x)
    for k in ("layers", "d_model", "heads", "seq_len", "vocab"):
        if k not in vals:
            raise ctx.error(f"missing architecture.{k}", node, None, f"architecture.{k}")
    return Architecture(**vals)


def _check_domain(ctx: _Ctx, name: str, dist: Dist, node: Mapping) -> None:
    lo, hi, _, meaning = INPUTS[name]
    s_lo, s_hi = support(dist)
    bad_low = s_lo < lo or (s_lo == lo and dist.family == "point")
    if name == "pue":
        bad_low = s_lo < lo
    if bad_low or s_hi > hi:
        rng = f"[{lo:g}, {hi:g}]" if name == "pue" else f"(0, {hi:g}]"
        hint = " (bound it with low:/high:, or use beta for a fraction)" if dist.family in ("normal", "lognormal") \
            else ""
        raise ctx.error(f"{meaning} must stay in {rng}, but this {dist.family} prior reaches "
                        f"[{s_lo:g}, {s_hi:g}]{hint}", node, name, f"priors.{name}")
    t_lo, t_hi = tail_quantiles(dist)  # what the sampler's table will hold at z = -8 and z = 8
    if not (t_lo > 0 and math.isfinite(t_hi)) or max(abs(math.log(t_lo)), abs(math.log(t_hi))) > MAX_LOG_INPUT:
        raise ctx.error(f"this {dist.family} prior reaches [{t_lo:.3g}, {t_hi:.3g}] in its 1e-15 tails; "
                        f"{meaning} must stay positive and within 1e-100..1e100 (check the units and the "
                        "parameters)", node, name, f"priors.{name}")


MAX_LOG_INPUT = 100 * math.log(10)  # every input's extreme draws within 1e-100..1e100
MAX_LOG_OUTPUT = 300 * math.log(10)  # every output's within 1e-300..1e300 (float64 holds 1.8e308)
MAX_ARCH = 10**9  # layers, widths, heads, sequence length, vocabulary: generous, and keeps FLOPs/token finite


def _check_output_range(ctx: _Ctx, spec: Spec, node: Mapping) -> None:
    """Refuse priors whose extreme draws would overflow an output (a units mistake, e.g. tokens in 1e30).

    Outputs are signed sums of input logs (model.py), so their extremes are sums of the inputs' extremes.
    """
    r = {n: tuple(math.log(v) for v in tail_quantiles(d)) for n, d in spec.priors.items()}
    a = spec.architecture
    if spec.flops == "megatron":  # Narayanan et al. 2021 Eq. 3 per token, as model.flops_per_token
        h, layers, s_, v = a.d_model, a.layers, a.seq_len, a.vocab
        c = math.log(72.0 * layers * h * h * (1 + s_ / (6.0 * h) + v / (12.0 * layers * h)))
        per_token = (c, c)
    elif spec.flops == "palm":  # PaLM App. B: 6N + 12 L H Q T per token
        attn = 12.0 * a.layers * a.heads * (a.head_dim or a.d_model // a.heads) * a.seq_len
        per_token = tuple(math.log(6.0 * math.exp(x) + attn) for x in r["params"])
    else:
        per_token = tuple(math.log(6.0) + x for x in r["params"])
    lo = {"flops": r["tokens"][0] + per_token[0]}
    hi = {"flops": r["tokens"][1] + per_token[1]}
    lo["gpu_hours"] = lo["flops"] - r["peak_flops"][1] - r["mfu"][1] - r["goodput"][1] - math.log(3600.0)
    hi["gpu_hours"] = hi["flops"] - r["peak_flops"][0] - r["mfu"][0] - r["goodput"][0] - math.log(3600.0)
    if "price" in r:
        lo["cost"], hi["cost"] = lo["gpu_hours"] + r["price"][0], hi["gpu_hours"] + r["price"][1]
    if "power" in r:
        lo["energy_mwh"] = lo["gpu_hours"] + r["power"][0] + r["pue"][0] - math.log(1e6)
        hi["energy_mwh"] = hi["gpu_hours"] + r["power"][1] + r["pue"][1] - math.log(1e6)
    for out in lo:
        if max(abs(lo[out]), abs(hi[out])) > MAX_LOG_OUTPUT:
            extreme = max(r, key=lambda n: max(abs(r[n][0]), abs(r[n][1])))
            e10 = [x / math.log(10) for x in (lo[out], hi[out])]
            raise ctx.error(f"these priors let {out} reach [1e{e10[0]:.0f}, 1e{e10[1]:.0f}] in their 1e-15 tails, "
                            "beyond what a float holds; "
                            f"check the units and spreads (most extreme input: {extreme})", node, "priors", "priors")


def _observations(ctx: _Ctx, data: Mapping, spec: Spec) -> dict[str, Observation]:
    node = _mapping(ctx, data["observe"], data, "observe", "observe")
    allowed = list(spec.outputs) + [n for n in spec.priors]
    out: dict[str, Observation] = {}
    for key in node:
        field_ = f"observe.{key}"
        if key not in allowed:
            every = list(OUTPUTS) + list(INPUTS)
            why = ""
            if key in OUTPUTS:
                why = {"wall_days": " (needs hardware.count)", "cost": " (needs a price prior)",
                       "energy_mwh": " (needs a power prior or an accelerator with a TDP)"}.get(key, "")
            elif key in INPUTS:
                why = " (it has no prior in this file)"
            raise ctx.error(f"cannot observe '{key}'{why}{closest(key, every) if not why else ''} "
                            f"(observable here: {', '.join(allowed)})", node, key, field_)
        o = node[key]
        if not isinstance(o, Mapping):
            x = parse_number(o)
            if x is None:
                raise ctx.error(f"expected {{value: ..., sigma: ...}} or {{between: [lo, hi]}}, got {_kind(o)}",
                                node, key, field_)
            if x <= 0:
                raise ctx.error(f"an observed {key} must be > 0, got {o}", node, key, field_)
            o = {"value": x}
        _check_keys(ctx, o, OBS_KEYS, field_)
        source = o.get("source")
        if source is not None and not isinstance(source, str):
            raise ctx.error(f"expected source: to be text, got {_kind(source)}", o, "source", f"{field_}.source")
        line = ctx.line(node, key)
        if "between" in o:
            b = o["between"]
            if "value" in o:
                raise ctx.error("give either value (with sigma/sd) or between: [lo, hi], not both", o, "between",
                                field_)
            if not isinstance(b, list) or len(b) != 2:
                raise ctx.error(f"expected between: [low, high], got {_kind(b)}", o, "between", field_)
            lo, hi = (parse_number(v) for v in b)
            if lo is None or hi is None:
                raise ctx.error("expected two numbers in between: [low, high]", o, "between", field_)
            if not 0 <= lo < hi:
                raise ctx.error(f"expected 0 <= low < high in between, got [{b[0]}, {b[1]}]", o, "between", field_)
            if key in spec.priors:  # an input: its prior's support is known here, exactly
                s_lo, s_hi = support(spec.priors[key])
                if hi < s_lo or lo > s_hi:
                    raise ctx.error(f"between: [{b[0]}, {b[1]}] excludes every value its prior allows "
                                    f"([{s_lo:g}, {s_hi:g}]): no draw could explain it", o, "between", field_)
            out[key] = Observation(key, "between", None, None, lo, hi, source, line)
            continue
        if "value" not in o:
            raise ctx.error("missing value (the published figure)", o, None, field_)
        value = _number(ctx, o, "value", f"{field_}.value")
        if value <= 0:
            raise ctx.error(f"an observed {key} must be > 0, got {o['value']}", o, "value", f"{field_}.value")
        noise = o.get("noise", "lognormal")
        if noise not in NOISES:
            raise ctx.error(f"unknown noise '{noise}'{closest(noise, NOISES)} (expected lognormal or normal; "
                            "use between: [lo, hi] for an interval)", o, "noise", f"{field_}.noise")
        if "sd" in o and "sigma" in o:
            raise ctx.error("give sigma (relative) or sd (absolute), not both", o, "sd", field_)
        if "sd" in o:
            scale = _number(ctx, o, "sd", f"{field_}.sd", positive=True)
            if noise == "lognormal":
                scale = math.sqrt(math.log1p((scale / value) ** 2))  # lognormal sigma with this sd at the value
        else:
            sigma = _number(ctx, o, "sigma", f"{field_}.sigma", positive=True) if "sigma" in o else 0.05
            if sigma > 5:
                raise ctx.error(f"expected a relative sigma (0.05 = 5%), got {o['sigma']}", o, "sigma",
                                f"{field_}.sigma")
            scale = sigma if noise == "lognormal" else sigma * value
        out[key] = Observation(key, noise, value, scale, None, None, source, line)
    return out


def resolved_dict(spec: Spec) -> dict[str, Any]:
    """The spec with every default filled in, as plain data (also the resolved prior file)."""
    d: dict[str, Any] = {"name": spec.name, "description": spec.description, "seed": spec.seed,
                         "samples": spec.samples, "flops": spec.flops}
    h = spec.hardware
    d["hardware"] = {k: v for k, v in (("accelerator", h.accelerator), ("precision", h.precision),
                                       ("count", h.count)) if v is not None}
    if spec.architecture is not None:
        d["architecture"] = {k: v for k, v in spec.architecture.__dict__.items() if v is not None}
    d["priors"] = {n: dist.to_dict() for n, dist in spec.priors.items()}
    if spec.observe:
        obs = {}
        for n, o in spec.observe.items():
            if o.noise == "between":
                obs[n] = {"between": [o.low, o.high]}
            elif o.noise == "lognormal":
                obs[n] = {"value": o.value, "sigma": o.scale}
            else:
                obs[n] = {"value": o.value, "noise": "normal", "sd": o.scale}
            if o.source:
                obs[n]["source"] = o.source
        d["observe"] = obs
    if spec.reported:
        d["reported"] = {n: r.to_dict() for n, r in spec.reported.items()}
    d.update(spec.extras)
    return _plain(d)


def _plain(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    return str(x)


__all__ = ["Spec", "Hardware", "Architecture", "Observation", "Dist", "SpecError", "load_spec", "resolved_dict",
           "INPUTS", "OUTPUTS", "CONVENTIONS", "DIST_KEYS", "check_samples"]
