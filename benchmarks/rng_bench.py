"""Throughput of standard-normal generators under jit on this machine (the engine's hot loop).

    python benchmarks/rng_bench.py                 # 2^22 and 2^24 elements, all variants
    python benchmarks/rng_bench.py --sizes 16 18 20 22 24 --only normals   # block-size sweep
    python benchmarks/rng_bench.py --json          # machine-readable

Every variant is timed interleaved with the others (rounds x repeats, best time kept), so a
noisy neighbour hurts all of them alike. Two figures per row:

* ``wall``: elements / best wall-clock second (what you get on this machine now);
* ``cpu``: elements per best process-CPU second x cores; with the machine to ourselves and
  perfect threading the two agree, so ``cpu`` estimates the quiet-machine rate when others are
  using the cores (it overstates it when XLA leaves a core idle).

Variants: JAX's own ``jax.random.normal``/``bits``; ``mcflops._rng.normals`` with each
generator; the generators' raw words; Philox with the 64-bit-multiply ``mulhilo`` (needs
``jax.enable_x64`` while tracing) instead of 16-bit halves; four word->normal transforms on
the same threefry words (Giles erfinv on the symmetric tail probability, used by ``_rng``;
``sqrt(2) erfinv(2u - 1)`` via ``lax.erf_inv``; ``jax.scipy.special.ndtri``; Box-Muller
``sqrt(-2 log u1) cos(2 pi u2)`` from both threefry words); and an engine-shaped kernel (three
independently keyed normals per draw, a log-space product, then sum and sum of squares).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mcflops import engine
from mcflops.engine import rng as _rng

U32, F32 = jnp.uint32, jnp.float32


def _idx(n):
    return jax.lax.iota(U32, n)


def _kw(key):
    return jax.random.bits(key, (4,), U32)


def _mulhilo_u64(a, m):
    p = a.astype(jnp.uint64) * jnp.uint64(m)
    return (p >> jnp.uint64(32)).astype(U32), p.astype(U32)


def _philox_u64_normals(key, n):
    with jax.enable_x64(True):
        k = _kw(key)
        w = _rng.philox4x32((_idx(n), jnp.zeros((), U32), k[2], k[3]), (k[0], k[1]), mulhilo=_mulhilo_u64)
        return _rng.normal_from_bits(w[0])


def _threefry_words(key, n):
    k = _kw(key)
    return _rng.threefry2x32((_idx(n), k[2]), (k[0], k[1]))


def _t_erfinv(key, n):
    u = _rng.uniform_from_bits(_threefry_words(key, n)[0])
    return F32(math.sqrt(2)) * jax.lax.erf_inv(F32(2) * u - F32(1))


def _t_ndtri(key, n):
    return jax.scipy.special.ndtri(_rng.uniform_from_bits(_threefry_words(key, n)[0]))


def _t_boxmuller(key, n):
    w0, w1 = _threefry_words(key, n)
    u1, u2 = _rng.uniform_from_bits(w0), _rng.uniform_from_bits(w1)
    return jnp.sqrt(F32(-2) * jnp.log(u1)) * jnp.cos(F32(2 * math.pi) * u2)


def _engine_like(key, n, generator="threefry"):
    """Three independently keyed inputs per draw, log-space product, moments reduced."""
    z = [_rng.normals(jax.random.fold_in(key, i), (n,), generator=generator) for i in range(3)]
    log_h = F32(17.2) + F32(0.035) * z[0] - F32(0.075) * z[1] - F32(0.04) * z[2]
    h = jnp.exp(log_h - F32(17.2))
    return jnp.stack([h.sum(), (h * h).sum()])


def variants():
    """name -> (fn(key, n), elements produced per n)."""
    return {
        "jax.random.normal (threefry)": (lambda k, n: jax.random.normal(k, (n,)), 1),
        "jax.random.bits u32": (lambda k, n: jax.random.bits(k, (n,), U32), 1),
        "_rng.normals threefry2x32-20": (lambda k, n: _rng.normals(k, (n,), generator="threefry"), 1),
        "_rng.normals philox4x32-10": (lambda k, n: _rng.normals(k, (n,), generator="philox"), 1),
        "philox4x32-10 u64-mulhi normals": (_philox_u64_normals, 1),
        "_rng.bits threefry2x32-20": (lambda k, n: _rng.bits(k, (n,), "threefry"), 1),
        "_rng.bits philox4x32-10": (lambda k, n: _rng.bits(k, (n,), "philox"), 1),
        "_rng.uniforms threefry": (lambda k, n: _rng.uniforms(k, (n,)), 1),
        "transform sqrt2*erfinv(2u-1)": (_t_erfinv, 1),
        "transform ndtri(u)": (_t_ndtri, 1),
        "transform Box-Muller (cos only)": (_t_boxmuller, 1),
        "engine-like 3 normals/draw (draws)": (_engine_like, 1),
    }


def measure(fns: dict, n: int, rounds: int = 5, repeats: int = 2) -> dict:
    key = jax.random.key(0)
    jitted = {name: jax.jit(fn, static_argnums=1) for name, (fn, _) in fns.items()}
    best = {name: [math.inf, math.inf] for name in fns}
    for f in jitted.values():
        jax.block_until_ready(f(key, n))
    for _ in range(rounds):
        for name, f in jitted.items():
            for _ in range(repeats):
                t, c = time.perf_counter(), time.process_time()
                jax.block_until_ready(f(key, n))
                best[name][0] = min(best[name][0], time.perf_counter() - t)
                best[name][1] = min(best[name][1], time.process_time() - c)
    cores = len(os.sched_getaffinity(0))
    return {
        name: {"wall_per_s": n * fns[name][1] / w, "cpu_per_s": cores * n * fns[name][1] / max(c, 1e-9)}
        for name, (w, c) in best.items()
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[22, 24], help="log2 of elements per call")
    ap.add_argument("--only", default="", help="substring filter on variant names")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    engine.setup()  # the engine's devices (one CPU device per core), before the first JAX computation
    fns = {k: v for k, v in variants().items() if args.only in k}
    out = {"jax": jax.__version__, "device": str(jax.devices()[0]), "cores": len(os.sched_getaffinity(0))}
    out["results"] = {}
    for logn in args.sizes:
        res = measure(fns, 2**logn, rounds=args.rounds)
        out["results"][f"2^{logn}"] = res
        if not args.json:
            print(f"n = 2^{logn}   (M elements/s: wall | cpu-normalised)")
            for name, r in res.items():
                print(f"  {name:38s} {r['wall_per_s'] / 1e6:8.1f} | {r['cpu_per_s'] / 1e6:8.1f}", flush=True)
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
