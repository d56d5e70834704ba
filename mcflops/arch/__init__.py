"""Architecture counts: parameters and FLOPs per token from a transformer's shape, and Hugging Face
``config.json`` files read into one. Plain Python: no JAX here."""

from mcflops.arch.counts import SHAPE_KEYS, Counts, Shape, attention_params, counts, mlp_params

__all__ = ["SHAPE_KEYS", "Counts", "Shape", "attention_params", "counts", "mlp_params"]
