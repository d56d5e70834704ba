"""The planning pass draws and bins only the sub-blocks that hold draws: its histograms and sums are the
same numbers, bit for bit, as reducing the whole block's draws (the reference below: every draw of the block
made at once, the padding's weights zero), for the prior, the posterior and compare's paired rows."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcflops import engine
from mcflops.analysis import compare as compare_mod
from mcflops.analysis import histpass
from mcflops.analysis import plan as plan_mod
from mcflops.model.compute import build_model
from mcflops.spec import load_spec

PRIORS = Path(__file__).resolve().parents[2] / "priors"


@jax.jit(static_argnames=("rows", "static", "size", "nbins"))
def _whole_block(key, params, lik, bins, block, n_valid, *, rows, static, size, nbins):
    """The pass as it was: the whole block's rows at once, invalid draws weighted 0."""
    lo, inv, thr = bins
    X, ll = rows(key, params, lik, block, None, size, *static)
    q = X.shape[0]
    valid = jnp.arange(size) < n_valid
    if ll is None:
        w, m = valid.astype(jnp.float32), jnp.float32(0.0)
    else:
        ll = jnp.where(valid, ll, -jnp.inf)
        m = jnp.max(ll)
        w = jnp.exp(ll - jnp.where(jnp.isfinite(m), m, 0.0))
    idx = jnp.clip(jnp.floor((X - lo[:, None]) * inv[:, None]) + 1, 0, nbins + 1).astype(jnp.int32)
    flat = (idx + (jnp.arange(q, dtype=jnp.int32) * (nbins + 2))[:, None]).reshape(-1)
    W = jnp.broadcast_to(w[None, :], X.shape)
    hist = jnp.zeros(q * (nbins + 2), jnp.float32).at[flat].add(W.reshape(-1)).reshape(q, nbins + 2)
    return {"hist": hist, "m": m, "s0": jnp.sum(w), "s0w2": jnp.sum(w * w),
            "min": jnp.min(jnp.where(valid[None, :], X, jnp.inf), axis=1),
            "max": jnp.max(jnp.where(valid[None, :], X, -jnp.inf), axis=1),
            "above": jnp.sum(jnp.where(X > thr[:, None], W, 0.0), axis=1),
            "below": jnp.sum(jnp.where(X < thr[:, None], W, 0.0), axis=1)}


def _same(rows, params, lik, static, q, n_valid, block=1):
    key = jax.random.key(7)
    rng = np.random.default_rng(0)
    lo = jnp.asarray(rng.uniform(-3.0, -2.0, q), jnp.float32)
    inv = jnp.asarray(rng.uniform(400.0, 800.0, q), jnp.float32)
    thr = jnp.asarray(rng.uniform(-0.2, 0.2, q), jnp.float32)
    bins = (lo, inv, thr)
    kw = dict(rows=rows, static=static, size=engine.BLOCK, nbins=engine.NBINS)
    new = histpass._hist_call(key, params, lik, bins, jnp.asarray([block], jnp.uint32),
                              jnp.asarray([n_valid], jnp.int32), sub=engine.SUB, **kw)
    ref = _whole_block(key, params, lik, bins, jnp.uint32(block), jnp.int32(n_valid), **kw)
    assert float(ref["s0"]) > 0
    for k, v in ref.items():
        a, b = np.asarray(new[k][0]), np.asarray(v)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), k


@pytest.mark.parametrize("n_valid", [20_000, engine.BLOCK - 5])
def test_plan_rows_prior_bit_equal(n_valid):
    spec = load_spec(PRIORS / "llama405b.yaml")
    _same(plan_mod._plan_rows, build_model(spec), None, ("price" in spec.priors,), 3, n_valid)


def test_plan_rows_posterior_bit_equal():
    spec = load_spec(PRIORS / "llama3.1-70b.yaml")
    model = build_model(spec)
    lik = engine.build_likelihood(spec, model)
    assert lik is not None
    with_price = "price" in spec.priors
    _same(plan_mod._plan_rows, model, lik, (with_price,), 3 if with_price else 2, 37_123)


def test_compare_rows_posterior_bit_equal():
    a, b = load_spec(PRIORS / "llama405b.yaml"), load_spec(PRIORS / "llama405b-mfu.yaml")
    rows = compare_mod.coupling(a, b)
    params, plan = compare_mod._params(a, b, rows)
    lik = (engine.build_likelihood(a, params[0]), engine.build_likelihood(b, params[1]))
    _same(compare_mod._compare_rows, params, lik, ("gpu_hours", plan), 3, 50_001, block=0)


def test_reduce_adds_the_blocks_whatever_the_call_size():
    """Over blocks of 2^15 draws (the last one short), reduce's sums are the float64 sums, in block order, of the
    whole-block reference of each block, for one block per call or several (engine.each_block)."""
    spec = load_spec(PRIORS / "llama405b.yaml")
    model, static, size = build_model(spec), ("price" in spec.priors,), 1 << 15
    n = 3 * size + 777
    key = jax.random.key(11)
    got = [histpass.reduce(key, plan_mod._plan_rows, model, None, n, static=static, size=size, blocks_per_call=k)
           for k in (1, 2)]
    bins = tuple(jnp.asarray(x, jnp.float32) for x in (got[0]["lo"], 1.0 / got[0]["width"], np.zeros(len(got[0]["lo"]))))
    ref = None
    for b in range(4):
        out = _whole_block(key, model, None, bins, jnp.uint32(b), jnp.int32(min(size, n - b * size)),
                           rows=plan_mod._plan_rows, static=static, size=size, nbins=engine.NBINS)
        blk = {k: np.asarray(out[k], np.float64) for k in ("hist", "s0", "below")}
        ref = blk if ref is None else {k: ref[k] + blk[k] for k in ref}
    assert ref["s0"] == n  # every draw once, the padding of the last block weighted 0
    for h in got:
        for k in ref:
            assert np.asarray(h[k]).tobytes() == ref[k].tobytes(), k


def test_each_block_gives_every_block_once_in_order():
    """engine.each_block: blocks 0 .. ceil(n / size) - 1 in order, each with its draws (the last one the rest),
    calls of blocks_per_call blocks and then one at a time, progress after each call."""
    calls, seen = [], []

    def call(blocks, n_valid):
        calls.append(len(blocks))
        return {"b": np.asarray(blocks), "nv": np.asarray(n_valid)}

    n, size = 10 * 7 + 3, 7
    got = [(b, int(out["b"]), int(out["nv"])) for b, out in
           engine.each_block(call, n, size, 4, lambda done, total: seen.append((done, total)))]
    assert got == [(b, b, 7) for b in range(10)] + [(10, 10, 3)]
    assert calls == [4, 4, 1, 1, 1]
    assert seen == [(4, 11), (8, 11), (9, 11), (10, 11), (11, 11)]


def test_readers_against_scipy():
    """The engine's histogram readers on a histogram of exact standard-normal bin probabilities (scipy): the
    CDF is linear within a bin, so it is off by at most max|F''| w^2 / 8 = phi(1) w^2 / 8, and a quantile by that
    over the density there (to first order; x1.01 for the second); outside the bins, the clamps and the under- and
    overflow shares."""
    from scipy import stats

    nb, lo, w = engine.NBINS, -4.0, 8.0 / engine.NBINS
    edges = lo + w * np.arange(nb + 1)
    cdf = stats.norm.cdf(edges)
    hist = np.concatenate([[cdf[0]], np.diff(cdf), [stats.norm.sf(edges[-1])]])
    err = stats.norm.pdf(1.0) * w * w / 8
    p = np.array([1e-3, 0.05, 0.25, 0.5, 0.9, 0.999])
    q = engine.hist_quantiles_within(hist, lo, w, p, -6.0, 6.0)
    exact = stats.norm.ppf(p)
    assert np.all(np.abs(q - exact) <= 1.01 * err / stats.norm.pdf(exact)), q - exact
    x = np.linspace(-3.9, 3.9, 101)
    assert np.max(np.abs(engine.hist_cdf_at(hist, lo, w, x) - stats.norm.cdf(x))) <= 1.01 * err
    assert engine.hist_cdf_at(hist, lo, w, -5.0) == pytest.approx(stats.norm.cdf(-4.0), rel=1e-12)
    assert engine.hist_cdf_at(hist, lo, w, 5.0) == pytest.approx(stats.norm.cdf(4.0), rel=1e-12)
    # in the underflow / overflow bins: the least / largest draw, not a guess
    assert engine.hist_quantiles_within(hist, lo, w, [1e-6, 1 - 1e-6], -5.5, 5.25).tolist() == [-5.5, 5.25]
    assert engine.hist_quantiles_within(hist, lo, w, [0.1, 0.9], 2.0, 2.0).tolist() == [2.0, 2.0]


def test_plan_rows_are_the_engine_draws():
    """The planning pass draws what engine.run draws: its GPU-hours row on block 0 is the engine's kept first
    draws (sums.first) but for the evaluation's float32 rounding, which XLA's fusion sets per program (measured:
    at most 3 ulps); another stream or block would differ by the draws' own spread."""
    spec = load_spec(PRIORS / "examples/dense70b-h100.yaml")
    model = build_model(spec)
    key = jax.random.key(3)
    sums = engine.run(key, model, None, 20_000)
    first = sums.first[sums.names.index("gpu_hours")]
    rows, _ = plan_mod._plan_rows(key, model, None, jnp.uint32(0), 0, first.size, False)
    ulp = float(np.spacing(np.float32(np.max(np.abs(first)))))
    assert np.max(np.abs(np.asarray(rows[0], np.float64) - first)) <= 8 * ulp
    assert np.std(first) > 1e4 * ulp  # the bound is far below the draws' spread
