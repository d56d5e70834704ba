"""What the quick commands import: `mcflops validate` must answer without loading JAX, the API layer, or
the figure and netCDF libraries (their import alone costs seconds on a small machine). Checked in a fresh
interpreter, since this test process has imported everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEAVY = ("jax", "jaxlib", "matplotlib", "arviz", "xarray", "h5netcdf", "rich", "mcflops.api", "mcflops.engine",
         "mcflops.model")

PROBE = """
import json, sys
from mcflops.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""


def _modules(*argv: str) -> tuple[int, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, env=env,
                       check=False, timeout=120)
    assert r.stdout.strip(), r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["rc"], set(out["modules"])


def _heavy(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_validate_imports_no_jax_nor_api():
    rc, mods = _modules("validate", "priors/llama405b.yaml", "priors/deepseek-v3.yaml")
    assert rc == 0
    assert "mcflops.spec" in mods  # the probe did validate through the spec layer
    assert _heavy(mods) == []


def test_bad_file_is_refused_without_jax(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\npriors: {mfu: {beta: {mean: 2, sd: 0.1}}}\n")
    rc, mods = _modules("validate", str(bad))
    assert rc == 2
    assert _heavy(mods) == []


def test_package_attributes_load_on_use():
    code = ("import sys, mcflops; a = 'mcflops.api' in sys.modules; r = mcflops.run; "
            "print(a, 'mcflops.api' in sys.modules, r.__module__, 'load_spec' in dir(mcflops))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, timeout=120)
    assert r.stdout.split() == ["False", "True", "mcflops.api.calls", "True"]


def test_figure_path_imports_no_jax():
    """Every plots module, and the output layer that hands them their data, import neither JAX nor the
    engine: `mcflops report` and a notebook that only draws start in the time matplotlib takes."""
    code = ("import json, pkgutil, sys, importlib, mcflops.plots, mcflops.output, mcflops.output.figures\n"
            "names = [m.name for m in pkgutil.iter_modules(mcflops.plots.__path__, 'mcflops.plots.')]\n"
            "[importlib.import_module(n) for n in names]\n"
            "print(json.dumps({'names': names, 'modules': sorted(sys.modules)}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, timeout=120)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert {"mcflops.plots.posterior", "mcflops.plots.sensitivity", "mcflops.plots.report"} <= set(out["names"])
    mods = set(out["modules"])
    assert "mcflops.plots.posterior" in mods
    heavy = [m for m in _heavy(mods) if not m.startswith(("matplotlib", "rich"))]
    assert heavy == []


def test_a_run_stages_its_arrays_without_compiling():
    """Building a model and its likelihood from host values (samplers' tables, constants, the observations)
    transfers them to the device without an XLA program each: a cold run compiled nine such programs. In a
    fresh interpreter, with priors no run has used (their samplers are not memoised yet)."""
    code = (
        "import jax, logging, sys\n"
        "jax.config.update('jax_log_compiles', True)\n"
        "seen = []\n"
        "class H(logging.Handler):\n"
        "    def emit(self, r):\n"
        "        m = r.getMessage()\n"
        "        seen.append(m) if m.startswith('Compiling ') else None\n"
        "logging.getLogger('jax').addHandler(H()); logging.getLogger('jax').setLevel(logging.WARNING)\n"
        "from mcflops.spec import load_spec\n"
        "from mcflops.model.compute import build_model\n"
        "from mcflops import engine\n"
        "spec = load_spec({'name': 'stage', 'hardware': {'accelerator': 'h100-sxm', 'count': 1000},\n"
        "                  'priors': {'params': 7.1e9, 'tokens': {'lognormal': [1.1e12, 1.3e12]},\n"
        "                             'mfu': {'beta': [0.31, 0.47]}, 'goodput': {'beta': [0.81, 0.93]}},\n"
        "                  'observe': {'gpu_hours': {'value': 5.1e4, 'sigma': 0.1}}})\n"
        "m = build_model(spec); lik = engine.build_likelihood(spec, m)\n"
        "jax.block_until_ready([s.table for s in m.samplers])\n"
        "print(len(seen), seen[:3])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "MCFLOPS_NO_CACHE": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=False,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[0] == "0", r.stdout
