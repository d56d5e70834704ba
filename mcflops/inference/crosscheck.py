"""NUTS against importance sampling: two estimates of one posterior from independent Monte Carlo methods
should differ by no more than their joint Monte Carlo error.

For each quantity that varies and each of mean, p5, p50 and p95, z = |NUTS - IS| / sqrt(mcse_NUTS^2 +
mcse_IS^2), with NUTS's MCSEs from its chains' autocorrelation (mcse.py) and importance sampling's from
Kish's ESS. Both estimates are asymptotically normal, so |z| > K_AGREE = 4 happens by chance with
probability 6.3e-5 per statistic (two-sided normal tail), under 3e-3 for the ~40 statistics of a run
even if they were independent: a larger z means that at least one method is biased (NUTS missing part of
a thin, curved ridge; importance sampling with too few effective draws in a region), not unlucky.

Compared only where importance sampling's own error bar can be trusted: k-hat within its threshold
(psis.khat_threshold) and ESS >= ESS_COMPARE (below that, Kish's ESS itself is too noisy).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

K_AGREE = 4.0
ESS_COMPARE = 100
STATS = ("mean", "p5", "p50", "p95")


def compare(nuts_stats: Mapping[str, Mapping], is_stats: Mapping[str, Mapping], names) -> dict[str, Any]:
    """The largest disagreement between the two summaries, in joint MCSEs (module doc)."""
    worst: tuple[float, str, float | None, float | None] = (0.0, "", None, None)  # None: nothing compared (JSON null)
    count = 0
    for name in names:
        a, b = nuts_stats[name], is_stats[name]
        if not (a["sd"] > 0 and b["sd"] > 0):  # a fixed quantity: nothing to compare
            continue
        for k in STATS:
            se = math.hypot(a.get(f"mcse_{k}", math.nan), b.get(f"mcse_{k}", math.nan))
            if not (se > 0 and math.isfinite(se) and math.isfinite(a[k]) and math.isfinite(b[k])):
                continue
            count += 1
            z = abs(a[k] - b[k]) / se
            if z > worst[0]:
                worst = (z, f"{name} {k}", a[k], b[k])
    z, what, x_nuts, x_is = worst
    return {"agree": bool(z <= K_AGREE), "max_z": z, "worst": what, "nuts": x_nuts, "importance": x_is,
            "k": K_AGREE, "compared": count}


def disagreement_note(c: Mapping[str, Any], divergences: int) -> str:
    """The note when the two methods disagree beyond their errors."""
    line = (f"WARNING: NUTS and importance sampling disagree beyond their Monte Carlo errors: {c['worst']} is "
            f"{c['nuts']:.4g} by NUTS and {c['importance']:.4g} by importance sampling, {c['max_z']:.1f} joint "
            f"MCSEs apart (> {c['k']:g}); at least one of them is biased")
    if divergences:
        line += f" (NUTS had {divergences} divergent transitions: it missed part of the posterior)"
    return line
