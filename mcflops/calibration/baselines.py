"""The baselines the model must beat, fitted on a fold's runs exactly as the model is, each a predictive of
log u = log(MFU x goodput) for a held-out run (whose published hours are then H = 6ND / (P u 3600)):

- ``constant``: one logit-normal for every run. With z_i = logit(u_i) over the n fitted runs, mean m and
  sample sd s, a new run's logit u is m + s sqrt(1 + 1/n) T_(n-1): the classical prediction interval for
  a new draw of a normal with unknown mean and variance (e.g. Geisser 1993, Predictive Inference, ch. 2).
- ``rule``: the "30-40% rule": MFU uniform on [0.3, 0.4], goodput 1; nothing is fitted.
- ``generation``: one constant per accelerator generation: generation g's mean m_g, the pooled
  within-generation sd s_p (n - G degrees of freedom), a new run's logit u is
  m_g + s_p sqrt(1 + 1/n_g) T_(n-G) (one-way ANOVA's prediction interval); a generation not among the fitted
  runs gets the ``constant`` baseline.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from mcflops.calibration.runs import Runs
from mcflops.priors import calibrated

RULE = (0.3, 0.4)
BASELINES = ("constant", "rule", "generation")
LABELS = {"constant": "constant logit-normal", "rule": "30-40% rule", "generation": "one constant per generation"}

# t -> (CDF, density) of log u at the points t
LogUPredictive = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def _logit_t(mean: float, scale: float, df: float) -> LogUPredictive:
    z = np.zeros(1)
    return lambda t: calibrated.log_u_cdf_pdf(np.array([mean]), np.array([scale]), z, z, t, df=df)


def constant_params(z: np.ndarray) -> tuple[float, float, float]:
    """(mean, predictive scale, degrees of freedom) of the constant logit-normal from logit u of its runs."""
    n = z.size
    if n < 2:
        raise ValueError("the constant baseline needs at least two runs")
    return float(z.mean()), float(z.std(ddof=1) * math.sqrt(1 + 1 / n)), float(n - 1)


def generation_params(z: np.ndarray, gens, gen: str) -> tuple[float, float, float] | None:
    """(mean, predictive scale, degrees of freedom) of generation ``gen``'s constant; None if it has no run
    here or the pooled sd has no degrees of freedom (every generation one run)."""
    gens = np.asarray(gens)
    names = sorted(set(gens.tolist()))
    dof = z.size - len(names)
    if gen not in names or dof < 1:
        return None
    ss = sum(float(((z[gens == g] - z[gens == g].mean()) ** 2).sum()) for g in names)
    mine = z[gens == gen]
    return float(mine.mean()), float(math.sqrt(ss / dof) * math.sqrt(1 + 1 / mine.size)), float(dof)


def rule(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """u uniform on [0.3, 0.4]: P(log u <= t) = (e^t - 0.3) / 0.1 on the support, density e^t / 0.1."""
    lo, hi = RULE
    e = np.exp(t)
    inside = (e >= lo) & (e <= hi)
    return np.clip((e - lo) / (hi - lo), 0.0, 1.0), np.where(inside, e / (hi - lo), 0.0)


def fit_baselines(runs: Runs, weights: np.ndarray) -> dict[str, Callable[[int], LogUPredictive]]:
    """Each baseline fitted on the runs with weight 1, as a function of a run index giving its predictive."""
    seen = np.asarray(weights) > 0
    z_all = np.log(runs.implied_u) - np.log1p(-runs.implied_u)
    z, gens = z_all[seen], np.asarray(runs.generations)[seen]
    const = _logit_t(*constant_params(z))

    def by_gen(i: int) -> LogUPredictive:
        p = generation_params(z, gens, runs.generations[i])
        return const if p is None else _logit_t(*p)

    return {"constant": lambda i: const, "rule": lambda i: rule, "generation": by_gen}


def error_floor(runs: Runs) -> dict[str, float]:
    """How close a median of log u could come to the published figures, fitted in-sample (each run's own figure
    included, so an optimistic floor for any held-out split): the median over the scored runs of
    |log u_i - the median log u of run i's group|, for one group of all runs (what a held-out generation leaves
    a predictor without covariates), one per generation, and one per organisation and generation."""
    ok = np.array([k != "upper_bound" for k in runs.kinds])
    lu = np.log(runs.implied_u)
    keys = {"pooled": ["all"] * runs.n, "per_generation": list(runs.generations),
            "per_org_generation": [f"{o}|{g}" for o, g in zip(runs.orgs, runs.generations)]}
    out = {}
    for name, key in keys.items():
        key = np.asarray(key)
        dev = np.empty(runs.n)
        for k in set(key[ok].tolist()):
            m = ok & (key == k)
            dev[m] = np.abs(lu[m] - np.median(lu[m]))
        out[name] = float(np.median(dev[ok]))
    return out
