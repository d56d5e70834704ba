"""Every PRNG stream id in one place: a stream's key is ``fold_in(key, id)`` of the run's key.

An input's stream is ``stable_id(name)`` (so that the same name draws the same numbers in any file: common
random numbers); the fixed ids below key what is not an input. They must differ from each other and from
every input's id (tests/engine/test_streams.py), else two streams would draw the same numbers, and fit the
32 bits ``fold_in`` takes (an input's id has 31). Changing a value changes the draws.
"""

from __future__ import annotations

import zlib

GUMBEL = 0x7FFF_FFF1  # the engine's weighted reservoir: Gumbel keys of every draw (kernel)
RESAMPLE = 0x7FFF_FFE1  # systematic resampling of the reservoir to equally weighted draws (inference.update)
NUTS = 0x7FFF_FFE0  # the NUTS chains (inference.nuts)
SOBOL_A = 0x5A1E_0A  # Saltelli's matrix A (analysis.sensitivity)
SOBOL_B = 0x5A1E_0B  # Saltelli's matrix B (analysis.sensitivity)
SHAPLEY = 0x5A1E_5B  # the Shapley effects' permutations and conditional draws (analysis.shapley)
SWEEP = 0x5A1E_05  # the one-input sweeps' fan of draws (analysis.local)
COMPARE = 0x5A1E_C0  # compare's second file: the draws of its inputs not shared with the first (analysis.compare)
PLAN_PILOT = 0x91A4_0001  # the planning pass's pilot draws, which set its histogram ranges (engine.extras; 32 bits)

FIXED = {"GUMBEL": GUMBEL, "RESAMPLE": RESAMPLE, "NUTS": NUTS, "SOBOL_A": SOBOL_A, "SOBOL_B": SOBOL_B,
         "SHAPLEY": SHAPLEY, "SWEEP": SWEEP, "COMPARE": COMPARE,
         "PLAN_PILOT": PLAN_PILOT}


def stable_id(name: str) -> int:
    """A stable 31-bit id for an input name (CRC-32; Python's hash() is salted per process)."""
    return zlib.crc32(name.encode()) & 0x7FFF_FFFF


def seed_key(seed: int):
    """The run's key from its seed (0 <= seed < 2^63). ``jax.random.key`` keeps only a seed's low 32 bits
    without 64-bit JAX (2^32 and 0 give one key), so the high word is folded in when it is not zero: seeds
    below 2^32 keep the key they always had."""
    import jax

    key = jax.random.key(seed & 0xFFFF_FFFF)
    return key if seed >> 32 == 0 else jax.random.fold_in(key, seed >> 32)
