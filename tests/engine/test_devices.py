"""The engine's scheduling does not change its numbers, and its reductions match brute force.

- Bit for bit: 1 or 8 (forced host) devices, 1 or 32 blocks per call: every sum is identical, the extra
  rows an analysis asks for (engine.extras) too.
- Quantiles from the histograms against ``np.quantile`` of the very same draws (2^20 of them):
  within 0.2% relative.
- The largest log-likelihoods (PSIS tail) and the Gumbel-top-k reservoir against a brute-force
  sort of every draw, also when the per-sub-block top-k is forced too small (the engine must notice
  and widen it).
- Inputs' prior histograms are exact bin probabilities: against scipy's CDF.
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcflops
from mcflops.engine import rng as _rng
from mcflops import engine
from mcflops import model as model_mod
from mcflops.engine import driver, exact
from tests.oracles import scipy_dist
from tests.simd import with_host_devices

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SPEC = {"name": "devices", "seed": 3, "hardware": {"accelerator": "h100-sxm", "count": 1024},
        "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.3, 0.5]},
                   "goodput": {"pert": [0.8, 0.9, 0.98]}, "price": {"lognormal": [2, 4]}},
        "observe": {"gpu_hours": {"value": 4e5, "sigma": 0.1}}}

_CHILD = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    import mcflops
    from mcflops import engine
    from mcflops import model as model_mod
    from mcflops.engine import driver, tree
    tree.MIN_GROUPS = 2  # groups of 16 blocks already for this small run (a 1e10-draw run's grouping)
    spec = mcflops.load_spec(json.loads(sys.argv[1]))
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    out = {"devices": jax.device_count()}
    driver.POOL = int(sys.argv[3])  # the PSIS tail and reservoir pool ends inside the run
    from mcflops.analysis import plan as plan_mod  # extra rows beside the run's own: a plan's, weighted
    extra = plan_mod.request(spec, key=jax.random.key(11), posterior=True)
    for bpc in (1, 32):
        s = engine.run(jax.random.key(11), m, lik, int(sys.argv[2]), size=1 << 12, sub=1 << 10, blocks_per_call=bpc,
                       extra=extra)
        flat = {"lo": s.lo, "width": s.width, "first": s.first, "top": s.top, "below": s.below,
                "inside": s.inside, "log_max": np.float64(s.log_max)}
        flat.update({"prior." + k: v for k, v in s.prior.items()})
        flat.update({"post." + k: v for k, v in s.post.items()})
        flat.update({"res." + k: v for k, v in s.reservoir.items()})
        flat.update({"rows." + k: v for k, v in s.rows.items()})
        out[bpc] = {k: np.asarray(v, np.float64).tobytes().hex() for k, v in flat.items()}
    print(json.dumps(out))
""")


def _child(devices: int, n: int, pool: int, cache_env: dict) -> dict:
    env = {**with_host_devices(devices), **cache_env, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(SPEC), str(n), str(pool)], capture_output=True,
                         check=False,
                         text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_same_sums_for_any_device_count_and_blocks_per_call(jax_cache_env):
    # 38 blocks of 4 sub-blocks, the last one partial: three groups of blocks (16, 16, 6) that the devices
    # add before the host does, spread unevenly over 8 devices; 1 block per call is rounded up to a group
    n = 37 * (1 << 12) + 999
    pool = 3 * (1 << 14)  # the first 2 of the 4 sub-blocks of every block keep the PSIS tail and the reservoir
    one, eight = _child(1, n, pool, jax_cache_env), _child(8, n, pool, jax_cache_env)
    assert one["devices"] == 1 and eight["devices"] == 8
    ref = one["1"]
    for got in (one["32"], eight["1"], eight["32"]):
        assert got.keys() == ref.keys()
        for k in ref:
            assert got[k] == ref[k], k


def _draws(spec, key, n):
    """Every draw of a one-block run, recomputed outside the engine (same keys, eager evaluation)."""
    m = model_mod.build_model(spec)
    v = model_mod.evaluate(m, engine.draw_z(key, m, np.uint32(0), n))
    return m, {k: np.broadcast_to(np.asarray(x, np.float64), (n,)) for k, x in v.items()}


def test_histogram_quantiles_match_exact_quantiles_of_the_same_draws(key):
    n = 1 << 20
    spec = mcflops.load_spec({**SPEC, "observe": {}})
    m, d = _draws(spec, key, n)
    sums = engine.run(key, m, None, n)
    from mcflops.engine import summary

    got = summary.summarize(sums, m.centers)
    gh = m.names.index("gpu_hours")  # an output's range bounds every draw: nothing under or over it
    assert sums.prior["hist"][gh][0] == 0 and sums.prior["hist"][gh][-1] == 0
    for name in m.names:
        x = np.exp(m.centers[name] + d[name])
        want = np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95])
        for k, w in zip(("p5", "p25", "p50", "p75", "p95"), want):
            assert abs(got[name][k] / w - 1) < 2e-3, (name, k, got[name][k], w)


def _gumbel(key, n):
    k = jax.random.fold_in(jax.random.fold_in(key, engine.GUMBEL), 0)
    u = _rng.uniform_from_bits(_rng.bits(k, (n,)))
    return np.asarray(-jnp.log(-jnp.log(u)), np.float64)


@pytest.mark.parametrize("force_small", [False, True])
def test_top_and_reservoir_are_the_exact_largest(key, monkeypatch, force_small):
    n = 3 * (1 << 12) + 77  # one block (size 2^14) of four sub-blocks of 2^12, the last partial
    spec = mcflops.load_spec(SPEC)
    m, d = _draws(spec, key, 1 << 14)
    lik = engine.build_likelihood(spec, m)
    if force_small:  # per-sub-block top-k far too small: the engine must detect it and widen
        monkeypatch.setattr(driver, "_per_sub", lambda expected, sub: 8)
    sums = engine.run(key, m, lik, n, size=1 << 14, sub=1 << 12)
    ll = np.asarray(engine.log_likelihood(lik, {k: jnp.asarray(v, jnp.float32) for k, v in d.items()}),
                    np.float64)[:n]
    want_top = np.sort(ll)[-(engine.psis_tail(n) + 1):]
    np.testing.assert_allclose(sums.top, want_top, rtol=1e-5, atol=1e-5)
    keys = ll + _gumbel(key, 1 << 14)[:n]
    order = np.argsort(-keys)[: engine.KEEP]
    np.testing.assert_allclose(sums.reservoir["key"], keys[order], rtol=1e-5, atol=1e-4)
    gh = m.names.index("gpu_hours")
    np.testing.assert_allclose(sums.reservoir["D"][gh], d["gpu_hours"][:n][order], rtol=1e-5, atol=1e-6)
    if force_small:
        assert sums.extra["widened"] != 1  # 8, 64 or 0 (every sub-block keeps all its draws)


def test_input_histograms_are_exact_bin_probabilities():
    spec = mcflops.load_spec(SPEC)
    m = model_mod.build_model(spec)
    for name in ("tokens", "mfu", "goodput"):
        s, c = m.sampler(name), m.centers[name]
        lo, width, nb = -0.4, 0.8 / 512, 512
        p = exact.bin_probabilities(s, lo, width, nb)
        edges = np.exp(c + lo + width * np.arange(nb + 1))
        cdf = scipy_dist(spec.priors[name]).cdf(edges)
        want = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
        # the table interpolates log F^-1(Phi(z)) linearly (error ~1e-6 in probability per bin edge)
        assert math.isclose(p.sum(), 1.0, rel_tol=1e-12)
        np.testing.assert_allclose(p, want, atol=2e-6)


def test_input_exp_moments_are_exact():
    """E[x] and E[x^2] of inputs (used for the prior's mean and sd) against scipy; a mixture with a
    point mass (a near-vertical table cell) must not overflow."""
    spec = mcflops.load_spec({**SPEC, "priors": {**SPEC["priors"],
                                                 "params": {"mixture": [{"lognormal": [1e9, 2e9]}, 3e9]}}})
    m = model_mod.build_model(spec)
    for name, rel in (("tokens", 1e-6), ("mfu", 1e-6), ("goodput", 1e-6), ("price", 1e-6), ("params", 1e-3)):
        e = exact.exp_moments(m.sampler(name)) * np.exp(np.array([1.0, 2.0]) * m.centers[name])
        d = scipy_dist(spec.priors[name])
        # the table interpolates log F^-1(Phi(z)) linearly; a point mass becomes a steep cell (1e-4 here)
        assert e[0] == pytest.approx(d.mean(), rel=rel), name
        assert e[1] == pytest.approx(d.std() ** 2 + d.mean() ** 2, rel=2 * rel), name


def _same_sums(a, b, parts=("prior", "post")):
    """Every prior and posterior sum of two runs over the same draws agrees to float32 summation order."""
    for which in parts:
        # another compiled program (and past the pool half-size sub-blocks): the same sums, added in another
        # order in float32. Sums of signed terms (s1d, cross) are compared on their terms' scale: Cauchy-Schwarz
        # bounds sum |d| by sqrt(s0 * sum d^2); float32 rounding of such a sum is ~1e-7 of that scale (measured
        # 1e-8 here; 3e-7 relative for sums of positive terms), so 1e-6 of it (and 2e-6 relative for sums of
        # positive terms) cannot hide a lost block (one block is 1/4 of every sum).
        x, y = getattr(a, which), getattr(b, which)
        scale = np.sqrt(float(y["s0"]) * np.asarray(y["s2d"], np.float64))
        for k, v in y.items():
            atol = {"s1d": 1e-6 * scale, "cross": 1e-6 * np.outer(scale, scale) / np.sqrt(float(y["s0"]))}.get(k, 1e-9)
            diff, v = np.abs(np.asarray(x[k], np.float64) - v), np.asarray(v, np.float64)
            assert np.all(diff <= atol + 2e-6 * np.abs(v)), (which, k, float(np.max(diff - 2e-6 * np.abs(v))))


def test_pool_feeds_the_tail_and_reservoir_and_leaves_the_sums_alone(key, monkeypatch):
    """Past their pool sub-blocks (engine.pool_subblocks) blocks skip the PSIS tail and the reservoir: those
    are the exact largest over the pool's draws (a prefix of every block), and every sum equals a run whose
    pool is every draw."""
    size, sub, n = 1 << 14, 1 << 12, 4 * (1 << 14) - 321
    spec = mcflops.load_spec(SPEC)
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    monkeypatch.setattr(driver, "POOL_ESS", 0)
    full = engine.run(key, m, lik, n, size=size, sub=sub)
    monkeypatch.setattr(driver, "POOL", 5 * sub)  # two of the four sub-blocks of each of the four blocks
    part = engine.run(key, m, lik, n, size=size, sub=sub)
    psub, pool = engine.pool_subblocks(n, size, sub)
    assert (psub, pool) == (2, 4 * 2 * sub) and full.pool == n and part.pool == pool
    # a GPU's layout on this CPU: the rest of each block (past its pool sub-blocks) in one sub-block
    whole = engine.run(key, m, lik, n, size=size, sub=sub, rsub=size - psub * sub)
    for got in (part, whole):
        _same_sums(got, full)
    np.testing.assert_array_equal(whole.top, part.top)  # the pool's sub-blocks are the same program either way
    np.testing.assert_array_equal(whole.reservoir["key"], part.reservoir["key"])
    _exact_pool(part, key, m, lik, 4, psub * sub)
    # a pool with too few effective draws for the reservoir is widened to every draw
    monkeypatch.setattr(driver, "POOL_ESS", 10 * n)
    assert engine.run(key, m, lik, n, size=size, sub=sub).pool == n


def _pool_ll(key, m, lik, nblocks: int, per_block: int):
    """The log-likelihoods and Gumbel keys of the first ``per_block`` draws of each block, recomputed block
    by block outside the engine, and the pool's Kish effective sample size."""
    ll, keys = [], []
    for b in range(nblocks):
        z = engine.draw_z(key, m, np.uint32(b), per_block)
        v = {k: jnp.asarray(x, jnp.float32) for k, x in model_mod.evaluate(m, z).items()}
        ll.append(np.asarray(engine.log_likelihood(lik, v), np.float64))
        g = jax.random.fold_in(jax.random.fold_in(key, engine.GUMBEL), b)
        u = _rng.uniform_from_bits(_rng.bits(g, (per_block,)))
        keys.append(ll[-1] + np.asarray(-jnp.log(-jnp.log(u)), np.float64))
    ll, keys = np.concatenate(ll), np.concatenate(keys)
    w = np.exp(ll - ll.max())
    return ll, keys, w.sum() ** 2 / (w * w).sum()


def _exact_pool(sums, key, m, lik, nblocks: int, per_block: int):
    """The run's PSIS tail and reservoir are the exact largest over its pool's draws."""
    ll, keys, _ = _pool_ll(key, m, lik, nblocks, per_block)
    assert ll.size == sums.pool
    np.testing.assert_allclose(sums.top, np.sort(ll)[-(engine.psis_tail(sums.pool) + 1):], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sums.reservoir["key"], np.sort(keys)[::-1][: engine.KEEP], rtol=1e-5, atol=1e-4)


def test_a_pool_with_too_few_effective_draws_grows(key, monkeypatch):
    """A pool whose effective sample size is under POOL_ESS grows by a selection-only pass over more of each
    block's sub-blocks: its tail and reservoir are then the exact largest over the grown pool, and the sums
    are those of the first pass, bit for bit."""
    size, sub, n = 1 << 14, 1 << 11, 4 * (1 << 14) - 321  # 8 sub-blocks per block
    spec = mcflops.load_spec(SPEC)
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    monkeypatch.setattr(driver, "POOL", 4 * sub)  # one pool sub-block per block
    monkeypatch.setattr(driver, "POOL_ESS", 0)
    first = engine.run(key, m, lik, n, size=size, sub=sub)
    assert first.pool == 4 * sub
    ess1 = _pool_ll(key, m, lik, 4, sub)[2]
    ess3 = _pool_ll(key, m, lik, 4, 3 * sub)[2]
    # asks for 2.2 sub-blocks' worth: grown to ceil(1.25 x 2.2) = 3 sub-blocks per block, enough unless the
    # ESS grows far slower than the draws (checked: it is at least 2.2 x that of one sub-block here)
    assert ess3 >= 2.2 * ess1
    monkeypatch.setattr(driver, "POOL_ESS", 2.2 * ess1)
    grown = engine.run(key, m, lik, n, size=size, sub=sub)
    assert grown.pool == 4 * 3 * sub
    _exact_pool(grown, key, m, lik, 4, 3 * sub)
    for part in ("prior", "post"):
        for k, v in getattr(first, part).items():
            np.testing.assert_array_equal(getattr(grown, part)[k], v)


def test_vmapped_blocks_give_the_same_sums(key, monkeypatch):
    """A GPU's layout, run on this CPU: blocks vmapped side by side (engine._batch), each with its pool
    sub-blocks and then the rest of the block at once, on 2.5 blocks (a partial one, an empty slot in
    the last batch): the same sums, tail and reservoir as one block at a time."""
    size, sub, n = 1 << 14, 1 << 12, 2 * (1 << 14) + 5000
    spec = mcflops.load_spec(SPEC)
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    monkeypatch.setattr(driver, "POOL", 3 * sub)  # one pool sub-block per block
    monkeypatch.setattr(driver, "POOL_ESS", 0)
    rsub = size - sub
    one = engine.run(key, m, lik, n, size=size, sub=sub, rsub=rsub)
    prior_one = engine.run(key, m, None, n, size=size, sub=size)  # a GPU's prior pass: whole blocks
    monkeypatch.setattr(driver, "_batch", lambda: 2)
    two = engine.run(key, m, lik, n, size=size, sub=sub, rsub=rsub)
    prior_two = engine.run(key, m, None, n, size=size, sub=size)
    assert one.pool == two.pool == 3 * sub
    _same_sums(two, one)
    _same_sums(prior_two, prior_one, parts=("prior",))
    # the same float32 arithmetic, vmapped: at most a few ulps apart (float32 eps 1.2e-7; 1e-6 is ~8 ulps), while a
    # wrong draw or a lost sub-block moves these values by far more than that
    for a, b in ((two.top, one.top), (two.reservoir["key"], one.reservoir["key"]), (two.first, one.first)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
