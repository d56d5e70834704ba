"""The validation: every split's folds (calibration.splits) fitted in one joint NUTS run, each held-out
run predicted by the model and by the baselines fitted on the same fold, and scored (calibration.scores).

Runs with an ``upper_bound`` figure are fitted (a censored likelihood) but not scored: their published
figure is not the hours, so coverage and the proper scores have nothing to compare.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from mcflops.calibration import baselines as base
from mcflops.calibration.model import Config, Fit, Sampler
from mcflops.calibration.predict import log_u_params
from mcflops.calibration.runs import Runs
from mcflops.calibration.scores import Predictive, Scored, aggregate, score
from mcflops.calibration.splits import SHORT, SPLITS, Split, make_splits
from mcflops.priors import calibrated

GRID = np.linspace(-9.0, -1e-9, 900)  # log u from 1.2e-4 to 1: where every predictive's mass lies
MODELS = ("model",) + base.BASELINES


def hours_predictive(log_hours_u1: float, log_u: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]) -> Predictive:
    """A predictive of log u as one of log hours: log H = c - log u, so F_H(y) = 1 - F_u(c - y), f_H(y) = f_u(c - y)."""
    cdf, pdf = log_u(GRID)
    return Predictive(log_hours_u1 - GRID[::-1], 1.0 - cdf[::-1], pdf[::-1])


def quadrature_nodes(sd: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Per draw, the Gauss-Hermite nodes for the CDF's integral over the reporting noise
    (priors.calibrated.log_u_cdf_pdf): the integrand, a CDF, varies on the scale sd / sigma in units of the
    noise, so one node when there is no noise (Config.kind_noise off), 8 while sigma < 0.3 sd, 16 while
    sigma < 2 sd, else 48 (the shipped prior's count for the whole table); the CDF then moves by under 1e-3 against 48 nodes (tests/calibration/test_validation.py).
    The density is not as forgiving: see model_log_u."""
    r = np.asarray(sigma, float) / np.asarray(sd, float)
    return np.where(r == 0.0, 1, np.where(r < 0.3, 8, np.where(r < 2.0, 16, 48)))  # no noise: one node is exact


def log_u_cdf(params: tuple[np.ndarray, ...], t: np.ndarray, df) -> np.ndarray:
    """The predictive CDF of log u at ``t`` (an equal-weight mixture over draws), each group of draws with
    its quadrature_nodes count."""
    nodes = quadrature_nodes(params[1], params[3])
    cdf = np.zeros(len(t))
    for n in np.unique(nodes):
        keep = nodes == n
        cdf += keep.mean() * calibrated.log_u_cdf_pdf(*(p[keep] for p in params), t, df=df, nodes=int(n))[0]
    return cdf


def model_log_u(fit: Fit, i: int, most: int = 120, at: float | None = None):
    """Run i's predictive of log u from ``fit``. With ``at`` (the published log u) the CDF is log_u_cdf's and the density is computed only at the two grid points around ``at``, with
    log_u_cdf_pdf's own count: the log score reads the density there alone, and under Student-t run effects
    the density's quadrature depends on the node count far more than the CDF's (an integrable spike of
    log sigmoid's density at u -> 1), so the log score stays the one the full computation gives."""
    params = log_u_params(fit, i, most)
    df = fit.config.run_df
    if at is None:
        return lambda t: calibrated.log_u_cdf_pdf(*params, t, df=df)
    params = tuple(np.broadcast_to(np.asarray(p, float), params[0].shape) for p in params)

    def log_u(t):
        cdf = log_u_cdf(params, t, df)
        j = int(np.clip(np.searchsorted(t, at), 1, len(t) - 1))
        pdf = np.zeros_like(cdf)
        pdf[j - 1:j + 1] = calibrated.log_u_cdf_pdf(*params, t[j - 1:j + 1], df=df)[1]
        return cdf, pdf

    return log_u


@dataclass
class SplitResult:
    split: Split
    rows: dict[str, list[Scored]] = field(default_factory=dict)  # model and each baseline

    def to_dict(self) -> dict[str, Any]:
        if self.split.skipped:
            return {"name": self.split.name, "label": self.split.label, "skipped": self.split.skipped}
        return {"name": self.split.name, "label": self.split.label, "folds": len(self.split.folds),
                "scores": {m: aggregate(r) for m, r in self.rows.items()},
                "rows": {m: [x.to_dict() for x in r] for m, r in self.rows.items()}}


@dataclass
class Validation:
    splits: list[SplitResult]
    seconds: float
    divergences: int
    config: Config

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "divergences": self.divergences,
                "config": {k: list(v) if isinstance(v, tuple) else v for k, v in self.config.__dict__.items()},
                "splits": [s.to_dict() for s in self.splits]}

    def table(self) -> list[dict[str, Any]]:
        """One row per split and predictor: its scores (the printed table)."""
        out = []
        for s in self.splits:
            if s.split.skipped:
                continue
            for m, rows in s.rows.items():
                out.append({"split": s.split.name, "model": m, **aggregate(rows)})
        return out


def scored_runs(runs: Runs) -> np.ndarray:
    return np.array([k != "upper_bound" for k in runs.kinds])


def validate(key, runs: Runs, cfg: Config, names: Sequence[str] = SPLITS,
             phase: Callable[[str], None] | None = None,
             tick: Callable[[int, int], None] | None = None) -> Validation:
    """Every split's folds in one joint NUTS run (one compile), then each held-out run's predictions scored.

    ``phase(text)`` names each stage (the joint fit, then one line per split's scoring) and ``tick(done,
    total)`` counts a split's scored runs."""
    splits = make_splits(runs, names)
    made = [s for s in splits if not s.skipped]
    w = np.concatenate([s.weights(runs.n) for s in made]) if made else np.zeros((0, runs.n))
    t0 = time.perf_counter()
    fits: list[Fit] = []
    if made:
        if phase:
            phase(f"validation: {w.shape[0]} folds of {len(made)} splits, one NUTS run ({cfg.chains} x {cfg.draws})")
        fits = Sampler(runs, cfg, folds=w.shape[0]).fit(key, w)
    ok = scored_runs(runs)
    results, f = [], 0
    for s in splits:
        res = SplitResult(s, {m: [] for m in MODELS})
        total = sum(int(ok[i]) for fold in s.folds for i in fold.held_out)
        if phase and not s.skipped:
            phase(f"validation, {SHORT.get(s.name, s.name)}: scoring {total} held-out runs")
        for fold in s.folds:
            fit = fits[f]
            f += 1
            bl = base.fit_baselines(runs, fit.weights)
            for i in fold.held_out:
                if not ok[i]:
                    continue
                c, y = runs.log_hours_u1[i], runs.log_hours[i]
                res.rows["model"].append(score(runs.ids[i], fold.label, runs.kinds[i], y,
                                               hours_predictive(c, model_log_u(fit, i, at=c - y))))
                for m in base.BASELINES:
                    res.rows[m].append(score(runs.ids[i], fold.label, runs.kinds[i], y, hours_predictive(c, bl[m](i))))
                if tick:
                    tick(len(res.rows["model"]), total)
        results.append(res)
    div = fits[0].divergences if fits else 0
    return Validation(results, time.perf_counter() - t0, div, cfg)
