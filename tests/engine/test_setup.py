"""Importing mcflops or the engine leaves JAX alone; ``engine.setup()`` claims one CPU device per core (or
MCFLOPS_CPU_DEVICES), never over an explicit setting, idempotent, and harmless once JAX has started."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("XLA_FLAGS", "MCFLOPS_CPU_DEVICES", "MCFLOPS_DISTRIBUTED", "JAX_COORDINATOR_ADDRESS",
                         "JAX_NUM_CPU_DEVICES")}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                         check=False, env={**base, "JAX_PLATFORMS": "cpu", **env}, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_importing_changes_nothing_in_jax():
    """After importing the package and the engine, JAX's backends have not started (the device count can still
    be set) and no cluster was joined, even where the environment would ask setup() for one."""
    got = _python("""
        import mcflops, mcflops.engine, mcflops.api
        import jax
        joined = jax.distributed.is_initialized()
        jax.config.update("jax_num_cpu_devices", 3)
        print(jax.device_count(), joined)
    """, MCFLOPS_CPU_DEVICES="2", MCFLOPS_DISTRIBUTED="0")
    assert got == "3 False"


def test_setup_claims_the_devices_once():
    got = _python("""
        import jax
        from mcflops import engine
        engine.setup()
        engine.setup()
        print(jax.device_count(), jax.config.jax_num_cpu_devices)
    """, MCFLOPS_CPU_DEVICES="3")
    assert got == "3 3"


def test_setup_leaves_explicit_settings_and_started_backends_alone():
    flags = _python("""
        import jax
        from mcflops import engine
        engine.setup()
        print(jax.device_count())
    """, MCFLOPS_CPU_DEVICES="3", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    assert flags == "2"
    started = _python("""
        import jax, jax.numpy as jnp
        from mcflops import engine
        jnp.ones(2).block_until_ready()  # JAX has started: too late to add devices, and no error
        engine.setup()
        print(jax.device_count())
    """, MCFLOPS_CPU_DEVICES="3")
    assert started == "1"


def test_a_run_sets_up_the_devices(jax_cache_env):
    """mcflops.run calls setup() before its first JAX computation."""
    got = _python("""
        import jax, mcflops
        mcflops.run({"name": "s", "hardware": {"accelerator": "h100-sxm"},
                     "priors": {"params": 7e9, "tokens": 1e12, "mfu": {"beta": [0.3, 0.5]}}}, samples=1000)
        print(jax.device_count())
    """, MCFLOPS_CPU_DEVICES="3", **jax_cache_env)
    assert got == "3"


def test_setup_joins_a_cluster_when_the_environment_asks(monkeypatch):
    """JAX_COORDINATOR_ADDRESS (with the process count and id) or MCFLOPS_DISTRIBUTED=1: jax.distributed joined
    once, with the environment's numbers; neither: not joined."""
    import jax

    from mcflops.engine import devices

    calls = []
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: bool(calls))
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "MCFLOPS_DISTRIBUTED"):
        monkeypatch.delenv(k, raising=False)
    assert devices._join_cluster() is False and calls == []
    monkeypatch.setenv("MCFLOPS_DISTRIBUTED", "1")
    assert devices._join_cluster() is True and calls == [{}]
    calls.clear()
    monkeypatch.delenv("MCFLOPS_DISTRIBUTED")
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "host0:1234")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "4")
    monkeypatch.setenv("JAX_PROCESS_ID", "2")
    assert devices._join_cluster() is True and calls == [{"num_processes": 4, "process_id": 2}]
    assert devices._join_cluster() is True and len(calls) == 1  # joined already: not again
