"""Every fixed PRNG stream id (engine.streams) is distinct from the others and from every input's id, so no
two streams of a run draw the same numbers; each fits the 32 bits fold_in takes, and all but PLAN_PILOT the 31
bits of an input's id (PLAN_PILOT lies above them, so it can be no input's)."""

from __future__ import annotations

import zlib

from mcflops import engine
from mcflops.engine import streams
from mcflops.spec import INPUTS, OUTPUTS


def test_fixed_ids_are_distinct_and_fit_fold_in():
    ids = list(streams.FIXED.values())
    assert len(set(ids)) == len(ids)
    assert all(isinstance(i, int) and 0 <= i < 1 << 32 for i in ids)
    assert {k for k, v in streams.FIXED.items() if v >= 1 << 31} == {"PLAN_PILOT"}  # its value predates the rule


def test_fixed_ids_differ_from_every_input_and_output_id():
    names = list(INPUTS) + list(OUTPUTS)  # outputs for margin: an output might become an input
    named = {engine.stable_id(n): n for n in names}
    assert len(named) == len(names)  # the names' own ids differ too
    clash = {k: named[v] for k, v in streams.FIXED.items() if v in named}
    assert not clash


def test_the_face_exports_every_fixed_id_and_stable_id_is_crc32():
    for k, v in streams.FIXED.items():
        assert getattr(engine, k) == v
    assert all(0 <= engine.stable_id(n) < 1 << 31 for n in INPUTS)
    assert engine.stable_id("mfu") == zlib.crc32(b"mfu") & 0x7FFF_FFFF  # the draws depend on it


def test_seed_keys_keep_every_bit_of_the_seed():
    """jax.random.key alone maps 2^32 and 0 to one key without 64-bit JAX; seed_key keeps seeds below 2^32 as
    they were and gives every seed up to 2^63 - 1 its own key."""
    import jax

    from mcflops.engine import seed_key

    def words(k):
        return tuple(int(x) for x in jax.random.key_data(k))

    for s in (0, 1, 5, 2**31, 2**32 - 1):
        assert words(seed_key(s)) == words(jax.random.key(s))
    seeds = (0, 5, 2**32, 2**32 + 5, 2**40 + 5, 2**53 + 1, 2**63 - 1)
    assert len({words(seed_key(s)) for s in seeds}) == len(seeds)
