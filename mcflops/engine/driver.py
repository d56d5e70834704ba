"""The block-reduction engine: draw blocks of samples on the JAX devices, reduce each block, sum blocks.

``run(key, model, lik, n)`` is the entry point. The device side (keyed draws, the one compiled
program per structure) is ``kernel.py``; what needs no sampling (equal quantities, histogram ranges
that bound every draw, inputs' exact bin probabilities and E[e^d]) is ``exact.py``. This module
schedules blocks on every device (on a CPU one device per core; across hosts with
``jax.distributed``) and adds each block's sums on the host in block order, in float64.

Input ``x`` in block ``b`` draws ``normals(fold_in(fold_in(key, crc32(x)), b), (size,))``, so a result
is a function of the seed and the sample count only: not of how many blocks one call handles, nor of
how many devices share them (bit-for-bit; tests/test_engine_devices.py). Memory stays flat as the
sample count grows: a block's sums are fixed-size, and the reservoir and PSIS tail are bounded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from mcflops.engine.exact import bin_probabilities, distinct_rows, exp_moments, ranges
from mcflops.engine.kernel import BLOCK, GPU_BATCH, KEEP, NBINS, SUB, Layout, Likelihood, make_call, mesh
from mcflops.model.compute import Model

_CALLS: dict[tuple, Callable] = {}
POOL = 1 << 20  # draws (at least) whose log-weights feed the PSIS tail and the reservoir (pool_subblocks)
POOL_ESS = 20 * KEEP  # a pool with fewer effective draws grows (run: a selection-only pass over more sub-blocks)


def _one_device_per_core() -> None:
    """On the CPU, one JAX device per core (``MCFLOPS_CPU_DEVICES`` overrides), so that blocks run on
    every core: XLA runs one program of this kernel on about one core. Done only before JAX's
    backends start and never over an explicit setting (XLA_FLAGS device count, jax_num_cpu_devices)."""
    from jax._src import xla_bridge

    want = os.environ.get("MCFLOPS_CPU_DEVICES")
    if xla_bridge.backends_are_initialized() or "xla_force_host_platform_device_count" in os.environ.get(
            "XLA_FLAGS", "") or jax.config.jax_num_cpu_devices >= 0:
        return
    try:
        n = int(want) if want else len(os.sched_getaffinity(0))
    except (ValueError, AttributeError):
        n = os.cpu_count() or 1
    if n > 1:
        jax.config.update("jax_num_cpu_devices", min(n, 64))


@dataclass
class Sums:
    """Float64 sums over all blocks, added in block order."""

    n: int
    names: tuple[str, ...]
    lo: np.ndarray
    width: np.ndarray
    prior: dict[str, np.ndarray]
    first: np.ndarray  # [Q, KEEP] the first draws (prior sample)
    post: dict[str, np.ndarray] | None = None
    log_max: float = -np.inf  # max log-likelihood over draws (the reference of post sums)
    below: np.ndarray | None = None
    inside: np.ndarray | None = None
    top: np.ndarray | None = None  # the largest log-likelihoods of the pool's draws, ascending (PSIS tail)
    pool: int = 0  # draws the PSIS tail and the reservoir are taken from (engine.pool_subblocks)
    reservoir: dict[str, np.ndarray] | None = None
    blocks: int = 0
    extra: dict = field(default_factory=dict)


def _per_sub(expected: float, sub: int) -> int:
    """Static top-k size per sub-block: the expected count plus a wide margin, a power of two."""
    k = expected + 6.0 * math.sqrt(expected) + 16.0
    return int(min(sub, max(64, 1 << (math.ceil(k) - 1).bit_length())))


def psis_tail(n: int) -> int:
    """M = min(3 sqrt(S), S / 5) (Vehtari et al. 2024): how many of the largest log-weights PSIS fits."""
    return int(min(max(math.ceil(3 * math.sqrt(n)), 1), 0.2 * n))


def _kish(s0: float, s0w2: float) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 (summary.ess; the engine sits below summary)."""
    return s0 * s0 / s0w2 if s0w2 > 0 else 0.0


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


def _layout(model: Model, lik, pool: int, size: int, sub: int, rsub: int, psub: int, widen: int = 1,
            pfrom: int = 0) -> Layout:
    """Static sizes of a pass whose pool (``psub`` sub-blocks per block) holds ``pool`` draws; ``widen``
    scales the per-sub-block top-k (0: keep every draw's key); ``pfrom`` > 0: a pass over the pool
    sub-blocks pfrom..psub-1 only, selections and weights only (the pool grown after a first pass)."""
    rows, _ = distinct_rows(model)
    ktop = kres = 0
    if lik is not None and psub:
        frac = min(sub, pool) / pool  # share of the pool's draws in one sub-block
        ktop = sub if not widen else _per_sub(widen * (psis_tail(pool) + 1) * frac, sub)
        kres = sub if not widen else _per_sub(widen * min(KEEP, pool) * frac, sub)
    sampled = tuple(i for i, r in enumerate(rows) if r not in model.inputs)
    batch = _batch()
    first = sub if psub else rsub  # the kept prior draws come from the block's first sub-block
    return Layout(size=size, sub=sub, rows=rows, sampled=sampled, keep=min(KEEP, first), ktop=ktop, kres=kres,
                  batch=batch, psub=psub if lik is not None else 0, rsub=rsub, pfrom=pfrom, sums=not pfrom)


def _call(lay: Layout, ndev: int) -> Callable:
    k = (lay, ndev)
    if k not in _CALLS:
        _CALLS[k] = make_call(lay, ndev)
    return _CALLS[k]


def sum_blocks(call: Callable[[jax.Array, jax.Array], Mapping], n: int, size: int, blocks_per_call: int,
               progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Float64 sums, in block order, of the ``"s"`` and ``"ss"`` outputs of ``call(block_ids, n_valid)`` over
    the ceil(n / size) keyed blocks of n draws (the Sobol and Shapley passes). Calls take ``blocks_per_call``
    blocks, the remainder one at a time: two compiled shapes at most."""
    nblocks = -(-n // size)
    full = nblocks - nblocks % blocks_per_call
    starts = [(b, blocks_per_call) for b in range(0, full, blocks_per_call)] + [(b, 1) for b in range(full, nblocks)]
    s = ss = None
    for start, count in starts:
        ids = np.arange(start, start + count, dtype=np.uint32)
        nv = np.minimum(n - ids.astype(np.int64) * size, size).astype(np.int32)
        out = jax.device_get(call(jnp.asarray(ids), jnp.asarray(nv)))
        for j in range(len(ids)):
            bs, bss = np.asarray(out["s"][j], np.float64), np.asarray(out["ss"][j], np.float64)
            s, ss = (bs, bss) if s is None else (s + bs, ss + bss)
        if progress is not None:
            progress(start + count, nblocks)
    return s, ss


def init_distributed() -> bool:
    """Join a multi-process JAX run (JAX's own runtime) when the environment asks for one:
    ``JAX_COORDINATOR_ADDRESS`` (with ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``), or
    ``MCFLOPS_DISTRIBUTED=1`` on a cluster JAX detects by itself (SLURM, Open MPI, Kubernetes).
    Called when the engine is imported, before any JAX computation; True if it joined."""
    from jax._src import distributed

    env = os.environ
    if distributed.global_state.client is not None:
        return True
    if env.get("JAX_COORDINATOR_ADDRESS"):
        kw = {k: int(env[v]) for k, v in (("num_processes", "JAX_NUM_PROCESSES"), ("process_id", "JAX_PROCESS_ID"))
              if v in env}
        jax.distributed.initialize(**kw)
        return True
    if env.get("MCFLOPS_DISTRIBUTED") == "1":
        jax.distributed.initialize()
        return True
    return False


class _Merge:
    """Adds block outputs in block order (float64), keeping the running maximum of the posterior."""

    def __init__(self, n: int, lay: Layout, posterior: bool, pool: int):
        self.n, self.lay, self.posterior, self.pool = n, lay, posterior, pool
        self.prior: dict | None = None
        self.post: dict | None = None
        self.log_max = -np.inf
        self.below = self.inside = None
        self.first = None
        self.m_top_cap = psis_tail(n) + 1  # the tail is cut to the pool's psis_tail only when read: a pool may grow
        self.pool_w = np.zeros(2)  # the pool's sum w and sum w^2, relative to pool_max (its ESS: pool_ess)
        self.pool_max = -np.inf
        self._top = np.empty(0)
        self.res = {"key": np.empty(0), "ll": np.empty(0), "D": np.empty((len(lay.rows), 0))}
        self.cut_top = self.cut_res = -np.inf  # the largest k-th value of a sub-block that was cut
        self._pending: list[tuple[np.ndarray, ...]] = []  # blocks' tail and reservoir candidates not yet folded in
        self._npending = 0

    @property
    def pool_ess(self) -> float:
        """Kish's effective sample size of the pool's weights."""
        return _kish(*self.pool_w)

    @property
    def m_top(self) -> int:
        return psis_tail(self.pool) + 1

    @property
    def top(self) -> np.ndarray:
        """The pool's largest log-likelihoods, ascending (PSIS tail)."""
        self.settle()
        return self._top[-self.m_top:]

    def add(self, blk: dict, n_valid: int, lay: Layout | None = None) -> None:
        """Add one block (``lay``: the layout of the call it came from, when not ``self.lay``)."""
        lay = self.lay if lay is None else lay
        if lay.sums:
            self._add_sums(blk)
        if self.posterior and "top" in blk:
            self._add_pool(blk, n_valid, lay)

    def _add_sums(self, blk: dict) -> None:
        prior = {k: np.asarray(v, np.float64) for k, v in blk["prior"].items()}
        self.prior = prior if self.prior is None else {k: self.prior[k] + prior[k] for k in prior}
        if self.first is None:
            self.first = np.asarray(blk["first"], np.float64)
        if not self.posterior:
            return
        b, i = np.asarray(blk["below"], np.float64), np.asarray(blk["inside"], np.float64)
        self.below = b if self.below is None else self.below + b
        self.inside = i if self.inside is None else self.inside + i
        m = float(blk["m"])
        if np.isfinite(m):
            post = {k: np.asarray(v, np.float64) for k, v in blk["post"].items()}
            if self.post is None:
                self.post, self.log_max = post, m
            else:
                new_max = max(m, self.log_max)
                a, c = math.exp(self.log_max - new_max), math.exp(m - new_max)
                self.post = {k: self.post[k] * (a * a if k == "s0w2" else a) + post[k] * (c * c if k == "s0w2" else c)
                             for k in post}
                self.log_max = new_max

    def _add_pool(self, blk: dict, n_valid: int, lay: Layout) -> None:
        s0, s0w2, m = map(float, np.asarray(blk["pool"], np.float64))  # this block's pool sub-blocks' weights
        if np.isfinite(m):
            new_max = max(m, self.pool_max)
            a, c = math.exp(self.pool_max - new_max), math.exp(m - new_max)
            self.pool_w = self.pool_w * [a, a * a] + np.array([s0 * c, s0w2 * c * c])
            self.pool_max = new_max
        sub = lay.sub
        counts = np.clip(n_valid - sub * np.arange(lay.pfrom, lay.psub), 0, sub)  # this call's pool sub-blocks
        top, rkey = np.asarray(blk["top"], np.float64), np.asarray(blk["rkey"], np.float64)
        full_t, full_r = counts > lay.ktop, counts > lay.kres
        if full_t.any():
            self.cut_top = max(self.cut_top, float(np.max(top[full_t, -1])))
        if full_r.any():
            self.cut_res = max(self.cut_res, float(np.max(rkey[full_r, -1])))
        rD = np.asarray(blk["rD"], np.float64)[counts > 0]  # [S, Q, k]
        self._pending.append((top[counts > 0].reshape(-1), rkey[counts > 0].reshape(-1),
                              np.asarray(blk["rll"], np.float64)[counts > 0].reshape(-1),
                              np.moveaxis(rD, 1, 0).reshape(rD.shape[1], -1)))
        self._npending += self._pending[-1][1].size
        if self._npending > 1 << 16:  # bounded memory: fold the candidates in now and then
            self.settle()

    def settle(self) -> None:
        """Fold the blocks' candidates into the PSIS tail and the reservoir (in block order: ties go to the
        earlier draw, whatever the number of blocks per fold)."""
        if not self._pending:
            return
        tops, keys, lls, Ds = zip(*self._pending)
        self._pending, self._npending = [], 0
        t = np.concatenate([self._top, *tops])
        if t.size > self.m_top_cap:
            t = np.partition(t, t.size - self.m_top_cap)[-self.m_top_cap:]
        self._top = np.sort(t)
        cand_key = np.concatenate([self.res["key"], *keys])
        order = np.argsort(-cand_key, kind="stable")[: min(KEEP, self.pool)]
        self.res = {"key": cand_key[order], "ll": np.concatenate([self.res["ll"], *lls])[order],
                    "D": np.concatenate([self.res["D"], *Ds], axis=1)[:, order]}

    def exact(self) -> bool:
        """Whether every sub-block kept all its draws that belong to the overall top (else: widen, rerun)."""
        if not self.posterior:
            return True
        top = self.top
        ok_top = self.cut_top == -np.inf or (top.size >= self.m_top and self.cut_top <= top[0])
        keys = self.res["key"]
        ok_res = self.cut_res == -np.inf or (keys.size >= min(KEEP, self.pool) and self.cut_res < keys[-1])
        return bool(ok_top and ok_res)


def _expand(d: dict[str, np.ndarray], where: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Sums over distinct rows -> sums over every tracked quantity (rows of equal quantities copied)."""
    ix = np.asarray(where)
    out = {}
    for k, v in d.items():
        if k == "cross":
            out[k] = v[np.ix_(ix, ix)]
        elif np.ndim(v) >= 1 and k not in ("s0", "s0w2"):
            out[k] = v[ix]
        else:
            out[k] = v
    return out


def _pass(key, model, lik, n, lay: Layout, lo, inv, below, blocks_per_call, progress, merge: _Merge) -> None:
    """Every block of n draws: calls of ``blocks_per_call`` blocks per device, added to ``merge`` in block order
    (the next call is dispatched before the previous one is added)."""
    ndev = jax.device_count()
    lo32, inv32 = jnp.asarray(np.asarray(lo, np.float32)), jnp.asarray(np.asarray(inv, np.float32))
    multi = jax.process_count() > 1
    if multi:
        from jax.experimental import multihost_utils
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        sharding = NamedSharding(mesh(), P("blocks"))
        to_global = lambda a: jax.make_array_from_callback(a.shape, sharding, lambda i: a[i])

    def finish(p):
        end, nv, back, out = p
        out = multihost_utils.process_allgather(out, tiled=True) if multi else jax.device_get(out)
        for j in back:  # call positions in block order
            if nv[j] > 0:  # blocks past n have none
                merge.add(jax.tree.map(lambda a, j=j: a[j], out), int(nv[j]), lay)
        if progress is not None:
            progress(end, nblocks)

    nblocks = -(-n // lay.size)
    fn = _call(lay, ndev)
    bpc = -(-max(1, blocks_per_call) // lay.batch) * lay.batch  # whole batches only (no remainder program)
    per_call = bpc * ndev
    # device d takes blocks start + d, start + d + ndev, ...: the last, partial call stays balanced
    order = np.arange(per_call).reshape(bpc, ndev).T.reshape(-1)  # call position -> offset of its block
    back = np.argsort(order)  # block offset -> call position
    pending = None
    for start in range(0, nblocks, per_call):
        ids = start + order.astype(np.int64)
        nv = np.clip(n - ids * lay.size, 0, lay.size).astype(np.int32)
        args = (ids.astype(np.uint32), nv)
        if multi:
            args = tuple(to_global(a) for a in args)
        out = fn(key, model, lik, lo32, inv32, below, *args)
        if pending is not None:  # overlap: add the previous call's sums while this one runs
            finish(pending)
        pending = (min(start + per_call, nblocks), nv, back, out)
    if pending is not None:
        finish(pending)


def _passes(key, model, lik, n, size, sub, rsub, lo, inv, below, blocks_per_call, progress, psub: int, pool: int,
            widen: int) -> _Merge:
    """Every block once, each its pool sub-blocks (PSIS tail, reservoir) first: one compiled program."""
    lay = _layout(model, lik, pool, size, sub, rsub, psub, widen)
    merge = _Merge(n, lay, lik is not None, pool)
    _pass(key, model, lik, n, lay, lo, inv, below, blocks_per_call, progress, merge)
    return merge


def run(key: jax.Array, model: Model, lik: Likelihood | None, n: int, *, blocks_per_call: int | None = None,
        size: int = BLOCK, sub: int | None = None, rsub: int | None = None,
        progress: Callable[[int, int], None] | None = None) -> Sums:
    """Draw n samples in blocks of ``size`` and return their float64 sums (the engine's one entry point).

    ``blocks_per_call`` blocks go to each device per compiled call (default: 16 on CPU, 32 on GPU; fewer
    calls cost less: 1e7 draws on 2 CPU devices took 0.188 s with 4, 0.170 s with 16, best of 6);
    ``sub`` is the sub-block size (default ``SUB``; with observations that of the pool's sub-blocks, the
    rest of a block in sub-blocks of ``rsub``: by default half that on a CPU, the whole rest on a GPU). None
    changes the draws; the sums are bit-identical for any ``blocks_per_call`` and any number of devices
    (given ``sub`` and ``rsub``).
    """
    if n < 1:
        raise ValueError(f"expected at least one draw, got n={n}")
    gpu = jax.devices()[0].platform != "cpu"
    # CPU: sub-blocks that stay in cache, one block at a time. GPU: whole blocks, several side by side
    # (kernels of 2^20 x batch elements); batch is fixed so that sums do not depend on the call size.
    # With observations a block starts with its pool sub-blocks (top-k selections): on a GPU 2^16 draws each and
    # the rest of the block at once; on a CPU half-size sub-blocks after the pool (no top-k there to amortise,
    # and the posterior's wider intermediates stay in L2: 1e7 draws 0.285 -> 0.269 s, medians of 12).
    sub = min(sub or (size if gpu and lik is None else (1 << 16) if gpu else SUB), size)
    if size % sub:
        raise ValueError(f"block size {size} is not a multiple of the sub-block size {sub}")
    if blocks_per_call is None:
        blocks_per_call = 32 if gpu else 16
    rows, where = distinct_rows(model)
    q = len(rows)
    below = lik.target if lik is not None else None
    lo, hi = ranges(model, rows)
    span = np.maximum(hi - lo, 1e-6)
    lo = lo - 0.01 * span  # a margin for float32 rounding
    width = 1.02 * span / NBINS
    psub, pool = pool_subblocks(n, size, sub) if lik is not None else (0, n)

    def rest(psub: int) -> int:
        if psub * sub >= size or lik is None:
            return sub
        if rsub:
            return rsub
        return size - psub * sub if gpu else sub // 2 if sub % 2 == 0 and sub > 1 else sub

    for widen in (1, 8, 64, 0):  # the per-sub-block top-k sizes are a guess; widen them if one was cut short
        merge = _passes(key, model, lik, n, size, sub, rest(psub), lo, 1.0 / width, below, blocks_per_call, progress,
                        psub, pool, widen)
        while pool < n and merge.pool_ess < POOL_ESS:
            # Too few effective draws in the pool for the reservoir and the tail fit: grow it (its effective size
            # grows about in proportion to its draws) by a pass over the new pool sub-blocks that only selects:
            # the sums are complete already. A sharp observation costs a fraction of a pass, not a second pass.
            grown = min(size // sub, max(psub + 1, math.ceil(1.25 * psub * POOL_ESS / max(merge.pool_ess, 1.0))))
            merge.pool = _pool_draws(n, size, sub, grown)
            ext = _layout(model, lik, merge.pool, size, sub, rest(grown), grown, widen, pfrom=psub)
            _pass(key, model, lik, n, ext, lo, 1.0 / width, below, blocks_per_call, None, merge)
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
    sums.extra.update(rows=rows, widened=widen, pool=pool)
    if lik is not None:
        sums.post = _expand(merge.post, where) if merge.post is not None else None
        sums.log_max = merge.log_max
        sums.below, sums.inside = merge.below, merge.inside
        sums.top, sums.pool = merge.top, pool
        r = merge.res
        sums.reservoir = {"key": r["key"], "ll": r["ll"], "D": r["D"][ix]}
    return sums


# Before any JAX computation (importing the engine is the first thing a run does): every core, every host.
_one_device_per_core()
init_distributed()
