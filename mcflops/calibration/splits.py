"""How the validation holds runs out: leave-one-out, leave one organisation out (all its runs at once),
leave one accelerator generation out, and a time split on a rolling origin (each year from 2023 on
predicted from the runs published before it). Each split is a list of folds; a fold names the runs it holds
out, and its fit sees every other run (weight 1) and none of those (weight 0), or in the time split only
the runs published before the held-out year.

Leave-one-out keeps a held-out run's siblings (same organisation, same chip) in the fit, so it flatters a
model that has learnt an organisation's or a chip's card; the grouped splits do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mcflops.calibration.runs import Runs

TIME_CUT = "2023-01"  # the first origin: the runs from this month on are predicted
# A rolling forecasting origin (Hyndman & Athanasopoulos, Forecasting: Principles and Practice, 3rd ed.,
# section 5.10, "time series cross-validation"): each calendar year from TIME_CUT on is one fold, fitted on
# every run published before that year and predicting that year's runs, so each later run is predicted once,
# from the past only, by the data a planner had then (one cut at 2023 measured a prior fitted on 7 runs).
SPLITS = ("loo", "org", "generation", "time")
LABELS = {"loo": "leave one run out", "org": "leave one organisation out",
          "generation": "leave one accelerator generation out",
          "time": f"time split (each year from {TIME_CUT[:4]} from the years before)"}

SHORT = {"loo": "one run out", "org": "organisation out", "generation": "generation out", "time": "time split"}


@dataclass(frozen=True)
class Fold:
    label: str  # what is held out: a run id, an organisation, a generation, "published 2024 (fit before 2024)"
    held_out: tuple[int, ...]
    fitted: tuple[int, ...] | None = None  # the runs its fit sees (None: every run not held out)


@dataclass(frozen=True)
class Split:
    name: str
    folds: tuple[Fold, ...] = ()
    skipped: str | None = None  # why the split could not be made (then no folds)
    label: str = field(default="")

    def weights(self, n: int) -> np.ndarray:
        """(folds, runs): 1 for the runs a fold's fit sees, 0 for the others (those it holds out, and in the
        time split the runs published after them too)."""
        w = np.ones((len(self.folds), n))
        for f, fold in enumerate(self.folds):
            if fold.fitted is not None:
                w[f] = 0.0
                w[f, list(fold.fitted)] = 1.0
            w[f, list(fold.held_out)] = 0.0
        return w


def _grouped(name: str, keys) -> Split:
    groups = sorted(set(keys))
    folds = tuple(Fold(g, tuple(i for i, k in enumerate(keys) if k == g)) for g in groups)
    if len(groups) < 2:
        return Split(name, skipped=f"one {name} only: nothing to hold out", label=LABELS[name])
    return Split(name, folds, label=LABELS[name])


def time_split(runs: Runs) -> Split:
    """Each year from TIME_CUT on, fitted on the runs published before it (the rolling origin above); skipped
    unless every run has ``published``."""
    missing = [runs.ids[i] for i in range(runs.n) if not runs.published or runs.published[i] is None]
    if missing:
        return Split("time", skipped=f"{len(missing)} of {runs.n} runs have no published: YYYY-MM field "
                     f"(e.g. {missing[0]}), so the time split is not made", label=LABELS["time"])
    later = tuple(i for i in range(runs.n) if runs.published[i] >= TIME_CUT)
    if not later or len(later) == runs.n:
        return Split("time", skipped=f"every run is published {'after' if later else 'before'} {TIME_CUT}",
                     label=LABELS["time"])
    years = sorted({runs.published[i][:4] for i in later})
    folds = tuple(Fold(f"published {y} (fit before {y})", tuple(i for i in later if runs.published[i][:4] == y),
                       tuple(i for i in range(runs.n) if runs.published[i] < f"{y}-01")) for y in years)
    return Split("time", folds, label=LABELS["time"])


def make_splits(runs: Runs, names=SPLITS) -> list[Split]:
    """The validation splits of ``runs``, in ``names``' order."""
    make = {"loo": lambda: Split("loo", tuple(Fold(runs.ids[i], (i,)) for i in range(runs.n)), label=LABELS["loo"]),
            "org": lambda: _grouped("org", runs.orgs),
            "generation": lambda: _grouped("generation", runs.generations),
            "time": lambda: time_split(runs)}
    return [make[n]() for n in names]
