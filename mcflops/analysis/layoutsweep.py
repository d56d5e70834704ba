"""Sweeps of a layout MFU prior's fields (``--sweep pp=8,16``): the output's quantiles with the layout changed.
Computation only, on the run's kept draws (NumPy).

Each output (GPU-hours, days, cost, energy) is inversely proportional to the MFU (mcflops/chain.py), so with the
layout's MFU prior F replaced by F_v, a kept draw keeps its quantile of MFU, u = F(mfu), and its other inputs:
output_v = output x mfu / F_v^{-1}(u). That is the coupling the planner uses across counts (the same draw at
the same quantile), so the differences between values are the layout's, not Monte Carlo noise. Under a
posterior the same map carries the posterior MFU's quantiles to the new layout (what the efficiency the data
imply would give there).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from mcflops.priors.quantiles import cdf, ppf

QUANTS = {"p5": 0.05, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95}
SCALES = ("gpu_hours", "wall_days", "cost", "energy_mwh")  # outputs proportional to 1 / MFU


def layout_sweep(field: str, values, dists, mfu_prior, draws: Mapping[str, np.ndarray], output: str,
                 posterior_draws: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Quantiles of ``output`` (and of MFU) at each value of layout ``field``; ``dists``: the MFU prior there."""
    if output not in SCALES:
        raise ValueError(f"a layout sweep moves outputs proportional to 1 / MFU ({', '.join(SCALES)}), not {output}")
    out: dict[str, Any] = {"field": field, "output": output, "values": list(values)}
    for which, d in (("prior", draws), ("posterior", posterior_draws)):
        if d is None or "mfu" not in d or output not in d:
            continue
        m, y = np.asarray(d["mfu"], float), np.asarray(d[output], float)
        u = np.clip(cdf(mfu_prior, m), 1e-12, 1 - 1e-12)
        rows = {k: [] for k in QUANTS}
        mfu_rows = {k: [] for k in QUANTS}
        for dist in dists:
            m_v = np.asarray(ppf(dist, u), float)
            y_v = y * m / m_v
            for k, q in zip(QUANTS, np.quantile(y_v, list(QUANTS.values()))):
                rows[k].append(float(q))
            for k, q in zip(QUANTS, np.quantile(m_v, list(QUANTS.values()))):
                mfu_rows[k].append(float(q))
        out[which] = {**rows, "mfu": mfu_rows, "draws": int(len(m)),
                      "p50_vs_first": [v / rows["p50"][0] for v in rows["p50"]]}
    return out
