"""Conditioning a sample of a prior on a measurement by importance weights (Bayes' rule on a sample of the prior;
Smith & Gelfand 1992, "Bayesian statistics without tears"), NumPy only: the pilot's likelihood, the weights'
effective sample size and weighted quantiles. One formula in one place: the ladder's pilot rung
(mcflops.analysis.pilot) and the pilot's held-out validation (mcflops.layoutfit.pilots) both call these."""

from __future__ import annotations

import math

import numpy as np


def log_weights(observed: float, predicted: np.ndarray, sigma: float) -> np.ndarray:
    """log w_i = -z_i^2 / 2, z_i = (log observed - log predicted_i) / sigma: a measurement with a normal error of
    ``sigma`` in log space (a lognormal likelihood), up to a constant."""
    z = (math.log(observed) - np.log(np.asarray(predicted, float))) / sigma
    return -0.5 * z * z


def normalised(logw: np.ndarray) -> np.ndarray:
    """exp(logw - max): the weights, largest 1 (no underflow of all of them at once)."""
    logw = np.asarray(logw, float)
    return np.exp(logw - logw.max())


def effective_size(w: np.ndarray) -> float:
    """Kish's effective sample size of weights w: (sum w)^2 / sum w^2."""
    w = np.asarray(w, float)
    return float(w.sum() ** 2 / (w * w).sum())


def weighted_quantiles(x: np.ndarray, w: np.ndarray, probs) -> np.ndarray:
    """Quantiles of the weighted sample (x, w): the weighted CDF at the midpoints of each draw's weight, linear
    between them (Hyndman & Fan 1996's type 5, with weights)."""
    x, w = np.asarray(x, float), np.asarray(w, float)
    o = np.argsort(x)
    xs, ws = x[o], w[o]
    c = (np.cumsum(ws) - 0.5 * ws) / ws.sum()
    return np.interp(np.asarray(probs, float), c, xs)
