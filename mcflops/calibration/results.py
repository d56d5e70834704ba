"""What `mcflops calibrate` and :func:`mcflops.calibrate` return, computed in one place: the fit of effective
utilization (MFU x goodput) to the published runs, its summary, the validation with its targets, the model
comparison, and the fit to ship. The command line prints and writes it, the API returns it: the same numbers
by construction."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from mcflops.calibration.baselines import error_floor
from mcflops.calibration.export import export as export_fit
from mcflops.calibration.export import fit_summary
from mcflops.calibration.model import Config, fit
from mcflops.calibration.runs import Runs, load_runs
from mcflops.calibration.select import COVERAGE, compare as compare_models
from mcflops.calibration.validate import validate

# the population prior's targets on the grouped splits: 90% coverage at least this on each, and a CRPS below
# both the constant's and the per-generation baseline's on at least GROUPED_WINS of them
GROUPED_SPLITS, GROUPED_COVERAGE, GROUPED_WINS = ("org", "generation", "time"), COVERAGE, 2
# per split, for the model: (key, op, value); "beats" compares the CRPS with every baseline's
TARGETS = (("coverage_90", "in", (0.85, 0.95)), ("median_abs_log_error", "<=", 0.20),
           ("median_p95_over_p5", "<=", 3.0), ("crps", "beats", "every baseline"))


@dataclass(frozen=True)
class Calibration:
    """``data``: what calibration.json holds (the fit's summary; with the validation also ``validation``,
    ``validation_table``, ``targets``, ``error_floor`` and ``loo``; with the comparison ``selection``).
    ``to_ship``: the fit to ship as mcflops/data/calibration_fit.json when it was asked for, else None."""

    data: dict[str, Any]
    to_ship: dict[str, Any] | None = None


def configs(chains: int, draws: int) -> tuple[Config, Config]:
    """The fit's sampler settings and the validation's: every fold of every split is one joint NUTS run, so
    the validation samples fewer (half the chains, half the draws, at least 100)."""
    cfg = Config(chains=chains, warmup=draws, draws=draws)
    return cfg, replace(cfg, chains=max(1, chains // 2), warmup=max(100, draws // 2), draws=max(100, draws // 2))


def calibrate(key, *, chains: int, draws: int, seed: int, validation: bool = True, select: bool = False,
              ship: bool = False, runs: Runs | None = None, phase: Callable[[str], None] | None = None,
              tick: Callable[[int, int], None] | None = None) -> Calibration:
    """The fit (``jax.random.fold_in(key, 0)``), its summary and, with ``validation``, every split scored
    (``fold_in(key, 1)``); with ``select`` the candidate models compared (``fold_in(key, 2)``); with ``ship``
    the fit to ship. ``seed`` is what the summary records (``key`` is ``engine.seed_key(seed)`` unless the
    caller brings its own). ``phase`` is told each stage's name as it starts and ``tick(done, total)`` a
    split's scored runs, for a display; neither computes anything."""
    import jax

    say = phase or (lambda text: None)
    runs = load_runs() if runs is None else runs
    cfg, vcfg = configs(chains, draws)
    say(f"fitting the model to {runs.n} published runs (NUTS, {cfg.chains} chains x {cfg.draws} draws)")
    f = fit(jax.random.fold_in(key, 0), runs, cfg)
    data: dict[str, Any] = fit_summary(f, cfg, seed)
    if validation:
        v = validate(jax.random.fold_in(key, 1), runs, vcfg, phase=phase, tick=tick)
        data["validation"] = v.to_dict()
        data["validation_table"] = v.table()
        data["targets"] = targets(v.table())
        data["grouped_targets"] = grouped_targets(v.table())
        data["error_floor"] = error_floor(runs)
        data["loo"] = loo_block(data["validation"])
    if select:
        data["selection"] = compare_models(jax.random.fold_in(key, 2), runs, vcfg, phase=phase)
    shipped = export_fit(f, seed, None, validation=data.get("validation_table")) if ship else None
    if shipped is not None and "loo" in data:
        shipped["loo"] = {k: v for k, v in data["loo"].items() if k != "rows"}
    return Calibration(data, shipped)


def loo_block(validation: dict[str, Any]) -> dict[str, Any]:
    """The leave-one-out split's model rows in the form calibration.png draws (and its old metrics)."""
    split = next(s for s in validation["splits"] if s["name"] == "loo")
    rows = [{**r, "covered": r["covered_90"]} for r in split["rows"]["model"]]
    sc = split["scores"]["model"]
    m = {"runs": sc["runs"], "coverage_90": sc["coverage_90"], "median_abs_log_error": sc["median_abs_log_error"],
         "median_error_pct": 100.0 * math.expm1(sc["median_abs_log_error"]),  # |log err| as a percentage error
         "median_p95_over_p5": sc["median_p95_over_p5"], "seconds": validation["seconds"]}
    return {**m, "rows": rows}


def targets(table: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per split, each of TARGETS and whether the model met it."""
    out: dict[str, dict[str, Any]] = {}
    for split in dict.fromkeys(r["split"] for r in table):
        rows = {r["model"]: r for r in table if r["split"] == split}
        m = rows["model"]
        res = {}
        for key, op, val in TARGETS:
            if op == "in":
                ok, text = val[0] <= m[key] <= val[1], f"{val[0]:g}-{val[1]:g}"
            elif op == "<=":
                ok, text = m[key] <= val, f"<= {val:g}"
            else:
                ok, text = all(m["crps"] < r["crps"] for k, r in rows.items() if k != "model"), "below every baseline"
            res[key] = {"target": text, "value": m[key], "met": bool(ok)}
        out[split] = res
    return out


def grouped_targets(table: list[dict[str, Any]]) -> dict[str, Any]:
    """The grouped splits' targets (GROUPED_*): each split's coverage and whether its CRPS is below both the
    constant's and the per-generation baseline's, and whether the two targets are met."""
    per = {}
    for split in GROUPED_SPLITS:
        rows = {r["model"]: r for r in table if r["split"] == split}
        if "model" not in rows:
            continue
        m = rows["model"]
        per[split] = {"coverage_90": m["coverage_90"], "crps": m["crps"],
                      "crps_constant": rows["constant"]["crps"], "crps_generation": rows["generation"]["crps"],
                      "beats_both": bool(m["crps"] < rows["constant"]["crps"] and m["crps"] < rows["generation"]["crps"])}
    wins = sum(p["beats_both"] for p in per.values())
    return {"splits": per, "coverage_met": bool(per) and all(p["coverage_90"] >= GROUPED_COVERAGE for p in per.values()),
            "crps_wins": wins, "crps_met": wins >= GROUPED_WINS,
            "target": f"90% coverage >= {GROUPED_COVERAGE:g} on each of {', '.join(GROUPED_SPLITS)}; CRPS below the "
                      f"constant and per-generation baselines on at least {GROUPED_WINS} of {len(GROUPED_SPLITS)}"}
