"""The package's one way to host-side randomness: a NumPy ``Generator`` from an explicit seed.

Draws on the device come from JAX keys (``mcflops.engine.rng``: the run's key, folded per input and block).
What is drawn on the host with NumPy (the layout model's Latin hypercube, the layout fit's new families and
residual noise, probe inputs) comes from :func:`generator`, each from a seed written beside the call, so a
result is a function of its inputs and never of a global state (``np.random.seed``, the legacy
``RandomState``): two calls with one seed give one stream, on any machine and in any order.
"""

from __future__ import annotations

import operator

import numpy as np


def generator(seed: int) -> np.random.Generator:
    """A PCG64 ``Generator`` seeded with ``seed`` (a non-negative whole number): the stream NumPy's
    ``default_rng(seed)`` gives (NumPy's docs: ``default_rng`` is ``Generator(PCG64(seed))``)."""
    seed = operator.index(seed)  # 1.5 or "1" is a mistake, not a seed
    if seed < 0:
        raise ValueError(f"seed: expected a whole number >= 0, got {seed}")
    return np.random.Generator(np.random.PCG64(seed))
