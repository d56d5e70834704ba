"""The devices the engine runs on: ``setup()`` (one CPU device per core, a multi-host run joined) and the
mesh blocks are sharded over.

Importing the engine changes nothing in JAX. ``setup()`` is an explicit call, made before the first JAX
computation by whoever starts one: ``mcflops.run`` (``api.run``) and the command line do; a notebook that
calls ``engine.run`` (or ``analysis``) directly calls ``engine.setup()`` first to use every core. It is
cheap and idempotent; once JAX's backends have started it leaves their devices as they are.
"""

from __future__ import annotations

import os

import jax
import numpy as np

_done = False


def setup() -> None:
    """Before any JAX computation: one CPU device per core (``_one_device_per_core``), then join a multi-host
    run when the environment asks for one (``_join_cluster``). Later calls do nothing."""
    global _done
    if _done:
        return
    _one_device_per_core()
    _join_cluster()
    _done = True


def _one_device_per_core() -> None:
    """On the CPU, one JAX device per core (``MCFLOPS_CPU_DEVICES`` overrides), so that blocks run on every
    core: XLA runs one program of the engine's kernel on about one core. Never over an explicit setting
    (XLA_FLAGS device count, jax_num_cpu_devices), and not once JAX's backends have started."""
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "") or jax.config.jax_num_cpu_devices >= 0:
        return
    want = os.environ.get("MCFLOPS_CPU_DEVICES")
    try:
        n = int(want) if want else len(os.sched_getaffinity(0))
    except (ValueError, AttributeError):
        n = os.cpu_count() or 1
    if n > 1:
        try:
            jax.config.update("jax_num_cpu_devices", min(n, 64))
        except RuntimeError:  # JAX refuses once its backends have started: keep the devices they have
            pass


def _join_cluster() -> bool:
    """Join a multi-process JAX run (JAX's own runtime) when the environment asks for one:
    ``JAX_COORDINATOR_ADDRESS`` (with ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``), or
    ``MCFLOPS_DISTRIBUTED=1`` on a cluster JAX detects by itself (SLURM, Open MPI, Kubernetes).
    True if this process is part of one."""
    env = os.environ
    if jax.distributed.is_initialized():
        return True
    if env.get("JAX_COORDINATOR_ADDRESS"):
        kw = {k: int(env[v]) for k, v in (("num_processes", "JAX_NUM_PROCESSES"), ("process_id", "JAX_PROCESS_ID"))
              if v in env}
        jax.distributed.initialize(**kw)
        return True
    if env.get("MCFLOPS_DISTRIBUTED") == "1":
        jax.distributed.initialize()
        return True
    return False


def mesh():
    """A 1-D mesh over every device of every process (blocks are sharded along it)."""
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()), ("blocks",))
