"""Spec -> the compute model: samplers, the copula and the napkin chain's float64 centres (host side), and
the centred log outputs the kernel traces. The chain's formulas, each cited, are in mcflops/chain.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import chain
from mcflops.model.copula import from_spec as copula_from_spec
from mcflops.model.samplers import Sampler, make_sampler, to_device
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

    @property
    def uncertain(self) -> tuple[str, ...]:
        """The inputs drawn from a distribution (the spec's ``uncertain``, its point masses left out), in spec
        order: the first of the quantities the engine tracks."""
        return self.names[: len(self.names) - len(self.outputs)]


jax.tree_util.register_dataclass(
    Model, data_fields=["samplers", "attn_alpha", "copula", "centers"],  # centres: leaves, unused in the kernel
    meta_fields=["inputs", "outputs", "flops_convention", "names"])


def build_model(spec: Spec) -> Model:
    """Compile the priors into samplers and the chain's float64 constants."""
    samplers = tuple(make_sampler(d) for d in spec.priors.values())
    inputs = tuple(spec.priors)
    c = {n: s.center for n, s in zip(inputs, samplers)}
    alpha = chain.params_share(spec.flops, spec.architecture, c.get("params"))
    c.update(chain.log_centres(spec.flops, spec.architecture, c, spec.hardware.count))
    return Model(inputs, samplers, spec.outputs, to_device(alpha, np.float32), c, spec.flops,
                 spec.uncertain + spec.outputs, copula=copula_from_spec(spec))  # a point mass: a "const" sampler


def outputs(model: Model, d: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Centred log outputs from centred log inputs ``d`` (pure; broadcasts over any shape)."""
    return chain.deviations(d, model.flops_convention, model.attn_alpha, model.outputs, jnp)


def evaluate(model: Model, z: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    """Centred logs of every input and output from standard-normal scores ``z`` (one per input)."""
    d = {}
    for name, s in zip(model.inputs, model.samplers):
        d[name] = s(z[name]) if name in z else jnp.broadcast_to(s.a, ())
    return {**d, **outputs(model, d)}


