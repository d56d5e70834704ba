"""The engine: keyed, blocked, device-sharded draws reduced to sums (``run``), and reading those sums.

Input ``x`` in block ``b`` draws ``normals(fold_in(fold_in(key, crc32(x)), b), (size,))``, so a result is a
function of the seed and the sample count only: not of how many blocks one call handles, nor of how many
devices share them.

Importing it changes nothing in JAX: ``setup()`` (one CPU device per core, a multi-host run joined) is an
explicit call before the first JAX computation; ``mcflops.run`` and the command line make it.

- ``driver``: ``run`` (schedules blocks on the devices, sizes the PSIS tail's pool), ``run_rows`` (an
  analysis's extra rows alone); ``each_block`` and ``sum_blocks``, the block loop of the Sobol, Shapley and per-count passes;
- ``extras``: the extra rows an analysis asks a pass for (plan's, compare's, the scenarios'), ``extra`` and
  their readers;
- ``kernel``: the compiled program that reduces a block to sums; keyed draws (``draw_z``); ``likelihood``:
  the observations compiled for it;
- ``tree``: a call's blocks added on the device in fixed groups; ``merge``: adding the groups on the host
  in group order, the PSIS tail and reservoir; ``exact``: what needs no sampling;
- ``summary``: ``Sums`` and reading them (``ess``, the histograms' CDF and quantiles, moments);
- ``programs``: ``program`` (jax.jit whose executables a second process loads from disk), ``use_cache``;
- ``streams``: every PRNG stream id; ``devices``: ``setup``, ``mesh``; ``rng``: the fused generator.
"""

from mcflops.engine.devices import mesh, setup
from mcflops.engine.driver import POOL, POOL_ESS, each_block, pool_subblocks, run, run_rows, sum_blocks
from mcflops.engine.extras import Extra, extra, row_cdf, row_quantiles
from mcflops.engine.kernel import BLOCK, GPU_BATCH, GPU_HIST_COPIES, KEEP, NBINS, SUB, PassShape, draw_z, hist_index, normals, normals_at
from mcflops.engine.likelihood import Likelihood, build_likelihood, log_likelihood
from mcflops.engine.merge import psis_tail
from mcflops.engine.programs import Program, program, stop_cache, use_cache
from mcflops.engine.streams import (COMPARE, GUMBEL, NUTS, PLAN_PILOT, RESAMPLE, SHAPLEY, SOBOL_A, SOBOL_B, SWEEP,
                                    seed_key, stable_id)
from mcflops.engine.summary import Sums, ess, hist_cdf, hist_cdf_at, hist_quantiles, hist_quantiles_within

__all__ = ["BLOCK", "COMPARE", "Extra", "GPU_BATCH", "GPU_HIST_COPIES", "GUMBEL", "KEEP", "NBINS", "NUTS", "PLAN_PILOT", "POOL", "POOL_ESS", "RESAMPLE",
           "SHAPLEY", "SOBOL_A", "SOBOL_B", "SUB", "SWEEP", "PassShape", "Likelihood", "Sums", "build_likelihood",
           "draw_z", "each_block", "ess", "extra", "hist_cdf", "hist_cdf_at", "hist_index", "hist_quantiles",
           "hist_quantiles_within", "log_likelihood", "mesh", "normals", "normals_at", "pool_subblocks",
           "Program", "program", "psis_tail", "row_cdf", "row_quantiles", "stop_cache", "use_cache", "run", "run_rows",
           "seed_key", "setup", "stable_id", "sum_blocks"]
