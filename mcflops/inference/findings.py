"""What the update says in words: the prior file's reported claims against the posterior, and what the
data say about MFU x goodput. Each finding is data for summary.json plus one line for the notes."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from mcflops.engine import summary
from mcflops.inference.conflicts import behind
from mcflops.inference.summaries import prob_between
from mcflops.numbers import format_number
from mcflops.spec import INPUTS


def findings(spec, centers: Mapping[str, float], sums, method: str, post_d: np.ndarray,
             draws: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], list[str]]:
    """summary.json's entries (``reported``, ``corr_mfu_goodput_log``, ``mfu_x_goodput``) and the finding lines.

    ``method``: "importance" or "nuts"; ``post_d``: posterior draws [Q, K] (centred logs, ``sums.names``
    order); ``draws``: the same in linear units, by name.
    """
    out: dict[str, Any] = {}
    lines: list[str] = []
    if spec.reported:
        out["reported"], claim_lines = reported(spec, centers, sums, method, draws)
        lines += claim_lines
    product, product_lines = mfu_x_goodput(spec, centers, sums, method, post_d)
    out.update(product)
    return out, lines + product_lines


def claim_range(name: str, low: float, high: float) -> str:
    """'38% <= MFU <= 43%': fractions in percent, other quantities as numbers."""
    fmt = (lambda x: f"{100 * x:g}%") if INPUTS.get(name, ("", "", ""))[2] == "fraction" else format_number
    return f"{fmt(low)} <= {'MFU' if name == 'mfu' else name} <= {fmt(high)}"


def reported(spec, centers: Mapping[str, float], sums, method: str,
             draws: Mapping[str, np.ndarray]) -> tuple[dict[str, dict], list[str]]:
    """The prior and posterior probability of each claim's range (``reported:`` in the prior file):
    importance sampling from the histograms, NUTS from its draws; a fixed input holds the claim or not."""
    out: dict[str, dict] = {}
    lines = []
    for name, r in spec.reported.items():
        a, b = r.low, r.high
        if name in sums.names:
            i = sums.names.index(name)
            prior_p = prob_between(sums.prior, i, centers[name], sums.lo[i], sums.width[i], a, b)
            if method == "importance":
                post_p = prob_between(sums.post, i, centers[name], sums.lo[i], sums.width[i], a, b)
            else:
                x = draws[name]
                post_p = float(np.mean((x >= a) & (x <= b)))
        else:
            v = spec.priors[name].params["value"]
            prior_p = post_p = float(a <= v <= b)
        entry: dict[str, Any] = {"range": [a, b], "prior_probability": prior_p, "posterior_probability": post_p,
                                 "source": r.source}
        line = (f"P({claim_range(name, a, b)}) = {post_p:.2f} under the posterior (prior {prior_p:.2f}); "
                f"reported by {r.source}")
        if name == "mfu":  # what MFU means depends on how FLOPs are counted
            entry["flops_convention"] = spec.flops
            line += f"; MFU here counts FLOPs by {spec.flops}"
        out[name] = entry
        lines.append(line)
    return out, lines


def mfu_x_goodput(spec, centers: Mapping[str, float], sums, method: str,
                  post_d: np.ndarray) -> tuple[dict[str, Any], list[str]]:
    """The posterior of MFU x goodput against each factor's: an observed product pins the product."""
    names = list(sums.names)
    if not ("mfu" in names and "goodput" in names):
        return {}, []
    out: dict[str, Any] = {}
    i, j = names.index("mfu"), names.index("goodput")
    if method == "importance":
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
    prod = np.exp(centers["mfu"] + centers["goodput"] + post_d[i] + post_d[j])
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
    lines = []
    if any("mfu" in behind(spec, n)[0] and "goodput" in behind(spec, n)[0]
           for n in spec.observe if n not in ("mfu", "goodput")):
        lines.append(f"the data constrain the product MFU x goodput, not each factor: its log-sd shrinks "
                     f"{sd0:.3f} -> {sd_prod:.3f} (posterior median {out['mfu_x_goodput']['p50']:.3f}), MFU's "
                     f"{sd0_m:.3f} -> {sd_m:.3f}, goodput's {sd0_g:.3f} -> {sd_g:.3f}; their logs correlate "
                     f"{corr:+.2f} after the update: a higher MFU with a lower goodput explains the figure as well")
    return out, lines
