"""The fit's residual split into a part a run shares with its other configurations and a part of its own, for the
pilot.

The layout fit has one residual per row, Student-t(DF) of scale sigma_obs x the row's noise (:mod:`fit`), and the
export folds it whole into the GEMM efficiency draws (:func:`mcflops.layoutfit.predictive.predictive`), which every layout
of a prior shares. A pilot reweights those draws, so production inherited the pilot's residual: none of its own.
But two configurations of one run share only part of what the terms miss. The unit that shares it is what a pilot
and its production run have in common (:func:`mcflops.layoutfit.fit.unit`): one series' rows of one model on one
accelerator, precision and sequence length, differing only in layout and count (a prior file's pilot keeps the
file's architecture and hardware and varies only layout fields and count). This module measures the split on the
fit's TRAINING rows (a held-out row's likelihood is masked out of the fit, so it is left out here too: the pilot's
held-out validation refits without each series and cannot leak).

Per posterior draw s, each training row's residual is its measured log MFU less the model's, standardised by the
row's noise (imputed rows are noisier by design, :data:`mcflops.layoutfit.fit.IMPUTED_NOISE`) and by its stack's
scale relative to sigma_obs (a_ks = sigma_k,s / sigma_obs,s, 1 in a fit without per-stack scales):

    e_is = (log y_i - sum_c r_ics log m_ics) / (noise_i a_ks),   r_ics proportional to w_ic t_DF((log y_i - log m_ics) / (sigma_s a_ks noise_i))

with c over the row's mixture of unknown settings (:mod:`mix`) and r its responsibilities under draw s (the
posterior probability of each setting given the row, as the fit's mixture likelihood implies). Then one-way
random-effects ANOVA over units (Searle, Casella & McCulloch 1992, Variance Components, Sec. 3.5, unbalanced
data): with N rows in J units of n_j,

    MS_w = sum_j sum_i (e_ij - mean_j)^2 / (N - J),   MS_b = sum_j n_j (mean_j - mean)^2 / (J - 1)
    n0 = (N - sum_j n_j^2 / N) / (J - 1),             s_b^2 = max(0, (MS_b - MS_w) / n0)

and the row share f_s = MS_w / (MS_w + s_b^2). A ratio, so it does not depend on whether the spread is read as a
Student-t scale or a standard deviation: sigma_row = sigma_obs sqrt(f) and sigma_shared = sigma_obs sqrt(1 - f),
sigma_row^2 + sigma_shared^2 = sigma_obs^2, so a plain layout prior's width is kept. The shipped figure is the
posterior median of sigma_obs,s sqrt(f_s); a fitted stack's, of sigma_obs,s a_ks sqrt(f_s). A unit of one row adds nothing within and its residual to the between
part; the within degrees of freedom come from the units with two rows or more (llm-foundry's GPU counts and
micro-batches, vTrain's layouts, MegaScale's and Megatron-Core's scaling).

Why not by series: a series (one paper's table) holds several models and sequence lengths, whose residuals differ
for reasons a pilot of the same model does not share, so by series nearly all of the residual reads as the row's
own (benchmarks/RESULTS.md, "A pilot on held-out series", gives both splits of the same fit).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import logsumexp
from scipy.stats import t as student_t

from mcflops.layoutfit.mix import by_component, row_attention, stack_scales, step_over_t0

CHUNK = 64  # posterior draws per NumPy pass (draws x rows x components arrays)


def anova(e: np.ndarray, groups: Sequence[Any]) -> dict[str, float]:
    """One-way random-effects ANOVA of ``e`` (rows, or draws x rows) by ``groups`` (one per row): the within mean
    square ``ms_within`` (its degrees of freedom ``df_within`` = N - J), the between-group variance component
    ``between`` (>= 0) and the row share ``share`` = ms_within / (ms_within + between) (the module docstring);
    arrays over the leading axis when ``e`` has two."""
    e = np.asarray(e, float)
    names, g = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    n, j = len(g), len(names)
    if j < 2 or n <= j:
        raise ValueError(f"a within/between split needs at least two groups and a group of two rows (got {n} rows "
                         f"in {j} groups)")
    onehot = np.zeros((n, j))
    onehot[np.arange(n), g] = 1.0
    nj = onehot.sum(axis=0)
    means = e @ onehot / nj  # (..., J)
    within = ((e - means[..., g]) ** 2).sum(axis=-1) / (n - j)
    grand = e.mean(axis=-1)
    ms_b = (nj * (means - grand[..., None]) ** 2).sum(axis=-1) / (j - 1)
    n0 = (n - (nj ** 2).sum() / n) / (j - 1)
    between = np.maximum(0.0, (ms_b - within) / n0)
    return {"ms_within": within, "df_within": float(n - j), "between": between,
            "share": within / (within + between), "groups": float(j), "rows": float(n)}


def log_model(f, draws: np.ndarray) -> np.ndarray:
    """log model MFU (true FLOPs) of each row and component at the posterior draws ``draws`` (indices): shape
    draws x rows x K, the fit's own arithmetic (:func:`mcflops.layoutfit.mix.step_over_t0`) in NumPy."""
    s, a = f.samples, f.data.arrays
    b = {k: np.asarray(v)[None] for k, v in by_component(a).items()}  # 1 x rows x (K or 1)
    fam, st = np.asarray(a["fam"]), np.asarray(a["stack"])
    logit = (s["mu_gemm"][draws, None] + s["tau_family"][draws, None] * s["z_family"][draws][:, fam]
             + s["tau_stack_gemm"][draws, None] * s["z_stack_gemm"][draws][:, st])
    if "z_series" in s:  # each row's series' own term (fit.series_effect)
        logit = logit + s["tau_series"][draws, None] * s["z_series"][draws][:, np.asarray(a["series"])]
    x = {p: np.exp(s[f"mu_log_{p}"][draws, None] + s[f"tau_stack_{p}"][draws, None] * s[f"z_stack_{p}"][draws][:, st])
         for p in ("tp_comm", "dp_comm")}
    eta = 1.0 / (1.0 + np.exp(-logit))
    lam = np.exp(s["mu_log_elementwise"][draws])[:, None, None] if "mu_log_elementwise" in s else 0.0
    att = None
    if getattr(f, "attention", False):  # each row's group's fitted kernels, the prior's median else (mix.row_attention)
        la = s["logit_attention"][draws] if "logit_attention" in s else None
        att = row_attention(np, la, np.asarray(a["att_k"]), np.asarray(a["att_scale"]))
        att = np.broadcast_to(att, (len(draws), len(st)))[..., None]
    step = step_over_t0(np, b, eta[..., None], x["tp_comm"][..., None], x["dp_comm"][..., None], lam, att)
    cv = np.exp(s["mu_log_straggler_cv"][draws])[:, None, None]
    return -np.log(step) - np.log1p(cv * b["S"])


def _stack_factor(f, draws: np.ndarray) -> np.ndarray:
    """sqrt(sigma_k^2 + FLOOR^2) / sigma_obs (the scale the likelihood reads over sigma_obs) of each row's stack at the posterior draws ``draws`` (draws x rows; ones for a fit
    with one residual scale)."""
    s, st = f.samples, np.asarray(f.data.arrays["stack"])
    fitted = stack_scales(s)
    if fitted is None:
        return np.ones((len(draws), len(st)))
    return fitted[draws][:, st] / s["sigma_obs"][draws, None]


def residuals(f, df: float, draws: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each training row's standardised residual under each posterior draw (draws x training rows; the module
    docstring's e_is) and the training rows' indices. ``df``: the likelihood's Student-t degrees of freedom."""
    a = f.data.arrays
    keep = np.flatnonzero(np.asarray(a.get("fit", np.ones(len(a["log_y"])))) > 0)
    n = len(f.samples["sigma_obs"])
    draws = np.arange(n) if draws is None else np.asarray(draws)
    log_y, noise, w = np.asarray(a["log_y"]), np.asarray(a["noise"]), np.asarray(a["weight"])
    with np.errstate(divide="ignore"):
        log_w = np.log(w)[None]  # padding: weight 0, log -inf, responsibility 0
    out = []
    for i in range(0, len(draws), CHUNK):
        d = draws[i:i + CHUNK]
        lm = log_model(f, d)
        stk = _stack_factor(f, d)  # draws x rows: each row's stack's scale over sigma_obs (1 without them)
        scale = f.samples["sigma_obs"][d][:, None, None] * stk[..., None] * noise[None, :, None]
        lp = log_w + student_t.logpdf((log_y[None, :, None] - lm) / scale, df)
        resp = np.exp(lp - logsumexp(lp, axis=-1, keepdims=True))
        fitted = (resp * np.where(w[None] > 0, lm, 0.0)).sum(axis=-1)
        out.append((log_y[None] - fitted) / (noise[None] * stk))
    return np.concatenate(out)[:, keep], keep


def split(f, df: float, units: Sequence[str] | None = None) -> dict[str, Any]:
    """sigma_row and sigma_shared from fit ``f`` (the module docstring): per posterior draw the ANOVA of the
    training rows' residuals by unit, summarised by posterior quantiles. ``units``: each row's group, in the fit's
    row order (default: ``f.data.units``, :func:`mcflops.layoutfit.fit.unit`)."""
    units = f.data.units if units is None else units
    if len(units) != len(f.data.arrays["log_y"]):
        raise ValueError("split needs each row's unit, in the fit's row order")
    e, keep = residuals(f, df)
    groups = np.asarray(units, dtype=object)[keep]
    res = anova(e, groups)
    sig = np.asarray(f.samples["sigma_obs"], float)
    row = sig * np.sqrt(res["share"])
    q = lambda x: {k: float(v) for k, v in zip(("p5", "p50", "p95"), np.quantile(x, (0.05, 0.5, 0.95)))}  # noqa: E731
    # a fitted stack's own residual scale (the floor in quadrature, as the likelihood reads it), split by the same
    # share (measured in units of each row's stack scale, so it is one figure for all stacks)
    fitted = stack_scales(f.samples)
    stacks = {k: float(np.median((sig if fitted is None else fitted[:, i]) * np.sqrt(res["share"])))
              for i, k in enumerate(f.data.stacks)}
    return {"sigma_row": float(np.median(row)), "sigma_row_q": q(row), "share": q(res["share"]),
            "sigma_obs": float(np.median(sig)), "rows": int(res["rows"]), "units": int(res["groups"]),
            "df_within": int(res["df_within"]), "stacks": stacks}


def shared_scale(sigma_obs: np.ndarray, sigma_row: float) -> np.ndarray:
    """The residual's shared scale per draw, sqrt(sigma_obs^2 - sigma_row^2) (0 where the row part is all of it)."""
    s = np.asarray(sigma_obs, float)
    return np.sqrt(np.maximum(s * s - sigma_row * sigma_row, 0.0))


def describe(res: Mapping[str, Any]) -> str:
    """How sigma_row was obtained, for the shipped file's source string."""
    q = res["sigma_row_q"]
    return (f"the row part of the fit's residual (mcflops.layoutfit.rowres): per posterior draw, one-way "
            f"random-effects ANOVA of the {res['rows']} training rows' residuals (against their mixture's "
            f"responsibility-weighted log model MFU, over noise) by unit, one model's configurations on one "
            f"stack ({res['units']} units, {res['df_within']} within-unit degrees of freedom); sigma_row = sigma_obs x sqrt(within share), "
            f"posterior median {res['sigma_row']:.4f} [90%: {q['p5']:.4f}, {q['p95']:.4f}] of sigma_obs "
            f"{res['sigma_obs']:.4f}; the rest, sqrt(sigma_obs^2 - sigma_row^2), stays folded into GEMM efficiency")
