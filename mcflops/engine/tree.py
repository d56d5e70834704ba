"""The blocks of a call reduced on the device, in fixed groups and a fixed tree, so that the host adds one
set of sums per group of blocks instead of one per block.

A run of n draws has groups of ``group_size(blocks)`` blocks: a power of two up to GROUP_BLOCKS, a function
of the sample count only, small enough that there are at least MIN_GROUPS groups (whole groups go to one
device, so a run of few blocks keeps every device busy: one block per group under 128 blocks). Group g
holds blocks g * G ... (g + 1) * G - 1 whatever the call size or the number of devices (``driver`` places
whole groups on one device), and its blocks are added pairwise in a fixed tree. JAX runs in float32 (x64
is off), so the tree carries each sum as an unevaluated pair hi + lo (Dekker's double-float addition:
Knuth's TwoSum, then a renormalising Fast2Sum; Dekker 1971, Knuth TAOCP vol. 2 4.2.2): a group's sum is
within a few float32 ulps squared of the exact sum of its blocks' float32 values, so moving the block adds
from the host's float64 to the device changes sums by ~1e-13 relative, far below the float32 rounding
inside each block. Sums that are not finite (an overflowed e^d) are passed through as they are: TwoSum
would turn inf into nan.

Posterior sums are relative to each block's maximum log-likelihood ``m``; a group's sums are rescaled to the
group's maximum first (e^(m_b - M), squared for the sum of squared weights), as the host does between groups.
A block with no weight (m = -inf) adds exact zeros, and so does a group with none (no e^(-inf + inf)).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from mcflops.engine import extras

GROUP_BLOCKS = 16  # the most blocks per group (the tree's depth is then 4): 1e10 draws are 597 groups
MIN_GROUPS = 64  # groups a run has at least (when it has the blocks): 8 devices get 8 groups each or more
SELECTIONS = ("top", "rkey", "rll", "rD")  # per block, in block order: merged on the host (ties by draw order)


def _two_sum(a, b):
    """s + e = a + b exactly (Knuth's TwoSum: no assumption on |a|, |b|)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _pair_add(ah, al, bh, bl):
    """(ah + al) + (bh + bl) as a renormalised pair (Dekker's add2, the 'sloppy' double-float sum)."""
    s, e = _two_sum(ah, bh)
    e = e + (al + bl)
    h = s + e
    return h, e - (h - s)


def compensated_sum(x: jax.Array) -> jax.Array:
    """Sum over axis 1 of x [groups, G, ...] in a fixed pairwise tree; returns [groups, 2, ...]: hi, lo
    (the host adds them in float64). G must be a power of two (1: the values, lo 0)."""
    hi, lo = x, jnp.zeros_like(x)
    while hi.shape[1] > 1:
        h, l = _pair_add(hi[:, 0::2], lo[:, 0::2], hi[:, 1::2], lo[:, 1::2])
        plain = hi[:, 0::2] + hi[:, 1::2]  # not finite: the plain sum (inf stays inf, no inf - inf)
        fin = jnp.isfinite(plain) & jnp.isfinite(h)
        hi, lo = jnp.where(fin, h, plain), jnp.where(fin, l, 0.0)
    return jnp.stack([hi[:, 0], lo[:, 0]], axis=1)


def _rescale(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each block's factor e^(m_b - M) to its group's maximum M (0 for a block with m_b = -inf, and for every
    block of a group with M = -inf), and M. m: [groups, G]."""
    top = jnp.max(m, axis=1)
    ok = jnp.isfinite(top)[:, None]
    return jnp.where(ok, jnp.exp(m - jnp.where(ok, top[:, None], 0.0)), 0.0), top


def fields(q: int, sampled: int, nbins: int, nobs: int, nx: int = 0,
           own: bool = True) -> dict[str, dict[str, tuple[int, ...]]]:
    """The sums a block adds, by section, with their shapes (q distinct rows, ``sampled`` of them with a
    counted prior histogram, nobs observations, nx extra rows): "add" (the prior's sums and the observations'
    prior shares, added as they are), "post" (the importance-weighted sums, rescaled) and "x" (the extra rows',
    engine.extras: rescaled to their own maximum, which is 0 for the prior's). ``own`` False: the extra rows'
    only. The device sends each section as one vector, its fields in this order (``reduce_groups``); ``split``
    undoes it."""
    mom = lambda ny: {"cross": (q, q), "s0": (), "s1d": (q,), "s1y": (ny,), "s2d": (q,), "s2y": (ny,)}
    out = {"add": {**mom(sampled), "hist": (sampled, nbins + 2)}} if own else {}
    if nobs and own:
        out["add"].update(below=(nobs,), inside=(nobs,))
        out["post"] = {**mom(q), "hist": (q, nbins + 2), "s0w2": ()}
    if nx:
        out["x"] = extras.fields(nx, nbins)
    return out


def split(vec: np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """One section's vector -> its fields (views)."""
    out, at = {}, 0
    for k, shape in shapes.items():
        size = math.prod(shape)
        out[k] = vec[at: at + size].reshape(shape)
        at += size
    assert at == vec.size, (at, vec.size)
    return out


def _flat(parts: dict, shapes: dict) -> jax.Array:
    """Fields [groups, G, ...] -> one vector per block [groups, G, size], in the order of ``shapes``."""
    assert {k: tuple(v.shape[2:]) for k, v in parts.items()} == shapes, "the sums do not match tree.fields"
    return jnp.concatenate([parts[k].reshape(parts[k].shape[:2] + (-1,)) for k in shapes], axis=2)


def group_size(blocks: int) -> int:
    """Blocks per group for a run of ``blocks`` blocks: the largest power of two up to GROUP_BLOCKS that leaves
    at least MIN_GROUPS groups (1 below 2 x MIN_GROUPS blocks). Part of the algorithm, like the block size:
    it sets the order of the additions, so the sums' last bits (never the draws)."""
    g = 1
    while g < GROUP_BLOCKS and blocks // (2 * g) >= MIN_GROUPS:
        g *= 2
    return g


def reduce_groups(acc: dict, shapes: dict[str, dict[str, tuple[int, ...]]], g: int) -> dict:
    """Per-block outputs of a call (leading axis: blocks, in group order) -> per-group sums of ``g`` blocks each
    (leading axis: groups; sections of ``shapes`` as vectors of hi, lo pairs [groups, 2, size]), and the
    blocks' selections untouched."""
    grouped = lambda v: v.reshape((v.shape[0] // g, g) + v.shape[1:])
    out = {k: acc[k] for k in SELECTIONS if k in acc}
    if "pool" in acc:  # [s0, s0w2, m] of each block's pool sub-blocks
        p = grouped(acc["pool"])
        f, top = _rescale(p[..., 2])
        out["pool"] = jnp.concatenate([compensated_sum(p[..., :2] * jnp.stack([f, f * f], axis=-1)),
                                       jnp.stack([top, jnp.zeros_like(top)], axis=1)[:, :, None]], axis=2)
    if "prior" in acc:
        parts = {k: grouped(v) for k, v in acc["prior"].items()}
        if "post" in acc:
            parts.update(below=grouped(acc["below"]), inside=grouped(acc["inside"]))
        out["add"] = compensated_sum(_flat(parts, shapes["add"]))
        out["first"] = grouped(acc["first"])[:, 0]  # the kept prior draws come from block 0 only
    for sec, m in (("post", "m"), ("x", "xm")):
        if sec in acc:
            out[sec], out[m] = _rescaled_sum({k: grouped(v) for k, v in acc[sec].items()}, grouped(acc[m]),
                                             shapes[sec])
    if "x" in acc:  # the extra rows' least and largest draws
        out["xmin"], out["xmax"] = jnp.min(grouped(acc["xmin"]), axis=1), jnp.max(grouped(acc["xmax"]), axis=1)
    return out


def _rescaled_sum(parts: dict, m: jax.Array, shapes: dict) -> tuple[jax.Array, jax.Array]:
    """A section of sums relative to each block's maximum ``m`` [groups, G] -> its group sums relative to the
    group's maximum (the sum of squared weights rescaled by the square), and that maximum."""
    f, top = _rescale(m)
    vec = _flat(parts, shapes)
    sq = np.asarray([k == "s0w2" for k in shapes for _ in range(math.prod(shapes[k]))])
    return compensated_sum(vec * jnp.where(sq, (f * f)[..., None], f[..., None])), top
