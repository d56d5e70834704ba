"""A file with exactly one uncertain input: every output is then that input times a constant, and the
kernel has no "sampled" row to histogram (each row's distribution is known exactly from the input's).
That layout once crashed the kernel (an empty float index); the quantiles must follow the closed form.
"""

import math

import numpy as np
from scipy import stats

import mcflops

N = 1 << 17
SPEC = {"name": "one-input", "seed": 3, "samples": N,
        "hardware": {"accelerator": "h100", "count": 1024},
        "priors": {"params": "70B", "tokens": {"lognormal": ["10T", "20T"]}, "mfu": 0.4}}


def test_one_uncertain_input_matches_the_lognormal_closed_form():
    res = mcflops.sample(SPEC)
    # tokens lognormal from its 5% and 95% points: median sqrt(lo hi), sigma ln(hi / lo) / (2 z_0.95)
    median = math.sqrt(10e12 * 20e12)
    sigma = math.log(2.0) / (2.0 * stats.norm.ppf(0.95))
    scale = 6.0 * 70e9 / (989.4e12 * 0.4) / 3600.0  # GPU-hours per token (6ND, the catalogue's H100 peak)
    for p in (0.05, 0.5, 0.95):
        want = scale * median * math.exp(sigma * stats.norm.ppf(p))
        got = res.quantile("gpu_hours", p)
        # the MCSE of a sample quantile of log hours: sqrt(p (1 - p) / n) / phi(z_p) x sigma; 5 of them
        # (a false failure about once in 1.7 million per check), plus the float32 chain's rounding
        se = math.sqrt(p * (1 - p) / N) / stats.norm.pdf(stats.norm.ppf(p)) * sigma
        assert abs(math.log(got / want)) < 5 * se + 1e-5, (p, got, want)
    assert np.isfinite(res.prior["gpu_hours"]["sd"])
