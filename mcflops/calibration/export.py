"""The fit as data: its id (the data, the model's configuration and the seed, hashed) and the export
that ships as mcflops/data/calibration_fit.json (thinned draws, diagnostics, the leave-one-out
metrics), which priors.calibrated reads for `mfu: {calibrated: ...}`."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from mcflops.calibration.model import Config, Fit, thin
from mcflops.calibration.predict import Loo
from mcflops.calibration.runs import KINDS, data_text
from mcflops.priors import calibrated

ADDED_OFF = ("drift",)  # Config switches added after the shipped fit (see fit_id)


def fit_summary(fit: Fit, cfg: Config, seed: int) -> dict[str, Any]:
    """calibration.json's account of one fit: its id and configuration, time, diagnostics, the posterior of
    every parameter and the calibrated prior per accelerator family (leave-one-out is added by the caller)."""
    from mcflops.calibration.predict import population_table

    summ = fit.summary()
    return {"seed": seed, "runs": fit.runs.n, "fit_id": fit_id(cfg, seed),
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.__dict__.items()},
            "fit_seconds": round(fit.seconds, 2), "divergences": fit.divergences,
            "max_r_hat": max(s["r_hat"] for s in summ.values()), "min_ess": min(s["ess"] for s in summ.values()),
            "posterior": summ, "population": population_table(fit)}


def fit_id(cfg: Config, seed: int) -> str:
    # a switch added after a fit was shipped, left off, is not hashed: the id names the model a fit has, and
    # the same model, data and seed keep their id (and the fit its draws) when the switch is added
    config = {k: v for k, v in cfg.__dict__.items() if not (k in ADDED_OFF and v is False)}
    blob = json.dumps({"data": hashlib.sha256(data_text().encode()).hexdigest(), "config": config,
                       "seed": seed}, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def export(fit: Fit, seed: int, loo_result: Loo | None = None, keep: int = 600,
           validation: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The fit as data for mcflops/data/calibration_fit.json: thinned posterior draws and diagnostics."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("mcflops")
    except PackageNotFoundError:
        ver = "0+unknown"
    names = ("alpha", "beta", "tau", "tau_org", "tau_acc", "tau_drift", "a_org", "a_acc", "a_year", "sigma",
             "throughput_offset")
    draws = {k: _round(thin(fit.draws[k], keep)) for k in names if k in fit.draws}
    summ = fit.summary()
    out = {"schema": calibrated.FIT_SCHEMA, "fit_id": fit_id(fit.config, seed), "made_by": "mcflops calibrate --write",
           "mcflops_version": ver, "data_sha256": hashlib.sha256(data_text().encode()).hexdigest(), "seed": seed,
           "n_runs": int(fit.runs.n), "runs": list(fit.runs.ids),
           "covariates": list(fit.config.covariates), "orgs": list(fit.runs.org_names),
           "families": list(fit.runs.family_names), "kinds": list(KINDS),
           "years": list(fit.runs.year_names) if fit.config.drift else [],
           "peak_range": [min(map(calibrated.peak16, fit.runs.accelerators)),
                          max(map(calibrated.peak16, fit.runs.accelerators))],
           "config": {k: list(v) if isinstance(v, tuple) else v for k, v in fit.config.__dict__.items()},
           "diagnostics": {"divergences": fit.divergences,
                           "max_r_hat": max(s["r_hat"] for s in summ.values()),
                           "min_ess": min(s["ess"] for s in summ.values())},
           "draws": draws}
    if loo_result is not None:
        out["loo"] = loo_result.metrics()
    if validation is not None:  # the validation table: one row per split and predictor
        out["validation"] = validation
    return out


def _round(v: np.ndarray) -> list:
    return np.vectorize(lambda x: float(f"{x:.5g}"), otypes=[float])(v).tolist()
