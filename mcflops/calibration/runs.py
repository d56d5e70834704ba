"""The published runs the calibration is fitted to (mcflops/data/published_runs.yaml), as arrays.

Each run gives its (active) parameters N, tokens D, accelerator, organisation, published
accelerator-hours H and how that figure was obtained (``hours_kind``): a model card's figure, a
count x days estimate, a third party's guess, a throughput x tokens figure (no downtime), an upper bound.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mcflops.priors import calibrated

KINDS = ("reported", "derived", "third_party", "reported_rounded", "reported_informal", "throughput",
         "upper_bound")


@dataclass(frozen=True)
class Runs:
    """Published runs as arrays for the model."""

    ids: tuple[str, ...]
    orgs: tuple[str, ...]
    accelerators: tuple[str, ...]
    kinds: tuple[str, ...]
    params: np.ndarray  # active parameters
    moe: np.ndarray  # 0/1
    log_hours: np.ndarray  # published accelerator-hours (log)
    log_hours_u1: np.ndarray  # log(6 N D / (P 3600)): the hours at u = 1
    # the row's ``generation`` (else its accelerator family) and ``published`` month ("YYYY-MM", else None)
    generations: tuple[str, ...] = ()
    published: tuple[str | None, ...] = ()
    tokens: np.ndarray | None = None  # training tokens D (for tokens per parameter)

    @property
    def years(self) -> np.ndarray:
        """Years since 2023-01 of each run's ``published`` month (nan where it has none): the date covariate."""
        return np.array([np.nan if p is None else calibrated.years_since_ref(p) for p in
                         (self.published or (None,) * self.n)])

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def org_names(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.orgs)))

    @property
    def family_names(self) -> tuple[str, ...]:
        return tuple(sorted({calibrated.accelerator_family(a) for a in self.accelerators}))

    def acc_names(self, group: str = "family") -> tuple[str, ...]:
        """The accelerator effect's levels: families, or the rows' ``generation`` (calibration.model.Config.acc_group)."""
        if group not in ("family", "generation"):
            raise ValueError(f"acc_group must be 'family' or 'generation', got {group!r}")
        return self.family_names if group == "family" else tuple(sorted(set(self.generations)))

    def acc_index(self, group: str = "family") -> np.ndarray:
        """Each run's level of the accelerator effect (see acc_names)."""
        if group == "family":
            return self.index()["fam"]
        names = self.acc_names(group)
        return np.array([names.index(g) for g in self.generations], np.int32)

    @property
    def year_names(self) -> tuple[int, ...]:
        """The calendar years the runs were published in (the drift's levels), sorted."""
        return tuple(sorted({int(p[:4]) for p in self.published if p is not None}))

    def year_index(self) -> np.ndarray:
        """Each run's level in year_names (the drift needs every run's ``published``)."""
        if not self.published or any(p is None for p in self.published):
            raise ValueError("the drift over publication years needs every run's published: YYYY-MM")
        names = self.year_names
        return np.array([names.index(int(p[:4])) for p in self.published], np.int32)

    def x(self, names: Sequence[str]) -> np.ndarray:
        peaks = np.array([calibrated.peak16(a) for a in self.accelerators])
        if "years" in names and np.isnan(self.years).any():
            missing = self.ids[int(np.flatnonzero(np.isnan(self.years))[0])]
            raise ValueError(f"the years covariate needs every run's published: YYYY-MM (run {missing} has none)")
        return calibrated.covariates(names, self.params, peaks, self.moe, self.tokens, self.years)

    def index(self) -> dict[str, np.ndarray]:
        orgs, fams = self.org_names, self.family_names
        return {"org": np.array([orgs.index(o) for o in self.orgs], np.int32),
                "fam": np.array([fams.index(calibrated.accelerator_family(a)) for a in self.accelerators], np.int32),
                "kind": np.array([KINDS.index(k) for k in self.kinds], np.int32)}

    @property
    def implied_u(self) -> np.ndarray:
        return np.exp(self.log_hours_u1 - self.log_hours)


def runs_from_records(records: Sequence[dict]) -> Runs:
    """Runs from mappings with id, org, moe, params_active, tokens, accelerator, hours, hours_kind (and,
    optionally, ``generation``, default the accelerator's family, and ``published``, "YYYY-MM")."""
    for r in records:
        if r["hours_kind"] not in KINDS:
            raise ValueError(f"run {r['id']}: unknown hours_kind {r['hours_kind']!r} (expected one of {KINDS})")
    peak = np.array([calibrated.peak16(r["accelerator"]) for r in records])
    n = np.array([float(r["params_active"]) for r in records])
    d = np.array([float(r["tokens"]) for r in records])
    return Runs(ids=tuple(str(r["id"]) for r in records), orgs=tuple(str(r["org"]) for r in records),
                accelerators=tuple(str(r["accelerator"]) for r in records),
                kinds=tuple(str(r["hours_kind"]) for r in records), params=n,
                moe=np.array([float(bool(r.get("moe", False))) for r in records]),
                log_hours=np.log([float(r["hours"]) for r in records]),
                log_hours_u1=np.log(6.0 * n * d / (peak * 3600.0)),  # Kaplan et al. 2020: C = 6ND
                generations=tuple(str(r.get("generation") or calibrated.accelerator_family(r["accelerator"]))
                                  for r in records),
                published=tuple(None if r.get("published") is None else _month(r) for r in records),
                tokens=d)


def _month(r: dict) -> str:
    """A row's ``published`` as "YYYY-MM" (YAML may read 2023-07 as text, a date or a number)."""
    v = r["published"]
    text = v.strftime("%Y-%m") if hasattr(v, "strftime") else str(v)
    if len(text) < 7 or not (text[:4].isdigit() and text[4] == "-" and text[5:7].isdigit()):
        raise ValueError(f"run {r['id']}: expected published: YYYY-MM, got {v!r}")
    return text[:7]


def data_text() -> str:
    return importlib.resources.files("mcflops").joinpath("data", "published_runs.yaml").read_text("utf-8")


def load_runs() -> Runs:
    """The published runs shipped in mcflops/data/published_runs.yaml."""
    from ruamel.yaml import YAML

    return runs_from_records(YAML(typ="safe", pure=True).load(data_text())["runs"])
