"""Plain NumPy float64 reference for the "405B" benchmark model (issue 6).

    gpu_hours = 6 * N * D / (peak * mfu * goodput) / 3600        (Kaplan et al. 2020, C ~ 6ND)

Priors (the benchmark model, not a claim about Llama 3.1 405B):

* N       = 405.9e9 parameters (point)
* D       ~ lognormal, 90% interval [15.0e12, 16.8e12] tokens
* mfu     ~ Beta with mean 0.40, sd 0.03 (method of moments)
* goodput ~ Beta whose 5% and 95% quantiles are 0.85 and 0.97 (solved with scipy.optimize
            on scipy.stats.beta.ppf)
* peak    = 989.4e12 FLOP/s (H100 SXM dense BF16, point)

``PRIORS`` holds the solved parameters so other benchmarks and tests reuse them.
``run(n, seed)`` draws in chunks (default 1e6) with ``np.random.default_rng(seed)``, keeps all
draws, and returns quantiles (``np.quantile``), mean, sd, seconds and draws/s.
Run ``python benchmarks/reference_numpy.py [n] [seed]`` to print JSON.
"""

from __future__ import annotations

import json
import math
import sys
import time

import numpy as np
from scipy import optimize, stats

QUANTILES = (0.05, 0.25, 0.50, 0.75, 0.95)
QUANTILE_NAMES = ("p5", "p25", "p50", "p75", "p95")
Z95 = float(stats.norm.ppf(0.95))  # 1.6448536..., half-width of a 90% interval in sds


def _lognormal_from_90(lo: float, hi: float) -> dict:
    """mu, sigma of ln X such that [lo, hi] is the central 90% interval."""
    mu = 0.5 * (math.log(lo) + math.log(hi))
    sigma = (math.log(hi) - math.log(lo)) / (2.0 * Z95)
    return {"lo": lo, "hi": hi, "mu": mu, "sigma": sigma}


def _beta_from_mean_sd(mean: float, sd: float) -> dict:
    """Method of moments: var = m(1-m)/(a+b+1)."""
    total = mean * (1.0 - mean) / sd**2 - 1.0
    return {"mean": mean, "sd": sd, "a": mean * total, "b": (1.0 - mean) * total}


def _beta_from_quantiles(q_lo: float, q_hi: float, p_lo: float = 0.05, p_hi: float = 0.95) -> dict:
    """Solve (a, b) with beta.ppf(p_lo) = q_lo, beta.ppf(p_hi) = q_hi (in log a, log b)."""

    def resid(log_ab: np.ndarray) -> np.ndarray:
        a, b = np.exp(log_ab)
        return np.array([stats.beta.ppf(p_lo, a, b) - q_lo, stats.beta.ppf(p_hi, a, b) - q_hi])

    # Start from the moments of a normal with the same 90% interval.
    m = 0.5 * (q_lo + q_hi)
    s = (q_hi - q_lo) / (2.0 * Z95)
    start = _beta_from_mean_sd(m, s)
    sol = optimize.least_squares(resid, np.log([start["a"], start["b"]]), xtol=1e-14, ftol=1e-14)
    a, b = (float(v) for v in np.exp(sol.x))
    err = float(np.max(np.abs(resid(sol.x))))
    if err > 1e-9:
        raise RuntimeError(f"beta quantile fit did not converge: max residual {err:.3g}")
    return {"q05": q_lo, "q95": q_hi, "a": a, "b": b, "max_residual": err}


PRIORS: dict = {
    "params": 405.9e9,
    "tokens": _lognormal_from_90(15.0e12, 16.8e12),
    "mfu": _beta_from_mean_sd(0.40, 0.03),
    "goodput": _beta_from_quantiles(0.85, 0.97),
    "peak_flops": 989.4e12,
}


def gpu_hours(params, tokens, mfu, goodput, peak_flops):
    """6ND / (peak * mfu * goodput) / 3600 (Kaplan et al. 2020 for 6ND)."""
    return 6.0 * params * tokens / (peak_flops * mfu * goodput) / 3600.0


def summarize(x: np.ndarray) -> dict:
    qs = np.quantile(x, QUANTILES)
    return {
        "quantiles": {k: float(v) for k, v in zip(QUANTILE_NAMES, qs)},
        "mean": float(np.mean(x)),
        "sd": float(np.std(x, ddof=1)),
    }


def run(n: int, seed: int = 0, chunk: int = 1_000_000) -> dict:
    """Draw ``n`` samples of gpu_hours (float64) in chunks; summarize all draws."""
    n = int(n)
    chunk = int(chunk)
    p = PRIORS
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        tokens = rng.lognormal(p["tokens"]["mu"], p["tokens"]["sigma"], m)
        mfu = rng.beta(p["mfu"]["a"], p["mfu"]["b"], m)
        goodput = rng.beta(p["goodput"]["a"], p["goodput"]["b"], m)
        out[start : start + m] = gpu_hours(p["params"], tokens, mfu, goodput, p["peak_flops"])
    res = summarize(out)
    seconds = time.perf_counter() - t0
    res.update({"n": n, "seed": seed, "seconds": seconds, "draws_per_s": n / seconds})
    return res


if __name__ == "__main__":
    n_arg = int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000
    seed_arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print(json.dumps({"priors": PRIORS, "result": run(n_arg, seed_arg)}, indent=2))
