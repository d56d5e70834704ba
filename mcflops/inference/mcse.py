"""Monte Carlo standard errors of Markov chain draws that account for their autocorrelation.

Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021), "Rank-normalization, folding, and localization:
an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2), as ArviZ computes them
(arviz_stats ``ess`` / ``mcse``; tests/inference/test_mcse.py checks these against it):

- ESS of a statistic: S / tau with tau = -1 + 2 sum_t rho_t, the autocorrelations rho_t combined over the
  chains (Sec. 3.2, Eq. 10-11) and summed with Geyer's initial monotone sequence (Geyer 1992, "Practical
  Markov chain Monte Carlo", Sec. 3.3); chains are split in halves first, so a drifting chain lowers it.
- mean: sd / sqrt(ESS of x); sd: the delta method on the variance, with the ESS of (x - mean)^2.
- a quantile q_p (Sec. 4.3): the ESS of the indicator 1{x <= q_p}, S_eff; the posterior of the
  probability below q_p is then Beta(S_eff p + 1, S_eff (1 - p) + 1), and the MCSE is half the spread of
  the draws between that Beta's 15.9% and 84.1% points (one normal sd either side).

Tail quantiles of a slowly mixing chain have far fewer effective draws than its bulk: an MCSE from the bulk
ESS understates their error. Plain NumPy and scipy.special (ArviZ is not needed to run).
"""

from __future__ import annotations

import math

import numpy as np

ONE_SD = (0.1586553, 0.8413447)  # Phi(-1), Phi(1): the probabilities arviz_stats uses


def _as_chains(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x[None, :] if x.ndim == 1 else x.reshape(x.shape[0], -1)


def split_chains(x) -> np.ndarray:
    """Each chain cut in two halves (an odd draw in the middle is left out): [2 chains, draws / 2]."""
    x = _as_chains(x)
    half = x.shape[1] // 2
    return np.vstack((x[:, :half], x[:, x.shape[1] - half:]))


def _autocov(x: np.ndarray) -> np.ndarray:
    """Autocovariance of each row at every lag, by FFT (divided by n, as Geyer's estimator expects)."""
    n = x.shape[1]
    m = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(x - x.mean(axis=1, keepdims=True), n=m, axis=1)
    return np.fft.irfft(f * np.conjugate(f), n=m, axis=1)[:, :n] / n


def ess(x) -> float:
    """Effective sample size of draws [chains, draws] (no splitting; see module doc)."""
    x = _as_chains(x)
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    chains, n = x.shape
    if n < 4:
        return math.nan
    acov = _autocov(x)
    mean_var = np.mean(acov[:, 0]) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n  # Vehtari et al. 2021, Eq. 3: within- plus between-chain variance
    if chains > 1:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    rho = np.zeros(n)
    rho[0] = even = 1.0
    rho[1] = odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    t = 1
    while t < n - 3 and even + odd > 0.0:  # Geyer's initial positive sequence of pair sums
        even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if even + odd >= 0:
            rho[t + 1], rho[t + 2] = even, odd
        t += 2
    max_t = t - 2
    if even > 0:
        rho[max_t + 1] = even
    t = 1
    while t <= max_t - 2:  # ... made monotone
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    size = chains * n
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1: max_t + 2])
    tau = max(tau, 1.0 / math.log10(size))  # antithetic chains: ESS at most S log10(S) (as ArviZ)
    return math.nan if np.isnan(rho).any() else float(size / tau)


def ess_mean(x) -> float:
    """ESS for the mean: of the split chains."""
    return ess(split_chains(x))


def ess_quantile(x, prob: float) -> float:
    """ESS for the quantile q_prob: of the indicator 1{x <= q_prob} on the split chains (Sec. 4.3)."""
    x = _as_chains(x)
    return ess(split_chains((x <= np.quantile(x, prob)).astype(np.float64)))


def mcse_mean(x) -> float:
    x = _as_chains(x)
    return float(np.std(x, ddof=1) / math.sqrt(ess_mean(x)))


def mcse_sd(x) -> float:
    """MCSE of the sd: var(s^2) = (m4 - m2^2) / ESS((x - mean)^2), then d sd = d var / (2 sd)."""
    c = _as_chains(x) - np.mean(x)
    m2 = np.mean(c**2)
    if m2 <= 0:
        return 0.0
    v = max(float(np.mean(c**4) - m2**2), 0.0) / ess_mean(c**2) / m2 / 4.0  # m4 - m2^2 >= 0 but for rounding
    return math.sqrt(v) if v >= 0 else math.nan


def mcse_quantile(x, prob: float) -> float:
    """MCSE of the quantile q_prob (module doc)."""
    from scipy.special import betaincinv  # the Beta quantile function

    x = _as_chains(x)
    s_eff = ess_quantile(x, prob)
    xs = np.sort(x.ravel())
    if not math.isfinite(s_eff):
        return math.nan
    a, b = (float(betaincinv(s_eff * prob + 1, s_eff * (1 - prob) + 1, p)) * xs.size - 1 for p in ONE_SD)
    lo = xs[int(math.floor(max(a, 0)))]
    hi = xs[int(math.ceil(min(b, xs.size - 1)))]
    return float((hi - lo) / 2)
