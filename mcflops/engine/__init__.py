"""The engine: keyed, blocked, device-sharded draws reduced to sums (``run``), and reading those sums.

Input ``x`` in block ``b`` draws ``normals(fold_in(fold_in(key, crc32(x)), b), (size,))``, so a result is a
function of the seed and the sample count only: not of how many blocks one call handles, nor of how many
devices share them.
"""

from mcflops.engine.driver import POOL, POOL_ESS, Sums, pool_subblocks, psis_tail, run, sum_blocks
from mcflops.engine.kernel import (BLOCK, GPU_BATCH, KEEP, NBINS, SUB, Layout, Likelihood, build_likelihood, draw_z,
                                   log_likelihood, mesh, normals, stable_id)

__all__ = ["BLOCK", "GPU_BATCH", "KEEP", "NBINS", "POOL", "POOL_ESS", "SUB", "Layout", "Likelihood", "Sums",
           "build_likelihood", "draw_z", "log_likelihood", "mesh", "normals", "pool_subblocks", "psis_tail", "run",
           "stable_id", "sum_blocks"]
