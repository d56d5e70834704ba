"""The block-reduction engine: draw blocks of samples on the JAX device, reduce each block, sum blocks.

A block is ``BLOCK`` draws keyed by its index (``fold_in(fold_in(key, crc32(input)), block)``), so a
result depends on the seed and the sample count only: not on how many blocks one call handles or on
how many devices share them. Each block is reduced on the device to fixed-size sums (moments,
log-space histograms, importance-weight sums, the largest log-weights, a Gumbel-top-k reservoir);
the host adds blocks in index order in float64, so memory stays flat as samples grow and the sums
are bit-for-bit the same however the blocks were scheduled.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from . import copula
from .model import Model, evaluate
from .spec import Observation, Spec

BLOCK = 1 << 20  # draws per keyed block (part of the algorithm: changing it changes the draws)
PILOT = 1 << 16  # draws that fix the histogram ranges
NBINS = 4096  # histogram bins per quantity (+ one underflow and one overflow bin)
KEEP = 4000  # draws kept for plots and ArviZ (prior: the first KEEP; posterior: a weighted reservoir)
_PILOT_ID = 0x7FFF_FFF0
_GUMBEL_ID = 0x7FFF_FFF1


def stable_id(name: str) -> int:
    """A stable 31-bit id for an input name (CRC-32; Python's hash() is salted per process)."""
    return zlib.crc32(name.encode()) & 0x7FFF_FFFF


def normals(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Standard normal draws for one input's block."""
    return jax.random.normal(key, shape, jnp.float32)


def draw_z(key: jax.Array, model: Model, block: jax.Array, size: int) -> dict[str, jax.Array]:
    """Standard-normal scores for every uncertain input of one block."""
    z = {}
    for name, s in zip(model.inputs, model.samplers):
        if s.kind != "const":
            z[name] = normals(jax.random.fold_in(jax.random.fold_in(key, stable_id(name)), block), (size,))
    return copula.apply(model, z)  # correlations: a Gaussian copula on the z's (identity when none)


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
    f = lambda x: jnp.asarray(np.asarray(x, np.float32))  # noqa: E731
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


@dataclass(frozen=True)
class Layout:
    """Static sizes of one engine pass."""

    size: int = BLOCK
    nbins: int = NBINS
    keep: int = KEEP
    ktop: int = 0  # largest log-weights kept for PSIS (0: no observations)
    posterior: bool = False


def _weighted(D: jax.Array, w: jax.Array, lo: jax.Array, inv: jax.Array, nbins: int) -> dict[str, jax.Array]:
    """Moments and a histogram of each row of D (centred logs) under weights w."""
    q = D.shape[0]
    y = jnp.exp(D)
    w = w[None, :]
    wD = D * w
    idx = jnp.clip(jnp.floor((D - lo[:, None]) * inv[:, None]) + 1, 0, nbins + 1).astype(jnp.int32)
    flat = (idx + (jnp.arange(q, dtype=jnp.int32) * (nbins + 2))[:, None]).reshape(-1)
    hist = jnp.zeros(q * (nbins + 2), jnp.float32).at[flat].add(jnp.broadcast_to(w, D.shape).reshape(-1))
    return {
        "s0": jnp.sum(w[0]),
        "s1d": jnp.sum(wD, axis=1),
        "s2d": jnp.sum(wD * D, axis=1),
        "s1y": jnp.sum(y * w, axis=1),
        "s2y": jnp.sum(y * y * w, axis=1),
        "cross": wD @ D.T,
        "hist": hist.reshape(q, nbins + 2),
    }


def block_stats(key, model: Model, lik: Likelihood | None, lo, inv, below, block, n_valid, layout: Layout):
    """Reduce one block of draws to fixed-size sums (runs on the device, under jit)."""
    size = layout.size
    v = evaluate(model, draw_z(key, model, block, size))
    D = jnp.stack([jnp.broadcast_to(v[n], (size,)) for n in model.names])
    valid = jnp.arange(size) < n_valid
    w0 = valid.astype(jnp.float32)
    out = {"prior": _weighted(D, w0, lo, inv, layout.nbins), "first": D[:, : layout.keep]}
    if lik is None:
        return out
    obs_d = jnp.stack([jnp.broadcast_to(v[n], (size,)) for n in lik.names])
    out["below"] = jnp.sum(jnp.where(obs_d < below[:, None], w0, 0.0), axis=1)
    out["inside"] = jnp.sum(jnp.where((obs_d >= lik.low[:, None]) & (obs_d <= lik.high[:, None]), w0, 0.0), axis=1)
    ll = jnp.where(valid, log_likelihood(lik, v), -jnp.inf)
    m = jnp.max(ll)
    m_safe = jnp.where(jnp.isfinite(m), m, 0.0)
    w = jnp.exp(ll - m_safe)
    post = _weighted(D, w, lo, inv, layout.nbins)
    post["s0w2"] = jnp.sum(w * w)
    out["post"] = post
    out["m"] = m
    out["top"] = jax.lax.top_k(ll, layout.ktop)[0]
    # Gumbel-top-k: the KEEP largest log w + Gumbel noise are a weighted sample without replacement
    # (Efraimidis & Spirakis 2006; Kool et al. 2019), mergeable across blocks by taking the top again.
    g = jax.random.gumbel(jax.random.fold_in(jax.random.fold_in(key, _GUMBEL_ID), block), (size,), jnp.float32)
    gk, gi = jax.lax.top_k(ll + g, layout.keep)
    out["reservoir"] = {"key": gk, "ll": ll[gi], "D": D[:, gi]}
    return out


@jax.jit
def _pilot(key: jax.Array, model: Model) -> jax.Array:
    v = evaluate(model, draw_z(jax.random.fold_in(key, _PILOT_ID), model, jnp.uint32(0), PILOT))
    D = jnp.stack([jnp.broadcast_to(v[n], (PILOT,)) for n in model.names])
    return jnp.stack([jnp.min(D, axis=1), jnp.max(D, axis=1)])


def _calls(layout: Layout):
    @jax.jit
    def run_blocks(key, model, lik, lo, inv, below, blocks, n_valid):
        def one(args):
            b, n = args
            return block_stats(key, model, lik, lo, inv, below, b, n, layout)

        return jax.lax.map(one, (blocks, n_valid))

    return run_blocks


_CALLS: dict[Layout, Callable] = {}


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
    top: np.ndarray | None = None  # the largest log-likelihoods (PSIS tail)
    reservoir: dict[str, np.ndarray] | None = None
    blocks: int = 0
    extra: dict = field(default_factory=dict)


def _add(acc: dict | None, new: Mapping[str, np.ndarray], scale: float = 1.0) -> dict:
    if acc is None:
        return {k: np.asarray(v, np.float64) * scale for k, v in new.items()}
    for k, v in new.items():
        acc[k] = acc[k] + np.asarray(v, np.float64) * scale
    return acc


def run(key: jax.Array, model: Model, lik: Likelihood | None, n: int, *, blocks_per_call: int = 1,
        size: int = BLOCK, progress: Callable[[int, int], None] | None = None) -> Sums:
    """Draw n samples in blocks and return their float64 sums (the engine's one entry point)."""
    pilot = np.asarray(_pilot(key, model), np.float64)
    span = np.maximum(pilot[1] - pilot[0], 1e-6)
    lo = pilot[0] - 0.5 * span
    width = 2.0 * span / NBINS
    nblocks = -(-n // size)
    ktop = 0
    if lik is not None:
        # PSIS needs the largest M = min(S/5, 3 sqrt(S)) log-weights (Vehtari et al. 2024). Each block keeps
        # at least 4096 (M for S up to 1.8M) rounded up to a power of two, so that sample counts share one
        # compiled kernel; psis.py takes the M it needs from the merged top.
        m_needed = int(min(max(math.ceil(3 * math.sqrt(n)), 1), 0.2 * n))
        ktop = min(max(4096, 1 << (m_needed - 1).bit_length()), size)
    layout = Layout(size=size, keep=min(KEEP, size), ktop=ktop, posterior=lik is not None)
    fn = _CALLS.setdefault(layout, _calls(layout))
    lo32, inv32 = jnp.asarray(lo, jnp.float32), jnp.asarray(1.0 / width, jnp.float32)
    below = lik.target if lik is not None else None
    sums = Sums(n=n, names=model.names, lo=lo, width=width, prior={}, first=np.empty(0))
    prior = post = None
    tops: list[np.ndarray] = []
    res: dict[str, np.ndarray] | None = None
    for start in range(0, nblocks, blocks_per_call):
        ids = np.arange(start, min(start + blocks_per_call, nblocks), dtype=np.uint32)
        n_valid = np.minimum(n - ids.astype(np.int64) * size, size).astype(np.int32)
        out = jax.device_get(fn(key, model, lik, lo32, inv32, below, jnp.asarray(ids), jnp.asarray(n_valid)))
        for j in range(len(ids)):
            blk = jax.tree.map(lambda a: a[j], out)
            prior = _add(prior, blk["prior"])
            if start + j == 0:
                sums.first = np.asarray(blk["first"], np.float64)[:, : min(KEEP, n)]
            if lik is None:
                continue
            sums.below = blk["below"] + (0 if sums.below is None else sums.below)
            sums.inside = blk["inside"] + (0 if sums.inside is None else sums.inside)
            m = float(blk["m"])
            if np.isfinite(m):
                if m > sums.log_max and post is not None:
                    post = {k: v * math.exp(sums.log_max - m) for k, v in post.items()}
                new_max = max(m, sums.log_max)
                post = _add(post, blk["post"], math.exp(m - new_max))
                sums.log_max = new_max
            tops.append(np.asarray(blk["top"], np.float64))
            r = blk["reservoir"]
            cand = {"key": np.asarray(r["key"], np.float64), "ll": np.asarray(r["ll"], np.float64),
                    "D": np.asarray(r["D"], np.float64)}
            if res is not None:
                cand = {k: np.concatenate([res[k], cand[k]], axis=-1) for k in cand}
            order = np.argsort(-cand["key"], kind="stable")[: layout.keep]
            res = {"key": cand["key"][order], "ll": cand["ll"][order], "D": cand["D"][:, order]}
            if len(tops) > 1:
                merged = np.concatenate(tops)
                tops = [np.sort(merged)[-ktop:]]
        if progress is not None:
            progress(min(start + blocks_per_call, nblocks), nblocks)
    sums.prior, sums.blocks = prior, nblocks
    if lik is not None:
        sums.post = post
        sums.top = np.sort(np.concatenate(tops))[-ktop:] if tops else np.empty(0)
        sums.reservoir = res
    return sums
