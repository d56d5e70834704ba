"""The engine against the NumPy and squigglepy references, in one process.

    .venv/bin/python benchmarks/bench.py                 # CPU: every figure of benchmarks/RESULTS.md
    .venv/bin/python benchmarks/bench.py --quick         # 1e6/1e7 only (a minute)
    .venv/bin/python benchmarks/bench.py --gpu --json gpu.json   # GPU machine: the prepared run (gpu_main)
    .venv/bin/python benchmarks/bench.py --gpu --dry-run # the same steps at tiny sizes, on any machine
    .venv/bin/python benchmarks/bench.py --json out.json # also write the figures as JSON

The model is the references' (``reference_numpy.PRIORS``): N = 405.9e9, D ~ lognormal 90% [15.0T,
16.8T], MFU ~ Beta(mean 0.40, sd 0.03), goodput ~ Beta with 90% interval [0.85, 0.97], H100 dense
BF16 peak; gpu_hours = 6ND / (peak MFU goodput) / 3600. Every variant computes the same quantiles
(p5..p95), mean and sd of gpu_hours; the engine also reports every input and output.

Figures (each the best of ``--repeats`` runs; the machine may be shared, so the load average is
printed beside them):

* draws/s of the prior predictive with quantiles at 1e7: the engine (compiled program warm, and
  the first call including compilation), NumPy (float64, ``default_rng``, ``np.quantile``) and
  squigglepy; the engine/NumPy ratio (target >= 10);
* seconds for 1e8 draws (target <= 10 s); peak RSS of a fresh process drawing 1e9 (target < 1.5 GB);
* quantile accuracy: the engine's histogram quantiles against ``np.quantile`` of the very same
  1e7 draws, recomputed outside the engine (target: within 0.2% relative);
* importance-sampling posterior (one observation) / prior pass, same draws (target <= 2);
* ``mcflops run priors/llama405b.yaml``: cold (empty JAX compilation cache) and warm, end to end
  (targets 15 s and 8 s).

Nothing here imports ArviZ or matplotlib, so it runs on a GPU machine without them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

SPEC = {
    "name": "bench-405b", "seed": 0, "samples": 10_000_000,
    "hardware": {"accelerator": "h100-sxm", "precision": "bf16"},
    "flops": "6nd",
    "priors": {"params": 405.9e9, "tokens": {"lognormal": [15.0e12, 16.8e12]},
               "mfu": {"beta": {"mean": 0.40, "sd": 0.03}}, "goodput": {"beta": [0.85, 0.97]}},
}
OBSERVE = {"gpu_hours": {"value": 30.84e6, "sigma": 0.05}}
QS = ("p5", "p25", "p50", "p75", "p95")


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _best(f, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


_LOADED: dict = {}


def _spec(observe: bool = False):
    """The benchmark spec, validated once per process: the counterpart of the NumPy reference's
    module-level ``PRIORS`` (its beta fit is solved once, at import, outside the timed runs)."""
    if observe not in _LOADED:
        from mcflops import load_spec

        _LOADED[observe] = load_spec({**SPEC, "observe": OBSERVE} if observe else SPEC)
    return _LOADED[observe]


def engine_prior(n: int, observe: bool = False):
    """api.run's prior predictive (model, engine, summaries, kept draws), as a notebook gets it."""
    import mcflops

    return mcflops.run(_spec(observe), samples=n, posterior=observe)


# Five uncertain inputs for the Sobol target: the benchmark model plus uncertain N and peak FLOP/s.
SOBOL_SPEC = {**SPEC, "priors": {**SPEC["priors"], "params": {"lognormal": [400e9, 410e9]},
                                 "peak_flops": {"lognormal": [850e12, 989.4e12]}}}


def sobol_time(base: int = 1 << 18) -> dict:
    """Sobol first/total indices with ``base`` base draws on five inputs (Saltelli/Jansen, n (k + 2)
    model evaluations): first call in this process (compile + run), then the best of two."""
    import jax

    from mcflops import load_spec
    from mcflops.analysis import sensitivity
    from mcflops import model as model_mod

    m = model_mod.build_model(load_spec(SOBOL_SPEC))
    names = m.uncertain
    t = time.perf_counter()
    sensitivity.sobol(jax.random.key(1), m, n=base)
    first = time.perf_counter() - t
    warm, out = _best(lambda: sensitivity.sobol(jax.random.key(1), m, n=base), 2)
    return {"inputs": list(names), "base": base, "evaluations": out["evaluations"], "first_call_s": first,
            "seconds": warm, "first_order_log": dict(zip(names, map(float, out["log"]["first"])))}


def engine_sums(n: int, posterior: bool):
    import jax

    from mcflops import engine
    from mcflops import model as model_mod

    spec = _spec(True)
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m) if posterior else None
    return engine.run(jax.random.key(0), m, lik, n)


def quantile_accuracy(n: int) -> dict:
    """Engine quantiles vs np.quantile of the same draws (recomputed block by block outside the engine)."""
    import jax

    from mcflops import load_spec
    from mcflops import engine
    from mcflops.engine import summary
    from mcflops import model as model_mod

    spec = load_spec(SPEC)
    m = model_mod.build_model(spec)
    key = jax.random.key(0)
    sums = engine.run(key, m, None, n)
    got = summary.summarize(sums, m.centers)
    out = {}
    for name in ("gpu_hours", "mfu", "goodput", "tokens"):
        parts = []
        for b in range(-(-n // engine.BLOCK)):
            size = min(engine.BLOCK, n - b * engine.BLOCK)
            v = model_mod.evaluate(m, engine.draw_z(key, m, np.uint32(b), engine.BLOCK))
            parts.append(np.broadcast_to(np.asarray(v[name], np.float64), (engine.BLOCK,))[:size])
        x = np.exp(m.centers[name] + np.concatenate(parts))
        exact = np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95])
        out[name] = {k: float(got[name][k] / e - 1) for k, e in zip(QS, exact)}
        del x, parts
    out["max_abs_rel_err"] = max(abs(v) for d in out.values() for v in d.values())
    return out


_RSS_CHILD = """
import resource, sys, time
sys.path.insert(0, {here!r})
import bench
t = time.perf_counter()
res = bench.engine_prior({n})
dt = time.perf_counter() - t
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, dt, res.prior["gpu_hours"]["p50"])
"""


def peak_rss(n: int) -> dict:
    """Peak RSS (KiB on Linux) of a fresh process running the prior predictive with n draws."""
    out = subprocess.run([sys.executable, "-c", _RSS_CHILD.format(here=str(HERE), n=n)], capture_output=True,
                         check=False, text=True, cwd=ROOT)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    kib, secs, p50 = out.stdout.split()[-3:]
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"n": n, "peak_rss_mb": int(kib) / 1024, "seconds": float(secs), "draws_per_s": n / float(secs),
            "p50": float(p50), "children_max_rss_mb": child / 1024}


def cli_startup(repeats: int) -> dict:
    """`mcflops run priors/llama405b.yaml` end to end: cold (empty compilation cache), then warm."""
    exe = str(Path(sys.executable).with_name("mcflops"))
    cmd = [exe, "run", "priors/llama405b.yaml", "--out", os.path.join(tempfile.gettempdir(), "mcflops-bench-out"),
           "--quiet"] if os.path.exists(exe) else [sys.executable, "-m", "mcflops.cli", "run", "priors/llama405b.yaml"]
    out: dict = {"command": " ".join(["mcflops"] + cmd[1:])}
    cache = tempfile.mkdtemp(prefix="mcflops-jax-cache-")
    env = {**os.environ, "MCFLOPS_JAX_CACHE": cache}
    try:
        for label in ["cold"] + ["warm"] * repeats:
            t = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
            dt = time.perf_counter() - t
            if r.returncode != 0:
                out[f"{label}_error"] = r.stderr[-1000:]
            out[label] = min(out.get(label, dt), dt)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return out


def _header(args) -> dict:
    import jax

    from mcflops import api
    from mcflops import engine

    engine.setup()  # first: one CPU device per core, claimed before JAX starts
    dev = api.device_name()
    r: dict = {"machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus", "device": dev,
               "jax": jax.__version__, "python": platform.python_version(),
               "date": time.strftime("%Y-%m-%d %H:%M %Z"), "command": " ".join(["python"] + sys.argv),
               "load_before": _load()}
    print(f"# {r['machine']}, {dev}, jax {r['jax']}, load {r['load_before']}", flush=True)
    return r


def gpu_main(args) -> int:
    """The prepared GPU run, one command: the prior pass at 1e8, 1e9 and 1e10 draws (target >= 1e10 draws/s
    at 1e10), the posterior pass against it with the host's share (target <= 2x), Sobol 2^20 x 5 inputs,
    peak device memory, determinism, the CPU backend's sums against the device's. Figures are written to
    ``--json`` after every step, so a run cut short keeps what it measured."""
    import gpu_checks

    r = _header(args)
    size = gpu_checks.sizes(args.dry_run)
    r["dry_run"] = args.dry_run

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(r, indent=2) + "\n")

    for n in size["prior"]:
        engine_prior(n)  # compile: a run's group size, and so its program, depends on n
        t, _ = _best(lambda n=n: engine_prior(n), 1 if n >= 10**9 else args.repeats)
        print(f"{'engine prior predictive + quantiles':44s} n={n:>14,d}  {t:8.3f} s  {n / t / 1e9:8.2f} G draws/s"
              + ("   (target >= 10 G/s)" if n >= 10**10 else ""), flush=True)
        r[f"engine_{n:.0e}"] = {"seconds": t, "draws_per_s": n / t}
        save()
    steps = [("posterior_vs_prior", lambda: gpu_checks.posterior_vs_prior(size["posterior"])),
             ("sobol", lambda: sobol_time(size["sobol_base"])),
             ("peak_memory", gpu_checks.peak_memory),
             ("determinism", lambda: gpu_checks.determinism(size["determinism"])),
             ("cpu_vs_device", lambda: gpu_checks.cpu_vs_device(size["cpu_vs_device"], args.dry_run))]
    for name, step in steps:
        try:
            r[name] = step()
        except Exception as e:  # one failing check must not cost the others' figures
            print(f"{name}: failed: {type(e).__name__}: {e}", flush=True)
            r[name] = {"error": f"{type(e).__name__}: {e}"}
        if name == "sobol" and "error" not in r[name]:
            print(f"{'Sobol, ' + str(r[name]['base']) + ' base draws, ' + str(len(r[name]['inputs'])) + ' inputs':44s} "
                  f"first call {r[name]['first_call_s']:.2f} s, warm {r[name]['seconds']:.2f} s", flush=True)
        save()
    r["load_after"] = _load()
    save()
    failed = [k for k, v in r.items() if isinstance(v, dict) and "error" in v]
    print(f"# done; failed steps: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true", help="GPU machine: the prepared run (gpu_main)")
    p.add_argument("--quick", action="store_true", help="1e7 comparison, accuracy and posterior ratio only")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--dry-run", action="store_true",
                   help="with --gpu: every step at tiny sizes on whatever device there is (a check of the script)")
    args = p.parse_args(argv)
    if args.dry_run and not args.gpu:
        p.error("--dry-run goes with --gpu")
    if args.gpu:
        return gpu_main(args)

    from mcflops import engine

    r = _header(args)

    def show(label, n, secs, extra=""):
        print(f"{label:44s} n={n:>14,d}  {secs:8.3f} s  {n / secs / 1e6:10.1f} M draws/s {extra}", flush=True)

    n7 = 10_000_000
    t_first, _ = _best(lambda: engine_prior(n7), 1)
    show("engine, first call (compile + run)", n7, t_first)

    import reference_numpy

    # engine and NumPy alternate, best of each: a busy neighbour slows both alike
    n_np = n7
    t_eng = t_np = float("inf")
    for _ in range(args.repeats):
        t, res = _best(lambda: engine_prior(n7), 2)
        t_eng = min(t_eng, t)
        t, ref = _best(lambda: reference_numpy.run(n_np), 1)
        t_np = min(t_np, t)
    show("engine prior predictive + quantiles", n7, t_eng)
    r["engine_1e7"] = {"seconds": t_eng, "draws_per_s": n7 / t_eng, "first_call_s": t_first,
                       "gpu_hours": {k: res.prior["gpu_hours"][k] for k in ("mean", "sd", *QS)}}
    show("numpy reference (float64, np.quantile)", n_np, t_np)
    r["numpy"] = {"n": n_np, "seconds": t_np, "draws_per_s": n_np / t_np, "quantiles": ref["quantiles"]}
    r["ratio_engine_numpy"] = (n7 / t_eng) / (n_np / t_np)
    print(f"{'engine / numpy':44s} {r['ratio_engine_numpy']:.1f}x   (target >= 10x)", flush=True)
    try:
        import reference_squiggle
    except ImportError as e:
        r["squigglepy"] = {"error": str(e)}
    else:
        t_sq, _ = _best(lambda: reference_squiggle.run(n7), 1)
        show("squigglepy reference", n7, t_sq)
        r["squigglepy"] = {"n": n7, "seconds": t_sq, "draws_per_s": n7 / t_sq}
        r["ratio_engine_squigglepy"] = (n7 / t_eng) / (n7 / t_sq)
        print(f"{'engine / squigglepy':44s} {r['ratio_engine_squigglepy']:.1f}x", flush=True)

    acc = quantile_accuracy(n7)
    r["quantile_accuracy_1e7"] = acc
    print(f"{'quantiles vs np.quantile, same 1e7 draws':44s} max |rel err| = {acc['max_abs_rel_err']:.2e}"
          "   (target < 2e-3)", flush=True)

    engine_sums(n7, True)  # compile the posterior program
    t_prior = t_post = float("inf")
    for _ in range(args.repeats):  # alternate, best of each
        t_prior = min(t_prior, _best(lambda: engine_sums(n7, False), 1)[0])
        t_post = min(t_post, _best(lambda: engine_sums(n7, True), 1)[0])
    r["posterior_1e7"] = {"prior_s": t_prior, "posterior_s": t_post, "ratio": t_post / t_prior}
    tp, tq = [], []
    for _ in range(15):  # the tightest target: also as a distribution of alternating calls
        tp.append(_best(lambda: engine_sums(n7, False), 1)[0])
        tq.append(_best(lambda: engine_sums(n7, True), 1)[0])
    r["posterior_1e7"].update(min_ratio_of_15=min(tq) / min(tp), median_ratio_of_15=float(np.median(tq) / np.median(tp)))
    show("engine.run, prior pass", n7, t_prior)
    show("engine.run, importance-sampling posterior", n7, t_post, f"({t_post / t_prior:.2f}x the prior; target <= 2)")
    print(f"{'  the same, 15 alternating calls':44s} ratio of minima {r['posterior_1e7']['min_ratio_of_15']:.2f}, "
          f"of medians {r['posterior_1e7']['median_ratio_of_15']:.2f}", flush=True)

    if not args.quick:
        big = [10**8]
        for n in big:
            t, _ = _best(lambda n=n: engine_prior(n), 1 if n >= 10**9 else args.repeats)
            show("engine prior predictive + quantiles", n, t)
            r[f"engine_{n:.0e}"] = {"seconds": t, "draws_per_s": n / t}
        n8 = 10**8  # the posterior at 1e8: the PSIS/reservoir pool is 1.6% of the draws there (11% at 1e7)
        engine_sums(n8, True)
        tp = tq = float("inf")
        for _ in range(4):
            tp = min(tp, _best(lambda: engine_sums(n8, False), 1)[0])
            tq = min(tq, _best(lambda: engine_sums(n8, True), 1)[0])
        r["posterior_1e8"] = {"prior_s": tp, "posterior_s": tq, "ratio": tq / tp}
        show("engine.run, importance-sampling posterior", n8, tq, f"({tq / tp:.2f}x the prior pass's {tp:.2f} s)")
        rss = peak_rss(10**9)
        r["rss_1e9"] = rss
        if "error" in rss:
            print("1e9 RSS run failed:", rss["error"])
        else:
            show("fresh process, 1e9 draws (incl. start-up)", 10**9, rss["seconds"],
                 f" peak RSS {rss['peak_rss_mb']:.0f} MB (target < 1500)")
        cli = cli_startup(args.repeats)
        r["cli"] = cli
        print(f"{'mcflops run priors/llama405b.yaml':44s} cold {cli.get('cold', float('nan')):.2f} s, "
              f"warm {cli.get('warm', float('nan')):.2f} s   (targets 15 s, 8 s)", flush=True)
    sob = sobol_time()
    r["sobol_2e18"] = sob
    print(f"{'Sobol, 2^18 base draws, ' + str(len(sob['inputs'])) + ' inputs':44s} first call {sob['first_call_s']:.2f} s, "
          f"warm {sob['seconds']:.2f} s   (target < 5 s)", flush=True)
    r["load_after"] = _load()
    print(f"# load average after: {r['load_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
