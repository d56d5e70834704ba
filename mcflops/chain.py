"""The napkin chain, once: FLOPs per token by convention, and every output as a product of its terms.

Formulas:

- FLOPs per token, ``6nd``: 6 N (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
  Sec. 2.1: C = 6 N D).
- FLOPs per token, ``palm``: 6 N + 12 L H Q T, with H Q = heads x head dim and T the sequence length
  (Chowdhery et al. 2022, "PaLM", Appendix B).
- FLOPs per token, ``megatron``: 72 l h^2 (1 + s/(6h) + V/(12 l h)), i.e. Eq. 3 of Narayanan et al. 2021,
  "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (per iteration
  72 B s l h^2 (...) without activation recomputation, 96 with it), divided by the B s tokens of an iteration.
- A published utilisation's FLOPs per token (:func:`published_per_token`): the above, ``causal``
  (PaLM's attention term halved) and ``hfu`` (hardware FLOPs: Eq. 3 with recompute, 96 for full recompute).
- FLOPs = FLOPs per token x D.
- Accelerator-hours = FLOPs / (peak FLOP/s x MFU x goodput x 3600) (MFU: PaLM Appendix B; goodput: the
  share of wall-clock time spent on useful training).
- Wall-clock days = hours / count / 24; cost = hours x price; energy (MWh) = hours x power (W) x PUE / 1e6.

``OUTPUTS`` writes each output as the expression the float chain evaluates (Python's left-to-right ``*``
and ``/``; a parenthesis is one factor, so the float chain rounds as the formula reads). Everything
else is derived from it: the float chain at point values (:func:`chain`), the float64 log-centres of
the model (:func:`log_centres`), the centred log deviations the kernel traces (:func:`deviations`),
the extreme logs the loader checks (:func:`log_bounds`), which inputs an output depends on
(:func:`depends`) and which outputs a spec has (:func:`available`). In logs each output is a signed
sum of its terms, added left to right; constants (and ``count``) shift the centre only. The one term
that is not a sum is the PaLM attention term, log(alpha e^dN + 1 - alpha) in deviations.

No JAX here: the deviations run on whatever array module the caller passes (the model passes jax.numpy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

PER_TOKEN = "flops_per_token"  # the convention's term
COUNT = "count"  # hardware.count: a number of the spec, not a prior

OUTPUTS: dict[str, str] = {
    "flops": "flops_per_token * tokens",  # C = 6 N D for 6nd (Kaplan et al. 2020, Sec. 2.1); CONVENTIONS below
    "gpu_hours": "flops / (peak_flops * mfu * goodput * 3600)",  # MFU as PaLM App. B; 3600 s per hour
    "wall_days": "gpu_hours / count / 24",  # on hardware.count accelerators at once
    "cost": "gpu_hours * price",  # price per accelerator-hour
    "energy_mwh": "gpu_hours * power * pue / 1e6",  # W x h = Wh; PUE: facility / IT power; 1e6 Wh per MWh
}


def _parse(text: str) -> tuple[tuple[int, tuple[str | float, ...]], ...]:
    """'a / (b * c) * 3' -> ((+1, ('a',)), (-1, ('b', 'c')), (+1, (3.0,))): signed factors, each a product."""
    out: list[tuple[int, tuple[str | float, ...]]] = []
    sign, rest = 1, text.replace("(", " ( ").replace(")", " ) ").split()
    while rest:
        tok = rest.pop(0)
        if tok in ("*", "/"):
            sign = 1 if tok == "*" else -1
            continue
        group = [tok]
        if tok == "(":  # one factor: a product
            group = []
            while (tok := rest.pop(0)) != ")":
                assert tok != "/", text
                if tok != "*":
                    group.append(tok)
        members = tuple(float(m) if m[0].isdigit() else m for m in group)
        out.append((sign, members))
    assert out and out[0][0] == 1 and isinstance(out[0][1][0], str), text
    return tuple(out)


TERMS = {name: _parse(text) for name, text in OUTPUTS.items()}


def _members(name: str) -> tuple[tuple[int, str | float], ...]:
    """An output's terms in logs: (sign, name or constant), in the order the sums add them."""
    return tuple((sign, m) for sign, group in TERMS[name] for m in group)


# ----------------------------------------------------------------------------------------------------
# FLOPs-per-token conventions


def _per_token_6nd(arch, n: float) -> float:
    return 6.0 * n  # Kaplan et al. 2020, Sec. 2.1


def _per_token_palm(arch, n: float) -> float:
    head_dim = arch.head_dim or arch.d_model // arch.heads
    return 6.0 * n + 12.0 * arch.layers * arch.heads * head_dim * arch.seq_len  # PaLM App. B: 6N + 12LHQT


def _per_token_megatron(arch, n: float | None) -> float:  # N does not enter
    h, l, s, v = arch.d_model, arch.layers, arch.seq_len, arch.vocab
    return 72.0 * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))  # Narayanan 2021 Eq. 3, no recompute


def _per_token_architecture(arch, n: float | None) -> float:  # N does not enter: the counts set it
    c = arch.counts()  # mcflops.arch.counts: each component's formula cited there
    if c is None:
        raise ValueError("flops: architecture needs an architecture that can be counted (its MLP width, ffn)")
    return c.training_flops_per_token  # 3 x forward: backward costs twice the forward (Narayanan et al. 2021)


def _dev_6nd(d, alpha, xp):
    return d["params"]


def _dev_palm(d, alpha, xp):  # log((6 N e^dN + attn) / (6 N + attn)) = log(alpha e^dN + 1 - alpha)
    return xp.log(alpha * xp.exp(d["params"]) + (1.0 - alpha))


def _dev_fixed(d, alpha, xp):  # the architecture alone sets it: no deviation, an array of the draws' shape
    return xp.zeros_like(d["tokens"])


@dataclass(frozen=True)
class Convention:
    """One way of counting FLOPs per token: its inputs, its value, its centred log deviation, its napkin text."""

    name: str
    inputs: tuple[str, ...]  # priors that FLOPs per token depend on
    per_token: Callable[[Any, Any], float]  # (architecture, N) -> FLOPs per token
    deviation: Callable[[Mapping[str, Any], Any, Any], Any]  # (d, alpha, xp) -> centred log FLOPs per token
    napkin: str  # the terminal's "FLOPs = ..." with {params} and {flops_per_token} to fill in
    rule: str = ""  # FLOPs per token as the report writes it, with its source


CONVENTIONS: dict[str, Convention] = {
    "6nd": Convention("6nd", ("params",), _per_token_6nd, _dev_6nd, "6·N·D = 6 x {params}"),
    "palm": Convention("palm", ("params",), _per_token_palm, _dev_palm,
                       "FLOPs/token x D = (6N + 12·L·H·Q·T) {flops_per_token}",
                       "(6N + 12·L·H·Q·T) per token (PaLM, Chowdhery et al. 2022, App. B)"),
    "megatron": Convention("megatron", (), _per_token_megatron, _dev_fixed,
                           "FLOPs/token x D = 72·l·h²(1 + s/6h + V/12lh) {flops_per_token}",
                           "72·l·h²·(1 + s/6h + V/12lh) per token (Narayanan et al. 2021, Eq. 3, no recompute)"),
    # counted from the shape (GQA, GLU, MoE with shared experts, MLA): what palm and megatron approximate
    "architecture": Convention("architecture", (), _per_token_architecture, _dev_fixed,
                               "FLOPs/token x D = 3 x forward counted from the architecture {flops_per_token}",
                               "3 × the forward FLOPs per token counted from the architecture (attention projections "
                               "and causal scores, MLP or experts, router, logits; backward twice the forward, "
                               "Narayanan et al. 2021)"),
}


# How a source counted the FLOPs behind its published utilisation (layout_runs.yaml's ``measured.convention``;
# its header defines each): the conventions above, read the same way, and those only a source uses. A
# published MFU is compared with the model's through the ratio of FLOPs per token.
PUBLISHED = ("6nd", "megatron", "palm", "causal", "hfu", "unstated")


def _per_token_causal(arch, n: float) -> float:  # PaLM's attention term halved: the causal mask skips half the scores
    head_dim = arch.head_dim or arch.d_model // arch.heads
    return 6.0 * n + 6.0 * arch.layers * arch.heads * head_dim * arch.seq_len


def _per_token_megatron_recompute(arch) -> float:  # Narayanan 2021 Eq. 3 with recompute: 96 B s l h^2 (...)
    h, l, s, v = arch.d_model, arch.layers, arch.seq_len, arch.vocab
    return 96.0 * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))


def published_per_token(convention: str, arch, n: float, recompute: str = "none",
                        recompute_ratio: float = 1.0) -> float:
    """FLOPs per token as a source's ``convention`` (one of :data:`PUBLISHED`) counts them, N = ``n``.

    ``unstated`` is read as palm. ``hfu`` counts the hardware's FLOPs, the recomputed forward included: with
    ``full`` recompute as Narayanan et al. 2021's Eq. 3 counts it (the logits not recomputed), else megatron's
    count times ``recompute_ratio``, the recompute's hardware over model FLOPs (mcflops.layout.recompute_ratio:
    the layout sits above the chain, so its caller passes it; 1 without recompute)."""
    if convention not in PUBLISHED:
        raise ValueError(f"unknown convention {convention!r}")
    if convention == "causal":
        return _per_token_causal(arch, n)
    if convention == "hfu":
        return _per_token_megatron_recompute(arch) if recompute == "full" else \
            recompute_ratio * _per_token_megatron(arch, n)
    return CONVENTIONS["palm" if convention == "unstated" else convention].per_token(arch, n)


def flops_per_token(spec, params: float | None) -> float:
    """FLOPs per training token under the spec's convention, at a point value of N."""
    return CONVENTIONS[spec.flops].per_token(spec.architecture, params)


def params_share(convention: str, arch, log_n: float | None) -> float:
    """6N's share of FLOPs per token at N = e^log_n: alpha of the PaLM deviation (1 where N is all of it)."""
    conv = CONVENTIONS[convention]
    if not conv.inputs:
        return 1.0
    n0 = math.exp(log_n)
    return 6.0 * n0 / conv.per_token(arch, n0)


# ----------------------------------------------------------------------------------------------------
# what the table gives


def available(inputs, count: int | None) -> tuple[str, ...]:
    """The outputs computable from these inputs (cost needs a price, days a count, energy a power)."""
    have = {*inputs, PER_TOKEN} | ({COUNT} if count else set())
    out = []
    for name in OUTPUTS:
        if all(isinstance(m, float) or m in have for _, m in _members(name)):
            have.add(name)
            out.append(name)
    return tuple(out)


def depends(name: str, convention: str) -> tuple[str, ...]:
    """The inputs a quantity depends on, in the order its formula names them (an input: itself)."""
    if name not in OUTPUTS:
        return (name,)
    out: list[str] = []
    for _, m in _members(name):
        if isinstance(m, float) or m == COUNT:
            continue
        for x in CONVENTIONS[convention].inputs if m == PER_TOKEN else depends(m, convention):
            if x not in out:
                out.append(x)
    return tuple(out)


def _product(terms, vals: Mapping[str, Any]) -> float:
    v = None
    for sign, group in terms:
        f = None
        for m in group:
            x = m if isinstance(m, float) else vals[m]
            f = x if f is None else f * x
        v = f if v is None else (v * f if sign > 0 else v / f)
    return v


def chain(spec, medians: Mapping[str, float] | None = None) -> dict[str, float]:
    """The napkin chain at point values, in float64: what one writes on a whiteboard.

    Each input at its median (a point prior is its value). With an observed gpu_hours, run it
    backwards: the MFU x goodput product the figure implies, and the MFU at goodput 1 and at the
    median goodput.
    """
    from mcflops.priors.quantiles import median

    med = dict(medians or {})
    for name, dist in spec.priors.items():
        if name not in med:
            med[name] = median(dist)
    out: dict[str, float] = {k: med[k] for k in spec.priors}
    out[PER_TOKEN] = flops_per_token(spec, med.get("params"))
    vals = {**med, PER_TOKEN: out[PER_TOKEN], COUNT: spec.hardware.count}
    for name in available(med, spec.hardware.count):
        out[name] = vals[name] = _product(TERMS[name], vals)
    obs = spec.observe.get("gpu_hours")
    if obs is not None and obs.value is not None:
        effective = _solve("gpu_hours", ("mfu", "goodput"), obs.value, vals)
        out["observed_gpu_hours"] = obs.value
        out["implied_mfu_x_goodput"] = effective
        out["implied_mfu"] = effective  # at goodput 1: the interview answer
        out["implied_mfu_at_median_goodput"] = effective / med["goodput"]
    return out


def _solve(name: str, product: tuple[str, ...], value: float, vals: Mapping[str, Any]) -> float:
    """The product of the divisors ``product`` that makes output ``name`` equal ``value``: the output and
    the product trade places (flops / (peak x M x G x 3600) = h  <=>  M x G = flops / (peak x h x 3600))."""
    terms = []
    for sign, group in TERMS[name]:
        if any(m in product for m in group):
            assert sign < 0 and all(m in group for m in product), (name, product)
            group = tuple(m for m in group if m not in product[1:])
            group = tuple(name if m == product[0] else m for m in group)
        terms.append((sign, group))
    return _product(terms, {**vals, name: value})


def log_centres(convention: str, arch, centres: Mapping[str, float], count: int | None) -> dict[str, float]:
    """Float64 log-centres of the outputs from the inputs' (their sums, left to right, constants included)."""
    conv = CONVENTIONS[convention]
    logs = {**centres, PER_TOKEN: math.log(conv.per_token(arch, math.exp(centres["params"]) if conv.inputs
                                                           else None))}
    if count:
        logs[COUNT] = math.log(count)
    out = {}
    for name in available(centres, count):
        v = None
        for sign, m in _members(name):
            x = math.log(m) if isinstance(m, float) else logs[m]
            v = x if v is None else (v + x if sign > 0 else v - x)
        out[name] = logs[name] = v
    return out


def deviations(d: Mapping[str, Any], convention: str, alpha, outputs, xp) -> dict[str, Any]:
    """Centred log outputs (those named in ``outputs``) from centred log inputs ``d``, in the array module ``xp``.

    Each output adds its terms left to right, e.g. ((flops - peak_flops) - mfu) - goodput; constants and
    ``count`` are in the centre, not here. Pure; broadcasts over any shape.
    """
    per_token = CONVENTIONS[convention].deviation(d, alpha, xp)
    out: dict[str, Any] = {}
    for name in OUTPUTS:
        if name not in outputs:
            continue
        v = None
        for sign, m in _members(name):
            if isinstance(m, float) or m == COUNT:
                continue
            x = per_token if m == PER_TOKEN else out[m] if m in out else d[m]
            v = x if v is None else (v + x if sign > 0 else v - x)
        out[name] = v
    return out


def log_bounds(convention: str, arch, ranges: Mapping[str, tuple[float, float]],
               count: int | None) -> dict[str, tuple[float, float]]:
    """The outputs' (lowest, highest) log from the inputs' (a divisor's highest gives the lowest):
    every output is monotone in each input (signed sums, and FLOPs per token increasing in N)."""
    conv = CONVENTIONS[convention]
    if conv.inputs:
        per_token = tuple(math.log(conv.per_token(arch, math.exp(x))) for x in ranges["params"])
    else:
        per_token = (math.log(conv.per_token(arch, None)),) * 2
    r = {**ranges, PER_TOKEN: per_token}
    if count:
        r[COUNT] = (math.log(count),) * 2
    out = {}
    for name in available(ranges, count):
        lo = hi = None
        for sign, m in _members(name):
            a, b = (math.log(m),) * 2 if isinstance(m, float) else r[m]
            if lo is None:
                lo, hi = a, b
            elif sign > 0:
                lo, hi = lo + a, hi + b
            else:
                lo, hi = lo - b, hi - a
        out[name] = r[name] = (lo, hi)
    return out


__all__ = [
    "CONVENTIONS",
    "COUNT",
    "OUTPUTS",
    "PER_TOKEN",
    "PUBLISHED",
    "TERMS",
    "Convention",
    "available",
    "chain",
    "depends",
    "deviations",
    "flops_per_token",
    "log_bounds",
    "log_centres",
    "params_share",
    "published_per_token",
]
