"""Spec -> the compute model in JAX: samplers z -> log x, the copula, the outputs (pure, log space)."""

from mcflops.model.compute import Model, build_model, evaluate, outputs
from mcflops.model.samplers import GRID, ZMAX, Sampler, make_sampler, to_device, z_grid

__all__ = ["GRID", "ZMAX", "Model", "Sampler", "build_model", "evaluate", "make_sampler", "outputs", "to_device",
           "z_grid"]
