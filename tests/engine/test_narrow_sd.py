"""A near-degenerate output (sd of its log 1e-4): its sd from the e^d sums cancels in float32 (it came out
0 while its quantiles were right); the summary then takes it from the log moments (delta method). The
oracle is the closed form: GPU-hours = c / (MFU x goodput) with MFU beta and goodput uniform, independent,
so E[H^k] = c^k E[MFU^-k] E[G^-k] (beta: E[X^-1] = (a+b-1)/(a-1), E[X^-2] = (a+b-1)(a+b-2)/((a-1)(a-2));
uniform on [l, h]: E[G^-1] = ln(h/l)/(h-l), E[G^-2] = (1/l - 1/h)/(h-l)), in float64.
"""

import math

import mcflops

N = 1 << 17
MEAN, SD = 0.4, 4e-5
LO, HI = 0.9, 0.90001
SPEC = {"name": "narrow", "seed": 5, "samples": N, "hardware": {"accelerator": "h100", "count": 1024},
        "priors": {"params": "70B", "tokens": "15T", "mfu": {"beta": {"mean": MEAN, "sd": SD}},
                   "goodput": {"uniform": [LO, HI]}}}


def test_a_narrow_output_keeps_its_sd():
    res = mcflops.sample(SPEC)
    k = MEAN * (1 - MEAN) / SD**2 - 1  # beta's a + b from its mean and sd
    a, b = MEAN * k, (1 - MEAN) * k
    m1 = (a + b - 1) / (a - 1) * math.log(HI / LO) / (HI - LO)
    m2 = (a + b - 1) * (a + b - 2) / ((a - 1) * (a - 2)) * (1 / LO - 1 / HI) / (HI - LO)
    rel_sd = math.sqrt(m2 - m1 * m1) / m1  # sd / mean of GPU-hours (float64: no cancellation at 1e-8)
    got = res.prior["gpu_hours"]["sd"] / res.prior["gpu_hours"]["mean"]
    # an sd estimated from N draws has a relative standard error of about 1 / sqrt(2 N) (0.2% here):
    # 5 of them (a false failure about once in 1.7 million), plus the delta method's O(sd^2) (1e-8)
    assert abs(got / rel_sd - 1) < 5 / math.sqrt(2 * N), (got, rel_sd)
    # the inputs' moments are exact (the distribution's own), not the delta method's
    assert abs(res.prior["mfu"]["sd"] / SD - 1) < 1e-6
