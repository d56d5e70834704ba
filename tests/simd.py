"""The other SIMD paths of an x86-64 CPU, for tests that say a number is the same on every machine.

NumPy dispatches its loops to the widest instruction set the CPU has (AVX-512 here and on CI's machine)
and XLA's CPU compiler does the same; the environment below holds both to AVX2, as on a CPU without
AVX-512. A reduction then adds in another order and a libm call may take another polynomial: the last
bits of a float change, nothing else. On a CPU without AVX-512 it changes nothing (the test still runs).
`.ci/run` runs the golden and determinism tests a second time with this environment set."""

from __future__ import annotations

import os

AVX2 = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}


def avx2_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with NumPy and XLA held to AVX2; XLA flags already
    set (a device count) are kept."""
    env = dict(os.environ if base is None else base)
    flags = " ".join(f for f in (env.get("XLA_FLAGS", ""), AVX2["XLA_FLAGS"]) if f)
    return {**env, "NPY_DISABLE_CPU_FEATURES": AVX2["NPY_DISABLE_CPU_FEATURES"], "XLA_FLAGS": flags}


def with_host_devices(n: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``n`` XLA host devices, the XLA flags already
    set kept: a child started under the AVX2 environment must stay on the AVX2 paths its parent takes,
    or the two differ in the last bits for a reason that is not the one under test."""
    env = dict(os.environ if base is None else base)
    kept = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    return {**env, "XLA_FLAGS": " ".join([*kept, f"--xla_force_host_platform_device_count={n}"])}
