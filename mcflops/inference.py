"""Bayesian update: condition on published figures. Importance sampling from the engine's sums."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import summary
from .errors import SpecError


def attach_posterior(res, lik, method: str = "auto") -> None:
    """Fill ``res.posterior`` (summaries, diagnostics) and ``res.posterior_draws`` from importance sampling."""
    sums, m = res.sums, res.model
    if sums.post is None or not np.isfinite(sums.log_max) or float(sums.post["s0"]) <= 0:
        names = ", ".join(lik.names)
        raise SpecError(f"no prior draw can explain the observation(s) {names}: every draw has zero likelihood; "
                        f"widen the priors of {', '.join(res.spec.uncertain) or 'the inputs'} or the observation",
                        path=res.spec.path, field="observe")
    post = summary.summarize(sums, m.centers, "post")
    n_eff = summary.ess(float(sums.post["s0"]), float(sums.post["s0w2"]))
    corr = summary.correlation(sums, "post")
    names = list(sums.names)
    out: dict[str, Any] = {"method": "importance", "ess": n_eff, "ess_fraction": n_eff / sums.n}
    out.update(post)
    if "mfu" in names and "goodput" in names:
        out["corr_mfu_goodput_log"] = float(corr[names.index("mfu"), names.index("goodput")])
    res.posterior = out
    r = sums.reservoir
    res.posterior_draws = {n: np.exp(m.centers[n] + r["D"][i]) for i, n in enumerate(names)}
    if n_eff < 1000:
        res.notes.append(f"importance sampling kept an effective sample of only {n_eff:.0f} draws; "
                         "the posterior is rough (a sharper observation needs NUTS: --method nuts)")
    _ = math
