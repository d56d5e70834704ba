"""The extra rows an analysis asks the engine for (engine.extras): reduced beside a run's own sums or alone,
they are the same numbers; the prior's are the exact counts of the very same draws (NumPy on every draw of
each block, made at once outside the engine), the posterior's the importance-weighted histograms to float32
rounding; and the run's own sums do not move when extra rows ride along."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcflops import engine
from mcflops.analysis import plan as plan_mod
from mcflops.model.compute import build_model
from mcflops.spec import load_spec

PRIORS = Path(__file__).resolve().parents[2] / "priors"
SIZE, SUB = 1 << 15, 1 << 12  # small blocks: 4 of them, the last one short
N = 3 * SIZE + 777
KW = dict(size=SIZE, sub=SUB)


@jax.jit(static_argnames=("fn", "static", "size"))
def _whole_block(key, params, lik, block, *, fn, static, size):
    """Every draw of a block at once: the rows and their log-likelihood (outside the engine's program)."""
    return fn(key, params, lik, block, None, size, *static)


def _oracle(x: engine.Extra, key, n: int):
    """Float64 NumPy sums over every block of the rows recomputed whole-block: bins as engine.hist_index
    computes them (float32 arithmetic), weights exp(ll - max ll) over all draws (None: the prior's 1s)."""
    lo32, inv32, thr = (np.asarray(v, np.float32) for v in (x.lo, 1.0 / x.width, x.thr))
    X, L = [], []
    for b in range(-(-n // SIZE)):
        rows, ll = _whole_block(key, x.params, x.lik, jnp.uint32(b), fn=x.fn, static=x.static, size=SIZE)
        k = min(SIZE, n - b * SIZE)
        X.append(np.asarray(rows)[:, :k])
        L.append(np.asarray(ll, np.float64)[:k] if ll is not None else np.zeros(k))
    X, L = np.concatenate(X, axis=1), np.concatenate(L)
    w = np.exp(L - L.max())
    idx = np.clip(np.floor((X - lo32[:, None]) * inv32[:, None]) + np.float32(1), 0, engine.NBINS + 1).astype(int)
    hist = np.stack([np.bincount(i, weights=w, minlength=engine.NBINS + 2) for i in idx])
    return {"hist": hist, "s0": w.sum(), "s0w2": (w * w).sum(), "above": ((X > thr[:, None]) * w).sum(axis=1),
            "below": ((X < thr[:, None]) * w).sum(axis=1), "min": X.min(axis=1), "max": X.max(axis=1),
            "log_max": L.max() if x.weighted else 0.0}


# XLA on a CPU compiles a block's reductions the same way whatever else the program holds, so the run's sums are
# the same bits with rows riding along or not; on a GPU, fusion picks a reduction order per program and weighted
# histograms are added with atomics (in no fixed order), so there the claim is float32 rounding: a sum of at most
# SIZE terms is within SIZE * 2^-24 of its total (Higham 2002, Eq. 4.4), measured against the sum of |terms|.
BITS = jax.devices()[0].platform == "cpu"


def _same(a, b, scale=None) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if BITS:
        return a.tobytes() == b.tobytes()
    scale = np.abs(np.asarray(b, np.float64)).max() if scale is None else scale
    return bool(np.max(np.abs(a.astype(np.float64) - b), initial=0.0) <= SIZE * 2.0 ** -24 * scale)


@pytest.fixture(scope="module")
def prior():
    spec = load_spec(PRIORS / "llama405b.yaml")
    key = jax.random.key(11)
    return spec, key, plan_mod.request(spec, key=key)


def test_prior_rows_are_the_exact_counts_of_the_same_draws(prior):
    """Unit weights: every count is a whole number, exact in float32 and in the device's and host's sums, so the
    engine's rows equal NumPy's counts of the same draws exactly, for one block per call or several."""
    spec, key, x = prior
    want = _oracle(x, key, N)
    assert want["s0"] == N
    for bpc in (1, 2):
        got = engine.run_rows(key, x, N, blocks_per_call=bpc, **KW)
        assert got["log_max"] == 0.0  # unit weights: relative to e^0
        for k in want:
            assert np.array_equal(np.asarray(got[k], np.float64), want[k]), (bpc, k)


def test_rows_beside_a_run_are_the_rows_alone_and_leave_its_sums_alone(prior):
    """The same rows reduced in the run's program as without it (bit for bit), and the run's own sums the same
    bits with and without the rows riding along (on a GPU, to float32 rounding: ``_same``)."""
    spec, key, x = prior
    m = build_model(spec)
    plain = engine.run(key, m, None, N, **KW)
    both = engine.run(key, m, None, N, extra=x, **KW)
    alone = engine.run_rows(key, x, N, **KW)
    for k in alone:
        assert _same(both.rows[k], alone[k]), k
    for k, v in plain.prior.items():
        assert _same(both.prior[k], v), k
    assert both.first.tobytes() == plain.first.tobytes() and plain.rows is None


def test_weighted_rows_against_numpy_and_beside_a_posterior_run():
    """Weighted by the observations: the engine's histograms, sums and shares against NumPy's float64 ones of the
    same draws, to float32 rounding (a sum of at most SIZE terms in float32 is within SIZE * 2^-24 of its total:
    Higham 2002, Eq. 4.4; weights under e^-40 of the largest are dropped, 4e-8 of it at most per draw); and
    beside a run with the same observations, the same bits as alone (the same sub-blocks, the same order; on a GPU,
    to float32 rounding: ``_same``)."""
    spec = load_spec(PRIORS / "llama3.1-70b.yaml")
    key = jax.random.key(5)
    m = build_model(spec)
    x = plan_mod.request(spec, key=key, posterior=True)
    assert x.weighted
    got = engine.run_rows(key, x, N, **KW)
    want = _oracle(x, key, N)
    assert got["log_max"] == want["log_max"]  # both relative to the largest log-likelihood (float32's, exactly)
    tol = (SIZE * 2.0 ** -24 + N * np.exp(-40.0)) * want["s0"]
    for k in ("hist", "s0", "above", "below"):
        assert np.max(np.abs(np.asarray(got[k]) - want[k])) <= tol, k
    assert abs(float(got["s0w2"]) - want["s0w2"]) <= tol
    assert np.array_equal(got["min"], want["min"]) and np.array_equal(got["max"], want["max"])
    both = engine.run(key, m, engine.build_likelihood(spec, m), N, extra=x, **KW)
    for k in got:
        assert _same(both.rows[k], got[k], want["s0"] if k in ("hist", "above", "below", "s0w2") else None), k


def test_pilot_bins_span_twice_the_pilot_range(prior):
    """The bins: twice the range of the pilot's 2^16 draws (the PLAN_PILOT stream), centred on it, in NBINS."""
    spec, key, x = prior
    X, _ = _whole_block(jax.random.fold_in(key, engine.PLAN_PILOT), x.params, None, jnp.uint32(0), fn=x.fn,
                        static=x.static, size=1 << 16)
    X = np.asarray(X, np.float64)
    span = X.max(axis=1) - X.min(axis=1)
    assert np.array_equal(x.lo, X.min(axis=1) - 0.5 * span)
    assert np.allclose(x.width * engine.NBINS, 2.0 * span, rtol=1e-15, atol=0)


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
    h = {"hist": hist[None], "lo": [lo], "width": [w], "min": [-6.0], "max": [6.0]}
    q = engine.row_quantiles(h, 0, p)
    exact = stats.norm.ppf(p)
    assert np.all(np.abs(q - exact) <= 1.01 * err / stats.norm.pdf(exact)), q - exact
    x = np.linspace(-3.9, 3.9, 101)
    assert np.max(np.abs(engine.row_cdf(h, 0, x) - stats.norm.cdf(x))) <= 1.01 * err
    assert engine.row_cdf(h, 0, -5.0) == pytest.approx(stats.norm.cdf(-4.0), rel=1e-12)
    assert engine.row_cdf(h, 0, 5.0) == pytest.approx(stats.norm.cdf(4.0), rel=1e-12)
    # in the underflow / overflow bins: the least / largest draw, not a guess
    assert engine.hist_quantiles_within(hist, lo, w, [1e-6, 1 - 1e-6], -5.5, 5.25).tolist() == [-5.5, 5.25]
    assert engine.hist_quantiles_within(hist, lo, w, [0.1, 0.9], 2.0, 2.0).tolist() == [2.0, 2.0]


def test_plan_rows_are_the_engine_draws():
    """The planning rows draw what engine.run draws: the GPU-hours row on block 0 is the engine's kept first
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
