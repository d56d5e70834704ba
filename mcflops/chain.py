"""The compute model, in log space: pure functions of centred log inputs.

Formulas (each cited where it is used):

- FLOPs, ``6nd``: C = 6 N D (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", Sec. 2.1).
- FLOPs, ``palm``: per token 6 N + 12 L H Q T, with H Q = d_model heads x head dim and T the sequence
  length (Chowdhery et al. 2022, "PaLM", Appendix B); total = per token x D.
- FLOPs, ``megatron``: per iteration 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) without activation
  recomputation (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM", Eq. 3 has 96 with recompute); per token divide by B s.
- Accelerator-hours = FLOPs / (peak FLOP/s x MFU x goodput) / 3600 (MFU: PaLM Appendix B; goodput:
  the share of wall-clock time spent on useful training).
- Wall-clock days = hours / count / 24; cost = hours x price; energy (MWh) = hours x power (W) x PUE / 1e6.

Every output is, in logs, a signed sum of input deviations plus a float64 constant; only the PaLM
attention term is not (log(alpha e^dN + 1 - alpha)). The constants live on the host.
"""

from __future__ import annotations

from typing import Mapping



SECONDS_PER_HOUR = 3600.0


def flops_per_token(spec, params: float | None) -> float:
    """FLOPs per training token under the spec's convention, at a point value of N."""
    a = spec.architecture
    if spec.flops == "6nd":
        return 6.0 * params  # Kaplan et al. 2020, Sec. 2.1
    if spec.flops == "palm":
        head_dim = a.head_dim or a.d_model // a.heads
        return 6.0 * params + 12.0 * a.layers * a.heads * head_dim * a.seq_len  # PaLM App. B: 6N + 12LHQT
    h, l, s, v = a.d_model, a.layers, a.seq_len, a.vocab
    return 72.0 * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h))  # Narayanan 2021 Eq. 3, no recompute


def chain(spec, medians: Mapping[str, float] | None = None) -> dict[str, float]:
    """The napkin chain at point values, in float64: what one writes on a whiteboard.

    Each input at its median (a point prior is its value). With an observed gpu_hours, run it
    backwards: the MFU x goodput product the figure implies, and the MFU at goodput 1 and at the
    median goodput.
    """
    from mcflops.priors.quantiles import ppf

    med = dict(medians or {})
    for name, dist in spec.priors.items():
        if name not in med:
            med[name] = float(ppf(dist, 0.5))
    out: dict[str, float] = {k: med[k] for k in spec.priors}
    per_token = flops_per_token(spec, med.get("params"))
    out["flops_per_token"] = per_token
    out["flops"] = per_token * med["tokens"]
    denom = med["peak_flops"] * med["mfu"] * med["goodput"] * SECONDS_PER_HOUR
    out["gpu_hours"] = out["flops"] / denom
    if spec.hardware.count:
        out["wall_days"] = out["gpu_hours"] / spec.hardware.count / 24.0
    if "price" in med:
        out["cost"] = out["gpu_hours"] * med["price"]
    if "power" in med:
        out["energy_mwh"] = out["gpu_hours"] * med["power"] * med["pue"] / 1e6
    obs = spec.observe.get("gpu_hours")
    if obs is not None and obs.value is not None:
        effective = out["flops"] / (med["peak_flops"] * obs.value * SECONDS_PER_HOUR)
        out["observed_gpu_hours"] = obs.value
        out["implied_mfu_x_goodput"] = effective
        out["implied_mfu"] = effective  # at goodput 1: the interview answer
        out["implied_mfu_at_median_goodput"] = effective / med["goodput"]
    return out
