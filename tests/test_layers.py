"""The layering holds: the engine runs without ArviZ, matplotlib or NumPyro, compiles once per
structure, and no module imports a higher layer (import-linter, configured in pyproject.toml)."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mcflops
from mcflops.engine import driver

ROOT = Path(__file__).resolve().parents[1]

SPEC = {"name": "layers", "hardware": {"accelerator": "h100-sxm"},
        "priors": {"params": 70e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.3, 0.5]}},
        "observe": {"gpu_hours": {"value": 6e5, "sigma": 0.1}}}


def test_one_compile_per_structure():
    """Same structure, other numbers: the block kernel is traced once (numbers are leaves). First in this
    file: the child process of the next test finds SPEC's programs in the compilation cache (conftest)."""
    mcflops.run(SPEC, samples=20_000)
    sizes = {k: f._cache_size() for k, f in driver._CALLS.items()}
    other = {**SPEC, "priors": {"params": 8e9, "tokens": {"lognormal": [3e12, 5e12]}, "mfu": {"beta": [0.2, 0.6]}},
             "observe": {"gpu_hours": {"value": 2e5, "sigma": 0.2}}}
    mcflops.run(other, samples=30_000, seed=5)
    assert {k: f._cache_size() for k, f in driver._CALLS.items()} == sizes


def test_engine_runs_without_plotting_or_ppl_packages(jax_cache_env):
    """The GPU machine has no ArviZ: the engine and importance sampling must not need it."""
    code = textwrap.dedent(f"""
        import sys
        for name in ("arviz", "arviz_base", "arviz_stats", "matplotlib", "numpyro", "xarray"):
            sys.modules[name] = None  # any import of these now raises ImportError
        import mcflops
        res = mcflops.run({SPEC!r}, samples=20_000)
        assert res.posterior["method"] == "importance", res.posterior["method"]
        print(res.prior["gpu_hours"]["p50"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", **jax_cache_env})
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip()) > 0


@pytest.mark.skipif(shutil.which("lint-imports") is None and not (ROOT / ".venv/bin/lint-imports").exists(),
                    reason="import-linter not installed")
def test_import_layers():
    exe = shutil.which("lint-imports") or str(ROOT / ".venv/bin/lint-imports")
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:]
