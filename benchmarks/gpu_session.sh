#!/usr/bin/env bash
# The prepared GPU session, one command on a GPU machine (benchmarks/RESULTS.md, "GPU"):
#
#     bash benchmarks/gpu_session.sh OUTDIR
#
# 1. bench.py --gpu: the prior pass at 1e8-1e10 draws, the posterior pass against it, Sobol, peak device memory,
#    determinism on the device and the CPU backend's sums against the device's (OUTDIR/gpu.json, written after
#    every step);
# 1b. gpu_sweep.py: the prior and posterior passes at 1e9 draws for several call shapes (histogram copies, batch);
# 2. the engine's tests with JAX on the GPU (the simulated-CPU-device tests excepted: they are CPU-only by design);
# 3. `mcflops sample` of the flagship at 1e9 draws, end to end.
#
# It needs the engine's dependencies only (jax with CUDA, numpy, scipy, ruamel.yaml, rich; pytest and hypothesis
# for step 2), no ArviZ and no matplotlib, and runs from the source tree (PYTHONPATH), so nothing is built. Each
# step has its own time limit, so one that hangs cannot cost the others.
set -u
OUTDIR=${1:?usage: gpu_session.sh OUTDIR}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}  # GPU_PLATFORM=cpu runs step 2 on the CPU (a check of the script)

{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
  "$PY" -c "import jax, numpy, scipy; print('jax', jax.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__); print(jax.devices())"
} 2>&1 | tee "$OUTDIR/machine.txt"

echo "== 1. bench.py --gpu"
timeout 200 "$PY" benchmarks/bench.py --gpu --json "$OUTDIR/gpu.json" 2>&1 | tee "$OUTDIR/bench.log"
echo "bench rc ${PIPESTATUS[0]}"

echo "== 1b. call shapes (gpu_sweep.py)"
timeout 150 "$PY" benchmarks/gpu_sweep.py --json "$OUTDIR/sweep.json" 2>&1 | tee "$OUTDIR/sweep.log"

echo "== 2. the engine's tests on the GPU"
# One process: several would each take the GPU's memory.
XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=${GPU_PLATFORM:-cuda} timeout 120 "$PY" -m pytest -q -p no:cacheprovider \
  -p no:xdist -o addopts="-ra" tests/engine --deselect tests/engine/test_devices.py 2>&1 | tee "$OUTDIR/engine_tests.log" | tail -40
echo "engine tests rc ${PIPESTATUS[0]}"

echo "== 3. mcflops sample priors/llama405b.yaml --samples 1e9 --json"
time timeout 90 "$PY" -m mcflops.cli sample priors/llama405b.yaml --samples 1e9 --json \
  > "$OUTDIR/sample_1e9.json" 2> "$OUTDIR/sample_1e9.err"
echo "sample rc $?"
tail -25 "$OUTDIR/sample_1e9.err"
head -c 1500 "$OUTDIR/sample_1e9.json"
