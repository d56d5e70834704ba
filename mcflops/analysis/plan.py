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
- ``compare``: two prior files on common random numbers: each input draws from
  ``fold_in(key, crc32(name))``, so inputs with the same name get the same z in both files, and one
  jitted pass evaluates both models on them and reduces the ratio's histogram.

The questions are the spec's ``plan:`` block, :class:`mcflops.spec.PlanOptions`, checked at load
(``mcflops.spec.plan_options`` adds the command line's values).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.errors import SpecError
from mcflops.model.compute import Model, build_model, evaluate
from mcflops.engine.summary import hist_cdf, hist_quantiles
from mcflops.spec import PlanOptions

NBINS = 4096
PILOT = 1 << 16
_PILOT_ID = engine.PLAN_PILOT
CURVE_POINTS = 64


# ----------------------------------------------------------------------------- blocked histograms

def _plan_rows(key, model: Model, lik, block, size, with_price: bool):
    """Centred logs of GPU-hours, GPU-hours per token (and USD per token), and the log-likelihood."""
    v = evaluate(model, engine.draw_z(key, model, block, size))
    h = jnp.broadcast_to(v["gpu_hours"], (size,))
    rows = [h, h - v["tokens"]]
    if with_price:
        rows.append(h - v["tokens"] + v["price"])
    ll = None if lik is None else engine.log_likelihood(lik, v)
    return jnp.stack(rows), ll


def _compare_rows(key, models, lik, block, size, output: str):
    """Both models' centred log output on the same z, and their difference (log B/A minus a constant)."""
    a, b = models
    da = jnp.broadcast_to(evaluate(a, engine.draw_z(key, a, block, size))[output], (size,))
    db = jnp.broadcast_to(evaluate(b, engine.draw_z(key, b, block, size))[output], (size,))
    return jnp.stack([da, db, db - da]), None


def _block(key, params, lik, bins, block, n_valid, rows, static, size, nbins):
    """One block's weighted histograms of the rows; ``bins``: (lo, 1 / width, thresholds) per row."""
    lo, inv, thr = bins
    X, ll = rows(key, params, lik, block, size, *static)
    q = X.shape[0]
    valid = jnp.arange(size) < n_valid
    if ll is None:
        w, m = valid.astype(jnp.float32), jnp.float32(0.0)
    else:
        ll = jnp.where(valid, ll, -jnp.inf)
        m = jnp.max(ll)
        w = jnp.exp(ll - jnp.where(jnp.isfinite(m), m, 0.0))
    idx = jnp.clip(jnp.floor((X - lo[:, None]) * inv[:, None]) + 1, 0, nbins + 1).astype(jnp.int32)
    flat = (idx + (jnp.arange(q, dtype=jnp.int32) * (nbins + 2))[:, None]).reshape(-1)
    W = jnp.broadcast_to(w[None, :], X.shape)
    hist = jnp.zeros(q * (nbins + 2), jnp.float32).at[flat].add(W.reshape(-1)).reshape(q, nbins + 2)
    return {"hist": hist, "m": m, "s0": jnp.sum(w), "s0w2": jnp.sum(w * w),
            "min": jnp.min(jnp.where(valid[None, :], X, jnp.inf), axis=1),
            "max": jnp.max(jnp.where(valid[None, :], X, -jnp.inf), axis=1),
            "above": jnp.sum(jnp.where(X > thr[:, None], W, 0.0), axis=1),
            "below": jnp.sum(jnp.where(X < thr[:, None], W, 0.0), axis=1)}


@partial(jax.jit, static_argnames=("rows", "static", "size", "nbins"))
def _hist_call(key, params, lik, bins, blocks, n_valid, *, rows, static, size, nbins):
    return jax.lax.map(lambda a: _block(key, params, lik, bins, a[0], a[1], rows, static, size, nbins),
                       (blocks, n_valid))


@partial(jax.jit, static_argnames=("rows", "static"))
def _pilot_call(key, params, *, rows, static):
    X, _ = rows(jax.random.fold_in(key, _PILOT_ID), params, None, jnp.uint32(0), PILOT, *static)
    return jnp.stack([jnp.min(X, axis=1), jnp.max(X, axis=1)])


def reduce(key: jax.Array, rows: Callable, params: Any, lik, n: int, *, static: tuple = (),
           thresholds=None, size: int = engine.BLOCK,
           progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Histograms (float64, blocks added in order) of the rows ``rows(key, params, lik, block, size, *static)``.

    With a likelihood the weights are exp(log-likelihood), rescaled block by block to the running
    maximum (the engine's scheme), so the histograms are the importance-weighted posterior's.
    """
    pilot = np.asarray(jax.device_get(_pilot_call(key, params, rows=rows, static=static)), np.float64)
    span = np.maximum(pilot[1] - pilot[0], 1e-6)
    lo, width = pilot[0] - 0.5 * span, 2.0 * span / NBINS
    q = len(lo)
    thr = np.zeros(q) if thresholds is None else np.asarray(thresholds, np.float64)
    nblocks = -(-n // size)
    acc: dict[str, Any] | None = None
    log_max = -np.inf
    mn, mx = np.full(q, np.inf), np.full(q, -np.inf)
    bins = tuple(jnp.asarray(x, jnp.float32) for x in (lo, 1.0 / width, thr))
    for b in range(nblocks):
        nv = min(n - b * size, size)
        out = jax.device_get(_hist_call(key, params, lik, bins, jnp.asarray([b], jnp.uint32),
                                        jnp.asarray([nv], jnp.int32), rows=rows, static=static, size=size,
                                        nbins=NBINS))
        blk = {k: np.asarray(v[0], np.float64) for k, v in out.items()}
        mn, mx = np.minimum(mn, blk["min"]), np.maximum(mx, blk["max"])
        m = float(blk["m"])
        if np.isfinite(m) and float(blk["s0"]) > 0:
            new = max(m, log_max)
            scale_new, scale_old = math.exp(m - new), (math.exp(log_max - new) if np.isfinite(log_max) else 0.0)
            parts = ("hist", "s0", "above", "below")
            blk2 = {k: blk[k] * scale_new for k in parts}
            blk2["s0w2"] = blk["s0w2"] * scale_new**2
            if acc is None:
                acc = blk2
            else:
                acc = {k: acc[k] * (scale_old**2 if k == "s0w2" else scale_old) + blk2[k] for k in acc}
            log_max = new
        if progress is not None:
            progress(b + 1, nblocks)
    if acc is None:
        raise SpecError("no draw can explain the observations (every likelihood is zero)", field="observe")
    acc.update(lo=lo, width=width, min=mn, max=mx, n=n)
    return acc


def quantiles(h: Mapping[str, Any], row: int, probs) -> np.ndarray:
    """Quantiles of row ``row`` (centred log), clamped to the exact min and max of the draws."""
    lo_x, hi_x = h["min"][row], h["max"][row]
    if hi_x <= lo_x:
        return np.full(len(np.atleast_1d(probs)), lo_x)
    qs = hist_quantiles(h["hist"][row], h["lo"][row], h["width"][row], probs)
    return np.clip(np.where(np.isnan(qs), np.where(np.asarray(probs) < 0.5, lo_x, hi_x), qs), lo_x, hi_x)


def cdf(h: Mapping[str, Any], row: int, x) -> np.ndarray:
    """P(row <= x) from the histogram (linear within bins)."""
    hist = h["hist"][row]
    edges, cum = hist_cdf(hist, h["lo"][row], h["width"][row])
    return np.interp(np.asarray(x, np.float64), edges, cum, left=cum[0], right=1.0 - hist[-1] / hist.sum())


# ----------------------------------------------------------------------------- the questions

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


def compare(spec_a, spec_b, *, output: str = "gpu_hours", samples: int | None = None, seed: int | None = None,
            progress: Callable[[int, int], None] | None = None, key: jax.Array | None = None) -> dict[str, Any]:
    """B against A on common random numbers: both outputs' quantiles and the distribution of B / A
    (``key``: in place of ``jax.random.key(seed)``)."""
    for s in (spec_a, spec_b):
        if output not in s.outputs:
            raise SpecError(f"'{output}' is not an output of this file (outputs: {', '.join(s.outputs)})",
                            path=s.path, field="--output")
    n = spec_a.samples if samples is None else int(samples)
    seed = spec_a.seed if seed is None else int(seed)
    ma, mb = build_model(spec_a), build_model(spec_b)
    shift = mb.centers[output] - ma.centers[output]  # log(B/A) = shift + (dB - dA)
    h = reduce(engine.seed_key(seed) if key is None else key, _compare_rows, (ma, mb), None, n, static=(output,),
               thresholds=[0.0, 0.0, -shift], progress=progress)
    probs = [0.05, 0.25, 0.5, 0.75, 0.95]
    names = ("p5", "p25", "p50", "p75", "p95")

    def side(spec, m, row):
        return {"name": spec.name, "path": spec.path,
                **dict(zip(names, np.exp(m.centers[output] + quantiles(h, row, probs)).tolist()))}

    ratio = dict(zip(names, np.exp(shift + quantiles(h, 2, probs)).tolist()))
    total = float(h["s0"])
    ratio.update(min=float(np.exp(shift + h["min"][2])), max=float(np.exp(shift + h["max"][2])),
                 prob_b_greater=float(h["above"][2] / total), prob_b_less=float(h["below"][2] / total))
    hist = h["hist"][2][1:-1].reshape(-1, NBINS // 64).sum(axis=1)  # 64 coarse bins for the plot
    edges = h["lo"][2] + h["width"][2] * (NBINS // 64) * np.arange(65)
    shared = [k for k in ma.inputs if k in mb.inputs and ma.sampler(k).kind != "const"
              and mb.sampler(k).kind != "const"]
    notes = []
    if (ma.copula is None) != (mb.copula is None) or (ma.copula is not None and ma.copula.names != mb.copula.names):
        notes.append("the two files correlate different inputs, so the shared inputs' draws differ where the "
                     "correlations do")
    return {"output": output, "seed": seed, "samples": n, "a": side(spec_a, ma, 0), "b": side(spec_b, mb, 1),
            "ratio": ratio, "shared_inputs": shared, "common_random_numbers": True,
            "ratio_hist": {"log_edges": (shift + edges).tolist(), "weights": (hist / total).tolist()},
            "notes": notes}
