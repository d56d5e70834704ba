"""Validation that cannot flatter: whole series of benchmark rows held out of a refit, then predicted.

Each kind of split is a partition of the rows into groups (:func:`partition`: disjoint, covering every row):

- ``paper``: the source publication (Megatron-LM 2021, Megatron-Core 2024, MegaScale with both its columns,
  llm-foundry, torchtitan, vTrain, Korthikanti et al. 2022, MLPerf Training with its rounds); each paper held out
  in turn, so its stack's effects are never fitted;
- ``generation``: the accelerator generation (Hopper with its FP8 rows, A100); each held out in turn, so its
  family's GEMM efficiency is drawn as a new family's;
- ``scale``: rows on more than :data:`SCALE_CUT` accelerators against the rest; only the largest are held
  out (the fit sees 8 to 1,024 accelerators and extrapolates up);
- ``series``: the stack stated. Within each stack that has two series or more (a series: one table of one
  source), its series sorted by name go alternately to halves A and B, each half held out in turn: every held-out
  series is predicted by a fit that never saw it but saw its stack's other series, as a file that states a fitted
  ``stack:`` is (its stack's effects and residual scale). A stack with one series stays in both fits.

A fold's fit is :func:`mcflops.layoutfit.fit.fit` with the held-out rows' likelihood masked out: the arrays keep
every row (and so every family and stack), the posterior is the one the training rows give, and the effect
of a stack or family that only held-out rows have is drawn from its prior, exactly as a new one's is. The
refit is the shipped fit's NUTS at a smaller budget (:func:`settings_for`): half the chains, half the draws
(at least 150 warm-up and 150 kept), its tree depth; its R-hat, ESS and divergences are reported beside each
split's scores, so a refit that did not converge says so.

A held-out row's prediction is the posterior predictive of its measured MFU (true model FLOPs): the model MFU
of each posterior draw (:func:`mcflops.layoutfit.fit.row_draws`: its unknown settings mixed) times the row's
residual, Student-t(DF) of scale its stack's sigma x the row's noise, :data:`NOISE_REPS` residuals per draw. Scores
(:func:`scores`): 90% coverage (p5 <= y <= p95), median |log(p50 / y)|, median p95/p5.

The baseline (:func:`baseline`) is a constant MFU per accelerator (catalogue id and precision), fitted on the
fold's training rows: in log MFU, accelerator g's mean m_g and the pooled within-accelerator sd s_p with n - G
degrees of freedom, a new row's log MFU m_g + s_p sqrt(1 + 1/n_g) T_(n-G), one-way ANOVA's prediction interval
(Geisser 1993, Predictive Inference, ch. 2); an accelerator without training rows gets the constant over every
training row, m + s sqrt(1 + 1/n) T_(n-1).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from mcflops.hostrng import generator
from mcflops.layoutfit import fit as lf

SCALE_CUT = 1024  # accelerators: the rows above it are the held-out largest scales
KINDS = ("paper", "generation", "scale", "series")
LABELS = {"paper": "paper out", "generation": "generation out", "scale": f"more than {SCALE_CUT:,} accelerators",
          "series": "series out, stack kept"}
HELD_GROUPS = {"scale": (f"> {SCALE_CUT}",), "series": ("A", "B")}  # kinds that hold out only some groups
PAPERS = {"megascale": "megascale", "megatron-on-megascale": "megascale"}  # MegaScale's two columns, one paper
# MLPerf Training's rounds (one stack, mlperf-training, a series each) are one code base's lineage (NVIDIA's NeMo-based
# implementation), held out together so that no round is predicted from its siblings
MLPERF = "mlperf-training"
NOISE_REPS = 20
QUANTILES = (0.05, 0.5, 0.95)
# the targets on held-out series (a fully stated layout): shown beside the scores, never fitted to
TARGETS = {"coverage_90": 0.85, "median_abs_log_error": 0.12, "median_p95_over_p5": 1.8}


@dataclass(frozen=True)
class Settings:
    """The refit's NUTS budget."""

    chains: int
    warmup: int
    draws: int
    max_tree_depth: int


def settings_for(chains: int, draws: int) -> Settings:
    """The validation refit's budget from the shipped fit's: half the chains, half the draws (>= 150: the trend
    refit's), the shipped fit's tree depth (10: each stack's own residual scale sharpens the posterior, and at
    depth 7 the refits ended at R-hat 1.4-1.9)."""
    n = max(150, draws // 2)
    return Settings(max(1, chains // 2), n, n, 10)


def group_of(kind: str, r: lf.Row) -> str:
    """The group of row ``r`` in a split of ``kind``."""
    if kind == "paper":
        return PAPERS.get(r.stack, MLPERF if r.stack.startswith("mlperf-") else r.stack)
    if kind == "generation":
        return r.family.removesuffix("-fp8")
    if kind == "scale":
        return f"> {SCALE_CUT}" if r.terms.count > SCALE_CUT else f"<= {SCALE_CUT}"
    raise ValueError(f"unknown split kind {kind!r}: expected one of {', '.join(KINDS)}")


def _halves(rs: Sequence[lf.Row]) -> dict[str, str]:
    """``series`` split: each series' half (A, B; "kept" for a stack's only series)."""
    by: dict[str, set[str]] = {}
    for r in rs:
        by.setdefault(r.stack, set()).add(r.series)
    return {s: ("AB"[i % 2] if len(ss) > 1 else "kept") for ss in by.values() for i, s in enumerate(sorted(ss))}


def partition(rs: Sequence[lf.Row], kind: str) -> dict[str, tuple[str, ...]]:
    """Row ids by group (sorted by group name), every row in exactly one group."""
    out: dict[str, list[str]] = {}
    half = _halves(rs) if kind == "series" else {}
    for r in rs:
        out.setdefault(half[r.series] if kind == "series" else group_of(kind, r), []).append(r.id)
    return {g: tuple(out[g]) for g in sorted(out)}


@dataclass(frozen=True)
class Fold:
    kind: str
    group: str
    held: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{LABELS[self.kind]}: {self.group}" if self.kind != "scale" else LABELS["scale"]


def folds(rs: Sequence[lf.Row], kinds: Sequence[str] = KINDS) -> list[Fold]:
    """Every fold of ``kinds``: each group held out in turn (only :data:`HELD_GROUPS`' for those kinds), less a
    group that is every row (nothing would be left to fit)."""
    out = []
    for kind in kinds:
        for g, ids in partition(rs, kind).items():
            if len(ids) < len(rs) and g in HELD_GROUPS.get(kind, (g,)):
                out.append(Fold(kind, g, ids))
    return out


def predict(f: lf.Fit, r: lf.Row, seed: int = 0) -> tuple[float, float, float]:
    """(p5, p50, p95) of row ``r``'s measured MFU under fit ``f``'s posterior predictive."""
    m = lf.row_draws(f, r)
    eps = generator(seed).standard_t(lf.DF, (NOISE_REPS, m.size))
    log_y = np.log(m)[None, :] + lf.stack_sigma(f, r.stack)[None, :] * r.noise * eps
    q = np.exp(np.quantile(log_y, QUANTILES))
    return float(q[0]), float(q[1]), float(q[2])


def baseline(train: Sequence[lf.Row], held: Sequence[lf.Row]) -> list[tuple[float, float, float]]:
    """(p5, p50, p95) of each held-out row's MFU under the constant per accelerator (the module docstring)."""
    from scipy import stats

    z = np.log([r.y for r in train])
    keys = np.array([r.accelerator for r in train])
    names = sorted(set(keys.tolist()))
    n, dof = z.size, z.size - len(names)
    ss = sum(float(((z[keys == g] - z[keys == g].mean()) ** 2).sum()) for g in names)
    out = []
    for r in held:
        mine = z[keys == r.accelerator]
        if mine.size and dof >= 1:
            m, scale, df = mine.mean(), np.sqrt(ss / dof) * np.sqrt(1 + 1 / mine.size), dof
        else:
            m, scale, df = z.mean(), z.std(ddof=1) * np.sqrt(1 + 1 / n), n - 1
        t = stats.t.ppf(QUANTILES[2], df)
        out.append((float(np.exp(m - t * scale)), float(np.exp(m)), float(np.exp(m + t * scale))))
    return out


def scores(y: Sequence[float], p5: Sequence[float], p50: Sequence[float], p95: Sequence[float]) -> dict[str, Any]:
    """90% coverage, median |log error| of the median, median p95/p5 over the rows."""
    y, p5, p50, p95 = (np.asarray(v, float) for v in (y, p5, p50, p95))
    return {"rows": int(y.size), "coverage_90": float(np.mean((p5 <= y) & (y <= p95))),
            "median_abs_log_error": float(np.median(np.abs(np.log(p50 / y)))),
            "median_p95_over_p5": float(np.median(p95 / p5))}


def score_rows(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The model's and the baseline's scores from per-row predictions (:func:`validate`'s ``rows``)."""
    col = {k: [r[k] for r in rows] for k in ("y", "p5", "p50", "p95")}
    base = [r["baseline"] for r in rows]
    return {"model": scores(col["y"], col["p5"], col["p50"], col["p95"]),
            "baseline": scores(col["y"], *zip(*base)) if base else scores([], [], [], [])}


def validate(rs: Sequence[lf.Row], settings: Settings, seed: int = 0, kinds: Sequence[str] = KINDS,
             phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Refit without each fold's rows and score its predictions against the constant baseline's; with each
    kind that holds out every row once, that kind's scores over all its held-out rows."""
    say = phase or (lambda text: None)
    by = {r.id: r for r in rs}
    fs = folds(rs, kinds)
    out: dict[str, Any] = {"settings": {"method": "NUTS (the shipped fit's sampler, a smaller budget)",
                                        **dataclasses.asdict(settings), "seed": seed, "noise_reps": NOISE_REPS},
                           "scale_cut": SCALE_CUT, "targets": TARGETS, "splits": [], "pooled": []}
    for i, fold in enumerate(fs):
        say(f"refitting without {fold.label} ({i + 1}/{len(fs)})")
        held = set(fold.held)
        f = lf.fit(rs, seed, settings.chains, settings.warmup, settings.draws,
                   max_tree_depth=settings.max_tree_depth, held=held)
        train = [r for r in rs if r.id not in held]
        t = time.perf_counter()
        base = baseline(train, [by[rid] for rid in fold.held])
        rows = [{"id": rid, "y": by[rid].y, **dict(zip(("p5", "p50", "p95"), predict(f, by[rid], seed))),
                 "baseline": list(b)} for rid, b in zip(fold.held, base)]
        out["splits"].append({"kind": fold.kind, "group": fold.group, "label": fold.label, "held_out": len(held),
                              "fit_rows": len(train), "r_hat_max": f.r_hat_max, "ess_min": f.ess_min,
                              "divergences": f.divergences, "seconds": f.seconds + time.perf_counter() - t,
                              **score_rows(rows), "rows": rows})
    for kind in kinds:
        mine = [s for s in out["splits"] if s["kind"] == kind]
        held = sum(s["held_out"] for s in mine)
        # every row held out once, or the series halves (each held-out row once): the kind's scores
        if mine and (held == len(rs) or kind == "series"):
            out["pooled"].append({"kind": kind, "label": f"{LABELS[kind]}: all {len(mine)} pooled",
                                  "held_out": held, **score_rows([r for s in mine for r in s["rows"]])})
    return out
