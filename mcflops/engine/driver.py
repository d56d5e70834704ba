"""The block-reduction engine: draw blocks of samples on the JAX devices, reduce each block, sum blocks.

``run(key, model, lik, n)`` is the entry point. The device side (keyed draws, the one compiled
program per structure) is ``kernel.py``; what needs no sampling (equal quantities, histogram ranges
that bound every draw, inputs' exact bin probabilities and E[e^d]) is ``exact.py``; adding the blocks'
outputs is ``merge.py``. This module schedules blocks on every device of every process (``devices.setup``
makes them: one per core on a CPU, hosts joined with ``jax.distributed``) and sizes the PSIS tail's and
reservoir's pool.

Input ``x`` in block ``b`` draws ``normals(fold_in(fold_in(key, crc32(x)), b), (size,))``, so a result
is a function of the seed and the sample count only: not of how many blocks one call handles, nor of
how many devices share them (bit-for-bit; tests/engine/test_devices.py). Memory stays flat as the
sample count grows: a block's sums are fixed-size, and the reservoir and PSIS tail are bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import jax
import numpy as np

from mcflops.engine.devices import mesh
from mcflops.engine.extras import Extra
from mcflops.engine.exact import bin_probabilities, distinct_rows, exp_moments, ranges
from mcflops.engine.kernel import BLOCK, GPU_BATCH, GPU_HIST_COPIES, KEEP, NBINS, SUB, PassShape, make_call
from mcflops.engine.likelihood import Likelihood
from mcflops.engine.merge import _expand, _Merge, psis_tail
from mcflops.engine import tree
from mcflops.engine.summary import Sums
from mcflops.model import to_device
from mcflops.model.compute import Model

_CALLS: dict[tuple, Callable] = {}
POOL = 1 << 20  # draws (at least) whose log-weights feed the PSIS tail and the reservoir (pool_subblocks)
POOL_ESS = 20 * KEEP  # a pool with fewer effective draws grows (run: a selection-only pass over more sub-blocks)


@dataclass(frozen=True)
class Pass:
    """What every pass over a run's blocks shares: the key, the model and its observations, n draws in blocks
    of ``size`` (pool sub-blocks of ``sub``), the histograms' ranges and the calls' size."""

    key: jax.Array
    model: Model
    lik: Likelihood | None
    n: int
    size: int
    sub: int
    lo: np.ndarray  # every distinct row's histogram starts here (centred log) ...
    inv: np.ndarray  # ... with bins of width 1 / inv
    below: jax.Array | None  # the observations' centred logs (the prior's share below each)
    blocks_per_call: int
    extra: Extra | None = None  # extra rows reduced beside the pass's own (engine.extras)


def _per_sub(expected: float, sub: int) -> int:
    """Static top-k size per sub-block: the expected count plus a wide margin, a power of two."""
    k = expected + 6.0 * math.sqrt(expected) + 16.0
    return int(min(sub, max(64, 1 << (math.ceil(k) - 1).bit_length())))


def pool_subblocks(n: int, size: int = BLOCK, sub: int = SUB) -> tuple[int, int]:
    """(p, draws): the PSIS tail and the reservoir come from the first p sub-blocks of ``sub`` draws of every
    block, p the fewest that hold POOL draws over the run's blocks; ``draws`` is how many that is.

    Both are bounded by what they serve (KEEP posterior draws for plots and ArviZ; a Pareto fit of the
    weights' tail, a property of their distribution), not by n: past a pool of ~1M draws they would cost
    a third of the importance-sampling pass and change nothing. The pool is a prefix of every block, so
    every block costs the same and devices stay balanced. ``run`` grows it (more sub-blocks of every block,
    up to all of them) while its effective sample size is under POOL_ESS, so the reservoir never starves."""
    nblocks, nsub = -(-n // size), size // sub
    p = min(nsub, -(-POOL // (nblocks * sub)))
    return p, _pool_draws(n, size, sub, p)


def _pool_draws(n: int, size: int, sub: int, p: int) -> int:
    """Draws in the first p sub-blocks of every block."""
    nblocks = -(-n // size)
    return (nblocks - 1) * min(size, p * sub) + min(n - (nblocks - 1) * size, p * sub)


def _batch() -> int:
    """Blocks computed side by side (vmapped) in a call: 1 on a CPU, GPU_BATCH on accelerators."""
    return 1 if jax.devices()[0].platform == "cpu" else GPU_BATCH


def _copies() -> int:
    """Copies of each histogram the scatter-adds are spread over: 1 on a CPU (no atomics), GPU_HIST_COPIES on
    accelerators."""
    return 1 if jax.devices()[0].platform == "cpu" else GPU_HIST_COPIES


def _layout(model: Model | None, lik, n: int, pool: int, size: int, sub: int, rsub: int, psub: int, widen: int = 1,
            pfrom: int = 0, extra: Extra | None = None) -> PassShape:
    """Static sizes of a pass whose pool (``psub`` sub-blocks per block) holds ``pool`` draws; ``widen``
    scales the per-sub-block top-k (0: keep every draw's key); ``pfrom`` > 0: a pass over the pool
    sub-blocks pfrom..psub-1 only, selections and weights only (the pool grown after a first pass).
    ``extra``: its rows too; ``model`` None: only them (``psub`` sub-blocks of ``sub`` first all the same, so
    that weighted rows are the same numbers as beside a run with observations)."""
    xs = {} if extra is None or pfrom else dict(xfn=extra.fn, xstatic=extra.static, nx=extra.q,
                                                xweighted=extra.weighted)
    if model is None:
        return PassShape(size=size, sub=sub, keep=0, batch=_batch(), psub=psub, rsub=rsub, own=False,
                         group=tree.group_size(-(-n // size)), **xs)
    rows, _ = distinct_rows(model)
    ktop = kres = 0
    if lik is not None and psub:
        frac = min(sub, pool) / pool  # share of the pool's draws in one sub-block
        ktop = sub if not widen else _per_sub(widen * (psis_tail(pool) + 1) * frac, sub)
        kres = sub if not widen else _per_sub(widen * min(KEEP, pool) * frac, sub)
    sampled = tuple(i for i, r in enumerate(rows) if r not in model.inputs)
    batch = _batch()
    first = sub if psub else rsub  # the kept prior draws come from the block's first sub-block
    return PassShape(size=size, sub=sub, rows=rows, sampled=sampled, keep=min(KEEP, first), ktop=ktop, kres=kres,
                  batch=batch, copies=_copies(), psub=psub if lik is not None else 0, rsub=rsub, pfrom=pfrom, sums=not pfrom,
                  group=tree.group_size(-(-n // size)), **xs)


def _call(lay: PassShape, ndev: int) -> Callable:
    k = (lay, ndev)
    if k not in _CALLS:
        _CALLS[k] = make_call(lay, ndev)
    return _CALLS[k]


def each_block(call: Callable[[jax.Array, jax.Array], Mapping], n: int, size: int, blocks_per_call: int,
               progress: Callable[[int, int], None] | None = None) -> Iterator[tuple[int, dict]]:
    """(block, its outputs) for each of the ceil(n / size) keyed blocks of n draws, in block order: the outputs
    of ``call(block_ids, n_valid)`` (every leaf with a leading axis over the call's blocks) at that block, on the
    host. Calls take ``blocks_per_call`` blocks, the remainder one at a time: two compiled shapes at most. The
    analyses' passes (Sobol, Shapley, planning, compare) loop over their blocks here."""
    nblocks = -(-n // size)
    full = nblocks - nblocks % blocks_per_call
    starts = [(b, blocks_per_call) for b in range(0, full, blocks_per_call)] + [(b, 1) for b in range(full, nblocks)]
    for start, count in starts:
        ids = np.arange(start, start + count, dtype=np.uint32)
        nv = np.minimum(n - ids.astype(np.int64) * size, size).astype(np.int32)
        out = jax.device_get(call(jax.device_put(ids), jax.device_put(nv)))  # no staging programs
        for j in range(count):
            yield start + j, {k: v[j] for k, v in out.items()}
        if progress is not None:
            progress(start + count, nblocks)


def sum_blocks(call: Callable[[jax.Array, jax.Array], Mapping], n: int, size: int, blocks_per_call: int,
               progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Float64 sums, in block order, of the ``"s"`` and ``"ss"`` outputs of ``call(block_ids, n_valid)`` over
    the ceil(n / size) keyed blocks of n draws (the Sobol and Shapley passes; ``each_block``)."""
    s = ss = None
    for _, out in each_block(call, n, size, blocks_per_call, progress):
        bs, bss = np.asarray(out["s"], np.float64), np.asarray(out["ss"], np.float64)
        s, ss = (bs, bss) if s is None else (s + bs, ss + bss)
    return s, ss


def _pass(p: Pass, lay: PassShape, merge: _Merge, progress: Callable[[int, int], None] | None) -> None:
    """Every block of n draws: calls of ``blocks_per_call`` blocks per device (rounded up to whole groups of
    ``lay.group`` blocks), added to ``merge`` in group order (the next call is dispatched before the previous one
    is added)."""
    n = p.n
    ndev = jax.device_count()
    lo32, inv32 = to_device(p.lo, np.float32), to_device(p.inv, np.float32)
    xargs = p.extra.args() if p.extra is not None and lay.nx else None
    multi = jax.process_count() > 1
    if multi:
        from jax.experimental import multihost_utils
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        sharding = NamedSharding(mesh(), P("blocks"))
        to_global = lambda a: jax.make_array_from_callback(a.shape, sharding, lambda i: a[i])

    def finish(pending):
        end, nv, groups, blocks, out = pending
        out = multihost_utils.process_allgather(out, tiled=True) if multi else jax.device_get(out)
        merge.add_call(out, groups, blocks, nv[blocks], lay)
        if progress is not None:
            progress(end, nblocks)

    nblocks = -(-n // lay.size)
    fn = _call(lay, ndev)
    g = lay.group
    unit = math.lcm(lay.batch, g)  # whole batches and whole groups only (no remainder program)
    bpc = -(-max(1, p.blocks_per_call) // unit) * unit
    per_call, gpd = bpc * ndev, bpc // g
    # Device d takes groups start + d, start + d + ndev, ... (so the last, partial call stays balanced), each a
    # run of g consecutive blocks: call position d * bpc + j * g + r holds block (j * ndev + d) * g + r.
    d, j, r = np.unravel_index(np.arange(per_call), (ndev, gpd, g))
    order = (j * ndev + d) * g + r  # call position -> offset of its block in the call
    gorder = np.argsort((np.arange(gpd)[None, :] * ndev + np.arange(ndev)[:, None]).reshape(-1))  # groups in order
    back = np.argsort(order)  # blocks in order: their call positions
    pending = None
    for start in range(0, nblocks, per_call):
        ids = start + order.astype(np.int64)
        nv = np.clip(n - ids * lay.size, 0, lay.size).astype(np.int32)
        args = (ids.astype(np.uint32), nv)
        if multi:
            args = tuple(to_global(a) for a in args)
        out = fn(p.key, p.model, p.lik, lo32, inv32, p.below, xargs, *args)
        if pending is not None:  # overlap: add the previous call's sums while this one runs
            finish(pending)
        held = nv[back] > 0  # blocks past n have no draws (and groups of them only zeros)
        groups = gorder[: -(-(nblocks - start) // g)]  # groups in order, those that hold draws
        pending = (min(start + per_call, nblocks), nv, groups, back[held], out)
    if pending is not None:
        finish(pending)


def _passes(p: Pass, rsub: int, psub: int, pool: int, widen: int,
            progress: Callable[[int, int], None] | None) -> _Merge:
    """Every block once, each its pool sub-blocks (PSIS tail, reservoir) first: one compiled program."""
    lay = _layout(p.model, p.lik, p.n, pool, p.size, p.sub, rsub, psub, widen, extra=p.extra)
    merge = _Merge(p.n, lay, p.lik is not None, pool, len(p.lik.names) if p.lik is not None else 0)
    _pass(p, lay, merge, progress)
    return merge


def _gpu() -> bool:
    return jax.devices()[0].platform != "cpu"


def _sub(size: int, sub: int | None, weighted: bool) -> int:
    """The (pool) sub-block size. CPU: sub-blocks that stay in cache, one block at a time. GPU: whole blocks,
    several side by side (kernels of 2^20 x batch elements); batch is fixed so that sums do not depend on the call
    size. With observations a block starts with its pool sub-blocks (top-k selections): on a GPU 2^16 draws each."""
    sub = min(sub or (size if _gpu() and not weighted else (1 << 16) if _gpu() else SUB), size)
    if size % sub:
        raise ValueError(f"block size {size} is not a multiple of the sub-block size {sub}")
    return sub


def _rest(size: int, sub: int, psub: int, rsub: int | None, weighted: bool) -> int:
    """Draws per sub-block after the pool: on a GPU the whole rest of the block at once, on a CPU half-size
    sub-blocks (no top-k there to amortise, and the posterior's wider intermediates stay in L2)."""
    if psub * sub >= size or not weighted:
        return sub
    if rsub:
        return rsub
    return size - psub * sub if _gpu() else sub // 2 if sub % 2 == 0 and sub > 1 else sub


def run_rows(key: jax.Array, extra: Extra, n: int, *, blocks_per_call: int | None = None, size: int = BLOCK,
             sub: int | None = None, rsub: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict:
    """Only the extra rows of ``extra`` (engine.extras) over n draws in blocks of ``size``: what ``run(...,
    extra=extra).rows`` holds, in the same blocks, sub-blocks and order (so a weighted row is the same number
    as beside a run with observations), without the model's own sums. A dict of float64 arrays: ``hist``,
    ``s0``, ``s0w2``, ``above``, ``below`` (relative to e^log_max), ``lo``, ``width``, ``min``, ``max``, ``n``."""
    if n < 1:
        raise ValueError(f"expected at least one draw, got n={n}")
    sub = _sub(size, sub, extra.weighted)
    psub, pool = pool_subblocks(n, size, sub) if extra.weighted else (0, n)
    pas = Pass(key=key, model=None, lik=None, n=n, size=size, sub=sub, lo=np.zeros(0), inv=np.zeros(0), below=None,
               blocks_per_call=blocks_per_call or (32 if _gpu() else 16), extra=extra)
    merge = _passes(pas, _rest(size, sub, psub, rsub, extra.weighted), psub, pool, 1, progress)
    return merge.rows(extra.lo, extra.width)


def run(key: jax.Array, model: Model, lik: Likelihood | None, n: int, *, blocks_per_call: int | None = None,
        size: int = BLOCK, sub: int | None = None, rsub: int | None = None,
        progress: Callable[[int, int], None] | None = None, extra: Extra | None = None) -> Sums:
    """Draw n samples in blocks of ``size`` and return their float64 sums (the engine's one entry point).

    ``blocks_per_call`` blocks go to each device per compiled call (default: 16 on CPU, 32 on GPU: fewer,
    larger calls cost less dispatching; rounded up to whole groups of ``tree.group_size`` blocks, which the device
    adds before the host does);
    ``sub`` is the sub-block size (default ``SUB``; with observations that of the pool's sub-blocks, the
    rest of a block in sub-blocks of ``rsub``: by default half that on a CPU, the whole rest on a GPU). None
    changes the draws; the sums are bit-identical for any ``blocks_per_call`` and any number of devices
    (given ``sub`` and ``rsub``). ``extra``: rows an analysis asks for besides (engine.extras), reduced in the
    same program on the same sub-blocks: the result's ``rows`` (as ``run_rows`` gives them).
    """
    if n < 1:
        raise ValueError(f"expected at least one draw, got n={n}")
    sub = _sub(size, sub, lik is not None)
    if blocks_per_call is None:
        blocks_per_call = 32 if _gpu() else 16
    rows, where = distinct_rows(model)
    q = len(rows)
    below = lik.target if lik is not None else None
    lo, hi = ranges(model, rows)
    span = np.maximum(hi - lo, 1e-6)
    lo = lo - 0.01 * span  # a margin for float32 rounding
    width = 1.02 * span / NBINS
    pas = Pass(key=key, model=model, lik=lik, n=n, size=size, sub=sub, lo=lo, inv=1.0 / width, below=below,
               blocks_per_call=blocks_per_call, extra=extra)
    psub, pool = pool_subblocks(n, size, sub) if lik is not None else (0, n)
    rest = lambda p: _rest(size, sub, p, rsub, lik is not None)  # noqa: E731
    for widen in (1, 8, 64, 0):  # the per-sub-block top-k sizes are a guess; widen them if one was cut short
        merge = _passes(pas, rest(psub), psub, pool, widen, progress)
        while pool < n and merge.pool_ess < POOL_ESS:
            # Too few effective draws in the pool for the reservoir and the tail fit: grow it (its effective size
            # grows about in proportion to its draws) by a pass over the new pool sub-blocks that only selects:
            # the sums are complete already. A sharp observation costs a fraction of a pass, not a second pass.
            grown = min(size // sub, max(psub + 1, math.ceil(1.25 * psub * POOL_ESS / max(merge.pool_ess, 1.0))))
            merge.pool = _pool_draws(n, size, sub, grown)
            ext = _layout(model, lik, n, merge.pool, size, sub, rest(grown), grown, widen, pfrom=psub)
            _pass(pas, ext, merge, None)
            psub, pool = grown, merge.pool
        if merge.exact():
            break
    lay = merge.lay
    hist = np.empty((q, NBINS + 2))
    for r, name in enumerate(rows):  # inputs: n times the exact probability of each bin
        hist[r] = merge.prior["hist"][lay.sampled.index(r)] if r in lay.sampled else \
            n * bin_probabilities(model.sampler(name), lo[r], width[r], NBINS)
    merge.prior["hist"] = hist
    ey = np.zeros((2, q))
    for r, name in enumerate(rows):  # inputs: n times the exact E[e^d] and E[e^2d]
        if r in lay.sampled:
            j = lay.sampled.index(r)
            ey[:, r] = merge.prior["s1y"][j], merge.prior["s2y"][j]
        else:
            ey[:, r] = n * exp_moments(model.sampler(name))
    merge.prior["s1y"], merge.prior["s2y"] = ey
    ix = np.asarray(where)
    sums = Sums(n=n, names=model.names, lo=lo[ix], width=width[ix], prior=_expand(merge.prior, where),
                first=merge.first[ix][:, : min(KEEP, n)], blocks=-(-n // size))
    if extra is not None:
        sums.rows = merge.rows(extra.lo, extra.width)
    sums.extra.update(rows=rows, widened=widen, pool=pool,
                      exact_moments=frozenset(name for r, name in enumerate(rows) if r not in lay.sampled))
    if lik is not None:
        sums.post = _expand(merge.post, where) if merge.post is not None else None
        sums.log_max = merge.log_max
        sums.below, sums.inside = merge.below, merge.inside
        sums.top, sums.pool = merge.top, pool
        r = merge.res
        sums.reservoir = {"key": r["key"], "ll": r["ll"], "D": r["D"][ix]}
    return sums
