"""Bayesian update: condition on published figures. Importance sampling from the engine's sums, NUTS
when it is poor (or asked for), summaries in one shape for both, and the findings the report states.

Importance sampling uses the prior as proposal: the engine weights every draw by the observations'
likelihood and reduces blocks to weighted moments and histograms (flat memory, engine speed). Its
diagnostics are Kish's effective sample size, ESS = (sum w)^2 / sum w^2 (Kish 1965, "Survey
Sampling", Sec. 11.7), and the Pareto k-hat of the weights (psis.py; Vehtari et al. 2024). ``auto``
switches to NUTS (nuts.py) when k-hat > 0.7 or ESS < 1000, or when the posterior is narrower than
the engine's histogram can resolve, and says why in ``res.notes``.

Summaries of each quantity: mean, sd, p5..p95, the 90% highest-density interval (HDI: the shortest
interval holding 90%, as arviz's hdi), and Monte Carlo standard errors from the ESS: sd / sqrt(ESS)
for the mean, sd / sqrt(2 ESS) for the sd (normal theory), and sqrt(p (1 - p) / ESS) / f(q_p) for
a quantile q_p (the asymptotic variance of a sample quantile; Serfling 1980, Sec. 2.3.3), with the
density f from the spacing of neighbouring quantiles.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from mcflops.inference import psis
from mcflops.engine import streams, summary
from mcflops.errors import SpecError

ESS_MIN = 1000  # below this, auto switches to NUTS (issue 3)
HDI_PROB = 0.9
# A posterior log-sd under MIN_BINS histogram bins makes histogram quantiles coarse: linear interpolation of
# the CDF errs by up to w^2 max|f'| / 8 = 0.03 (w/s)^2 for a normal of sd s and bins of width w, i.e. under
# 0.008 in probability (0.02 s in a quantile) at 2 bins per sd. Means and sds come from moment sums, exact.
MIN_BINS = 2
PAPER_MFU = (0.38, 0.43)  # Llama Team 2024, "The Llama 3 Herd of Models" (arXiv 2407.21783) Table 4, BF16 MFU
# which inputs each output depends on (model.py): used to say which priors an observation conflicts with
_DEPENDS = {"flops": ("params", "tokens"), "gpu_hours": ("params", "tokens", "peak_flops", "mfu", "goodput")}
_DEPENDS["wall_days"] = _DEPENDS["gpu_hours"]
_DEPENDS["cost"] = _DEPENDS["gpu_hours"] + ("price",)
_DEPENDS["energy_mwh"] = _DEPENDS["gpu_hours"] + ("power", "pue")


# ----------------------------------------------------------------------------------------------------
# summaries: from a weighted log-space histogram (importance sampling) or from draws (NUTS)


def _hdi_from_quantile(qf, prob: float = HDI_PROB, grid: int = 400) -> tuple[float, float]:
    """Shortest interval [Q(p), Q(p + prob)] over p in [0, 1 - prob] for a quantile function Q (linear units)."""
    p = np.linspace(0.0, 1.0 - prob, grid + 1)
    p = np.clip(p, 1e-6, 1 - prob - 1e-6)
    a, b = qf(p), qf(p + prob)
    ok = np.isfinite(a) & np.isfinite(b)
    if not ok.any():
        return math.nan, math.nan
    i = int(np.argmin(np.where(ok, b - a, np.inf)))
    return float(a[i]), float(b[i])


def hist_stats(s: Mapping[str, np.ndarray], i: int, center: float, lo: float, width: float,
               n_eff: float) -> dict[str, Any]:
    """summary.quantity_stats plus the 90% HDI and MCSEs, from weighted sums (one quantity)."""
    out = summary.quantity_stats(s, i, center, lo, width, n_eff)
    edges, cdf = summary.hist_cdf(np.asarray(s["hist"][i], np.float64), lo, width)

    def qf(p):  # quantiles in linear units; NaN where they fall into the under/overflow bins
        q = np.exp(center + np.interp(p, cdf, edges))
        return np.where((np.asarray(p) < cdf[0]) | (np.asarray(p) > cdf[-1]), np.nan, q)

    out["hdi90"] = list(_hdi_from_quantile(qf))
    out.update(_mcse(out, qf, n_eff))
    out["ess"] = float(n_eff)
    return out


def sample_stats(d: np.ndarray, center: float, ess: float) -> dict[str, Any]:
    """The same summary from draws of a centred log (any shape), with the draws' effective sample size."""
    x = np.exp(center + np.asarray(d, np.float64).ravel())
    ld = center + np.asarray(d, np.float64).ravel()
    out: dict[str, Any] = {"mean": float(np.mean(x)), "sd": float(np.std(x))}
    for k, p in summary.QUANTILES.items():
        out[k] = float(np.quantile(x, p))
    xs = np.sort(x)
    k = int(math.ceil(HDI_PROB * len(xs)))  # shortest window holding 90% of the sorted draws (arviz.hdi)
    j = int(np.argmin(xs[k - 1:] - xs[: len(xs) - k + 1]))
    out["hdi90"] = [float(xs[j]), float(xs[j + k - 1])]
    out.update(_mcse(out, lambda p: np.quantile(x, p), ess))
    out["log_mean"], out["log_sd"] = float(np.mean(ld)), float(np.std(ld))
    out["ess"] = float(ess)
    return out


def _mcse(st: Mapping[str, Any], qf, n_eff: float) -> dict[str, float]:
    """Monte Carlo standard errors of mean, sd, p5, p50, p95 from the effective sample size (module doc)."""
    n = max(float(n_eff), 1.0)
    out = {"mcse_mean": st["sd"] / math.sqrt(n), "mcse_sd": st["sd"] / math.sqrt(2.0 * n)}
    for key, p in (("p5", 0.05), ("p50", 0.5), ("p95", 0.95)):
        dp = min(0.02, p / 2)
        a, b = (float(v) for v in qf(np.asarray([p - dp, p + dp])))
        inv_f = (b - a) / (2 * dp)  # 1 / density at q_p (linear units)
        out[f"mcse_{key}"] = math.sqrt(p * (1 - p) / n) * inv_f if math.isfinite(inv_f) else math.nan
    return out


def prob_between(s: Mapping[str, np.ndarray], i: int, center: float, lo: float, width: float,
                 a: float, b: float) -> float:
    """P(a <= x <= b) of quantity i under weighted sums (interpolated histogram CDF)."""
    edges, cdf = summary.hist_cdf(np.asarray(s["hist"][i], np.float64), lo, width)
    fa, fb = np.interp([math.log(a) - center, math.log(b) - center], edges, cdf, left=0.0, right=1.0)
    return float(fb - fa)


# ----------------------------------------------------------------------------------------------------
# importance sampling


def reservoir_draws(sums, key) -> np.ndarray:
    """Equally weighted posterior draws [Q, K] (centred logs) from the engine's Gumbel-top-k reservoir.

    The reservoir holds the K largest ll + Gumbel keys: a weighted sample without replacement, whose
    inclusion probability given the threshold kappa (the K-th key) is q_i = 1 - exp(-exp(ll_i - kappa));
    weighting each kept draw by w_i / q_i makes it unbiased (Kool, van Hoof & Welling 2019, "Stochastic
    beams and where to find them", Sec. 4.1; Duffield, Lund & Thorup 2007, priority sampling).
    Systematic resampling (Kitagawa 1996) turns those weights into equal ones: when the ESS is much
    larger than K the weights are already equal and every draw is kept once.
    """
    import jax

    r = sums.reservoir
    keys, ll, D = np.asarray(r["key"]), np.asarray(r["ll"]), np.asarray(r["D"])
    kappa = keys[-1]
    ok = np.isfinite(keys[:-1]) & np.isfinite(ll[:-1])
    ll, D = ll[:-1][ok], D[:, :-1][:, ok]
    if ll.size == 0:
        return D
    if np.isfinite(kappa):
        logq = np.log(-np.expm1(-np.exp(np.minimum(ll - kappa, 700.0))))
    else:
        logq = np.zeros_like(ll)
    lw = ll - logq
    w = np.exp(lw - lw.max())
    cum = np.cumsum(w / w.sum())
    u0 = float(jax.random.uniform(jax.random.fold_in(key, streams.RESAMPLE), ()))
    idx = np.searchsorted(cum, (u0 + np.arange(ll.size)) / ll.size, side="left")
    return D[:, np.minimum(idx, ll.size - 1)]


def importance_posterior(sums, centers: Mapping[str, float]) -> tuple[dict[str, dict], float]:
    s = sums.post
    n_eff = summary.ess(float(s["s0"]), float(s["s0w2"]))
    return ({n: hist_stats(s, i, centers[n], sums.lo[i], sums.width[i], n_eff) for i, n in enumerate(sums.names)},
            n_eff)


def poor_reasons(khat: float, n_eff: float, stats: Mapping[str, dict], sums) -> list[str]:
    """Why importance sampling cannot be trusted here (empty: it can)."""
    why = []
    if khat > psis.K_GOOD:
        why.append(f"Pareto k-hat {khat:.2f} > {psis.K_GOOD} (heavy-tailed weights; Vehtari et al. 2024)")
    if n_eff < ESS_MIN:
        why.append(f"effective sample size {n_eff:.0f} < {ESS_MIN} of {sums.n:,} draws")
    thin = [n for i, n in enumerate(sums.names)
            if 0 < stats[n]["log_sd"] < MIN_BINS * sums.width[i] and sums.prior["s2d"][i] > 0]
    if thin and not why:
        why.append(f"the posterior of {', '.join(thin)} is narrower than {MIN_BINS} histogram bins")
    return why


# ----------------------------------------------------------------------------------------------------
# conflicts: an observation no prior draw can explain


def _behind(spec, name: str) -> tuple[list[str], list[str]]:
    """(uncertain, fixed) inputs that an observed quantity depends on."""
    deps = (name,) if name in spec.priors else _DEPENDS.get(name, tuple(spec.priors))
    if spec.flops == "megatron":
        deps = tuple(d for d in deps if d != "params")
    deps = [d for d in deps if d in spec.priors]
    return [d for d in deps if d in spec.uncertain], [d for d in deps if d not in spec.uncertain]


def _prior_range(res, name: str) -> tuple[float, float]:
    """Smallest and largest prior draw of a quantity (to a histogram bin), or its fixed value."""
    sums, m = res.sums, res.model
    if name not in sums.names:
        v = math.exp(m.centers[name])
        return v, v
    i = sums.names.index(name)
    h = np.asarray(sums.prior["hist"][i])
    nz = np.flatnonzero(h > 0)
    lo = sums.lo[i] + (max(nz[0], 1) - 1) * sums.width[i]
    hi = sums.lo[i] + min(nz[-1], len(h) - 2) * sums.width[i]
    return math.exp(m.centers[name] + lo), math.exp(m.centers[name] + hi)


def conflicts(res) -> list[str]:
    """One line per observation that lies outside every prior draw (naming the priors behind it)."""
    from mcflops.numbers import format_number as fmt

    spec, sums, out = res.spec, res.sums, []
    for i, (name, o) in enumerate(spec.observe.items()):
        a, b = _prior_range(res, name)
        unc, fixed = _behind(spec, name)
        priors = (f"the prior{'s' if len(unc) > 1 else ''} of {', '.join(unc)}" if unc else "no uncertain input")
        if fixed:
            priors += f" (with {', '.join(fixed)} fixed)"
        if o.noise == "between":
            if sums.inside[i] > 0:
                continue
            where = f"[{fmt(o.low)}, {fmt(o.high)}]"
        else:
            pct = summary.percentile_of(sums, i)
            if 0.0 < pct < 100.0:
                continue
            where = fmt(o.value)
        out.append(f"observe.{name} {where} lies outside every prior draw of {name} "
                   f"({fmt(a)} to {fmt(b)}, set by {priors})")
    return out


def _no_draw_error(res, lik) -> SpecError:
    lines = conflicts(res)
    if not lines:
        inside = ", ".join(f"{n} {float(res.sums.inside[i] / res.sums.n):.3g}" for i, n in enumerate(lik.names)
                           if lik.kinds[i] == "between")
        lines = [f"the observations {', '.join(lik.names)} are each possible, but no prior draw satisfies all of "
                 f"them together (prior probability inside each interval: {inside})"]
    return SpecError("no prior draw can explain the observations: " + "; ".join(lines)
                     + "; widen those priors or check the observed values", path=res.spec.path, field="observe")


# ----------------------------------------------------------------------------------------------------
# the update


def attach_posterior(res, lik, method: str = "auto", *, sampler: Callable | None = None, warmup: int = 1000,
                     draws: int = 1000, chains: int = 4) -> None:
    """Fill ``res.posterior`` (summary.json's "posterior") and ``res.posterior_draws`` (linear units).

    ``sampler`` is the NUTS sampler (``nuts.run_nuts``), handed in by the caller (api.run): inference
    and nuts are sibling layers; None means NumPyro is not installed.
    """
    import jax

    if method not in ("auto", "is", "nuts"):
        raise SpecError(f"expected --method auto, is or nuts, got '{method}'", field="--method")
    sums, m = res.sums, res.model
    if sums.post is None or not np.isfinite(sums.log_max) or float(sums.post["s0"]) <= 0:
        raise _no_draw_error(res, lik)
    key = jax.random.key(res.seed)
    stats, n_eff = importance_posterior(sums, m.centers)
    khat = psis.khat_from_top(sums.top, sums.pool or sums.n)  # the tail of the pool's weights (engine.pool_subblocks)
    why = poor_reasons(khat, n_eff, stats, sums)
    for line in conflicts(res):
        res.notes.append(f"{line}: the posterior rests on the tail of the prior")
    is_diag = {"ess": n_eff, "ess_fraction": n_eff / sums.n, "pareto_k": khat, "draws": sums.n}
    pool = {"pareto_k_draws": sums.pool} if 0 < sums.pool < sums.n else {}  # k-hat and reservoir from the pool
    is_diag.update(pool)
    use_nuts = method == "nuts" or (method == "auto" and bool(why))
    if use_nuts and sampler is None:
        res.notes.append("WARNING: NumPyro is not installed, so NUTS cannot run; the posterior below is importance "
                         "sampling" + (f", which is poor here: {'; '.join(why)}" if why else ""))
        use_nuts = False
    out: dict[str, Any]
    if use_nuts:
        r = sampler(key, m, lik, chains=chains, warmup=warmup, draws=draws)
        stats = {n: sample_stats(r["d"][n], m.centers[n], r["ess"][n]) for n in sums.names}
        for n in stats:
            stats[n]["rhat"] = r["rhat"][n]
        varying = [n for n in sums.names if stats[n]["sd"] > 0] or list(sums.names)
        out = {"method": "nuts", "ess": min(r["ess"][n] for n in varying),
               "rhat": max(r["rhat"][n] for n in varying), "divergences": r["divergences"],
               "chains": chains, "draws": draws, "warmup": warmup, "seconds": round(r["seconds"], 3),
               "pareto_k": khat, "importance": is_diag}
        if r["interval_handling"]:
            out["interval_handling"] = r["interval_handling"]
        post_d = np.stack([r["d"][n].reshape(-1) for n in sums.names])
        if method == "auto":
            res.notes.append(f"importance sampling was poor ({'; '.join(why)}), so the posterior is from NUTS "
                             f"({chains} chains x {draws} draws, ESS {out['ess']:.0f}, R-hat {out['rhat']:.3f})")
        if out["ess"] < ESS_MIN:
            res.notes.append(f"NUTS kept an effective sample of only {out['ess']:.0f} draws (a thin, curved ridge "
                             "mixes slowly); the Monte Carlo errors (mcse_*) say how rough the posterior is")
        if out["rhat"] > 1.01 or out["divergences"] > 0:
            res.notes.append(f"NUTS diagnostics: R-hat {out['rhat']:.3f}, {out['divergences']} divergent transitions "
                             "(R-hat should be < 1.01 and divergences 0: Vehtari et al. 2021)")
    else:
        out = {"method": "importance", "ess": n_eff, "ess_fraction": n_eff / sums.n, "pareto_k": khat,
               "chains": 1, **pool}
        post_d = reservoir_draws(sums, key)
        if why:
            res.notes.append(f"WARNING: importance sampling is poor here ({'; '.join(why)}): the posterior below "
                             "is unreliable; use --method nuts (or --method auto) or more --samples")
    out.update(stats)
    res.posterior_draws = {n: np.exp(m.centers[n] + post_d[i]) for i, n in enumerate(sums.names)}
    out.update(_findings(res, out, post_d))
    res.posterior = out


def _findings(res, post: Mapping[str, Any], post_d: np.ndarray) -> dict[str, Any]:
    """MFU against the paper's 38-43%, and what the data say about MFU x goodput."""
    sums, m, spec = res.sums, res.model, res.spec
    names = list(sums.names)
    out: dict[str, Any] = {}
    lines = []
    if "mfu" in names:
        i = names.index("mfu")
        a, b = PAPER_MFU
        prior_p = prob_between(sums.prior, i, m.centers["mfu"], sums.lo[i], sums.width[i], a, b)
        if post["method"] == "importance":
            post_p = prob_between(sums.post, i, m.centers["mfu"], sums.lo[i], sums.width[i], a, b)
        else:
            x = res.posterior_draws["mfu"]
            post_p = float(np.mean((x >= a) & (x <= b)))
        out["mfu_vs_paper"] = {"range": [a, b], "prior_probability": prior_p, "posterior_probability": post_p,
                               "flops_convention": spec.flops,
                               "source": "Llama Team 2024 (arXiv 2407.21783) Table 4: BF16 MFU 38-43% on 8K-16K H100s"}
        lines.append(f"P({a:.0%} <= MFU <= {b:.0%}) = {post_p:.2f} under the posterior (prior {prior_p:.2f}); the "
                     f"Llama 3 paper reports 38-43% BF16 MFU (Table 4); MFU here counts FLOPs by {spec.flops}")
    if "mfu" in names and "goodput" in names:
        i, j = names.index("mfu"), names.index("goodput")
        if post["method"] == "importance":
            c = summary.correlation(sums, "post")
            s = sums.post
            s0 = float(s["s0"])
            mean = s["s1d"] / s0
            cov = s["cross"] / s0 - np.outer(mean, mean)
            sd_m, sd_g = math.sqrt(max(cov[i, i], 0)), math.sqrt(max(cov[j, j], 0))
            sd_prod = math.sqrt(max(cov[i, i] + cov[j, j] + 2 * cov[i, j], 0.0))
            corr = float(c[i, j])
        else:
            dm, dg = post_d[i], post_d[j]
            sd_m, sd_g, sd_prod = float(np.std(dm)), float(np.std(dg)), float(np.std(dm + dg))
            corr = float(np.corrcoef(dm, dg)[0, 1])
        prod = np.exp(m.centers["mfu"] + m.centers["goodput"] + post_d[i] + post_d[j])
        p0 = sums.prior
        mean0 = p0["s1d"] / float(p0["s0"])
        cov0 = p0["cross"] / float(p0["s0"]) - np.outer(mean0, mean0)
        sd0 = math.sqrt(max(cov0[i, i] + cov0[j, j] + 2 * cov0[i, j], 0.0))
        sd0_m, sd0_g = math.sqrt(max(cov0[i, i], 0.0)), math.sqrt(max(cov0[j, j], 0.0))
        out["corr_mfu_goodput_log"] = corr
        out["mfu_x_goodput"] = {"p5": float(np.quantile(prod, 0.05)), "p50": float(np.quantile(prod, 0.5)),
                                "p95": float(np.quantile(prod, 0.95)), "log_sd": sd_prod,
                                "log_sd_mfu": sd_m, "log_sd_goodput": sd_g, "corr_log": corr,
                                "prior_log_sd": sd0, "prior_log_sd_mfu": sd0_m, "prior_log_sd_goodput": sd0_g}
        if any("mfu" in _behind(spec, n)[0] and "goodput" in _behind(spec, n)[0]
               for n in spec.observe if n not in ("mfu", "goodput")):
            lines.append(f"the data constrain the product MFU x goodput, not each factor: its log-sd shrinks "
                         f"{sd0:.3f} -> {sd_prod:.3f} (posterior median {out['mfu_x_goodput']['p50']:.3f}), MFU's "
                         f"{sd0_m:.3f} -> {sd_m:.3f}, goodput's {sd0_g:.3f} -> {sd_g:.3f}; their logs correlate "
                         f"{corr:+.2f} after the update: a higher MFU with a lower goodput explains the figure as well")
    if lines:
        out["findings"] = lines
        res.notes.extend(lines)
    return out
