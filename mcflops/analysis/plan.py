"""Planning: the estimate run backwards, each answer with a probability. Computation only.

The same draws as ``mcflops run`` (engine.draw_z with the run key and the engine's block size) are
reduced by the engine (as its extra rows, ``engine.extras``: beside a run's own sums, or alone) to log-space
histograms of the planning quantities; every answer is a quantile of one of them (Hyndman & Fan 1996 type-4
interpolation of the binned CDF, ``summary.hist_quantiles``):

- accelerators to finish within D days with probability p: ``ceil(q_p(GPU-hours) / (24 D))``
  (wall-clock days = accelerator-hours / count / 24, as in the model: perfect scaling, goodput inside);
- days a cluster of G accelerators needs: ``q(GPU-hours) / (24 G)`` at p50, p90 and p;
- tokens that fit a budget with probability p: hours are linear in tokens, so with
  h = GPU-hours per token (a random variable, free of the tokens prior), ``P(T h <= H) >= p`` iff
  ``T <= H / q_p(h)``; a dollar budget uses the cost per token h x price the same way;

The questions are the spec's ``plan:`` block, :class:`mcflops.spec.PlanOptions`, checked at load
(``mcflops.spec.plan_options`` adds the command line's values).

Inputs that depend on the accelerator count (``Spec.count_dependent``: the failures goodput) are
re-solved at the count each question names (:mod:`mcflops.analysis.percount`): the hours, the cluster's
days and the budgets at ``gpus`` (default hardware.count), and the deadline's count as the fixed point
``min G: P(hours(G) / (24 G) <= D) >= p``, its curve with goodput(G) at every G. Without such inputs
the closed forms above answer everything from one pass.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.analysis import percount
from mcflops.errors import SpecError, UsageError
from mcflops.model.compute import Model, build_model, evaluate
from mcflops.spec import PlanOptions

CURVE_POINTS = 64


def _plan_rows(key, model: Model, lik, block, at, size, with_price: bool):
    """Centred logs of GPU-hours, GPU-hours per token (and USD per token), and the log-likelihood
    (draws at .. at + size - 1 of the block)."""
    v = evaluate(model, engine.draw_z(key, model, block, size, at))
    h = jnp.broadcast_to(v["gpu_hours"], (size,))
    rows = [h, h - v["tokens"]]
    if with_price:
        rows.append(h - v["tokens"] + v["price"])
    ll = None if lik is None else engine.log_likelihood(lik, v)
    return jnp.stack(rows), ll


def _plan_rows_at(key, models, lik, block, at, size, with_price: bool):
    """:func:`_plan_rows` of the spec re-solved at the asked count (``models[1]``), on the file's draws; the
    observations weigh the draws through the file's own model (``models[0]``): they are about its run."""
    base, re_solved = models
    z = engine.draw_z(key, base, block, size, at)
    v = evaluate(re_solved, z)
    h = jnp.broadcast_to(v["gpu_hours"], (size,))
    rows = [h, h - v["tokens"]]
    if with_price:
        rows.append(h - v["tokens"] + v["price"])
    ll = None if lik is None else engine.log_likelihood(lik, evaluate(base, z))
    return jnp.stack(rows), ll


def weighed(h: dict[str, Any]) -> dict[str, Any]:
    """The engine's extra rows (``engine.run_rows``), refused when no draw has weight."""
    if not float(h["s0"]) > 0:
        raise SpecError("no draw can explain the observations (every likelihood is zero)", field="observe")
    return h


def _setup(spec, opts: PlanOptions, posterior: bool):
    """(model, likelihood, the rows' function, its params, the rows' models' centres) of a plan."""
    model = build_model(spec)
    lik = None
    if posterior:
        if not spec.observe:
            raise UsageError("needs an `observe:` block in the file", arg="posterior", path=spec.path)
        lik = engine.build_likelihood(spec, model)
    G = opts.gpus or spec.hardware.count
    if spec.count_dependent and opts.gpus:
        refuse_count(spec, G)
    if spec.count_dependent:  # the hours, the cluster and the budgets at the asked count, what depends on it re-solved
        at = build_model(percount.spec_at(spec, G)) if G else model
        return model, lik, _plan_rows_at, (model, at), at.centers
    return model, lik, _plan_rows, model, model.centers


def request(spec, opts: PlanOptions | None = None, *, key: jax.Array, posterior: bool = False) -> engine.Extra:
    """The rows a plan reads, as the request ``engine.run(..., extra=)`` reduces beside a run's own sums (its
    ``rows`` then answer :func:`plan` with no pass of its own)."""
    opts = spec.plan if opts is None else opts
    _, lik, fn, params, _ = _setup(spec, opts, posterior)
    return engine.extra(key, fn, params, lik, static=("price" in spec.priors,))


def plan(spec, opts: PlanOptions | None = None, *, samples: int | None = None, seed: int | None = None,
         posterior: bool = False, progress: Callable[[int, int], None] | None = None,
         key: jax.Array | None = None, rows: dict[str, Any] | None = None) -> dict[str, Any]:
    """Answer the planning questions of ``opts`` (default: the file's ``plan:``) from one blocked pass
    (``key``: in place of ``jax.random.key(seed)``); ``rows``: that pass's rows already reduced (a run's
    ``sums.rows`` for :func:`request`, on the same key and samples)."""
    opts = spec.plan if opts is None else opts
    n = spec.samples if samples is None else int(samples)
    seed = spec.seed if seed is None else int(seed)
    model, lik, fn, params, c = _setup(spec, opts, posterior)
    with_price = "price" in spec.priors
    key = engine.seed_key(seed) if key is None else key
    G = opts.gpus or spec.hardware.count
    dep = tuple(spec.count_dependent)
    if rows is None:
        rows = engine.run_rows(key, engine.extra(key, fn, params, lik, static=(with_price,)), n, progress=progress)
    h = weighed(rows)
    ch = c["gpu_hours"]
    centres = [ch, ch - c["tokens"]] + ([ch - c["tokens"] + c["price"]] if with_price else [])
    p = opts.prob
    probs = [0.05, 0.25, 0.5, 0.75, 0.9, 0.95, p]

    def q(row: int, pr) -> np.ndarray:
        return np.exp(centres[row] + engine.row_quantiles(h, row, pr))

    hq = q(0, probs)
    out: dict[str, Any] = {"name": spec.name, "seed": seed, "samples": n, "prob": p,
                           "distribution": "posterior" if lik is not None else "prior",
                           "gpu_hours": dict(zip(("p5", "p25", "p50", "p75", "p90", "p95", "at_prob"), hq.tolist()))}
    if lik is not None:
        out["ess"] = engine.ess(float(h["s0"]), float(h["s0w2"]))
    D = opts.deadline_days
    if dep:
        out["count_dependent"] = list(dep)
    out["notes"] = [held(spec)] if (D is not None or G) else []
    if D is not None and dep:
        _fixed_point(out, key, spec, model, lik, n, D, p, hq[-1] / (24.0 * D))
    elif D is not None:
        exact = hq[-1] / (24.0 * D)
        out["deadline"] = {"days": D, "prob": p, "gpus": int(math.ceil(exact - 1e-9)), "gpus_exact": float(exact),
                           "gpus_p50": int(math.ceil(hq[2] / (24.0 * D) - 1e-9))}
        lo_c, hi_c = np.exp(centres[0] + engine.row_quantiles(h, 0, [0.005, 0.999])) / (24.0 * D)
        counts = np.unique(np.ceil(np.geomspace(max(lo_c, 1.0), max(hi_c, 2.0), CURVE_POINTS)).astype(np.int64))
        out["curve"] = {"days": D, "gpus": counts.tolist(),
                        "prob": engine.row_cdf(h, 0, np.log(24.0 * D * counts) - centres[0]).tolist()}
    if G:
        days = q(0, [0.5, 0.9, p]) / (24.0 * G)
        out["cluster"] = {"gpus": G, "days_p50": float(days[0]), "days_p90": float(days[1]), "days_at_prob": float(days[2])}
        if D is not None:
            within = engine.row_cdf(h, 0, math.log(24.0 * D * G) - centres[0])
            out["cluster"]["prob_within_deadline"] = float(within)
    if opts.budget_hours is not None:
        hpt = q(1, [0.5, p])
        out["budget_hours"] = {"budget": opts.budget_hours, "prob": p, "tokens": float(opts.budget_hours / hpt[1]),
                               "tokens_p50": float(opts.budget_hours / hpt[0]),
                               "hours_per_token_p50": float(hpt[0])}
    if opts.budget_usd is not None:
        cpt = q(2, [0.5, p])
        out["budget_usd"] = {"budget": opts.budget_usd, "prob": p, "tokens": float(opts.budget_usd / cpt[1]),
                             "tokens_p50": float(opts.budget_usd / cpt[0]), "usd_per_token_p50": float(cpt[0])}
    if dep and G:
        base = {n_: spec.count_dependent[n_].count for n_ in dep}
        words = ", ".join(f"{n_} p50 {percount.median_at(spec, n_, G):.3f} on {G:,} accelerators"
                          + (f" ({percount.median_at(spec, n_, base[n_]):.3f} on the file's {base[n_]:,})"
                             if base[n_] != G else "") for n_ in dep)
        out["notes"].insert(1, f"the hours, days and budgets are on {G:,} accelerators with {words}")
        out["notes"] += [x for x in percount.notes(spec, {"cluster": G}) if x not in out["notes"]]
    return out


def held(spec) -> str:
    """What a plan holds fixed and what it re-solves as the accelerator count moves: a hand-set MFU or goodput is
    the file's at every count, a count-dependent prior (a layout's, a failures model's) is solved at each."""
    from mcflops.layout import LayoutPrior
    from mcflops.priors.calibrated import describe

    dep = spec.count_dependent
    parts = []
    fixed = [n for n in ("mfu", "goodput") if n in spec.priors and n not in dep]
    if "mfu" in fixed and describe(spec.priors["mfu"]) is not None:  # its goodput is the point 1 it implies
        # the calibrated prior holds MFU x goodput in one number: the published runs' downtime, at their counts
        parts.append("mfu is the calibrated MFU x goodput (effective utilization), held at the file's prior at "
                     "every count: its goodput is the published runs' (their downtime at their own counts), so "
                     "it does not fall as failures grow with the count, nor does the MFU as the count grows at a "
                     "fixed batch; a hand-set or layout MFU with goodput: {failures: ...} re-solves both at each "
                     "count")
        fixed = []
    if fixed:
        them = " and ".join(fixed)
        why = {"mfu": ("measured MFU tends to fall with the count at a fixed batch", "mfu: {layout: ...}"),
               "goodput": ("failures grow with it", "goodput: {failures: ...}")}
        text = f"{them} {'is' if len(fixed) == 1 else 'are'} held at the file's prior at every count"
        if spec.hardware.count:
            text += f" (it was set for {spec.hardware.count:,} accelerators)"
        text += (f", though {' and '.join(why[n][0] for n in fixed)}; {' and '.join(why[n][1] for n in fixed)} "
                 f"{'re-solves it' if len(fixed) == 1 else 're-solve them'} at each count")
        parts.append(text)
    for name, d in dep.items():
        if isinstance(d, LayoutPrior):
            lo = d.layout
            parts.append(f"{name} is re-solved at each count from the layout with tp {lo.tp}, pp {lo.pp}, cp {lo.cp}, "
                         f"the micro-batch and the global batch ({lo.global_batch:,} sequences) held: dp follows the "
                         "count, so each replica's micro-batches, the pipeline bubble and the data-parallel "
                         "collectives move with it")
        else:
            parts.append(f"{name} is re-solved at each count from its failures model (failures and restarts scale "
                         "with the accelerators; the checkpoint settings held)")
    return "what moves with the accelerator count: " + "; ".join(parts)


def refuse_count(spec, count: int) -> None:
    """SpecError when a count-dependent prior (a layout) cannot be solved on ``count`` accelerators, naming the
    nearest counts it runs on."""
    for name, d in spec.count_dependent.items():
        why = d.runs_on(count) if hasattr(d, "runs_on") else None
        if why is None:
            continue
        ok = np.asarray(d.runnable_counts(), np.int64)
        near = sorted({int(ok[i]) for i in (np.searchsorted(ok, count) - 1, np.searchsorted(ok, count))
                       if 0 <= i < len(ok)})
        hint = f"; it runs on {' or '.join(f'{g:,}' for g in near)} (the nearest)" if near else \
            "; it runs on no accelerator count"
        raise SpecError(f"{name}'s layout cannot run on {count:,} accelerators: {why}{hint}", path=spec.path,
                        field="gpus")


def searched(spec, counts: percount.Counts) -> str:
    """The note that a plan searched only the counts its layout runs on, and which."""
    from mcflops.layout import LayoutPrior

    lay = next(d for d in spec.count_dependent.values() if isinstance(d, LayoutPrior)).layout
    shown = [f"{g:,}" for g in counts.allowed]
    listing = ", ".join(shown) if len(shown) <= 8 else ", ".join(shown[:3] + ["..."] + shown[-2:])
    return (f"only counts the layout runs on were searched ({len(shown):,}: {listing}): multiples of tp x pp x cp = "
            f"{lay.tp * lay.pp * lay.cp:,}" + (f" and of tp x pp x ep = {lay.tp * lay.pp * lay.ep:,}" if lay.ep > 1 else "")
            + f" whose dp divides the global batch of {lay.global_batch:,} sequences into "
            "whole micro-batches; state another global_batch to search other counts")


def _fixed_point(out: dict[str, Any], key, spec, model, lik, n: int, D: float, p: float, start: float) -> None:
    """The deadline's count and curve when inputs depend on the count (:mod:`mcflops.analysis.percount`), and
    the notes: what was re-solved, the goodput at the answer, the failures model's regime there."""
    curve = percount.Curve(key, spec, model, lik, n, D)
    counts = percount.runnable(spec)
    fp = percount.fixed_point(curve, p, start, counts)
    half = percount.fixed_point(curve, 0.5, start, counts) if p != 0.5 else fp
    ess = curve.ess
    dl: dict[str, Any] = {"days": D, "prob": p, "method": "fixed point", "gpus": fp["gpus"],
                          "gpus_p50": half["gpus"]}
    if fp["gpus"] is not None:
        P = fp["prob_at_gpus"]
        dl.update(prob_at_gpus=P, fewer_gpus=fp["fewer_gpus"], prob_one_fewer=fp["prob_one_fewer"],
                  mcse=math.sqrt(P * (1 - P) / max(ess, 1.0)))
    else:
        dl.update(best_gpus=fp["best_gpus"], best_prob=fp["best_prob"])
    out["deadline"] = dl
    points, probs = percount.curve_points(curve, fp["gpus"], CURVE_POINTS, counts)
    out["curve"] = {"days": D, "gpus": points, "prob": probs}
    if counts.allowed is not None:
        out["notes"].append(searched(spec, counts))
    names = ", ".join(spec.count_dependent)
    g = fp["gpus"] if fp["gpus"] is not None else fp["best_gpus"]
    words = ", ".join(f"{name} p50 {percount.median_at(spec, name, g):.3f} on {g:,}" for name in spec.count_dependent) \
        if g is not None else ""
    if g is None:
        lo, hi = fp["tried"]
        out["notes"].append(f"no accelerator count finishes within {D:g} days: with {names} re-solved at each count, "
                            f"no draw finishes at any count from {lo:,} to {hi:,}")
    elif fp["gpus"] is None:
        out["notes"].append(f"no accelerator count finishes within {D:g} days with probability {p:g}: with {names} "
                            f"re-solved at each count, the best is {fp['best_gpus']:,} (P = {fp['best_prob']:.3f}); "
                            f"{words}")
    else:
        out["notes"].append(f"{names} re-solved at every count tried: {fp['gpus']:,} accelerators is the fixed point "
                            f"(the smallest count whose P(done within {D:g} days) >= {p:g}, with its own {names}; "
                            f"{words})")
    out["notes"] += [x for x in percount.notes(spec, {"deadline": g}) if x not in out["notes"]]
