"""Pareto k-hat of importance weights (PSIS diagnostic) from the largest log-weights only.

Vehtari, Simpson, Gelman, Yao & Gabry (2024), "Pareto smoothed importance sampling", JMLR 25(72):
fit a generalized Pareto distribution (GPD) to the M largest weights above the (M+1)-th largest,
with M = floor(3 sqrt(S / r_eff)) when S r_eff > 225 and floor(S / 5) otherwise (the rule of
arviz-stats; r_eff = 1 for independent prior draws). The shape estimate k-hat says how many moments
the weight distribution has: k < 0.5 finite variance; k <= 0.7 reliable in practice (Sec. 3.2:
above 0.7 the estimate converges too slowly to trust at any practical S).

The GPD fit is Zhang & Stephens (2009), "A new and efficient estimation method for the generalized
Pareto distribution", Technometrics 51(3): a quasi-posterior mean of theta = -k/sigma over a grid
of m = 30 + floor(sqrt(n)) values, then k from theta. The estimate is shrunk towards 0.5 with the
weakly informative prior of Vehtari et al. (2024, Appendix C): k <- (n k + 10 * 0.5) / (n + 10).

Only the tail matters, so the engine keeps just the largest ``ktop`` log-likelihoods per run
(mergeable across blocks) and this module needs nothing else. Plain NumPy, float64.
"""

from __future__ import annotations

import math

import numpy as np

PRIOR_K, PRIOR_N = 0.5, 10.0  # weakly informative prior on k (Vehtari et al. 2024, Appendix C)
K_GOOD = 0.7  # above this, importance sampling is unreliable (Vehtari et al. 2024, Sec. 3.2)


def khat_threshold(n: int) -> float:
    """The largest k-hat at which n weights are trusted: min(1 - 1/log10(n), 0.7) (Vehtari et al. 2024,
    Sec. 3.2: the sample-size-dependent threshold; arviz-stats' ``good_k``). Fewer draws need a lighter
    tail: the threshold is 0.5 at n = 100 and 0.7 from n = 2154 on."""
    return min(1.0 - 1.0 / math.log10(n), K_GOOD) if n > 1 else K_GOOD


def tail_length(n: int, r_eff: float = 1.0) -> int:
    """M, the number of largest weights in the tail fit (Vehtari et al. 2024, Sec. 3; arviz-stats)."""
    if n * r_eff > 225:
        return int(math.floor(3.0 * math.sqrt(n / r_eff)))
    return int(math.floor(n / 5))


def gpd_fit(x: np.ndarray) -> tuple[float, float]:
    """(k, sigma) of a GPD with location 0 fitted to positive exceedances ``x`` (sorted ascending).

    Zhang & Stephens (2009), Sec. 3: theta_j = 1/x_(n) + (1 - sqrt(m / (j - 1/2))) / (3 x*), x* the
    first quartile x_(floor(n/4 + 1/2)); profile log-likelihood l(theta) = n (log(theta / k(theta)) -
    k(theta) - 1) with k(theta) = -mean(log(1 - theta x)) in their sign convention; theta-hat is the
    l-weighted mean of the grid. Returned k uses the PSIS sign (k > 0: heavy tail) and includes the
    weakly informative prior. NaN when the sample cannot be GPD-like (x* not above the minimum).
    """
    x = np.asarray(x, np.float64)
    n = len(x)
    m = 30 + int(math.floor(math.sqrt(n)))
    q1 = x[int(math.floor(n / 4 + 0.5)) - 1]
    if not q1 > x[0]:
        return math.nan, math.nan
    j = np.arange(1, m + 1, dtype=np.float64)
    theta = 1.0 / x[-1] + (1.0 - np.sqrt(m / (j - 0.5))) / (3.0 * q1)
    kz = np.mean(np.log1p(-theta[:, None] * x[None, :]), axis=1)  # = -k_ZS(theta) = PSIS k at theta
    loglik = n * (np.log(-theta / kz) - kz - 1.0)
    w = np.exp(loglik - np.max(loglik))
    w = np.where(w >= 10 * np.finfo(float).eps * w.sum(), w, 0.0)  # drop negligible grid points
    theta_hat = float(np.sum(theta * w) / np.sum(w))
    k = float(np.mean(np.log1p(-theta_hat * x)))
    sigma = -k / theta_hat
    k = (n * k + PRIOR_N * PRIOR_K) / (n + PRIOR_N)
    return (k if math.isfinite(k) else math.inf), sigma


def khat_from_top(top: np.ndarray, n: int) -> float:
    """Pareto k-hat of n importance log-weights given (at least) their largest values ``top``.

    Uses the M = tail_length(n) largest as the tail and the (M+1)-th largest as the threshold. When
    ``top`` holds only M values (the engine keeps ceil(3 sqrt(n)), which equals M when 3 sqrt(n) is
    a whole number), the smallest kept value is the threshold and the tail has M - 1 draws: the fit
    then uses one draw fewer than arviz-stats would (a change of order 1/M in k-hat).

    Returns -inf when the weights are all equal (interval observations only: k-hat is undefined and
    importance sampling is rejection sampling), +inf when fewer than 5 tail weights are positive.
    """
    top = np.sort(np.asarray(top, np.float64))
    if top.size < 2:
        return math.inf
    m = min(tail_length(n), top.size - 1)
    tail, cut = top[-m:], top[-m - 1]
    mx = tail[-1]
    if not np.isfinite(mx) or np.sum(np.isfinite(tail)) < 5:
        return math.inf
    if np.isfinite(cut) and mx - cut <= 0:
        return -math.inf
    cut_w = math.exp(cut - mx) if np.isfinite(cut) else 0.0
    x = np.exp(tail - mx) - cut_w  # exceedances of the weights (scaled by the largest) over the threshold
    k, _ = gpd_fit(x)
    return k


def khat_from_logw(logw: np.ndarray) -> float:
    """Pareto k-hat of a full array of log-weights (the same fit; for tests and NumPy users)."""
    logw = np.asarray(logw, np.float64).ravel()
    m = tail_length(logw.size)
    part = np.partition(logw, logw.size - m - 1)[logw.size - m - 1:]
    return khat_from_top(part, logw.size)
