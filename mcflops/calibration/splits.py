"""How the validation holds runs out: leave-one-out, leave one organisation out (all its runs at once),
leave one accelerator generation out, and a time split (fit on the runs published before 2023, predict the
later ones). Each split is a list of folds; a fold names the runs it holds out, and its fit sees every
other run (weight 1) and none of those (weight 0).

Leave-one-out keeps a held-out run's siblings (same organisation, same chip) in the fit, so it flatters a
model that has learnt an organisation's or a chip's card; the grouped splits do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mcflops.calibration.runs import Runs

TIME_CUT = "2023-01"  # fit on runs published before this month, predict the rest
SPLITS = ("loo", "org", "generation", "time")
LABELS = {"loo": "leave one run out", "org": "leave one organisation out",
          "generation": "leave one accelerator generation out", "time": f"time split (fit before {TIME_CUT[:4]})"}

SHORT = {"loo": "one run out", "org": "organisation out", "generation": "generation out", "time": "time split"}


@dataclass(frozen=True)
class Fold:
    label: str  # what is held out: a run id, an organisation, a generation, "published >= 2023-01"
    held_out: tuple[int, ...]


@dataclass(frozen=True)
class Split:
    name: str
    folds: tuple[Fold, ...] = ()
    skipped: str | None = None  # why the split could not be made (then no folds)
    label: str = field(default="")

    def weights(self, n: int) -> np.ndarray:
        """(folds, runs): 1 for the runs a fold's fit sees, 0 for those it holds out."""
        w = np.ones((len(self.folds), n))
        for f, fold in enumerate(self.folds):
            w[f, list(fold.held_out)] = 0.0
        return w


def _grouped(name: str, keys) -> Split:
    groups = sorted(set(keys))
    folds = tuple(Fold(g, tuple(i for i, k in enumerate(keys) if k == g)) for g in groups)
    if len(groups) < 2:
        return Split(name, skipped=f"one {name} only: nothing to hold out", label=LABELS[name])
    return Split(name, folds, label=LABELS[name])


def time_split(runs: Runs) -> Split:
    """Fit on runs published before TIME_CUT, predict the others; skipped unless every run has ``published``."""
    missing = [runs.ids[i] for i in range(runs.n) if not runs.published or runs.published[i] is None]
    if missing:
        return Split("time", skipped=f"{len(missing)} of {runs.n} runs have no published: YYYY-MM field "
                     f"(e.g. {missing[0]}), so the time split is not made", label=LABELS["time"])
    later = tuple(i for i in range(runs.n) if runs.published[i] >= TIME_CUT)
    if not later or len(later) == runs.n:
        return Split("time", skipped=f"every run is published {'after' if later else 'before'} {TIME_CUT}",
                     label=LABELS["time"])
    return Split("time", (Fold(f"published >= {TIME_CUT}", later),), label=LABELS["time"])


def make_splits(runs: Runs, names=SPLITS) -> list[Split]:
    """The validation splits of ``runs``, in ``names``' order."""
    make = {"loo": lambda: Split("loo", tuple(Fold(runs.ids[i], (i,)) for i in range(runs.n)), label=LABELS["loo"]),
            "org": lambda: _grouped("org", runs.orgs),
            "generation": lambda: _grouped("generation", runs.generations),
            "time": lambda: time_split(runs)}
    return [make[n]() for n in names]
