"""The block-reduction engine: draw blocks of samples on the JAX devices, reduce each block, sum blocks.

Keying. Input ``x`` in block ``b`` draws ``normals(fold_in(fold_in(key, crc32(x)), b), (size,))``
(``_rng``: element i from counter i, so any slice can be made on its own; blocks are ``BLOCK`` =
2^20 draws). A result is therefore a function of the seed and the sample count only: not of how
many blocks one call handles, nor of how many devices share them (``draw_z`` gives the same draws).

One compiled program per structure does everything: a loop over the call's blocks and, in each
block, over sub-blocks of ``SUB`` draws (intermediates stay in cache; only sub-blocks that hold
draws run). Each sub-block adds into fixed-size sums: moments, log-space histograms of the outputs,
and with observations the importance-weighted sums (weights relative to a running maximum, rescaled
when it grows, as in an online softmax), the largest log-likelihoods (PSIS tail) and the largest
Gumbel keys (a weighted reservoir), both by an exact top-k per sub-block. Inputs' prior histograms
and E[e^d] are exact (from their z -> d maps), not sampled. Quantities equal draw for draw (e.g.
``wall_days`` and ``gpu_hours`` in centred logs) are reduced once. Histogram ranges bound every
draw the engine can make (|z| <= ZBOUND), so no pilot pass is needed.

Blocks are sharded across all devices (a 1-D mesh over ``jax.devices()``; on a CPU one device per
core; across hosts with ``jax.distributed``); each block's sums come back to the host, which adds
them in block order in float64: memory stays flat as samples grow, and the sums are bit-for-bit the
same however the blocks were scheduled.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from . import _rng, copula
from .model import Model, outputs
from .spec import Spec

BLOCK = 1 << 20  # draws per keyed block (part of the algorithm: changing it changes the draws)
SUB = 1 << 16  # draws per keyed sub-block (idem); blocks smaller than SUB are one sub-block
ZBOUND = 6.4  # no standard normal the engine draws exceeds this (_rng: largest |z| is 6.34)
NBINS = 4096  # histogram bins per quantity (+ one underflow and one overflow bin)
KEEP = 4000  # draws kept for plots and ArviZ (prior: the first KEEP; posterior: a weighted reservoir)
GPU_BATCH = 8  # blocks vmapped side by side on a GPU
GROUP = 16  # the exact per-sub-block top-k first picks groups of GROUP draws by their maxima
_GUMBEL_ID = 0x7FFF_FFF1


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


def stable_id(name: str) -> int:
    """A stable 31-bit id for an input name (CRC-32; Python's hash() is salted per process)."""
    return zlib.crc32(name.encode()) & 0x7FFF_FFFF


def normals(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Standard normal draws (float32): a pure function of the key, element i from counter i
    (``_rng.normals``: fused Threefry-2x32-20, about twice as fast as ``jax.random.normal`` on CPU)."""
    return _rng.normals(key, shape)


def _words(key: jax.Array) -> jax.Array:
    """The four key words ``_rng`` derives from a key (Threefry key, counter high word)."""
    return jax.random.bits(key, (4,), jnp.uint32)


def _input_keys(key: jax.Array, model: Model, block) -> dict[str, jax.Array]:
    return {name: jax.random.fold_in(jax.random.fold_in(key, stable_id(name)), block)
            for name, s in zip(model.inputs, model.samplers) if s.kind != "const"}


def draw_z(key: jax.Array, model: Model, block, size: int) -> dict[str, jax.Array]:
    """Standard-normal scores of every uncertain input for the first ``size`` draws of block ``block``
    (the draws ``run`` makes there), the copula applied."""
    z = {name: normals(k, (size,)) for name, k in _input_keys(key, model, block).items()}
    return copula.apply(model, z)  # correlations: a Gaussian copula on the z's (identity when none)


# ---------------------------------------------------------------------------------------------- observations

@dataclass(frozen=True)
class Likelihood:
    """Observations compiled for the kernel. Static: what is observed and how; leaves: the numbers."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]  # lognormal | normal | between
    target: jax.Array  # centred log of the observed value (lognormal/normal)
    scale: jax.Array  # sigma of log (lognormal) or value/sd (normal)
    low: jax.Array  # between: centred log bounds
    high: jax.Array


jax.tree_util.register_dataclass(Likelihood, data_fields=["target", "scale", "low", "high"],
                                 meta_fields=["names", "kinds"])


def build_likelihood(spec: Spec, model: Model) -> Likelihood | None:
    if not spec.observe:
        return None
    t, s, lo, hi = [], [], [], []
    for name, o in spec.observe.items():
        c = model.centers[name]
        if o.noise == "between":
            t.append(0.0), s.append(1.0)
            lo.append(math.log(o.low) - c if o.low > 0 else -np.inf), hi.append(math.log(o.high) - c)
        else:
            t.append(math.log(o.value) - c)
            s.append(o.scale if o.noise == "lognormal" else o.value / o.scale)
            lo.append(0.0), hi.append(0.0)
    f = lambda x: jnp.asarray(np.asarray(x, np.float32))
    return Likelihood(tuple(spec.observe), tuple(o.noise for o in spec.observe.values()), f(t), f(s), f(lo), f(hi))


def log_likelihood(lik: Likelihood, v: Mapping[str, jax.Array]) -> jax.Array:
    """Sum of the observations' log-likelihoods (up to constants) for each draw."""
    total = 0.0
    for i, (name, kind) in enumerate(zip(lik.names, lik.kinds)):
        d = v[name]
        if kind == "lognormal":  # log(observed) ~ Normal(log q, sigma)
            total = total - 0.5 * jnp.square((d - lik.target[i]) / lik.scale[i])
        elif kind == "normal":  # observed ~ Normal(q, sd): (q - v)/sd = (v/sd)(e^{d-t} - 1)
            total = total - 0.5 * jnp.square(lik.scale[i] * jnp.expm1(d - lik.target[i]))
        else:  # uniform likelihood on [low, high]
            total = total + jnp.where((d >= lik.low[i]) & (d <= lik.high[i]), 0.0, -jnp.inf)
    return total


# ---------------------------------------------------------------------------------------------- the kernel

@dataclass(frozen=True)
class Layout:
    """Static sizes of one engine pass (with the model's structure, what a compiled program depends on)."""

    size: int = BLOCK  # draws per block
    sub: int = SUB  # draws per sub-block
    rows: tuple[str, ...] = ()  # distinct quantities reduced (the others are equal to one of these)
    sampled: tuple[int, ...] = ()  # rows whose prior histogram is counted (inputs' is known exactly)
    nbins: int = NBINS
    keep: int = KEEP  # prior draws kept (the first of block 0)
    ktop: int = 0  # largest log-likelihoods kept per sub-block (0: no observations)
    kres: int = 0  # largest Gumbel keys kept per sub-block
    batch: int = 1  # blocks computed side by side (vmapped) in a call: 1 on CPU, a few on GPUs

    @property
    def nsub(self) -> int:
        return self.size // self.sub


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


def _hist_index(D, lo, inv, nbins):
    """Flat bin index of every element of D (row r uses bins r*(nbins+2) .. (r+1)*(nbins+2) - 1)."""
    idx = jnp.clip(jnp.floor((D - lo[:, None]) * inv[:, None]) + 1.0, 0.0, nbins + 1.0).astype(jnp.int32)
    return idx + (jnp.arange(D.shape[0], dtype=jnp.int32) * (nbins + 2))[:, None]


def _top(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """Exact top-k (values, indices) of a vector, via its groups' maxima: the k largest elements lie in
    the k groups with the largest maxima (a group holding one of them has a maximum at least as large,
    and at most k groups can), so only k * GROUP elements go through top_k."""
    n = x.shape[0]
    if k * GROUP >= n or n % GROUP:
        return jax.lax.top_k(x, k)
    g = x.reshape(n // GROUP, GROUP)
    _, gi = jax.lax.top_k(jnp.max(g, axis=1), k)
    cand = g[gi].reshape(-1)
    v, j = jax.lax.top_k(cand, k)
    return v, gi[j // GROUP] * GROUP + j % GROUP


def _block(key, model: Model, lik: Likelihood | None, lo, inv, below, block, n_valid, lay: Layout):
    """Reduce one block of draws to fixed-size sums (on the device, under jit)."""
    sub, q, nb = lay.sub, len(lay.rows), lay.nbins
    names = tuple(n for n, s in zip(model.inputs, model.samplers) if s.kind != "const")
    ids = [stable_id(n) for n in names] + ([_GUMBEL_ID] if lik is not None else [])
    K = None
    if ids:  # every stream's key words at once (vmapped: one Threefry graph, not one per stream)
        words = jax.vmap(lambda i: _words(jax.random.fold_in(jax.random.fold_in(key, i), block)))
        K = words(jnp.asarray(ids, jnp.uint32))[:, :, None]  # [streams, 4 words, 1]
    f32 = jnp.float32
    zq = jnp.zeros((q,), f32)
    mom0 = {"s0": jnp.zeros((), f32), "s1d": zq, "s2d": zq, "s1y": zq, "s2y": zq, "cross": jnp.zeros((q, q), f32)}
    hs = len(lay.sampled)
    zs = jnp.zeros((hs,), f32)  # the prior's e^d sums: sampled rows only (inputs' are known exactly)
    acc = {"prior": {**mom0, "s1y": zs, "s2y": zs, "hist": jnp.zeros((hs * (nb + 2),), f32)},
           "first": jnp.zeros((q, lay.keep), f32)}
    if lik is not None:
        no = len(lik.names)
        acc.update(post={**mom0, "hist": jnp.zeros((q * (nb + 2),), f32), "s0w2": jnp.zeros((), f32)},
                   m=jnp.full((), -jnp.inf, f32), below=jnp.zeros((no,), f32), inside=jnp.zeros((no,), f32),
                   top=jnp.full((lay.nsub, lay.ktop), -jnp.inf, f32),
                   rkey=jnp.full((lay.nsub, lay.kres), -jnp.inf, f32),
                   rll=jnp.full((lay.nsub, lay.kres), -jnp.inf, f32),
                   rD=jnp.zeros((lay.nsub, q, lay.kres), f32))

    def body(s, acc):
        # Barriers materialise the generator's words, the inputs' deviations and D once each: XLA would
        # otherwise re-run the generator (or the table lookups) inside every consumer.
        if K is not None:
            idx = (s * sub).astype(jnp.uint32) + jax.lax.iota(jnp.uint32, sub)
            W = _rng.threefry2x32((idx[None, :], K[:, 2]), (K[:, 0], K[:, 1]))[0]  # = _rng.bits(key_i)[s*sub:]
            W = jax.lax.optimization_barrier(W)
            Z = jax.lax.optimization_barrier(_rng.normal_from_bits(W[: len(names)]))
        z = copula.apply(model, {n: Z[i] for i, n in enumerate(names)})
        d = {}
        for name, smp in zip(model.inputs, model.samplers):  # model.evaluate, with a barrier between its halves
            d[name] = smp(z[name]) if name in z else jnp.broadcast_to(smp.a, ())
        d = jax.lax.optimization_barrier(d)
        v = {**d, **outputs(model, d)}
        valid = (s * sub + jnp.arange(sub, dtype=jnp.int32)) < n_valid
        w0 = valid.astype(f32)
        D = jnp.stack([jnp.broadcast_to(v[n], (sub,)) for n in lay.rows])
        D = jax.lax.optimization_barrier(jnp.where(valid[None, :], D, 0.0))  # invalid draws: 0, weight 0
        smp = np.asarray(lay.sampled)
        if lik is not None:  # the posterior weighs e^d of every row
            y = jnp.where(valid[None, :], jnp.exp(D), 0.0)
            ys = y[smp]
        else:
            ys = jnp.where(valid[None, :], jnp.exp(D[smp]), 0.0)
        idx = _hist_index(D, lo, inv, nb)
        new = dict(acc)
        hi = jax.lax.Precision.HIGHEST
        if lik is not None:  # the posterior's weights first: one product gives both cross-sum matrices
            ll = jnp.where(valid, log_likelihood(lik, v), -jnp.inf)
            m = jnp.maximum(acc["m"], jnp.max(ll))
            ok = jnp.isfinite(m)
            w = jnp.exp(ll - jnp.where(ok, m, 0.0))
            cross = jnp.dot(jnp.concatenate([D, D * w[None, :]]), D.T, precision=hi)
        else:
            cross = jnp.dot(D, D.T, precision=hi)
        pm = _moments(D, ys, None, jnp.clip(n_valid - s * sub, 0, sub).astype(f32), cross[:q])
        new["prior"] = {k: acc["prior"][k] + pm[k] for k in pm}
        ph = acc["prior"]["hist"]
        for j, r in enumerate(lay.sampled):  # one scatter per row (row r's bins moved to slot j)
            ph = ph.at[idx[r] - (r - j) * (nb + 2)].add(w0, mode="promise_in_bounds")
        new["prior"]["hist"] = ph
        # the first draws: a branch, not a pass over D every time
        if lay.keep:
            new["first"] = jax.lax.cond(s == 0, lambda: D[:, : lay.keep], lambda: acc["first"])
        if lik is None:
            return new
        od = jnp.stack([jnp.broadcast_to(v[n], (sub,)) for n in lik.names])
        new["below"] = acc["below"] + jnp.sum(jnp.where(od < below[:, None], w0, 0.0), axis=1)
        new["inside"] = acc["inside"] + jnp.sum(jnp.where((od >= lik.low[:, None]) & (od <= lik.high[:, None]),
                                                          w0, 0.0), axis=1)
        scale = jnp.where(ok, jnp.exp(acc["m"] - jnp.where(ok, m, 0.0)), 0.0)  # earlier sums to the new maximum
        qm = _moments(D, y, w, jnp.sum(w), cross[q:])
        post = {k: acc["post"][k] * scale + qm[k] for k in qm}
        post["s0w2"] = acc["post"]["s0w2"] * (scale * scale) + jnp.sum(w * w)
        ph = acc["post"]["hist"] * scale
        for r in range(q):  # one scatter per row: the weights need no q-fold copy
            ph = ph.at[idx[r]].add(w, mode="promise_in_bounds")
        post["hist"] = ph
        new["post"], new["m"] = post, m
        new["top"] = jax.lax.dynamic_update_index_in_dim(acc["top"], _top(ll, lay.ktop)[0], s, 0)
        # Gumbel-top-k: the largest ll + Gumbel noise are a weighted sample without replacement
        # (Efraimidis & Spirakis 2006; Kool et al. 2019), mergeable by taking the largest again.
        g = -jnp.log(-jnp.log(_rng.uniform_from_bits(W[len(names)])))  # Gumbel(0, 1)
        rk, ri = _top(ll + g, lay.kres)
        new["rkey"] = jax.lax.dynamic_update_index_in_dim(acc["rkey"], rk, s, 0)
        new["rll"] = jax.lax.dynamic_update_index_in_dim(acc["rll"], ll[ri], s, 0)
        new["rD"] = jax.lax.dynamic_update_index_in_dim(acc["rD"], D[:, ri], s, 0)
        return new

    nsub = (n_valid + (sub - 1)) // sub
    acc = jax.lax.fori_loop(0, nsub, body, acc)
    acc["prior"]["hist"] = acc["prior"]["hist"].reshape(hs, nb + 2)
    if "post" in acc:
        acc["post"]["hist"] = acc["post"]["hist"].reshape(q, nb + 2)
    return acc


def _mesh():
    """A 1-D mesh over every device of every process (blocks are sharded along it)."""
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()), ("blocks",))


def _make_call(lay: Layout, ndev: int):
    def local(key, model, lik, lo, inv, below, blocks, n_valid):
        return jax.lax.map(lambda a: _block(key, model, lik, lo, inv, below, a[0], a[1], lay),
                           (blocks, n_valid), batch_size=lay.batch if lay.batch > 1 else None)

    if ndev == 1:
        return jax.jit(local)
    from jax.sharding import PartitionSpec as P

    sharded = jax.shard_map(local, mesh=_mesh(), in_specs=(P(),) * 6 + (P("blocks"), P("blocks")),
                            out_specs=P("blocks"), check_vma=False)
    return jax.jit(sharded)


_CALLS: dict[tuple, Callable] = {}


# ---------------------------------------------------------------------------------------------- the host side

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
    top: np.ndarray | None = None  # the largest log-likelihoods, ascending (PSIS tail)
    reservoir: dict[str, np.ndarray] | None = None
    blocks: int = 0
    extra: dict = field(default_factory=dict)


def distinct_rows(model: Model) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Quantities that differ (``rows``) and, for each of ``model.names``, the row that holds it.

    Two quantities share a row when they are equal at random probe points of the inputs' centred
    logs (e.g. ``wall_days`` and ``gpu_hours``, or ``flops`` and ``tokens`` when N is fixed): an
    output is a fixed function of the inputs, so equality at generic points means the same function.
    """
    rng = np.random.default_rng(20261129)  # probes only: no effect on any draw
    d = {}
    for name, s in zip(model.inputs, model.samplers):
        d[name] = rng.normal(0.0, 0.5, 5) if s.kind != "const" else np.zeros(5)
    v = {**d, **{k: np.asarray(x, np.float64) for k, x in outputs(model, d).items()}}
    rows: list[str] = []
    where: list[int] = []
    for name in model.names:
        x = np.broadcast_to(np.asarray(v[name], np.float64), (5,))
        for r, other in enumerate(rows):
            if np.array_equal(x, np.broadcast_to(np.asarray(v[other], np.float64), (5,))):
                where.append(r)
                break
        else:
            rows.append(name)
            where.append(len(rows) - 1)
    return tuple(rows), tuple(where)


def ranges(model: Model, rows: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The range of every row over all draws the engine can make (the histograms' span): an input's
    d = sampler(z) is non-decreasing in z, and |z| <= ZBOUND (times the row sums of |L| for inputs in
    a copula, z_corr = L z); outputs are monotone in each input (signed sums, and the PaLM term
    log(a e^dN + 1 - a)), so their extremes are at corners of the inputs' box."""
    L = getattr(model, "copula", None)
    zmax = {}
    if L is not None:
        rs = np.abs(np.asarray(L.chol, np.float64)).sum(axis=1)
        zmax = {n: ZBOUND * float(r) for n, r in zip(L.names, rs)}
    box = {}
    for name, smp in zip(model.inputs, model.samplers):
        if smp.kind == "const":
            box[name] = (0.0, 0.0)
        else:
            zb = zmax.get(name, ZBOUND)
            ends = np.asarray(smp(jnp.asarray([-zb, zb], jnp.float32)), np.float64)
            box[name] = (float(ends[0]), float(ends[1]))
    names = [n for n in model.inputs if box[n][0] != box[n][1]]
    corners = np.array(np.meshgrid(*[[0, 1]] * len(names), indexing="ij")).reshape(len(names), -1)
    d = {n: np.full(corners.shape[1], box[n][0]) for n in model.inputs}
    for i, n in enumerate(names):
        d[n] = np.where(corners[i] == 1, box[n][1], box[n][0])
    v = {**d, **{k: np.asarray(x, np.float64) for k, x in outputs(model, d).items()}}
    lo = np.array([float(np.min(v[r])) for r in rows])
    hi = np.array([float(np.max(v[r])) for r in rows])
    return lo, hi


def bin_probabilities(sampler, lo: float, width: float, nbins: int) -> np.ndarray:
    """Exact probability of each histogram bin (underflow, nbins bins from lo, overflow) for an input:
    d = sampler(z) is non-decreasing in z ~ N(0, 1), so P(d < e) = Phi(z(e)) with z(e) its inverse
    (the same float32 numbers the kernel uses; linear between table nodes, as the kernel interpolates)."""
    from scipy.special import ndtr

    e = lo + width * np.arange(nbins + 1)
    if sampler.kind == "affine":
        z = (e - float(sampler.a)) / float(sampler.b)
    else:
        from .distributions import z_grid

        tab, zg = np.asarray(sampler.table, np.float64), z_grid()
        i = np.clip(np.searchsorted(tab, e, side="right"), 1, len(tab) - 1)
        t0, t1 = tab[i - 1], tab[i]
        frac = np.clip(np.where(t1 > t0, (e - t0) / np.where(t1 > t0, t1 - t0, 1.0), 1.0), 0.0, 1.0)
        z = np.where(e < tab[0], -np.inf, np.where(e >= tab[-1], np.inf, zg[i - 1] + frac * (zg[i] - zg[i - 1])))
    cdf = ndtr(z)
    return np.diff(np.concatenate([[0.0], cdf, [1.0]]))


def exp_moments(sampler) -> np.ndarray:
    """Exact (E[e^d], E[e^2d]) of an input's centred log d = sampler(z), z ~ N(0, 1). Affine d = a + b z:
    E[e^{kd}] = exp(k a + k^2 b^2 / 2). Table (d linear in z on each cell [z0, z1], d = a + b z there):
    the sum over cells of exp(k a + k^2 b^2 / 2) (Phi(z1 - k b) - Phi(z0 - k b)) (completing the square),
    with the constant end values beyond the grid."""
    from scipy.special import log_ndtr

    k = np.array([1.0, 2.0])[:, None]
    if sampler.kind == "affine":
        a, b = float(sampler.a), float(sampler.b)
        return np.exp(k[:, 0] * a + 0.5 * (k[:, 0] * b) ** 2)
    from .distributions import z_grid

    tab, zg = np.asarray(sampler.table, np.float64), z_grid()
    b = np.diff(tab) / np.diff(zg)
    a = tab[:-1] - b * zg[:-1]
    lo, hi = zg[:-1] - k * b, zg[1:] - k * b
    # log(Phi(hi) - Phi(lo)) on the side where it does not cancel (mirror cells that lie above 0)
    up = lo > 0
    l1, l0 = np.where(up, -lo, hi), np.where(up, -hi, lo)
    with np.errstate(divide="ignore"):
        logp = log_ndtr(l1) + np.log1p(-np.exp(np.minimum(log_ndtr(l0) - log_ndtr(l1), 0.0)))
    cells = np.exp(k * a + 0.5 * (k * b) ** 2 + logp)
    ends = np.exp(k * tab[0] + log_ndtr(zg[0])) + np.exp(k * tab[-1] + log_ndtr(-zg[-1]))
    return cells.sum(axis=1) + ends[:, 0]


def _per_sub(expected: float, sub: int) -> int:
    """Static top-k size per sub-block: the expected count plus a wide margin, a power of two."""
    k = expected + 6.0 * math.sqrt(expected) + 16.0
    return int(min(sub, max(64, 1 << (math.ceil(k) - 1).bit_length())))


def psis_tail(n: int) -> int:
    """M = min(3 sqrt(S), S / 5) (Vehtari et al. 2024): how many of the largest log-weights PSIS fits."""
    return int(min(max(math.ceil(3 * math.sqrt(n)), 1), 0.2 * n))


def _layout(model: Model, lik, n: int, size: int, sub: int, widen: int = 1) -> Layout:
    """Static sizes for n draws; ``widen`` scales the per-sub-block top-k (0: keep every draw's key)."""
    rows, _ = distinct_rows(model)
    ktop = kres = 0
    if lik is not None:
        frac = min(sub, n) / n  # share of all draws in one sub-block
        ktop = sub if not widen else _per_sub(widen * (psis_tail(n) + 1) * frac, sub)
        kres = sub if not widen else _per_sub(widen * min(KEEP, n) * frac, sub)
    sampled = tuple(i for i, r in enumerate(rows) if r not in model.inputs)
    batch = 1 if jax.devices()[0].platform == "cpu" else GPU_BATCH
    return Layout(size=size, sub=sub, rows=rows, sampled=sampled, keep=min(KEEP, sub), ktop=ktop, kres=kres,
                  batch=batch)


def _call(lay: Layout, ndev: int) -> Callable:
    k = (lay, ndev)
    if k not in _CALLS:
        _CALLS[k] = _make_call(lay, ndev)
    return _CALLS[k]


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

    def __init__(self, n: int, lay: Layout, posterior: bool):
        self.n, self.lay, self.posterior = n, lay, posterior
        self.prior: dict | None = None
        self.post: dict | None = None
        self.log_max = -np.inf
        self.below = self.inside = None
        self.first = None
        self.m_top = psis_tail(n) + 1
        self.top = np.empty(0)
        self.res = {"key": np.empty(0), "ll": np.empty(0), "D": np.empty((len(lay.rows), 0))}
        self.cut_top = self.cut_res = -np.inf  # the largest k-th value of a sub-block that was cut

    def add(self, blk: dict, n_valid: int) -> None:
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
        sub = self.lay.sub
        counts = np.clip(n_valid - sub * np.arange(self.lay.nsub), 0, sub)
        top, rkey = np.asarray(blk["top"], np.float64), np.asarray(blk["rkey"], np.float64)
        full_t, full_r = counts > self.lay.ktop, counts > self.lay.kres
        if full_t.any():
            self.cut_top = max(self.cut_top, float(np.max(top[full_t, -1])))
        if full_r.any():
            self.cut_res = max(self.cut_res, float(np.max(rkey[full_r, -1])))
        t = np.concatenate([self.top, top[counts > 0].reshape(-1)])
        self.top = np.sort(t)[-self.m_top:]
        keep = min(KEEP, self.n)
        cand_key = np.concatenate([self.res["key"], rkey[counts > 0].reshape(-1)])
        cand_ll = np.concatenate([self.res["ll"], np.asarray(blk["rll"], np.float64)[counts > 0].reshape(-1)])
        rD = np.asarray(blk["rD"], np.float64)[counts > 0]  # [S, Q, k]
        cand_D = np.concatenate([self.res["D"], np.moveaxis(rD, 1, 0).reshape(rD.shape[1], -1)], axis=1)
        order = np.argsort(-cand_key, kind="stable")[:keep]
        self.res = {"key": cand_key[order], "ll": cand_ll[order], "D": cand_D[:, order]}

    def exact(self) -> bool:
        """Whether every sub-block kept all its draws that belong to the overall top (else: widen, rerun)."""
        if not self.posterior:
            return True
        ok_top = self.cut_top == -np.inf or (self.top.size >= self.m_top and self.cut_top <= self.top[0])
        keys = self.res["key"]
        ok_res = self.cut_res == -np.inf or (keys.size >= min(KEEP, self.n) and self.cut_res < keys[-1])
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


def _pass(key, model, lik, n, lay, lo, inv, below, blocks_per_call, progress) -> _Merge:
    """One pass over n draws: calls of ``blocks_per_call`` blocks per device, summed in block order."""
    ndev = jax.device_count()
    fn = _call(lay, ndev)
    bpc = -(-max(1, blocks_per_call) // lay.batch) * lay.batch  # whole batches only (no remainder program)
    per_call = bpc * ndev
    # device d takes blocks start + d, start + d + ndev, ...: the last, partial call stays balanced
    order = np.arange(per_call).reshape(bpc, ndev).T.reshape(-1)  # call position -> offset of its block
    back = np.argsort(order)  # block offset -> call position
    nblocks = -(-n // lay.size)
    merge = _Merge(n, lay, lik is not None)
    lo32, inv32 = jnp.asarray(np.asarray(lo, np.float32)), jnp.asarray(np.asarray(inv, np.float32))
    multi = jax.process_count() > 1
    if multi:
        from jax.experimental import multihost_utils
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        sharding = NamedSharding(_mesh(), P("blocks"))
        to_global = lambda a: jax.make_array_from_callback(a.shape, sharding, lambda i: a[i])

    def finish(p):
        start, nv, out = p
        out = multihost_utils.process_allgather(out, tiled=True) if multi else jax.device_get(out)
        for k in range(per_call):
            j = back[k]
            if nv[j] > 0:
                merge.add(jax.tree.map(lambda a, j=j: a[j], out), int(nv[j]))
        if progress is not None:
            progress(min(start + per_call, nblocks), nblocks)

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
        pending = (start, nv, out)
    if pending is not None:
        finish(pending)
    return merge


def run(key: jax.Array, model: Model, lik: Likelihood | None, n: int, *, blocks_per_call: int | None = None,
        size: int = BLOCK, sub: int | None = None, progress: Callable[[int, int], None] | None = None) -> Sums:
    """Draw n samples in blocks of ``size`` and return their float64 sums (the engine's one entry point).

    ``blocks_per_call`` blocks go to each device per compiled call (default: 4 on CPU, 32 on GPU);
    ``sub`` is the sub-block size (default ``SUB``). Neither changes the draws; the sums are
    bit-identical for any ``blocks_per_call`` and any number of devices (given ``sub``).
    """
    if n < 1:
        raise ValueError(f"expected at least one draw, got n={n}")
    gpu = jax.devices()[0].platform != "cpu"
    # CPU: sub-blocks that stay in cache, one block at a time. GPU: whole blocks, several side by side
    # (kernels of 2^20 x batch elements); batch is fixed so that sums do not depend on the call size.
    sub = min(sub or (size if gpu else SUB), size)
    if size % sub:
        raise ValueError(f"block size {size} is not a multiple of the sub-block size {sub}")
    if blocks_per_call is None:
        blocks_per_call = 32 if gpu else 4
    rows, where = distinct_rows(model)
    q = len(rows)
    below = lik.target if lik is not None else None
    lay = _layout(model, lik, n, size, sub)
    lo, hi = ranges(model, rows)
    span = np.maximum(hi - lo, 1e-6)
    lo = lo - 0.01 * span  # a margin for float32 rounding
    width = 1.02 * span / NBINS
    for widen in (1, 8, 64, 0):  # the per-sub-block top-k sizes are a guess; widen them if one was cut short
        if widen != 1:
            lay = _layout(model, lik, n, size, sub, widen)
        merge = _pass(key, model, lik, n, lay, lo, 1.0 / width, below, blocks_per_call, progress)
        if merge.exact():
            break
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
    sums.extra.update(rows=rows, widened=widen)
    if lik is not None:
        sums.post = _expand(merge.post, where) if merge.post is not None else None
        sums.log_max = merge.log_max
        sums.below, sums.inside = merge.below, merge.inside
        sums.top = merge.top
        r = merge.res
        sums.reservoir = {"key": r["key"], "ll": r["ll"], "D": r["D"][ix]}
    return sums


# Before any JAX computation (importing the engine is the first thing a run does): every core, every host.
_one_device_per_core()
init_distributed()
