"""Importance sampling from the engine's sums: the prior is the proposal, each draw weighted by the
observations' likelihood, blocks reduced to weighted moments and histograms (flat memory).

Diagnostics: Kish's effective sample size, ESS = (sum w)^2 / sum w^2 (Kish 1965, "Survey Sampling",
Sec. 11.7), and the Pareto k-hat of the weights (psis.py; Vehtari et al. 2024). ``poor_reasons`` says
when these cannot be trusted, so that the update can switch to NUTS.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from mcflops.engine import program, streams, summary
from mcflops.inference import psis
from mcflops.inference.summaries import hist_stats

ESS_MIN = 1000  # below this, the automatic method switches to NUTS
# A posterior log-sd under MIN_BINS histogram bins makes histogram quantiles coarse: linear interpolation of
# the CDF errs by up to w^2 max|f'| / 8 = 0.03 (w/s)^2 for a normal of sd s and bins of width w, i.e. under
# 0.008 in probability (0.02 s in a quantile) at 2 bins per sd. Means and sds come from moment sums, exact.
MIN_BINS = 2


def reservoir_draws(sums, key) -> tuple[np.ndarray, float]:
    """Equally weighted posterior draws [Q, K] (centred logs) from the engine's Gumbel-top-k reservoir.

    The reservoir holds the K largest ll + Gumbel keys: a weighted sample without replacement, whose
    inclusion probability given the threshold kappa (the K-th key) is q_i = 1 - exp(-exp(ll_i - kappa));
    weighting each kept draw by w_i / q_i makes it unbiased (Kool, van Hoof & Welling 2019, "Stochastic
    beams and where to find them", Sec. 4.1; Duffield, Lund & Thorup 2007, priority sampling).
    Systematic resampling (Kitagawa 1996) turns those weights into equal ones: when the ESS is much
    larger than K the weights are already equal and every draw is kept once. The threshold is a key, not a
    draw, so a reservoir of K keys gives K - 1 draws (engine.KEEP - 1 posterior draws against KEEP prior ones).

    Also returns the resample's effective size: Kish's ESS of the weights w_i / q_i (at most K - 1).
    """
    r = sums.reservoir
    keys, ll, D = np.asarray(r["key"]), np.asarray(r["ll"]), np.asarray(r["D"])
    kappa = keys[-1]
    ok = np.isfinite(keys[:-1]) & np.isfinite(ll[:-1])
    ll, D = ll[:-1][ok], D[:, :-1][:, ok]
    if ll.size == 0:
        return D, 0.0
    if np.isfinite(kappa):
        logq = np.log(-np.expm1(-np.exp(np.minimum(ll - kappa, 700.0))))
    else:
        logq = np.zeros_like(ll)
    lw = ll - logq
    w = np.exp(lw - lw.max())
    cum = np.cumsum(w / w.sum())
    u0 = float(_resample_start(key))
    idx = np.searchsorted(cum, (u0 + np.arange(ll.size)) / ll.size, side="left")
    return D[:, np.minimum(idx, ll.size - 1)], float(summary.ess(float(w.sum()), float(np.sum(w * w))))


def _u0(key):
    import jax

    return jax.random.uniform(jax.random.fold_in(key, streams.RESAMPLE), ())


_resample_start = program(_u0)  # one program, kept across runs (engine.program), for two eager calls


def importance_posterior(sums, centers: Mapping[str, float]) -> tuple[dict[str, dict], float]:
    """The summary of every tracked quantity under the weighted sums, and Kish's ESS."""
    s = sums.post
    n_eff = summary.ess(float(s["s0"]), float(s["s0w2"]))
    return ({n: hist_stats(s, i, centers[n], sums.lo[i], sums.width[i], n_eff) for i, n in enumerate(sums.names)},
            n_eff)


def poor_reasons(khat: float, n_eff: float, sums) -> list[str]:
    """Why importance sampling cannot be trusted here (empty: it can): k-hat above the sample-size-dependent
    threshold of the draws it was fitted to (psis.khat_threshold), or Kish's ESS under ESS_MIN."""
    why = []
    k_max = psis.khat_threshold(sums.pool or sums.n)
    if khat > k_max:
        why.append(f"Pareto k-hat {khat:.2f} > {k_max:.2f} (heavy-tailed weights; Vehtari et al. 2024)")
    if n_eff < ESS_MIN:
        why.append(f"effective sample size {n_eff:.0f} < {ESS_MIN} of {sums.n:,} draws")
    return why


def thin(stats: Mapping[str, dict], sums) -> list[str]:
    """The quantities whose posterior is narrower than MIN_BINS histogram bins (their histogram quantiles
    would be coarse): an observed quantity and what is fixed by it, under a sharp observation."""
    return [n for i, n in enumerate(sums.names)
            if 0 < stats[n]["log_sd"] < MIN_BINS * sums.width[i] and sums.prior["s2d"][i] > 0]
