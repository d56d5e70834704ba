"""What a prior file leaves to the defaults, and the priors that are legal but likely mistakes: the notes a
:class:`~mcflops.spec.Spec` carries from its load to the terminal, summary.json and the report.

The defaults are recognised by the sources :func:`mcflops.spec.inputs.fill_defaults` gives them, not by what
the file left out, so that the resolved prior file a run writes (every default spelled out, with that source)
loads with the same notes and repeats the run's summary exactly.
"""

from __future__ import annotations

import math
import re
from typing import Mapping

from mcflops import hardware as hw
from mcflops.numbers import format_number
from mcflops.priors.dist import Dist

DEFAULT_GOODPUT = "default: no downtime (goodput 1)"
DEFAULT_GOODPUT_CALIBRATED = "default: goodput 1, as the calibrated mfu prior is effective utilization (MFU x goodput)"
DEFAULT_PUE = "default: accelerator power only (PUE 1)"
CATALOGUE = "catalogue: "  # the start of the catalogue's peak and TDP sources
DIVIDES = ("mfu", "goodput")  # GPU-hours = FLOPs / (peak x MFU x goodput) / 3600 (chain.py): 1/x of these
MIN_SPREAD = 1e-6  # a 90% interval narrower than this, relative: float32 draws (epsilon 1.2e-7) cannot resolve it


def peak_source(accelerator: str, precision: str) -> str:
    return f"{CATALOGUE}{accelerator} {precision} dense peak"


def tdp_source(accelerator: str) -> str:
    return f"{CATALOGUE}{accelerator} TDP"


def spec_notes(priors: Mapping[str, Dist], accelerator: str | None, precision: str) -> tuple[str, ...]:
    """The notes of a loaded file's priors: its defaults, then its warnings, in input order."""
    return tuple(assumptions(priors, accelerator, precision)) + tuple(warnings(priors))


def assumptions(priors: Mapping[str, Dist], accelerator: str | None, precision: str) -> list[str]:
    """One line per default the file relies on: goodput 1, PUE 1, the catalogue's peak and TDP."""
    out = []
    g = priors.get("goodput")
    if g is not None and g.source == DEFAULT_GOODPUT:
        # Llama 3's 405B run: "higher than 90% effective training time" (arXiv 2407.21783 Sec. 3.3.4); 1 / 0.9 = 1.11
        out.append("goodput is 1 (the file gives no goodput: prior): no downtime at all, which makes GPU-hours about "
                   "10% optimistic; published runs report about 0.9 (Llama 3: 'higher than 90% effective training "
                   "time', arXiv 2407.21783 Sec. 3.3.4); give one, e.g. goodput: {beta: [0.85, 0.97]}")
    acc = _accelerator(accelerator)
    p = priors.get("peak_flops")
    if p is not None and acc is not None and p.source == peak_source(acc.id, precision):
        out.append(f"peak_flops is the catalogue's dense {precision} peak of the {acc.name}, "
                   f"{format_number(p.params['value'] / 1e12)} TFLOP/s per accelerator, without sparsity "
                   f"({_first_clause(acc.source)}, in mcflops/data/accelerators.yaml); MFU is measured against it")
    w = priors.get("power")
    if w is not None and acc is not None and w.source == tdp_source(acc.id):
        out.append(f"power is the catalogue's TDP of the {acc.name}, {w.params['value']:g} W per accelerator "
                   f"({_first_clause(acc.source)}, in mcflops/data/accelerators.yaml): energy assumes each draws "
                   "its maximum all the time, and nothing else (hosts, network); give a power prior for a measured "
                   "average")
    u = priors.get("pue")
    if u is not None and u.source == DEFAULT_PUE:
        out.append("PUE is 1 (the file gives no pue: prior): energy counts the accelerators alone, no cooling or "
                   "power delivery; Meta reports a fleet PUE of 1.08 for 2023 (2024 sustainability report), the Uptime "
                   "Institute's 2023 survey an industry average of 1.58")
    return out


def units_note(flops: str, arch, priors: Mapping[str, Dist]) -> str | None:
    """Under ``flops: 6nd`` the MFU is in 6ND units (Kaplan et al. 2020, Sec. 2.1: 6 N per token), which leave out
    attention's score FLOPs; most published MFU counts them (PaLM App. B: 6N + 12 L H Q T; Llama 3 Sec. 3.3.2
    does), so the same run's MFU reads higher that way. Counted from the architecture when the file has one
    that can be counted (mcflops.arch: causal scores), else said in words."""
    if flops != "6nd" or "mfu" not in priors:
        return None
    counts = arch.counts() if arch is not None else None
    n = priors.get("params")
    if counts is None or n is None:
        return ("mfu is in 6ND units (6 x parameters per token, flops: 6nd): attention's score FLOPs are not "
                "counted, a few percent of a dense model's at 2-8K sequence and growing with it (12 L H Q T per "
                "token, PaLM App. B), so an MFU counted with them (as papers often quote it) reads higher than the "
                "same run's here; give an architecture: (a preset or hf_config) to have the difference counted")
    from mcflops.priors.quantiles import median

    ratio = counts.training_flops_per_token / (6.0 * float(median(n)))
    scores = 3.0 * counts.flops.get("attention_scores_causal", 0.0) / counts.training_flops_per_token
    return (f"mfu is in 6ND units (6 x parameters per token, flops: 6nd): attention's score FLOPs, "
            f"{scores:.1%} of this model's training FLOPs at sequence {arch.seq_len:,} (causal, counted "
            f"from its architecture), are not counted; the FLOPs counted from the architecture are {ratio:.3f} x 6ND "
            f"per token, so an MFU measured that way (flops: architecture) reads {ratio:.3f} x this file's")


def warnings(priors: Mapping[str, Dist]) -> list[str]:
    """Priors that load but are likely mistakes: a U-shaped beta, and a beta under GPU-hours' divisor whose
    reciprocal has no mean or no variance."""
    out = []
    for name, d in priors.items():
        for i, c in enumerate(d.components or (d,)):
            if c.family != "beta":
                continue
            a, b = c.params["a"], c.params["b"]
            where = f"priors.{name}" + (f".mixture[{i}]" if d.components else "")
            if a < 1 and b < 1:
                m, sd = a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))  # beta mean and sd
                out.append(f"WARNING: {where}: beta(a={a:.3g}, b={b:.3g}) is U-shaped (both shape parameters < 1): "
                           f"its mass piles up near 0 and 1, not around its mean {m:.3g} (sd {sd:.3g}); "
                           f"a typo for sd {sd / 10:.2g}?")
            if name in DIVIDES and a <= 2:
                out.append(_reciprocal(where, name, a))
    return out


def _reciprocal(where: str, name: str, a: float) -> str:
    """The moments of 1/X for X ~ beta(a, b): E[X^r] = B(a + r, b) / B(a, b), finite only for r > -a (the
    integral of x^(a + r - 1) (1 - x)^(b - 1) diverges at 0 otherwise; Johnson, Kotz & Balakrishnan 1995,
    Continuous Univariate Distributions Vol. 2, ch. 25). So E[1/X] is infinite for a <= 1, Var[1/X] (r = -2)
    for a <= 2; GPU-hours, days, cost and energy are proportional to 1/X."""
    which, shown = ("mean and sd are", "mean and sd do") if a <= 1 else ("sd is", "sd does")
    moment = "E[1/x] is infinite (a <= 1)" if a <= 1 else "Var[1/x] is infinite (a <= 2)"
    return (f"WARNING: {where}: beta shape a = {a:.3g}: GPU-hours are proportional to 1/{name}, and for this beta "
            f"{moment}, so GPU-hours' {which} infinite: the tables' {shown} not settle as draws grow (read "
            f"the quantiles), and a beta with a > 2 (less mass near 0) avoids it")


def spread_error(name: str, d: Dist) -> str | None:
    """The message for an 'uncertain' prior with no spread (``beta {a: 1e300, b: 1e300}``), else None.

    Refused rather than read as a point: the file says the input is uncertain, and the draws, the sensitivity
    indices and the posterior would each treat a zero-variance input differently (as a constant, as a 0/0
    share); a point is one number away, and the message gives it."""
    if d.family == "point":
        return None
    from mcflops.priors.quantiles import central

    q5, q50, q95 = central(d)
    if q95 - q5 > MIN_SPREAD * max(abs(q5), abs(q95)):
        return None
    return (f"this {d.family} prior has no spread: its 90% interval [{q5:.7g}, {q95:.7g}] is narrower than one part "
            f"in {1 / MIN_SPREAD:.0e}, below what the draws resolve; write it as a number ({name}: {q50:.6g})")


def _accelerator(accelerator: str | None):
    if accelerator is None:
        return None
    try:
        return hw.get(accelerator)
    except hw.HardwareError:
        return None


def _first_clause(source: str) -> str:
    """The catalogue source's first document ('NVIDIA H100 Tensor Core GPU datasheet'); the catalogue holds the
    rest (the columns read, the sparsity halved)."""
    text = re.split(r" \(|, |; | ;| / ", source)[0].strip()
    return text if len(text) <= 120 else text[:115] + "[...]"
