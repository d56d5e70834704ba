"""Speed as felt: whole-process times of the commands a user types, each in a fresh process.

    .venv/bin/python benchmarks/cli_speed.py                  # every command, 5 repeats
    .venv/bin/python benchmarks/cli_speed.py --repeats 3 --only validate,sample
    .venv/bin/python benchmarks/cli_speed.py --json out.json  # also write the figures as JSON
    .venv/bin/python benchmarks/cli_speed.py --tree /tmp/base    # A/B: another source tree, same rounds
    .venv/bin/python benchmarks/cli_speed.py --only run --prior priors/examples/ladder/dense70b-guess.yaml

Commands (targets on the 2-core reference machine in benchmarks/RESULTS.md):

* ``mcflops validate priors/llama405b.yaml`` (<= 0.6 s, and no JAX import);
* ``mcflops sample priors/llama405b.yaml`` warm (<= 1.5 s);
* ``mcflops run priors/llama405b.yaml`` warm (<= 3 s, and <= 1.5x the time the plain NumPy reference,
  ``benchmarks/reference_numpy.py``, takes to draw 1e7 samples, timed in the same rounds) and cold, with an
  empty JAX compilation cache (<= 10 s); beside it, in the same rounds, the warm run without its MFU in
  context (``--no-context``): what the context adds.

``--prior FILE`` times another prior file in place of the flagship.

Each command runs ``--repeats`` times in a fresh process; the runs of every command are
interleaved round by round, so that a busy neighbour slows all of them alike. The reference is the
start-up of ``python -c "import numpy"`` measured in the same rounds: on a shared machine the
ratio to it moves less than the seconds do. Reported: median and minimum seconds, the median ratio to
the reference, and the median CPU seconds (user + system, child processes included: less sensitive
to the load than the seconds; ``--json`` also lists every run's). "warm" means the caches of one folder
(``MCFLOPS_JAX_CACHE``: JAX's compilation cache, the compiled programs of ``engine.program`` and the
host results of ``mcflops.diskcache``) were filled by the untimed runs first (the cold `run`, then a
`sample`); "cold" is that first `run`, with the folder empty. The folder is a fresh temporary one, so the user's own caches are left alone.

``--tree DIR`` (repeatable) times the same commands of other source trees (e.g. a ``git archive`` of an
earlier commit) in the same rounds, each imported through ``PYTHONPATH`` with its own cache folder: an
A/B comparison on a shared machine, where minutes apart the load differs more than the trees do.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRIOR = "priors/llama405b.yaml"


def _mcflops(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcflops.cli", *args]


def commands(out: str) -> dict[str, list[str]]:
    return {
        "reference: python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
        "validate": _mcflops("validate", PRIOR),
        "sample (warm)": _mcflops("sample", PRIOR, "--quiet"),
        "run (warm)": _mcflops("run", PRIOR, "--quiet", "--out", out),
        "run --no-context (warm)": _mcflops("run", PRIOR, "--quiet", "--no-context", "--out", out),
        # the flagship's other yardstick: the plain NumPy model at the run's 1e7 draws, as a whole process too
        "numpy 1e7 draws": [sys.executable, str(ROOT / "benchmarks" / "reference_numpy.py"), "10000000"],
    }


CPU: dict[str, list[float]] = {}  # command -> CPU seconds (user + system) of each timed run
DRAWING: list[float] = []  # the NumPy reference's own sampling seconds (its JSON's `seconds`) in each round


def timed(cmd: list[str], env: dict, cwd: Path = ROOT, name: str | None = None) -> float:
    """Wall seconds of one run of ``cmd``; its CPU seconds (user + system, with the processes it started
    and waited for) go to ``CPU[name]``: less sensitive to a busy neighbour."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, check=False)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    if name == "numpy 1e7 draws":
        DRAWING.append(json.loads(r.stdout)["result"]["seconds"])
    if name is not None:
        CPU.setdefault(name, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return dt


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--only", help="comma-separated: validate, sample, run, cold")
    p.add_argument("--json", help="write the figures to this file")
    p.add_argument("--tree", action="append", default=[], help="another source tree timed in the same rounds")
    p.add_argument("--prior", default=PRIOR, help=f"the prior file the commands read (default {PRIOR})")
    args = p.parse_args(argv)
    globals()["PRIOR"] = args.prior

    tmp = tempfile.mkdtemp(prefix="mcflops-cli-speed-")
    trees = {"": ROOT, **{f" [{Path(t).name}]": Path(t).resolve() for t in args.tree}}
    envs = {}
    for i, (tag, root) in enumerate(trees.items()):
        envs[tag] = {**os.environ, "MCFLOPS_JAX_CACHE": os.path.join(tmp, f"jax-cache-{i}")}
        envs[tag].setdefault("JAX_PLATFORMS", "cpu")
        if tag:
            envs[tag]["PYTHONPATH"] = str(root)
    cmds = {}
    for i, tag in enumerate(trees):
        for name, cmd in commands(os.path.join(tmp, f"out-{i}")).items():
            # --no-context is this tree's flag (an earlier tree has no context to leave out)
            if not (tag and (name.startswith("reference") or name.startswith("numpy") or "--no-context" in name)):
                cmds[name + tag] = (tag, cmd)
    if args.only:
        keep = set(args.only.split(","))
        cmds = {k: v for k, v in cmds.items() if k.startswith("reference") or k.split()[0] in keep
                or (k.startswith("numpy") and "run" in keep)}
    want_cold = not args.only or "cold" in args.only.split(",")
    times: dict[str, list[float]] = {k: [] for k in cmds}
    result: dict = {"load_before": _load(), "python": sys.version.split()[0],
                    "trees": {tag or "this": str(root) for tag, root in trees.items()}}
    try:
        for i, (tag, root) in enumerate(trees.items()):  # cold: the first run with an empty cache; it warms it
            cold = timed(_mcflops("run", PRIOR, "--quiet", "--out", os.path.join(tmp, f"cold-{i}")), envs[tag], root,
                         "run (cold)" + tag)
            if want_cold:
                times["run (cold)" + tag] = [cold]
            timed(_mcflops("sample", PRIOR, "--quiet"), envs[tag], root)
        for _ in range(args.repeats):
            for name, (tag, cmd) in cmds.items():
                times[name].append(timed(cmd, envs[tag], trees[tag], name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = statistics.median(next(v for k, v in times.items() if k.startswith("reference")))
    result["load_after"] = _load()
    print(f"# load average {result['load_before']} -> {result['load_after']}; {args.repeats} rounds")
    print(f"{'command':48s} {'median s':>9s} {'min s':>7s} {'x reference':>12s} {'CPU s':>7s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        cpu = statistics.median(CPU.get(name) or [float("nan")])
        result[name] = {"median_s": med, "min_s": min(ts), "ratio_to_reference": med / ref, "n": len(ts),
                        "cpu_s": cpu, "runs_s": ts, "cpu_runs_s": CPU.get(name, [])}
        print(f"{name:48s} {med:9.2f} {min(ts):7.2f} {med / ref:12.1f} {cpu:7.2f}")
    if "run (warm)" in times and DRAWING:
        # medians of rounds that alternated the two, so a busy neighbour slowed both alike: the whole warm run
        # (1e6 draws, the posterior, the report and its figures) against the reference's 1e7 draws alone
        ratio = statistics.median(times["run (warm)"]) / statistics.median(DRAWING)
        whole = statistics.median(times["run (warm)"]) / statistics.median(times["numpy 1e7 draws"])
        result["run_warm_over_numpy_1e7"] = {"drawing": ratio, "whole_process": whole,
                                             "numpy_drawing_s": DRAWING}
        print(f"warm flagship run / the NumPy reference's 1e7-draw time: {ratio:.2f} (target <= 1.5); "
              f"/ its whole process: {whole:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
