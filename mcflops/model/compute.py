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

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import jax
import jax.numpy as jnp

from mcflops.chain import SECONDS_PER_HOUR, flops_per_token

from mcflops.model.copula import from_spec as copula_from_spec
from mcflops.model.samplers import Sampler, make_sampler
from mcflops.spec import Spec

@dataclass(frozen=True)
class Model:
    """A spec compiled for the kernel: samplers (leaves: numbers) and static structure."""

    inputs: tuple[str, ...]  # every input, in spec order
    samplers: tuple[Sampler, ...]
    outputs: tuple[str, ...]
    attn_alpha: jax.Array  # palm: share of 6N in FLOPs/token at the centre (1.0 otherwise)
    centers: Mapping[str, float] = field(default_factory=dict)  # float64 log-centres of every quantity
    flops_convention: str = "6nd"
    names: tuple[str, ...] = ()  # quantities tracked by the engine: uncertain inputs, then outputs
    copula: Any = None  # copula.Copula (Cholesky factor of correlated inputs' z) or None

    def sampler(self, name: str) -> Sampler:
        return self.samplers[self.inputs.index(name)]


jax.tree_util.register_dataclass(
    Model, data_fields=["samplers", "attn_alpha", "copula", "centers"],  # centres: leaves, unused in the kernel
    meta_fields=["inputs", "outputs", "flops_convention", "names"])


def build_model(spec: Spec) -> Model:
    """Compile the priors into samplers and the chain's float64 constants."""
    samplers = tuple(make_sampler(d) for d in spec.priors.values())
    inputs = tuple(spec.priors)
    c = {n: s.center for n, s in zip(inputs, samplers)}
    if spec.flops == "megatron":
        per_token = flops_per_token(spec, None)
        alpha = 1.0
    else:
        n0 = math.exp(c["params"])
        per_token = flops_per_token(spec, n0)
        alpha = 6.0 * n0 / per_token
    c["flops"] = c["tokens"] + math.log(per_token)
    c["gpu_hours"] = c["flops"] - c["peak_flops"] - c["mfu"] - c["goodput"] - math.log(SECONDS_PER_HOUR)
    if spec.hardware.count:
        c["wall_days"] = c["gpu_hours"] - math.log(spec.hardware.count) - math.log(24.0)
    if "price" in c:
        c["cost"] = c["gpu_hours"] + c["price"]
    if "power" in c:
        c["energy_mwh"] = c["gpu_hours"] + c["power"] + c["pue"] - math.log(1e6)
    uncertain = tuple(n for n, s in zip(inputs, samplers) if s.kind != "const")
    return Model(inputs, samplers, spec.outputs, jnp.asarray(alpha, jnp.float32), c, spec.flops,
                 uncertain + spec.outputs, copula=copula_from_spec(spec))


def outputs(model: Model, d: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Centred log outputs from centred log inputs ``d`` (pure; broadcasts over any shape)."""
    if model.flops_convention == "6nd":
        d_per_token = d["params"]
    elif model.flops_convention == "palm":
        a = model.attn_alpha  # log((6 N e^dN + attn) / (6 N + attn)) = log(alpha e^dN + 1 - alpha)
        d_per_token = jnp.log(a * jnp.exp(d["params"]) + (1.0 - a))
    else:
        d_per_token = jnp.zeros_like(d["tokens"])
    out = {"flops": d["tokens"] + d_per_token}
    out["gpu_hours"] = out["flops"] - d["peak_flops"] - d["mfu"] - d["goodput"]
    if "wall_days" in model.outputs:
        out["wall_days"] = out["gpu_hours"]
    if "cost" in model.outputs:
        out["cost"] = out["gpu_hours"] + d["price"]
    if "energy_mwh" in model.outputs:
        out["energy_mwh"] = out["gpu_hours"] + d["power"] + d["pue"]
    return out


def evaluate(model: Model, z: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Centred logs of every input and output from standard-normal scores ``z`` (one per input)."""
    d = {}
    for name, s in zip(model.inputs, model.samplers):
        d[name] = s(z[name]) if name in z else jnp.broadcast_to(s.a, ())
    return {**d, **outputs(model, d)}


