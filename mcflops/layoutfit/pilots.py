"""The pilot, validated on scaling series held out of the fit: given a series' smallest-scale row, predict the rest.

A pilot in a prior file or on the command line (mcflops.analysis.pilot) is a measured throughput at a small scale
on the run's own stack; the production MFU is the layout prior's draws at the production layout and count,
reweighted by the pilot's likelihood. This module asks whether that transfers, on series the fit never saw. For
each series of :data:`SERIES` (MegaScale's 175B strong scaling in both its columns, Megatron-Core's strong and
weak scaling, Llama 3 405B from 8K to 16K GPUs):

1. refit the layout model without the series' rows (:func:`mcflops.layoutfit.fit.fit` with them masked, at the
   held-out budget of :func:`mcflops.layoutfit.holdout.settings_for`; a production series is never in the fit,
   so its refit holds nothing out) and export it as ``layout_fit.json`` is exported
   (:func:`mcflops.layoutfit.validate.export`: a new run with a new software stack);
2. build each row's layout prior from that export through the prior-file grammar
   (:func:`mcflops.layoutfit.validate.layout_prior`, as the production rows' check does): every row of a series
   is on one accelerator, so all share the same Latin-hypercube efficiency draws, as a file's pilot and its
   production layout do;
3. weight the draws by the smallest-count row's measured MFU (true model FLOPs, log-normal error
   :data:`SIGMA`, the CLI's default, widened by the run's own residual of the export's ``row_residual``: the
   prior file's likelihood, :func:`mcflops.spec.pilots.log_likelihood`) and read each other row's posterior
   predictive: the weighted quantiles of its draws, each carrying a fresh draw of its own residual
   (:meth:`mcflops.layout.LayoutPrior.factor_draws`).

Scores (:func:`mcflops.layoutfit.holdout.scores`, over every predicted row): 90% coverage, median |log(p50 / y)|,
median p95/p5; and the median p95/p5 at each series' production scale (its largest count). Beside them, the
same rows under the refit's layout prior without the pilot (what the pilot buys) and the pilot's own MFU carried
unchanged to every row (a constant: what the model adds over "it stays as the pilot measured"). Where the refit
has the series' stack from its other series, the same refit is read again as a file that states ``stack:`` does
(``stack_stated``: the stack's effects and residual scale as fitted, not a new stack's).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mcflops.layoutfit import fit as lf
from mcflops.layoutfit import holdout as lh
from mcflops.layoutfit import validate as lv
from mcflops.layoutfit.data import LayoutRun, load_layout_runs
from mcflops.layout.fit import stack_entry
from mcflops.layoutfit.mix import draw_components
from mcflops.priors.weighting import effective_size, normalised, weighted_quantiles
from mcflops.spec.pilots import SIGMA, log_likelihood  # a pilot's default error and likelihood, a prior file's

SERIES = ("megascale-175b-strong-megascale", "megascale-175b-strong-megatron", "megatron-core-2024-h100-strong",
          "megatron-core-2024-h100-weak", "llama3-405b")
# the targets for a pilot's transfer on held-out series: shown beside the scores, never fitted to
TARGETS = {"median_abs_log_error": 0.08, "coverage_90": 0.85, "production_p95_over_p5": 1.4}


def series_runs(name: str, runs: Sequence[LayoutRun] | None = None) -> list[LayoutRun]:
    """The rows of series ``name``, the pilot (the smallest count; the first listed among equals) first."""
    mine = [r for r in (load_layout_runs() if runs is None else runs) if r.series == name]
    if len(mine) < 2:
        raise ValueError(f"series {name!r} has {len(mine)} rows in layout_runs.yaml: a pilot needs one more to predict")
    pilot = min(range(len(mine)), key=lambda i: (mine[i].count, i))
    return [mine[pilot]] + [r for i, r in enumerate(mine) if i != pilot]


def mfu_draws(run: LayoutRun, fit_json: Mapping[str, Any], row: bool = True,
              stack: str | None = None) -> tuple[np.ndarray, lf.Row]:
    """The row's layout-prior MFU draws (true model FLOPs) under ``fit_json``, and its prepared row (its measured
    MFU ``y``): a recompute its source leaves out is each mode that fits, mixed 1:1 per draw (as the fit mixes it
    and the production check does); a production row takes the paper's settings the check assumes. ``row``
    False: on the shared draws, without the run's own residual (what a pilot's likelihood reads). ``stack``: the
    fitted stack's priors in ``fit_json`` (a file that states it)."""
    arch, lay = lv.PRODUCTION.get(run.series, ({}, {}))
    r = lf.prepare(run, arch, lay)
    per = [np.asarray(lv.layout_prior(run, fit_json, arch, {**lay, "recompute": mode}, stack).factor_draws(row=row)
                      ["mfu"], float) for mode in r.modes]
    return draw_components(per, (), len(r.modes)), r


def transfer(runs: Sequence[LayoutRun], fit_json: Mapping[str, Any], sigma: float = SIGMA,
             stack: str | None = None, pilots: int = 1) -> dict[str, Any]:
    """Condition on ``runs[0]`` (the pilot; with ``pilots`` 2, on ``runs[0]`` and ``runs[1]`` together, as a file
    with two pilot measurements does), predict the others: per row its measured MFU, the pilot-conditioned
    (p5, p50, p95), the unconditioned layout prior's and the pilot's constant; the weights' effective size. The
    weights are a prior file's (:func:`mcflops.spec.pilots.log_likelihood`: the pilot's error and its run's own
    residual, ``fit_json``'s ``row_residual``, or with ``stack`` that stack's; two pilots' log likelihoods add, each
    run's residual its own); each predicted row carries its own residual draw. ``pilot`` is the first pilot."""
    row_sigma = float(stack_entry(fit_json, stack)["residual"]) if stack else lv.row_sigma(fit_json)
    draws = [mfu_draws(r, fit_json, stack=stack) for r in runs[pilots:]]
    given = [mfu_draws(r, fit_json, row=False, stack=stack) for r in runs[:pilots]]
    m0, pilot = given[0]
    w = normalised(sum(log_likelihood(g.y, m, sigma, row_sigma) for m, g in given))
    probs = list(lh.QUANTILES)
    rows = []
    for (m, row), run in zip(draws, runs[pilots:]):
        post = weighted_quantiles(m, w, probs)
        prior = np.quantile(m, probs)
        rows.append({"id": row.id, "count": run.count, "y": row.y,
                     **dict(zip(("p5", "p50", "p95"), (float(x) for x in post))),
                     "prior": [float(x) for x in prior], "constant": pilot.y})
    return {"pilot": {"id": pilot.id, "count": runs[0].count, "y": pilot.y, "sigma": sigma, "row_sigma": row_sigma,
                      "predicted_prior": [float(x) for x in np.quantile(m0, probs)],
                      "predicted_posterior": [float(x) for x in weighted_quantiles(m0, w, probs)]},
            "ess": effective_size(w), "draws": int(w.size), "rows": rows}


def series_scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pilot-conditioned, the prior's and the constant's scores over ``rows`` (the constant has no interval)."""
    y = [r["y"] for r in rows]
    model = lh.scores(y, [r["p5"] for r in rows], [r["p50"] for r in rows], [r["p95"] for r in rows])
    prior = lh.scores(y, *zip(*[r["prior"] for r in rows]))
    const = float(np.median(np.abs(np.log(np.asarray([r["constant"] for r in rows]) / np.asarray(y)))))
    return {"model": model, "prior": prior, "constant_median_abs_log_error": const}


def production_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows at the series' production scale: its largest count."""
    top = max(r["count"] for r in rows)
    return [r for r in rows if r["count"] == top]


def validate(seed: int, settings: lh.Settings, series: Sequence[str] = SERIES,
             refit: Callable[[set[str]], Mapping[str, Any]] | None = None,
             phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Each series refitted out and predicted from its pilot (the module docstring). ``refit(held ids)`` returns a
    ``layout_fit.json``-shaped export and a convergence summary under ``"fit"`` (default: NUTS at ``settings``)."""
    say = phase or (lambda text: None)
    bench = lf.rows()
    all_runs = load_layout_runs()

    def nuts(held: set[str]) -> Mapping[str, Any]:
        f = lf.fit(bench, seed, settings.chains, settings.warmup, settings.draws,
                   max_tree_depth=settings.max_tree_depth, held=held)
        return lv.export(f, f"mcflops calibrate --layout --pilot-holdout --seed {seed}", seed)

    refit = refit or nuts
    out: dict[str, Any] = {"settings": {"method": "NUTS (the shipped fit's sampler, the held-out budget)",
                                        "chains": settings.chains, "warmup": settings.warmup, "draws": settings.draws,
                                        "max_tree_depth": settings.max_tree_depth, "seed": seed, "sigma": SIGMA},
                           "targets": TARGETS, "series": []}
    for i, name in enumerate(series):
        runs = series_runs(name, all_runs)
        held = {r.id for r in runs if r.kind == "benchmark"}
        say(f"refitting without {name} ({i + 1}/{len(series)}) and conditioning on its pilot")
        t = time.perf_counter()
        fj = refit(held)
        res = transfer(runs, fj)
        fit = fj.get("fit", {})
        # the same refit read as a file that states the series' stack does, where the refit has the stack's
        # other series (its effects and residual scale as they fitted)
        stk = lf.stack(runs[0])
        stated = None
        if stk in fj.get("stack", {}):
            st = transfer(runs, fj, stack=stk)
            stated = {"stack": stk, **st, **series_scores(st["rows"]),
                      "production_p95_over_p5": _production_width(st["rows"])}
        # a second pilot at the next count (a second measured scale: the terms that change with the count, which
        # one pilot leaves to the priors), where two rows are left to predict; the one pilot on the same rows beside
        two = None
        if len(runs) >= 4:
            second = sorted(runs[1:], key=lambda r: r.count)[0]
            order = [runs[0], second] + [r for r in runs[1:] if r is not second]
            tw = transfer(order, fj, pilots=2)
            ids = {r["id"] for r in tw["rows"]}
            same = [r for r in res["rows"] if r["id"] in ids]
            two = {"second": {"id": second.id, "count": second.count}, **tw, **series_scores(tw["rows"]),
                   "production_p95_over_p5": _production_width(tw["rows"]),
                   "one_pilot_same_rows": {**series_scores(same), "production_p95_over_p5": _production_width(same)}}
        out["series"].append({"series": name, "held_out": len(held), "fit_rows": len(bench) - len(held),
                              # a prior file's pilot keeps the file's architecture: a series whose model changes
                              # with the count (Megatron-Core's weak scaling) asks more of it than a pilot can state
                              "one_model": len({r.model for r in runs}) == 1,
                              "r_hat_max": fit.get("r_hat_max"), "ess_min": fit.get("ess_min"),
                              "divergences": fit.get("divergences"), "seconds": time.perf_counter() - t,
                              **res, **series_scores(res["rows"]),
                              "production_p95_over_p5": _production_width(res["rows"]), "stack_stated": stated,
                              "two_pilots": two})
    out["pooled"] = pool(out["series"])
    out["met"] = met(out["pooled"])
    one = [s for s in out["series"] if s["one_model"]]
    if one:  # what a prior file's pilot: block can state (one model at every count), scored on its own too
        out["pooled_one_model"] = pool(one)
        out["met_one_model"] = met(out["pooled_one_model"])
    stated = [{"series": s["series"], **s["stack_stated"]} for s in out["series"] if s["stack_stated"] and s["one_model"]]
    if stated:  # the one-model series again, the file stating the stack the refit has other series of
        out["pooled_stack_stated"] = pool(stated)
        out["met_stack_stated"] = met(out["pooled_stack_stated"])
    twos = [{"series": s["series"], **s["two_pilots"]} for s in out["series"] if s["two_pilots"] and s["one_model"]]
    if twos:  # the one-model series with a second pilot, and the one pilot on the same rows
        out["pooled_two_pilots"] = pool(twos)
        out["met_two_pilots"] = met(out["pooled_two_pilots"])
        out["pooled_two_pilots"]["one_pilot_same_rows"] = pool(
            [{"series": t["series"], "rows": [r for s in out["series"] if s["series"] == t["series"] for r in s["rows"]
                                              if r["id"] in {x["id"] for x in t["rows"]}],
              "production_p95_over_p5": t["one_pilot_same_rows"]["production_p95_over_p5"]} for t in twos])
    return out


def _production_width(rows: Sequence[Mapping[str, Any]]) -> float:
    return lh.scores(*zip(*[(r["y"], r["p5"], r["p50"], r["p95"]) for r in production_rows(rows)]))["median_p95_over_p5"]


def pool(series: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The scores over every predicted row of ``series``; production's p95/p5 the median over the series."""
    every = [r for s in series for r in s["rows"]]
    return {"rows": len(every), "series": [s["series"] for s in series], **series_scores(every),
            "production_p95_over_p5": float(np.median([s["production_p95_over_p5"] for s in series]))}


def met(pooled: Mapping[str, Any]) -> dict[str, bool]:
    """Each target against a pool's scores."""
    return {"median_abs_log_error": pooled["model"]["median_abs_log_error"] <= TARGETS["median_abs_log_error"],
            "coverage_90": pooled["model"]["coverage_90"] >= TARGETS["coverage_90"],
            "production_p95_over_p5": pooled["production_p95_over_p5"] <= TARGETS["production_p95_over_p5"]}
