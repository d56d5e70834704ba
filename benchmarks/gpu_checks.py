"""The checks of ``bench.py --gpu`` beyond speed: the posterior pass against the prior pass at large n with
the host's share of the time, peak device memory, the engine's determinism on the device, and its sums
against the CPU backend's.

Each returns plain data for bench.py's JSON and prints one line. Nothing here imports ArviZ or
matplotlib (a GPU image may lack them). ``sizes(dry)``: the sample counts of a real run, or of a dry
run (tiny, on whatever device there is: tests/test_bench_gpu.py runs it so that the script cannot rot
between GPU sessions).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SUMMARY_KEYS = ("mean", "sd", "p5", "p25", "p50", "p75", "p95")


def sizes(dry: bool) -> dict:
    """Sample counts (dry: small enough for a CPU in seconds)."""
    if dry:
        return {"prior": [1 << 20], "posterior": [1 << 20], "sobol_base": 1 << 10, "determinism": 1 << 20,
                "cpu_vs_device": 1 << 20}  # one n: the posterior's programs compile once
    return {"prior": [10**8, 10**9, 10**10], "posterior": [10**8, 10**9, 10**10], "sobol_base": 1 << 20,
            "determinism": 1 << 26, "cpu_vs_device": 1 << 24}


def _model(posterior: bool):
    import bench
    from mcflops import engine
    from mcflops import model as model_mod

    spec = bench._spec(True)
    m = model_mod.build_model(spec)
    return m, engine.build_likelihood(spec, m) if posterior else None


def posterior_vs_prior(ns: list[int]) -> dict:
    """engine.run's prior pass and importance-sampling posterior pass at each n (same draws): seconds, draws/s,
    their ratio (target <= 2), and the share of the posterior pass spent in the host's merge (timed around
    every ``_Merge.add_call`` while the device works on the next call)."""
    import jax

    from mcflops import engine
    from mcflops.engine import merge

    host = [0.0]
    add = merge._Merge.add_call

    def timed(self, *a, **k):
        t = time.perf_counter()
        try:
            return add(self, *a, **k)
        finally:
            host[0] += time.perf_counter() - t

    merge._Merge.add_call = timed
    out = {}
    try:
        for n in ns:
            row = {}
            for posterior in (False, True):
                m, lik = _model(posterior)
                dt = float("inf")
                for _ in range(2):  # the first run compiles (the posterior's pool layout depends on n)
                    host[0] = 0.0
                    t = time.perf_counter()
                    engine.run(jax.random.key(0), m, lik, n)
                    dt = min(dt, time.perf_counter() - t)
                row["posterior" if posterior else "prior"] = {"seconds": dt, "draws_per_s": n / dt,
                                                              "host_merge_s": host[0], "host_share": host[0] / dt}
            row["ratio"] = row["posterior"]["seconds"] / row["prior"]["seconds"]
            out[f"{n:.0e}"] = row
            print(f"{'posterior / prior pass':44s} n={n:>14,d}  {row['ratio']:6.2f}x (target <= 2); prior "
                  f"{row['prior']['draws_per_s'] / 1e9:.2f} G draws/s; host share prior "
                  f"{row['prior']['host_share']:.1%}, posterior {row['posterior']['host_share']:.1%}", flush=True)
    finally:
        merge._Merge.add_call = add
    return out


def peak_memory() -> dict:
    """Peak bytes in use on each device since the process started (None where the backend does not say)."""
    import jax

    stats = [d.memory_stats() or {} for d in jax.local_devices()]
    peak = [s.get("peak_bytes_in_use") for s in stats]
    limit = [s.get("bytes_limit") for s in stats]
    known = [p for p in peak if p is not None]
    print(f"{'peak device memory':44s} {max(known) / 2**30:.2f} GiB" if known else
          f"{'peak device memory':44s} not reported by this backend", flush=True)
    return {"peak_bytes": peak, "bytes_limit": limit}


def _flat(sums) -> dict[str, np.ndarray]:
    d = {"first": sums.first, "top": sums.top}
    d.update({"prior." + k: v for k, v in sums.prior.items()})
    d.update({"post." + k: v for k, v in (sums.post or {}).items()})
    d.update({"res." + k: v for k, v in (sums.reservoir or {}).items()})
    return {k: np.asarray(v, np.float64) for k, v in d.items()}


def determinism(n: int) -> dict:
    """The posterior pass twice with the default call size and once with twice as many blocks per call: the
    prior's sums (integer histograms, float32 moments in a fixed order) must be bit-identical; the weighted
    histograms may move in their last bits (atomic adds on a GPU); reported as the largest relative gap."""
    import jax

    from mcflops import engine

    m, lik = _model(True)
    gpu = jax.devices()[0].platform != "cpu"
    bpc = 32 if gpu else 16
    runs = [_flat(engine.run(jax.random.key(3), m, lik, n, blocks_per_call=b)) for b in (bpc, bpc, 2 * bpc)]
    out = {"n": n, "blocks_per_call": [bpc, bpc, 2 * bpc]}
    for label, other in (("repeat", runs[1]), ("call_size", runs[2])):
        exact = [k for k in runs[0] if not k.startswith("post.hist")]
        same = all(np.array_equal(runs[0][k], other[k], equal_nan=True) for k in exact)
        gap = max(float(np.max(np.abs(runs[0][k] - other[k]) / np.maximum(np.abs(runs[0][k]), 1e-30), initial=0.0))
                  for k in runs[0])
        out[label] = {"bit_identical_except_weighted_histograms": same, "max_rel_gap": gap}
    print(f"{'determinism (repeat; 2x blocks per call)':44s} identical {out['repeat']['bit_identical_except_weighted_histograms']}"
          f", {out['call_size']['bit_identical_except_weighted_histograms']}; largest gap "
          f"{out['repeat']['max_rel_gap']:.1e}, {out['call_size']['max_rel_gap']:.1e}", flush=True)
    return out


_CPU_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
import gpu_checks
print(json.dumps(gpu_checks.summaries({n})))
"""


def summaries(n: int) -> dict:
    """Prior and posterior summaries (gpu_hours, mfu) of the benchmark model at n draws on this process's
    default backend."""
    import jax

    from mcflops import engine
    from mcflops.engine import summary

    out = {}
    for posterior in (False, True):
        m, lik = _model(posterior)
        sums = engine.run(jax.random.key(5), m, lik, n)
        part = "post" if posterior else "prior"
        got = summary.summarize(sums, m.centers, part)
        out[part] = {q: {k: float(got[q][k]) for k in SUMMARY_KEYS} for q in ("gpu_hours", "mfu")}
    return out


def cpu_vs_device(n: int, dry: bool) -> dict:
    """The same sums on the CPU backend (a child process) and on this one: summaries within float32 rounding
    (largest relative gap; target < 1e-4: the draws are the same, only the order and the transcendental
    functions' last bits differ)."""
    import jax

    here = summaries(n)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", _CPU_CHILD.format(here=str(HERE), n=n)], capture_output=True,
                       text=True, cwd=ROOT, env=env, check=False)
    if r.returncode != 0:
        print(f"{'CPU vs ' + jax.devices()[0].platform:44s} CPU child failed", flush=True)
        return {"error": r.stderr[-2000:]}
    cpu = json.loads(r.stdout.strip().splitlines()[-1])
    gap = max(abs(here[p][q][k] / cpu[p][q][k] - 1) for p in here for q in here[p] for k in SUMMARY_KEYS)
    label = f"CPU vs {jax.devices()[0].platform}" + (" (dry run: both CPU)" if dry else "")
    print(f"{label:44s} n={n:>14,d}  largest relative gap {gap:.1e} (target < 1e-4)", flush=True)
    return {"n": n, "max_rel_gap": gap, "device": here, "cpu": cpu}
