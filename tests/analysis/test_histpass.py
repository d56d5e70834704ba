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
