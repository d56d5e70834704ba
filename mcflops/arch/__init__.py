"""Architecture counts: parameters and FLOPs per token from a transformer's shape, and Hugging Face
``config.json`` files read into one. Plain Python: no JAX here."""

from mcflops.arch.counts import SHAPE_KEYS, Counts, Shape, attention_params, counts, mlp_params
from mcflops.arch.hf import FAMILIES, from_config, preset, presets, read_config

__all__ = ["FAMILIES", "SHAPE_KEYS", "Counts", "Shape", "attention_params", "counts", "from_config", "mlp_params",
           "preset", "presets", "read_config"]
