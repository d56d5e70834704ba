"""Choosing the model by its grouped validation: each candidate structure is fitted and scored on the
leave-one-organisation-out and leave-one-generation-out splits, and the one with the lowest CRPS averaged
over those splits wins (ties within 0.005, about half a percent of error, go to the simpler one). The
candidates and the rule are fixed before looking at the scores, and the held-out runs are never used to
tune a candidate.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from mcflops.calibration.model import Config
from mcflops.calibration.runs import Runs
from mcflops.calibration.validate import validate

GROUPED = ("org", "generation")
TIE = 0.005
# name -> (covariates, run_df, organisation effect, what the accelerator effect pools over), simplest first.
# "generation only": a partially pooled effect per accelerator generation (the rows' `generation`) and no
# organisation effect, the model the per-generation baseline's scores suggested (added before it was scored)
CANDIDATES: dict[str, tuple[tuple[str, ...], float | None, bool, str]] = {
    "generation only": (("moe",), None, False, "generation"),
    "effects only": (("moe",), None, True, "family"),
    "size": (("log10_params", "moe"), None, True, "family"),
    "size, peak": (("log10_params", "log2_peak", "moe"), None, True, "family"),
    "size x peak": (("log10_params", "log2_peak", "log10_params_x_log2_peak", "moe"), None, True, "family"),
    "generation only, Student-t": (("moe",), 4.0, False, "generation"),
    "effects only, Student-t": (("moe",), 4.0, True, "family"),
    "size, Student-t": (("log10_params", "moe"), 4.0, True, "family"),
}


def candidate(cfg: Config, name: str) -> Config:
    covariates, df, org, group = CANDIDATES[name]
    return replace(cfg, covariates=covariates, run_df=df, org_effect=org, acc_group=group)


def compare(key, runs: Runs, cfg: Config, names: Sequence[str] = tuple(CANDIDATES),
            phase: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Each candidate's grouped scores (one row per candidate), the winner marked ``chosen``."""
    rows = []
    for name in names:
        if phase:
            phase(f"candidate {name!r}")
        v = validate(key, runs, candidate(cfg, name), GROUPED)
        scores = {s.split.name: s.to_dict()["scores"]["model"] for s in v.splits if not s.split.skipped}
        rows.append({"candidate": name, "covariates": list(CANDIDATES[name][0]), "run_df": CANDIDATES[name][1],
                     "org_effect": CANDIDATES[name][2], "acc_group": CANDIDATES[name][3],
                     "crps": float(np.mean([s["crps"] for s in scores.values()])), "splits": scores,
                     "seconds": round(v.seconds, 1)})
    best = min(r["crps"] for r in rows)
    for r in rows:
        r["chosen"] = False
    next(r for r in rows if r["crps"] <= best + TIE)["chosen"] = True
    return rows
