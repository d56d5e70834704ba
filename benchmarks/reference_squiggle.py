"""squigglepy reference for the "405B" benchmark model (issue 6).

The same model and priors as ``reference_numpy.py`` (imported from there as ``PRIORS``),
written the way a squigglepy user would: distributions composed with arithmetic, then
``sq.sample(model, n)``. ``sq.lognorm(lo, hi)`` takes a 90% interval; ``sq.beta(a, b)``.

    gpu_hours = 6 * N * D / (peak * mfu * goodput) / 3600        (Kaplan et al. 2020, C ~ 6ND)

``run(n, seed)`` returns the same shape as ``reference_numpy.run``.
Run ``python benchmarks/reference_squiggle.py [n] [seed]`` to print JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import squigglepy as sq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_numpy import PRIORS, summarize  # noqa: E402


def model():
    """The composed squigglepy distribution of gpu_hours."""
    p = PRIORS
    tokens = sq.lognorm(p["tokens"]["lo"], p["tokens"]["hi"])  # 90% interval
    mfu = sq.beta(p["mfu"]["a"], p["mfu"]["b"])
    goodput = sq.beta(p["goodput"]["a"], p["goodput"]["b"])
    return 6.0 * p["params"] * tokens / (p["peak_flops"] * mfu * goodput) / 3600.0


def run(n: int, seed: int = 0) -> dict:
    """Draw ``n`` samples of gpu_hours with squigglepy (one call); summarize all draws."""
    n = int(n)
    t0 = time.perf_counter()
    sq.set_seed(seed)
    x = sq.sample(model(), n)
    res = summarize(x)
    seconds = time.perf_counter() - t0
    res.update({"n": n, "seed": seed, "seconds": seconds, "draws_per_s": n / seconds})
    return res


if __name__ == "__main__":
    n_arg = int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000
    seed_arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print(json.dumps({"result": run(n_arg, seed_arg)}, indent=2))
