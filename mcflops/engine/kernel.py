"""The engine's device side: keyed standard normals and the one compiled program that reduces blocks of
draws to fixed-size sums (the observations' log-likelihood: ``likelihood.py``; extra rows: ``extras.py``).

Keying. Input ``x`` in block ``b`` draws ``normals(fold_in(fold_in(key, crc32(x)), b), (size,))``
(``_rng``: element i from counter i, so any slice can be made on its own). ``draw_z`` gives the
draws of any block, the same as the engine's.

The program (``make_call``): a loop over the call's blocks and, in each block, over sub-blocks
(on a CPU ``SUB`` draws, so intermediates stay in cache; only sub-blocks that hold draws run). Each
sub-block adds into fixed-size sums: moments and log-space histograms of the outputs, and with
observations the importance-weighted sums (weights relative to a running maximum, rescaled when it
grows, as in an online softmax), the largest log-likelihoods (PSIS tail) and the largest Gumbel keys
(a weighted reservoir), both by an exact top-k per sub-block, in the block's first ``psub`` sub-blocks
only (the pool: engine.pool_subblocks). Blocks are sharded over a 1-D mesh of
every device (``shard_map``); nothing is communicated between devices. The blocks of a call are added on
the device in fixed groups (``tree.py``), so the host adds one set of sums per group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from mcflops.engine import extras
from mcflops.engine import rng as _rng
from mcflops.engine.devices import mesh
from mcflops.engine.likelihood import Likelihood, log_likelihood
from mcflops.engine.extras import weights as _weights
from mcflops.engine.programs import program
from mcflops.engine.streams import GUMBEL, stable_id
from mcflops.engine import tree
from mcflops.engine.summary import NBINS
from mcflops.engine.tree import fields
from mcflops.model import copula
from mcflops.model.compute import Model, outputs

BLOCK = 1 << 20  # draws per keyed block (part of the algorithm: changing it changes the draws)
SUB = 1 << 14  # draws per sub-block on a CPU (a loop inside the block: intermediates stay in L2; larger ones spill)
KEEP = 4000  # draws kept for plots and ArviZ (prior: the first KEEP; posterior: a weighted reservoir)
GPU_BATCH = 8  # blocks vmapped side by side on a GPU
# Copies of each histogram a GPU's scatter-adds are spread over (draw i adds to copy i mod GPU_HIST_COPIES), summed
# once per block: the draws of a row crowd a few hundred central bins, and atomic adds to one address queue up.
GPU_HIST_COPIES = 32
GROUP = 16  # the exact per-sub-block top-k first picks groups of GROUP draws by their maxima


def normals(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Standard normal draws (float32): a pure function of the key, element i from counter i
    (``_rng.normals``: fused Threefry-2x32-20, faster than ``jax.random.normal`` on a CPU)."""
    return _rng.normals(key, shape)


def normals_at(key: jax.Array, at, size: int) -> jax.Array:
    """Elements at .. at + size - 1 of ``normals(key, (n,))`` for any n past them (``at`` may be traced): the
    draws of one sub-block made on their own."""
    k = _words(key)
    idx = jnp.asarray(at).astype(jnp.uint32) + jax.lax.iota(jnp.uint32, size)
    return _rng.normal_from_bits(_rng.threefry2x32((idx, k[2]), (k[0], k[1]))[0])


def _words(key: jax.Array) -> jax.Array:
    """The four key words ``_rng`` derives from a key (Threefry key, counter high word)."""
    return jax.random.bits(key, (4,), jnp.uint32)


def _input_keys(key: jax.Array, model: Model, block) -> dict[str, jax.Array]:
    return {name: jax.random.fold_in(jax.random.fold_in(key, stable_id(name)), block)
            for name, s in zip(model.inputs, model.samplers) if s.kind != "const"}


def draw_z(key: jax.Array, model: Model, block, size: int, at=None) -> dict[str, jax.Array]:
    """Standard-normal scores of every uncertain input for the first ``size`` draws of block ``block``
    (the draws ``run`` makes there), the copula applied; with ``at``, draws at .. at + size - 1 of the block."""
    z = {name: normals(k, (size,)) if at is None else normals_at(k, at, size)
         for name, k in _input_keys(key, model, block).items()}
    if at is not None:  # a sub-block inside a loop: the scores materialised once, or XLA re-runs the generator
        z = jax.lax.optimization_barrier(z)  # inside each consumer (a table sampler's gathers and weights)
    return copula.apply(model, z)  # correlations: a Gaussian copula on the z's (identity when none)


# ---------------------------------------------------------------------------------------------- the program

@dataclass(frozen=True)
class PassShape:
    """Static sizes of one engine pass (with the model's structure, what a compiled program depends on).

    A block is read in two loops: ``psub`` pool sub-blocks of ``sub`` draws (with observations: the PSIS
    tail and the reservoir are selected there), then sub-blocks of ``rsub`` draws up to the block's end
    (no selection). Without observations ``psub`` is 0 and the second loop is the whole block."""

    size: int = BLOCK  # draws per block
    sub: int = SUB  # draws per pool sub-block
    rows: tuple[str, ...] = ()  # distinct quantities reduced (the others are equal to one of these)
    sampled: tuple[int, ...] = ()  # rows whose prior histogram is counted (inputs' is known exactly)
    nbins: int = NBINS
    keep: int = KEEP  # prior draws kept (the first of block 0)
    ktop: int = 0  # largest log-likelihoods kept per pool sub-block
    kres: int = 0  # largest Gumbel keys kept per pool sub-block
    batch: int = 1  # blocks computed side by side (vmapped) in a call: 1 on CPU, a few on GPUs
    copies: int = 1  # copies of the model's histograms the scatter-adds are spread over: 1 on CPU (GPU_HIST_COPIES)
    psub: int = 0  # pool sub-blocks at the start of every block (0: no observations)
    rsub: int = SUB  # draws per sub-block after the pool
    pfrom: int = 0  # with sums=False: the pool sub-blocks pfrom..psub-1 of every block (a grown pool's new part)
    sums: bool = True  # False: only the PSIS tail, the reservoir and the pool's weights (no moments, histograms)
    group: int = 1  # blocks a device adds before the host does (tree.group_size of the run's blocks)
    own: bool = True  # False: the extra rows only (engine.run_rows), none of the model's own sums
    xfn: Callable | None = None  # the extra rows' function and its static arguments (engine.extras)
    xstatic: tuple = ()
    nx: int = 0  # extra rows reduced beside the pass's own
    xweighted: bool = False  # whether they are weighted by their own likelihood

    @property
    def nsub(self) -> int:
        """Pool sub-blocks a call selects in, per block."""
        return self.psub - self.pfrom


def _moments(D, y, w, s0, cross):
    """Sums over one sub-block (rows of D: centred logs, masked to 0 where a draw is not valid; y = e^D,
    masked the same): s0, sum w d, sum w d^2, sum w e^d, sum w e^2d, and the cross sums sum w d d'
    (``cross``, computed by the caller). ``w=None``: every valid draw has weight 1 (the prior)."""
    if w is None:
        return {"s0": s0, "s1d": jnp.sum(D, axis=1), "s2d": jnp.diagonal(cross), "s1y": jnp.sum(y, axis=1),
                "s2y": jnp.sum(y * y, axis=1), "cross": cross}
    wD, wy = D * w[None, :], y * w[None, :]
    return {"s0": s0, "s1d": jnp.sum(wD, axis=1), "s2d": jnp.diagonal(cross), "s1y": jnp.sum(wy, axis=1),
            "s2y": jnp.sum(wy * y, axis=1), "cross": cross}


def hist_index(D, lo, inv, nbins):
    """Flat bin index of every element of D (row r uses bins r*(nbins+2) .. (r+1)*(nbins+2) - 1): bin 0 below
    ``lo``, bins of width 1 / ``inv`` from there, bin nbins + 1 above (every histogram of a pass is binned here)."""
    idx = jnp.clip(jnp.floor((D - lo[:, None]) * inv[:, None]) + 1.0, 0.0, nbins + 1.0).astype(jnp.int32)
    return idx + (jnp.arange(D.shape[0], dtype=jnp.int32) * (nbins + 2))[:, None]


def _top(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """Exact top-k (values, indices) of a vector, via its groups' maxima: the k largest elements lie in
    the k groups with the largest maxima (a group holding one of them has a maximum at least as large,
    and at most k groups can), so only k * GROUP elements go through top_k. Group c is the strided set
    {c, c + m, c + 2m, ...} (m = n / GROUP): its maxima are an elementwise max of GROUP contiguous rows,
    which vectorises (contiguous groups reduce slower), and lax.top_k on XLA:CPU is a sort, so it costs by
    the length it sorts."""
    n = x.shape[0]
    if k * GROUP >= n or n % GROUP:
        return jax.lax.top_k(x, k)
    m = n // GROUP
    g = x.reshape(GROUP, m)
    _, gi = jax.lax.top_k(jnp.max(g, axis=0), k)
    v, j = jax.lax.top_k(g[:, gi].reshape(-1), k)  # candidate j is element gi[j % k] of row j // k
    return v, (j // k) * m + gi[j % k]


def _draw(model: Model, rows, names, ks, at, sub: int, n_valid):
    """Draws at .. at + sub - 1 of a block: the generator's words W (one row per key in ``ks``), every quantity's
    centred log v, which draws are valid (below n_valid) and D (the rows' values, 0 where not valid)."""
    # Barriers materialise the generator's words, the inputs' deviations and D once each: XLA would otherwise
    # re-run the generator (or the table lookups) inside every consumer.
    W = Z = None
    if ks is not None:
        idx = jnp.asarray(at).astype(jnp.uint32) + jax.lax.iota(jnp.uint32, sub)
        W = _rng.threefry2x32((idx[None, :], ks[:, 2]), (ks[:, 0], ks[:, 1]))[0]  # = _rng.bits(key_i)[at:]
        W = jax.lax.optimization_barrier(W)
        Z = jax.lax.optimization_barrier(_rng.normal_from_bits(W[: len(names)]))
    z = copula.apply(model, {n: Z[i] for i, n in enumerate(names)})
    d = {}
    for name, smp in zip(model.inputs, model.samplers):  # model.evaluate, with a barrier between its halves
        d[name] = smp(z[name]) if name in z else jnp.broadcast_to(smp.a, ())
    d = jax.lax.optimization_barrier(d)
    v = {**d, **outputs(model, d)}
    valid = (at + jnp.arange(sub, dtype=jnp.int32)) < n_valid
    D = jnp.stack([jnp.broadcast_to(v[n], (sub,)) for n in rows])
    D = jax.lax.optimization_barrier(jnp.where(valid[None, :], D, 0.0))  # invalid draws: 0, weight 0
    return W, v, valid, D


def _select(acc: dict, i, ll, gumbel_words, D, lay: PassShape) -> dict:
    """Slot i of the PSIS tail (the ktop largest log-likelihoods) and of the reservoir (the kres largest
    ll + Gumbel keys, with their draws)."""
    new = dict(acc)
    new["top"] = jax.lax.dynamic_update_index_in_dim(acc["top"], _top(ll, lay.ktop)[0], i, 0)
    # Gumbel-top-k: the largest ll + Gumbel noise are a weighted sample without replacement
    # (Efraimidis & Spirakis 2006; Kool et al. 2019), mergeable by taking the largest again.
    g = -jnp.log(-jnp.log(_rng.uniform_from_bits(gumbel_words)))  # Gumbel(0, 1)
    rk, ri = _top(ll + g, lay.kres)
    new["rkey"] = jax.lax.dynamic_update_index_in_dim(acc["rkey"], rk, i, 0)
    new["rll"] = jax.lax.dynamic_update_index_in_dim(acc["rll"], ll[ri], i, 0)
    new["rD"] = jax.lax.dynamic_update_index_in_dim(acc["rD"], D[:, ri], i, 0)
    return new


def _select_block(model: Model, lik: Likelihood, n_valid, lay: PassShape, K, names):
    """A grown pool's new part (pool sub-blocks pfrom..psub-1 of a block): the selections and the sums of
    the weights there (relative to their largest log-likelihood), nothing else (``PassShape.sums`` False)."""
    f32, q, k = jnp.float32, len(lay.rows), lay.nsub
    acc = {"m": jnp.full((), -jnp.inf, f32), "w": jnp.zeros((2,), f32),
           "top": jnp.full((k, lay.ktop), -jnp.inf, f32), "rkey": jnp.full((k, lay.kres), -jnp.inf, f32),
           "rll": jnp.full((k, lay.kres), -jnp.inf, f32), "rD": jnp.zeros((k, q, lay.kres), f32)}

    def body(s, acc):
        W, v, valid, D = _draw(model, lay.rows, names, K, (lay.pfrom + s) * lay.sub, lay.sub, n_valid)
        ll = jnp.where(valid, log_likelihood(lik, v), -jnp.inf)
        m = jnp.maximum(acc["m"], jnp.max(ll))
        ok = jnp.isfinite(m)
        w = _weights(ll, m, ok)
        scale = _weights(acc["m"], m, ok)
        new = _select(acc, s, ll, W[len(names)], D, lay)
        new["w"] = acc["w"] * jnp.stack([scale, scale * scale]) + jnp.stack([jnp.sum(w), jnp.sum(w * w)])
        new["m"] = m
        return new

    held = (n_valid + (lay.sub - 1)) // lay.sub  # sub-blocks that hold draws
    acc = jax.lax.fori_loop(0, jnp.clip(held - lay.pfrom, 0, k), body, acc)
    w = acc.pop("w")
    acc["pool"] = jnp.stack([w[0], w[1], acc.pop("m")])
    return acc


def _block(key, model: Model | None, lik: Likelihood | None, lo, inv, below, xargs, block, n_valid, lay: PassShape):
    """Reduce one block of draws to fixed-size sums (on the device, under jit): the model's own (``lay.own``)
    and the extra rows (``lay.nx``; ``xargs``: their arguments, engine.extras)."""
    q, nb = len(lay.rows), lay.nbins
    names = tuple(n for n, s in zip(model.inputs, model.samplers) if s.kind != "const") if lay.own else ()
    pool = lik is not None and lay.psub > 0  # the block starts with pool sub-blocks (PSIS tail, reservoir)
    ids = [stable_id(n) for n in names] + ([GUMBEL] if pool else [])
    K = None
    if ids:  # every stream's key words at once (vmapped: one Threefry graph, not one per stream)
        words = jax.vmap(lambda i: _words(jax.random.fold_in(jax.random.fold_in(key, i), block)))
        K = words(jnp.asarray(ids, jnp.uint32))[:, :, None]  # [streams, 4 words, 1]
    if not lay.sums:  # only the selections in a grown pool's new sub-blocks
        return _select_block(model, lik, n_valid, lay, K, names)
    f32 = jnp.float32
    zq = jnp.zeros((q,), f32)
    mom0 = {"s0": jnp.zeros((), f32), "s1d": zq, "s2d": zq, "s1y": zq, "s2y": zq, "cross": jnp.zeros((q, q), f32)}
    hs = len(lay.sampled)
    zs = jnp.zeros((hs,), f32)  # the prior's e^d sums: sampled rows only (inputs' are known exactly)
    acc = extras.init(lay.nx, nb, lay.xweighted) if lay.nx else {}
    C = lay.copies
    lane = (jax.lax.iota(jnp.int32, max(lay.sub, lay.rsub)) % C) if C > 1 else None  # draw i's copy: i mod C
    if lay.own:
        acc.update(prior={**mom0, "s1y": zs, "s2y": zs, "hist": jnp.zeros((C * hs * (nb + 2),), f32)},
                   first=jnp.zeros((q, lay.keep), f32))
    if lik is not None:
        no = len(lik.names)
        acc.update(post={**mom0, "hist": jnp.zeros((C * q * (nb + 2),), f32), "s0w2": jnp.zeros((), f32)},
                   m=jnp.full((), -jnp.inf, f32), below=jnp.zeros((no,), f32), inside=jnp.zeros((no,), f32))
    if pool:
        acc.update(top=jnp.full((lay.psub, lay.ktop), -jnp.inf, f32),
                   rkey=jnp.full((lay.psub, lay.kres), -jnp.inf, f32),
                   rll=jnp.full((lay.psub, lay.kres), -jnp.inf, f32),
                   rD=jnp.zeros((lay.psub, q, lay.kres), f32))

    def make_body(start: int, sub: int, select: bool, first: bool):
        """Sub-block s of a loop: draws start + s * sub ... of the block (``select``: a pool sub-block)."""
        ks = K if select or K is None else K[: len(names)]

        def body(s, acc):
            new = own(s, acc) if lay.own else dict(acc)
            if lay.nx:  # the extra rows, on the same sub-block's draws
                new.update(extras.step(acc, lay.xfn, lay.xstatic, xargs, key, block, start + s * sub, sub, n_valid,
                                       hist_index, nb))
            return new

        def own(s, acc):
            at = start + s * sub  # the sub-block's first draw in the block
            W, v, valid, D = _draw(model, lay.rows, names, ks, at, sub, n_valid)
            w0 = valid.astype(f32)
            smp = np.asarray(lay.sampled, dtype=np.int32)  # may be empty: every row known exactly
            if lik is not None:  # the posterior weighs e^d of every row
                y = jnp.where(valid[None, :], jnp.exp(D), 0.0)
                ys = y[smp]
            else:
                ys = jnp.where(valid[None, :], jnp.exp(D[smp]), 0.0)
            idx = hist_index(D, lo, inv, nb)
            new = dict(acc)
            hi = jax.lax.Precision.HIGHEST
            if lik is not None:  # the posterior's weights first: one product gives both cross-sum matrices
                ll = jnp.where(valid, log_likelihood(lik, v), -jnp.inf)
                m = jnp.maximum(acc["m"], jnp.max(ll))
                ok = jnp.isfinite(m)
                w = _weights(ll, m, ok)
                cross = jnp.dot(jnp.concatenate([D, D * w[None, :]]), D.T, precision=hi)
            else:
                cross = jnp.dot(D, D.T, precision=hi)
            pm = _moments(D, ys, None, jnp.clip(n_valid - at, 0, sub).astype(f32), cross[:q])
            new["prior"] = {k: acc["prior"][k] + pm[k] for k in pm}
            ph = acc["prior"]["hist"]
            copy = 0 if C == 1 else lane[:sub] * (hs * (nb + 2))
            for j, r in enumerate(lay.sampled):  # one scatter per row (row r's bins moved to slot j)
                ph = ph.at[idx[r] - (r - j) * (nb + 2) + copy].add(w0, mode="promise_in_bounds")
            new["prior"]["hist"] = ph
            if first:  # the first draws: a branch, not a pass over D every time
                new["first"] = jax.lax.cond(s == 0, lambda: D[:, : lay.keep], lambda: acc["first"])
            if lik is None:
                return new
            od = jnp.stack([jnp.broadcast_to(v[n], (sub,)) for n in lik.names])
            new["below"] = acc["below"] + jnp.sum(jnp.where(od < below[:, None], w0, 0.0), axis=1)
            new["inside"] = acc["inside"] + jnp.sum(jnp.where((od >= lik.low[:, None]) & (od <= lik.high[:, None]),
                                                              w0, 0.0), axis=1)
            scale = _weights(acc["m"], m, ok)  # earlier sums to the new maximum
            qm = _moments(D, y, w, jnp.sum(w), cross[q:])
            post = {k: acc["post"][k] * scale + qm[k] for k in qm}
            post["s0w2"] = acc["post"]["s0w2"] * (scale * scale) + jnp.sum(w * w)
            ph = acc["post"]["hist"] * scale
            copy = 0 if C == 1 else lane[:sub] * (q * (nb + 2))
            for r in range(q):  # one scatter per row: the weights need no q-fold copy
                ph = ph.at[idx[r] + copy].add(w, mode="promise_in_bounds")
            post["hist"] = ph
            new["post"], new["m"] = post, m
            if not select:
                return new
            return _select(new, s, ll, W[len(names)], D, lay)

        return body

    start = 0
    if lay.psub:  # the pool's sub-blocks (only those that hold draws run), then a snapshot of its weights' sums
        npool = jnp.minimum((n_valid + (lay.sub - 1)) // lay.sub, lay.psub)
        acc = jax.lax.fori_loop(0, npool, make_body(0, lay.sub, pool, lay.keep > 0), acc)
        if pool:
            acc["pool"] = jnp.stack([acc["post"]["s0"], acc["post"]["s0w2"], acc["m"]])
        start = lay.psub * lay.sub
    if start < lay.size:
        nrest = (jnp.maximum(n_valid - start, 0) + (lay.rsub - 1)) // lay.rsub
        acc = jax.lax.fori_loop(0, nrest, make_body(start, lay.rsub, False, lay.keep > 0 and not pool), acc)
    if lay.own:  # the copies added (whole counts: exact in float32 below 2^24 draws a block)
        acc["prior"]["hist"] = acc["prior"]["hist"].reshape(C, hs, nb + 2).sum(axis=0)
    if lay.nx:
        acc["x"]["hist"] = acc["x"]["hist"].reshape(lay.nx, nb + 2)
    if "post" in acc:
        acc["post"]["hist"] = acc["post"]["hist"].reshape(C, q, nb + 2).sum(axis=0)
    return acc


def sum_fields(lay: PassShape, lik: Likelihood | None) -> dict:
    """The sections of sums a block of this pass adds (``tree.fields``)."""
    return fields(len(lay.rows), len(lay.sampled), lay.nbins, len(lik.names) if lik is not None else 0, nx=lay.nx,
                  own=lay.own)


def make_call(lay: PassShape, ndev: int):
    """The compiled program of a pass: each device reduces its blocks (a whole number of groups, in group
    order) to one set of sums per group (``tree.reduce_groups``); the selections stay per block."""

    def local(key, model, lik, lo, inv, below, xargs, blocks, n_valid):
        one = lambda b, nv: _block(key, model, lik, lo, inv, below, xargs, b, nv, lay)
        if lay.batch == 1:
            acc = jax.lax.map(lambda a: one(*a), (blocks, n_valid))
        else:
            # lax.map's batch_size reshapes every output to (-1, ...), which divides by a zero-size section (a file
            # with one uncertain input has no histogram rows); the call holds whole batches (driver), so the
            # batches are reshaped with their sizes spelled out.
            k, b = blocks.shape[0] // lay.batch, lay.batch
            acc = jax.lax.map(lambda a: jax.vmap(one)(*a), (blocks.reshape(k, b), n_valid.reshape(k, b)))
            acc = jax.tree.map(lambda v: v.reshape((k * b,) + v.shape[2:]), acc)
        return tree.reduce_groups(acc, sum_fields(lay, lik), lay.group)

    if ndev == 1:
        return program(local, token=(lay, ndev))
    from jax.sharding import PartitionSpec as P

    sharded = jax.shard_map(local, mesh=mesh(), in_specs=(P(),) * 7 + (P("blocks"), P("blocks")),
                            out_specs=P("blocks"), check_vma=False)
    return program(sharded, token=(lay, ndev))
