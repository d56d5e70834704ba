"""Monte Carlo standard errors of Markov chains (inference/mcse.py) against ArviZ and a closed form.

- ArviZ (arviz_stats): the same ESS and MCSE of the mean, the sd and quantiles, to rounding, on a fixture.
- Closed form: a stationary Gaussian AR(1) chain x_t = phi x_(t-1) + sqrt(1 - phi^2) e_t has N(0, 1)
  marginals and autocorrelation phi^t, so its integrated autocorrelation time for the mean is
  (1 + phi) / (1 - phi) (Geyer 1992, "Practical Markov chain Monte Carlo", Sec. 3.1) and for the indicator
  1{x <= q_p} it is 1 + 2 sum_t (Phi2(q_p, q_p; phi^t) - p^2) / (p (1 - p)), Phi2 the bivariate normal CDF.
  Over R independent replicates the errors divided by their stated MCSE have sd 1 when the MCSE is right
  (sqrt(tau) = 2.4 at phi = 0.7 for an MCSE that ignores the autocorrelation). The sd of R = 200 such
  z-scores has a sampling sd of ~ 1 / sqrt(2 R) = 0.05: the band [0.8, 1.2] is 4 of those.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from mcflops.inference import mcse
from mcflops.inference.summaries import sample_stats

PHI = 0.7


def ar1(rng, chains: int, n: int, phi: float = PHI) -> np.ndarray:
    from scipy.signal import lfilter

    e = rng.standard_normal((chains, n))
    x = np.empty((chains, n))
    x[:, 0] = e[:, 0]  # a stationary start
    x[:, 1:] = lfilter([math.sqrt(1 - phi * phi)], [1.0, -phi], e[:, 1:], axis=1, zi=phi * e[:, :1])[0]
    return x


def test_equals_arviz_on_a_fixture():
    azs = pytest.importorskip("arviz_stats")
    x = np.exp(0.3 * ar1(np.random.default_rng(1), 4, 1000, 0.9))  # skewed, strongly autocorrelated
    assert mcse.ess_mean(x) == pytest.approx(float(azs.ess(x, method="mean")), rel=1e-9)
    assert mcse.mcse_mean(x) == pytest.approx(float(azs.mcse(x, method="mean")), rel=1e-9)
    assert mcse.mcse_sd(x) == pytest.approx(float(azs.mcse(x, method="sd")), rel=1e-9)
    for p in (0.05, 0.5, 0.95):
        assert mcse.ess_quantile(x, p) == pytest.approx(float(azs.ess(x, method="quantile", prob=p)), rel=1e-9)
        assert mcse.mcse_quantile(x, p) == pytest.approx(float(azs.mcse(x, method="quantile", prob=p)), rel=1e-9)
    # the summaries of NUTS draws ([chains, draws] of a centred log) carry these
    st = sample_stats(np.log(x), 0.0, 1.0, chains=True)
    assert st["mcse_p5"] == pytest.approx(float(azs.mcse(x, method="quantile", prob=0.05)), rel=1e-9)
    assert st["mcse_mean"] == pytest.approx(float(azs.mcse(x, method="mean")), rel=1e-9)


def test_ess_matches_the_ar1_integrated_autocorrelation_time():
    x = ar1(np.random.default_rng(2), 4, 50_000)
    tau = (1 + PHI) / (1 - PHI)
    # Geyer's estimator of tau from 200,000 draws: relative sd ~ sqrt(2 (2 M + 1) / S) ~ 2% for a window M ~ 20
    assert mcse.ess_mean(x) == pytest.approx(x.size / tau, rel=0.1)
    p = 0.05
    q = stats.norm.ppf(p)
    t = np.arange(1, 200)
    joint = np.array([stats.multivariate_normal([0, 0], [[1, PHI**k], [PHI**k, 1]]).cdf([q, q]) for k in t])
    tau_i = 1 + 2 * np.sum((joint - p * p) / (p * (1 - p)))
    assert mcse.ess_quantile(x, p) == pytest.approx(x.size / tau_i, rel=0.15)


def test_mcse_is_calibrated_on_autocorrelated_chains():
    rng = np.random.default_rng(3)
    z_mean, z_p5, z_iid = [], [], []
    q = stats.norm.ppf(0.05)
    for _ in range(200):
        x = ar1(rng, 4, 1000)
        z_mean.append(np.mean(x) / mcse.mcse_mean(x))
        z_p5.append((np.quantile(x, 0.05) - q) / mcse.mcse_quantile(x, 0.05))
        z_iid.append(np.mean(x) / (np.std(x) / math.sqrt(x.size)))  # what ignoring the autocorrelation says
    assert 0.8 < np.std(z_mean) < 1.2, np.std(z_mean)
    assert 0.8 < np.std(z_p5) < 1.2, np.std(z_p5)
    assert np.std(z_iid) > 2.0  # sqrt((1 + phi) / (1 - phi)) = 2.4: the error an iid MCSE understates
