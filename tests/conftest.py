"""Strict JAX in tests (as equinox and diffrax do): rank promotion raises, warnings are errors."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# XLA's CPU backend at optimisation level 0 for the tests (and the processes they start, which inherit it), as
# mcflops.inference.nuts compiles its driver: the suite compiles some 2,500 programs and runs most on 1e4-1e5 draws,
# so compiling is half its CPU, and level 0 compiles faster and runs slower (a large pass, which no test runs, is
# several times slower: benchmarks/RESULTS.md, "Test suite"). Results differ in the last bits of sums, which the
# goldens' tolerances (a share of each statistic's Monte Carlo error) are made for. Not where the flags already
# choose the code path:
# .ci/run's portability pass sets an instruction set, and runs the goldens and determinism tests at the default
# level, so both levels are checked against the stored summaries (made at the default level, tests/golden/make.py).
_flags = os.environ.get("XLA_FLAGS", "")
if "--xla_cpu_max_isa" not in _flags and "optimization_level" not in _flags:
    os.environ["XLA_FLAGS"] = f"{_flags} --xla_backend_optimization_level=0".strip()

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")

from mcflops import engine  # noqa: E402

# One CPU device per test process, and per process a test starts (the environment is inherited): xdist's two
# workers already keep both cores busy, and a program sharded over two devices in each of them compiled and
# ran 8% more CPU for the same sums (blocks are keyed by index, so the answer does not depend on the device
# count); children with one device also load the programs the tests compiled. The multi-device paths are
# tested where they are the claim, in child processes that set their own device count
# (tests/engine/test_devices.py, tests/test_reproducible.py, tests/cli/test_multiprocess.py, test_setup.py).
os.environ.setdefault("MCFLOPS_CPU_DEVICES", "1")
engine.setup()  # as a run does, before any JAX computation

# JAX's persistent compilation cache in the folder `mcflops run` keeps it in (engine.use_cache: the user's cache
# folder, MCFLOPS_JAX_CACHE, off with MCFLOPS_NO_CACHE=1), from the first compile on: the folder the CLI tests
# fill anyway (in this process, the first in-process CLI run would turn it on; JAX fixes its folder once per
# process). A test that builds a program another test or an earlier session built (a fresh closure, the same
# HLO) loads the executable instead of compiling it: JAX keys entries by the program, the backend, its devices
# and the compile options, so it is the executable a compile gives. The program store stays off (stop_cache):
# tests trace as mcflops.run does.
engine.use_cache()
engine.stop_cache()
JAX_CACHE = jax.config.jax_compilation_cache_dir  # None when caches are off

# Property tests draw from a fixed seed (derandomized) like every other statistical test here: a CI
# failure is reproducible, and a run never depends on a local example database.
settings.register_profile("mcflops", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile("mcflops")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_configure(config):
    # Two processes (xdist workers, CLI runs) share the folder and JAX writes its entries unlocked: one read
    # while another process writes it warns and compiles instead; that is JAX working, not a test failing.
    config.addinivalue_line("filterwarnings", "ignore:Error reading persistent compilation cache entry")


@pytest.fixture(scope="session")
def jax_cache_env() -> dict[str, str]:
    """The environment that gives a child process this one's compilation cache (a child that runs programs
    the tests may have compiled already)."""
    return {"JAX_COMPILATION_CACHE_DIR": JAX_CACHE} if JAX_CACHE else {}


@pytest.fixture
def key():
    return jax.random.key(20261129)


# The files whose tests cost the most (they compile programs of their own, or start processes that do), most
# first: CPU seconds per file in a whole run from an empty cache (benchmarks/RESULTS.md, "Test suite"). Run first, they
# overlap the many short tests instead of finishing the run on one worker while the other waits: with
# `--dist loadscope` (pyproject.toml) a worker takes the next whole file when it is nearly idle, and a file's
# module fixtures and compiled programs serve all its tests in one process. Every other file keeps its place, and
# the tests of a file keep their order.
HEAVY_FIRST = (
    "tests/engine/test_devices.py",
    "tests/test_golden.py",
    "tests/test_notebook_api.py",
    "tests/analysis/test_ladder.py",
    "tests/analysis/test_compare.py",
    "tests/inference/test_update.py",
    "tests/test_properties.py",
    "tests/analysis/test_sensitivity.py",
    "tests/engine/test_extras.py",
    "tests/layoutfit/test_fit.py",
    "tests/cli/test_multiprocess.py",
    "tests/analysis/test_compare_scenarios.py",
    "tests/layoutfit/test_holdout.py",
    "tests/inference/test_nuts_conjugate.py",
    "tests/calibration/test_calibrate.py",
    "tests/analysis/test_plan_count.py",
    "tests/calibration/test_shipped_fit.py",
    "tests/analysis/test_plan.py",
    "tests/analysis/test_compare_ratio.py",
    "tests/calibration/test_validation.py",
    "tests/cli/test_locks.py",
    "tests/test_bench_gpu.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {f: i for i, f in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest as collected
