"""What the fit predicts: the log utilization and the published hours of a run (from the fit's draws,
by the exact predictive of priors.calibrated), the calibrated prior for a new run on each accelerator
family, and the leave-one-out check (each run predicted from a fit without it)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from mcflops.calibration.model import Config, Fit, Sampler
from mcflops.calibration.runs import KINDS, Runs, load_runs
from mcflops.priors import calibrated

PROBS = (0.05, 0.5, 0.95)


def log_u_params(fit: Fit, i: int, most: int = 1000) -> tuple[np.ndarray, ...]:
    """Per-draw (mean, sd, shift, sigma) of the log utilization run i's published figure would imply
    (see priors.calibrated.log_u_cdf_pdf).

    Uses run i's own org and family effects: for a held-out run whose org is in no other run, that
    effect's posterior is its prior, i.e. a new org drawn from the population. When no fitted run shares
    its accelerator family, its peak is held inside the fitted runs' range (the covariates are not
    extrapolated: the population spread of families applies), as the shipped prior does for a new family.
    """
    d = fit.thinned(most)
    runs, ix = fit.runs, fit.runs.index()
    peaks = np.array([calibrated.peak16(a) for a in runs.accelerators])
    seen = fit.weights > 0
    peak = peaks[i]
    acc = runs.acc_index(fit.config.acc_group)
    if not np.any(seen & (acc == acc[i])):
        peak = float(np.clip(peak, peaks[seen].min(), peaks[seen].max()))
    x = calibrated.covariates(fit.config.covariates, runs.params[i], peak, runs.moe[i],
                              None if runs.tokens is None else runs.tokens[i], runs.years[i])
    mean = d["alpha"] + d["beta"] @ x
    if "a_org" in d:
        mean = mean + d["a_org"][:, ix["org"][i]]
    if "a_acc" in d:
        mean = mean + d["a_acc"][:, acc[i]]
    if "a_year" in d:  # every run's year is a level; one the fold did not fit is its random walk's prior
        mean = mean + d["a_year"][:, runs.year_index()[i]]
    kind = runs.kinds[i]
    shift = d["throughput_offset"] if kind == "throughput" and "throughput_offset" in d else np.zeros_like(mean)
    sigma = d["sigma"][:, KINDS.index(kind)]
    return mean, d["tau"], shift, sigma


def predict_log_u(fit: Fit, i: int, probs=PROBS, most: int = 1000) -> np.ndarray:
    """Quantiles of the log utilization run i's published figure would imply, from the fit's draws."""
    return calibrated.log_u_quantiles(*log_u_params(fit, i, most), probs, df=fit.config.run_df)


def predict_hours(fit: Fit, i: int, probs=PROBS) -> np.ndarray:
    """Quantiles of run i's published hours: H = 6ND / (P u 3600), so H's p-quantile uses u's (1 - p)."""
    q = predict_log_u(fit, i, 1.0 - np.asarray(probs, float))
    return np.exp(fit.runs.log_hours_u1[i] - q)


def population_table(fit: Fit) -> list[dict[str, Any]]:
    """The calibrated prior (p5/p50/p95 of u) for a new org's run at a few sizes on each family, and a note
    where the data have no run on that family."""
    peaks = [calibrated.peak16(a) for a in fit.runs.accelerators]
    fitd = {"draws": fit.thinned(1000), "covariates": list(fit.config.covariates),
            "orgs": [], "families": list(fit.runs.family_names), "kinds": list(KINDS),
            "peak_range": [min(peaks), max(peaks)], "years": list(fit.runs.year_names) if fit.config.drift else []}
    rows = []
    for acc in ("a100", "h100-sxm", "tpu-v4", "b200"):
        fam = calibrated.accelerator_family(acc)
        before = calibrated.predecessor(fam, fitd["families"])
        note = "" if fam in fitd["families"] else f"no published run on {acc}: " + (
            f"its predecessor's effect ({before}) with the spread of families added" if before
            else "the population spread of families applies")
        for n in (7e9, 70e9, 400e9):
            q = np.exp(calibrated.log_u_quantiles(*calibrated.predictive(fitd, n, acc, False), PROBS,
                                                  df=fit.config.run_df))
            rows.append({"accelerator": acc, "params": n, "p5": q[0], "p50": q[1], "p95": q[2], "note": note})
    return rows


@dataclass
class LooRow:
    """One run predicted from a fit without it: its published hours against the 90% interval."""

    id: str
    kind: str
    published: float
    p5: float
    p50: float
    p95: float
    covered: bool
    abs_log_error: float  # |log(p50 / published)|
    width: float  # p95 / p5
    divergences: int  # of the joint run
    max_r_hat: float


@dataclass
class Loo:
    """The leave-one-out check: one row per held-out run, the time it took, and each fold's fit."""

    rows: list[LooRow]
    seconds: float
    fits: list[Fit] = field(default_factory=list, repr=False)  # each fold's posterior (not serialised)

    @property
    def coverage(self) -> float:
        return float(np.mean([r.covered for r in self.rows]))

    @property
    def median_abs_log_error(self) -> float:
        return float(np.nanmedian([r.abs_log_error for r in self.rows]))

    @property
    def median_width(self) -> float:
        return float(np.median([r.width for r in self.rows]))

    def metrics(self) -> dict[str, float]:
        return {"runs": len(self.rows), "coverage_90": self.coverage,
                "median_abs_log_error": self.median_abs_log_error,
                "median_error_pct": 100.0 * math.expm1(self.median_abs_log_error),
                "median_p95_over_p5": self.median_width, "seconds": self.seconds}

    def to_dict(self) -> dict[str, Any]:
        return {**self.metrics(), "rows": [r.__dict__ for r in self.rows]}


def loo(key, runs: Runs | None = None, cfg: Config = Config(), only: Sequence[int] | None = None) -> Loo:
    """Exact leave-one-out: refit without each run (its weight 0) and predict its published hours.

    All folds are sampled in one joint NUTS run (model.Sampler with one fold per held-out run), so
    leave-one-out costs about as much as a few fits, not one per run.
    """
    runs = runs or load_runs()
    which = list(range(runs.n)) if only is None else list(only)
    w = np.ones((len(which), runs.n))
    w[np.arange(len(which)), which] = 0.0
    t0 = time.perf_counter()
    fits = Sampler(runs, cfg, folds=len(which)).fit(key, w)
    rows = []
    for f, i in zip(fits, which):
        p5, p50, p95 = predict_hours(f, i)
        pub = float(np.exp(runs.log_hours[i]))
        bound = runs.kinds[i] == "upper_bound"  # the true hours are below the figure: only p5 can miss
        rows.append(LooRow(runs.ids[i], runs.kinds[i], pub, float(p5), float(p50), float(p95),
                           bool(pub >= p5) if bound else bool(p5 <= pub <= p95),
                           float("nan") if bound else abs(math.log(p50 / pub)), float(p95 / p5),
                           f.divergences, f.max_r_hat()))
    return Loo(rows, time.perf_counter() - t0, fits)
