"""The prepared GPU run (``benchmarks/bench.py --gpu``) stays runnable between GPU sessions: its dry run
(every step at tiny sizes, here on the CPU) completes in a process where ArviZ and matplotlib cannot be
imported (a GPU image may lack them), writes every figure, and its checks hold on the CPU: determinism
bit for bit, and the CPU child's sums equal to this process's."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# arviz and matplotlib made unimportable before the script starts (as on an image without them)
_RUN = """
import runpy, sys
sys.modules["arviz"] = None
sys.modules["matplotlib"] = None
sys.argv = ["bench.py", "--gpu", "--dry-run", "--json", sys.argv[1]]
sys.path.insert(0, "benchmarks")
try:
    runpy.run_path("benchmarks/bench.py", run_name="__main__")
except SystemExit as e:
    sys.exit(e.code)
"""


def test_gpu_script_dry_run_without_arviz_or_matplotlib(tmp_path, jax_cache_env):
    out = tmp_path / "gpu.json"
    env = {**os.environ, **jax_cache_env, "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", _RUN, str(out)], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["dry_run"] is True
    for step in ("posterior_vs_prior", "sobol", "peak_memory", "determinism", "cpu_vs_device"):
        assert step in got and "error" not in got[step], (step, got.get(step))
    row = got["posterior_vs_prior"]["1e+06"]
    assert row["prior"]["draws_per_s"] > 0 and 0 <= row["posterior"]["host_share"] < 1
    assert got["determinism"]["repeat"]["bit_identical_except_weighted_histograms"]
    assert got["determinism"]["call_size"]["bit_identical_except_weighted_histograms"]
    assert got["cpu_vs_device"]["max_rel_gap"] < 1e-4
    assert got["sobol"]["inputs"] and len(got["sobol"]["inputs"]) == 5
