"""The Bayesian update: condition on published figures. Importance sampling from the engine's sums
(importance.py), NUTS (nuts.py) when it is poor or asked for, summaries in one shape for both
(summaries.py), and the findings the report states (findings.py).

``auto`` keeps importance sampling whenever it is adequate: Pareto k-hat within the sample-size-dependent
threshold min(1 - 1/log10(S), 0.7) and Kish's ESS >= ESS_MIN (Vehtari et al. 2024, Sec. 3.2). Only then
does it switch to NUTS, and says why in the notes. NUTS is not the safer method: on the thin, curved
ridge of a sharp observation of a product (gpu_hours = 6ND / (peak x MFU x goodput)) through beta priors,
a dense mass matrix fits the ridge only on average, and the sampler under-visits where it bends (its
divergences). A quantity narrower than the histogram's bins (the observed one, under a sharp
observation) is summarised from the resampled draws instead. When NUTS runs and importance sampling's
own errors can be trusted, the two are compared (crosscheck.py) and a disagreement beyond their joint
errors is said. A posterior that fails its checks (NUTS's R-hat above 1.01, ESS below 1000, divergent
transitions or a disagreement with importance sampling; importance sampling poor with nothing to fall
back on; draws piled at the end of an input's sampler table, where the data contradict the prior beyond
what the model draws: edges.py) carries ``checks = {"passed": False, "why": [...]}`` so that the report and the terminal can
say so first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from mcflops.errors import UsageError
from mcflops.inference import crosscheck, psis
from mcflops.inference.conflicts import conflicts, no_draw_error
from mcflops.inference.edges import edge_piles, edge_reason, observed_distance
from mcflops.inference.findings import findings
from mcflops.inference.importance import ESS_MIN, MIN_BINS, importance_posterior, poor_reasons, reservoir_draws, thin
from mcflops.inference.summaries import sample_stats

METHODS = ("auto", "is", "nuts")


@dataclass(frozen=True)
class Posterior:
    """What the update gives: summary.json's "posterior", equally weighted draws of every tracked quantity
    (linear units, by name) and the notes (warnings, conflicts, findings) in the order they arose."""

    summary: dict[str, Any]
    draws: dict[str, np.ndarray]
    notes: tuple[str, ...] = ()


def posterior(key, spec, model, sums, lik, *, method: str = "auto", sampler: Callable | None = None,
              warmup: int = 1000, draws: int = 1000, chains: int = 4) -> Posterior:
    """The posterior of the engine run ``sums`` (of ``model`` built from ``spec``) under the likelihood ``lik``.

    ``key`` is the run's key (NUTS and the reservoir's resample fold their stream ids into it).
    ``sampler`` is the NUTS sampler (``nuts.run_nuts``), handed in by the caller: None means NumPyro is
    not installed. ``warmup``, ``draws``, ``chains``: NUTS's run size.
    """
    if method not in METHODS:
        raise UsageError(f"expected one of {', '.join(map(repr, METHODS))}, got {method!r}", arg="method")
    centers = model.centers
    if sums.post is None or not np.isfinite(sums.log_max) or float(sums.post["s0"]) <= 0:
        raise no_draw_error(spec, centers, sums, lik)
    notes: list[str] = []
    stats, n_eff = importance_posterior(sums, centers)
    khat = psis.khat_from_top(sums.top, sums.pool or sums.n)  # the tail of the pool's weights (engine.pool_subblocks)
    why = poor_reasons(khat, n_eff, sums)
    for line in conflicts(spec, centers, sums):
        notes.append(f"{line}: the posterior rests on the tail of the prior")
    is_diag = {"ess": n_eff, "ess_fraction": n_eff / sums.n, "pareto_k": khat, "draws": sums.n}
    pool = {"pareto_k_draws": sums.pool} if 0 < sums.pool < sums.n else {}  # k-hat and reservoir from the pool
    is_diag.update(pool)
    use_nuts = method == "nuts" or (method == "auto" and bool(why))
    if use_nuts and sampler is None:
        notes.append("WARNING: NumPyro is not installed, so NUTS cannot run; the posterior below is importance "
                     "sampling" + (f", which is poor here: {'; '.join(why)}" if why else ""))
        use_nuts = False
    comparable = khat <= psis.khat_threshold(sums.pool or sums.n) and n_eff >= crosscheck.ESS_COMPARE
    is_d = None
    if not use_nuts or comparable:
        is_d, res_ess = reservoir_draws(sums, key)
        narrow = thin(stats, sums)
        for n in narrow:  # histogram quantiles would be coarse: the resampled draws resolve them
            stats[n] = sample_stats(is_d[sums.names.index(n)], centers[n], min(res_ess, n_eff))
        if narrow and not use_nuts:
            notes.append(f"the posterior of {', '.join(narrow)} is narrower than {MIN_BINS} histogram bins: "
                         f"{'its' if len(narrow) == 1 else 'their'} summaries come from the {is_d.shape[1]:,} "
                         f"resampled posterior draws (effective size {min(res_ess, n_eff):,.0f})")
    out: dict[str, Any]
    if use_nuts:
        r = sampler(key, model, lik, chains=chains, warmup=warmup, draws=draws)
        nuts_stats = {n: sample_stats(r["d"][n], centers[n], r["ess"][n], chains=True) for n in sums.names}
        for n in nuts_stats:
            nuts_stats[n]["rhat"] = r["rhat"][n]
        out = _nuts_summary(r, sums.names, nuts_stats, khat, is_diag, chains, warmup, draws)
        post_d = np.stack([r["d"][n].reshape(-1) for n in sums.names])
        notes += _nuts_notes(out, why, method, chains, draws)
        if comparable:
            out["nuts_vs_importance"] = crosscheck.compare(nuts_stats, stats, sums.names)
            if not out["nuts_vs_importance"]["agree"]:
                notes.append(crosscheck.disagreement_note(out["nuts_vs_importance"], out["divergences"]))
        stats = nuts_stats
    else:
        out = {"method": "importance", "ess": n_eff, "ess_fraction": n_eff / sums.n, "pareto_k": khat,
               "chains": 1, **pool}
        post_d = is_d
        if why:
            notes.append(f"WARNING: importance sampling is poor here ({'; '.join(why)}): the posterior below "
                         "is unreliable; use --method nuts (or --method auto) or more --samples")
    out.update(stats)
    linear = {n: np.exp(centers[n] + post_d[i]) for i, n in enumerate(sums.names)}
    found, lines = findings(spec, centers, sums, out["method"], post_d, linear)
    out.update(found)
    if lines:
        out["findings"] = lines
        notes += lines
    failed = list(_nuts_failures(out) if use_nuts else why)
    piles = edge_piles(model, sums.names, post_d)  # the sampler stopped where its table does (edges.py)
    if piles:
        failed.insert(0, edge_reason(piles, observed_distance(spec, out)))  # the cause, before its symptoms
    if failed:
        out["checks"] = {"passed": False, "why": failed, **({"prior_edge": piles} if piles else {})}
    return Posterior(out, linear, tuple(notes))


def _nuts_failures(out: Mapping[str, Any]) -> list[str]:
    """What NUTS's diagnostics fail (Vehtari et al. 2021: R-hat < 1.01 and enough effective draws; Betancourt
    2017, "A conceptual introduction to Hamiltonian Monte Carlo", Sec. 6.2: no divergent transitions) and
    whether it disagrees with importance sampling; a non-finite R-hat fails too."""
    why = []
    if not float(out["rhat"]) <= 1.01:
        why.append(f"R-hat {out['rhat']:.3f} > 1.01 (the chains disagree)")
    if not float(out["ess"]) >= ESS_MIN:
        why.append(f"NUTS effective sample size {out['ess']:.0f} < {ESS_MIN}")
    if out["divergences"] > 0:  # the sampler could not follow the curvature there (Betancourt 2017, Sec. 6.2)
        why.append(f"{out['divergences']} divergent NUTS transitions (part of the posterior was missed)")
    c = out.get("nuts_vs_importance")
    if c and not c["agree"]:
        why.append(f"NUTS and importance sampling disagree ({c['worst']}: {c['max_z']:.1f} joint MCSEs)")
    return why


def _nuts_summary(r: Mapping[str, Any], names, stats, khat: float, is_diag: dict, chains: int, warmup: int,
                  draws: int) -> dict[str, Any]:
    varying = [n for n in names if stats[n]["sd"] > 0] or list(names)
    out = {"method": "nuts", "ess": min(r["ess"][n] for n in varying),
           "rhat": max(r["rhat"][n] for n in varying), "divergences": r["divergences"],
           "chains": chains, "draws": draws, "warmup": warmup, "seconds": round(r["seconds"], 3),
           "pareto_k": khat, "importance": is_diag}
    if r["interval_handling"]:
        out["interval_handling"] = r["interval_handling"]
    return out


def _nuts_notes(out: Mapping[str, Any], why: list[str], method: str, chains: int, draws: int) -> list[str]:
    notes = []
    if method == "auto":
        notes.append(f"importance sampling was poor ({'; '.join(why)}), so the posterior is from NUTS "
                     f"({chains} chains x {draws} draws, ESS {out['ess']:.0f}, R-hat {out['rhat']:.3f})")
    if out["ess"] < ESS_MIN:
        notes.append(f"NUTS kept an effective sample of only {out['ess']:.0f} draws (a thin, curved ridge "
                     "mixes slowly); the Monte Carlo errors (mcse_*) say how rough the posterior is")
    if out["rhat"] > 1.01 or out["divergences"] > 0:
        notes.append(f"NUTS diagnostics: R-hat {out['rhat']:.3f}, {out['divergences']} divergent transitions "
                     "(R-hat should be < 1.01 and divergences 0: Vehtari et al. 2021)")
    return notes
