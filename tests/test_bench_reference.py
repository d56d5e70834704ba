"""The benchmark compares like with like: the engine and the plain NumPy reference (benchmarks/) sample
the same model, so their gpu_hours distributions agree within Monte Carlo error (issue 6)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench  # noqa: E402
import reference_numpy  # noqa: E402

N = 400_000
K = 4.5  # |difference| < 4.5 standard errors: two-sided false-failure rate 7e-6 per comparison (normal)


def test_engine_and_numpy_reference_sample_the_same_model():
    res = bench.engine_prior(N)
    eng = res.prior["gpu_hours"]
    ref = reference_numpy.run(N, seed=7, chunk=100_000)
    # means: independent samples, SE of each = sd / sqrt(n)
    se = math.hypot(eng["sd"], ref["sd"]) / math.sqrt(N)
    assert abs(eng["mean"] - ref["mean"]) < K * se
    # sd: SE of a sample sd ~ sd * sqrt((kurtosis - 1) / (4 n)); this output's excess kurtosis is < 1,
    # so sqrt(2 / (4 n)) sd per sample bounds it
    se_sd = math.hypot(eng["sd"], ref["sd"]) * math.sqrt(2.0 / (4 * N))
    assert abs(eng["sd"] - ref["sd"]) < K * se_sd
    # median: the engine reports its own MCSE; the reference's is the same for the same n and density
    assert abs(eng["p50"] - ref["quantiles"]["p50"]) < K * math.sqrt(2.0) * eng["mcse_p50"]
    # the 5% and 95% quantiles: a 4.5-sigma order-statistic band of the reference's p (binomial)
    x = _reference_draws(N)
    for p, k in ((0.05, "p5"), (0.95, "p95")):
        band = K * math.sqrt(p * (1 - p) / N)
        lo, hi = np.quantile(x, [p - 1.5 * band, p + 1.5 * band])  # 1.5 > sqrt(2): both samples vary
        assert lo < eng[k] < hi, (k, lo, eng[k], hi)


def _reference_draws(n: int) -> np.ndarray:
    p = reference_numpy.PRIORS
    rng = np.random.default_rng(11)
    tokens = rng.lognormal(p["tokens"]["mu"], p["tokens"]["sigma"], n)
    mfu = rng.beta(p["mfu"]["a"], p["mfu"]["b"], n)
    goodput = rng.beta(p["goodput"]["a"], p["goodput"]["b"], n)
    return reference_numpy.gpu_hours(p["params"], tokens, mfu, goodput, p["peak_flops"])


def test_sobol_benchmark_spec_has_five_uncertain_inputs():
    from mcflops import load_spec
    from mcflops.model.compute import build_model

    assert len(build_model(load_spec(bench.SOBOL_SPEC)).uncertain) == 5
