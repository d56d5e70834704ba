"""Planning: the estimate run backwards, each answer with a probability. Computation only.

The same draws as ``mcflops run`` (engine.draw_z with the run key and the engine's block size) are
reduced, block by block on the device, to log-space histograms of the planning quantities; every
answer is a quantile of one of them (Hyndman & Fan 1996 type-4 interpolation of the binned CDF,
``summary.hist_quantiles``):

- accelerators to finish within D days with probability p: ``ceil(q_p(GPU-hours) / (24 D))``
  (wall-clock days = accelerator-hours / count / 24, as in the model: perfect scaling, goodput inside);
- days a cluster of G accelerators needs: ``q(GPU-hours) / (24 G)`` at p50, p90 and p;
- tokens that fit a budget with probability p: hours are linear in tokens, so with
  h = GPU-hours per token (a random variable, free of the tokens prior), ``P(T h <= H) >= p`` iff
  ``T <= H / q_p(h)``; a dollar budget uses the cost per token h x price the same way;

The questions are the spec's ``plan:`` block, :class:`mcflops.spec.PlanOptions`, checked at load
(``mcflops.spec.plan_options`` adds the command line's values).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.analysis.histpass import cdf, quantiles, reduce
from mcflops.errors import SpecError
from mcflops.model.compute import Model, build_model, evaluate
from mcflops.spec import PlanOptions

CURVE_POINTS = 64


def _plan_rows(key, model: Model, lik, block, size, with_price: bool):
    """Centred logs of GPU-hours, GPU-hours per token (and USD per token), and the log-likelihood."""
    v = evaluate(model, engine.draw_z(key, model, block, size))
    h = jnp.broadcast_to(v["gpu_hours"], (size,))
    rows = [h, h - v["tokens"]]
    if with_price:
        rows.append(h - v["tokens"] + v["price"])
    ll = None if lik is None else engine.log_likelihood(lik, v)
    return jnp.stack(rows), ll


def plan(spec, opts: PlanOptions | None = None, *, samples: int | None = None, seed: int | None = None,
         posterior: bool = False, progress: Callable[[int, int], None] | None = None,
         key: jax.Array | None = None) -> dict[str, Any]:
    """Answer the planning questions of ``opts`` (default: the file's ``plan:``) from one blocked pass
    (``key``: in place of ``jax.random.key(seed)``)."""
    opts = spec.plan if opts is None else opts
    n = spec.samples if samples is None else int(samples)
    seed = spec.seed if seed is None else int(seed)
    model = build_model(spec)
    lik = None
    if posterior:
        if not spec.observe:
            raise SpecError("--posterior needs an `observe:` block in the file", path=spec.path, field="--posterior")
        lik = engine.build_likelihood(spec, model)
    with_price = "price" in spec.priors
    h = reduce(engine.seed_key(seed) if key is None else key, _plan_rows, model, lik, n, static=(with_price,), progress=progress)
    c = model.centers
    ch = c["gpu_hours"]
    centres = [ch, ch - c["tokens"]] + ([ch - c["tokens"] + c["price"]] if with_price else [])
    p = opts.prob
    probs = [0.05, 0.25, 0.5, 0.75, 0.9, 0.95, p]

    def q(row: int, pr) -> np.ndarray:
        return np.exp(centres[row] + quantiles(h, row, pr))

    hq = q(0, probs)
    out: dict[str, Any] = {"name": spec.name, "seed": seed, "samples": n, "prob": p,
                           "distribution": "posterior" if lik is not None else "prior",
                           "gpu_hours": dict(zip(("p5", "p25", "p50", "p75", "p90", "p95", "at_prob"), hq.tolist()))}
    if lik is not None:
        out["ess"] = engine.ess(float(h["s0"]), float(h["s0w2"]))
    D = opts.deadline_days
    if D is not None:
        exact = hq[-1] / (24.0 * D)
        out["deadline"] = {"days": D, "prob": p, "gpus": int(math.ceil(exact - 1e-9)), "gpus_exact": float(exact),
                           "gpus_p50": int(math.ceil(hq[2] / (24.0 * D) - 1e-9))}
        lo_c, hi_c = np.exp(centres[0] + quantiles(h, 0, [0.005, 0.999])) / (24.0 * D)
        counts = np.unique(np.ceil(np.geomspace(max(lo_c, 1.0), max(hi_c, 2.0), CURVE_POINTS)).astype(np.int64))
        out["curve"] = {"days": D, "gpus": counts.tolist(),
                        "prob": cdf(h, 0, np.log(24.0 * D * counts) - centres[0]).tolist()}
    G = opts.gpus or spec.hardware.count
    if G:
        days = q(0, [0.5, 0.9, p]) / (24.0 * G)
        out["cluster"] = {"gpus": G, "days_p50": float(days[0]), "days_p90": float(days[1]), "days_at_prob": float(days[2])}
        if D is not None:
            out["cluster"]["prob_within_deadline"] = float(cdf(h, 0, math.log(24.0 * D * G) - centres[0]))
    if opts.budget_hours is not None:
        hpt = q(1, [0.5, p])
        out["budget_hours"] = {"budget": opts.budget_hours, "prob": p, "tokens": float(opts.budget_hours / hpt[1]),
                               "tokens_p50": float(opts.budget_hours / hpt[0]),
                               "hours_per_token_p50": float(hpt[0])}
    if opts.budget_usd is not None:
        cpt = q(2, [0.5, p])
        out["budget_usd"] = {"budget": opts.budget_usd, "prob": p, "tokens": float(opts.budget_usd / cpt[1]),
                             "tokens_p50": float(opts.budget_usd / cpt[0]), "usd_per_token_p50": float(cpt[0])}
    return out
