"""What `mcflops calibrate --layout` returns, computed in one place: the layout MFU model's efficiency priors
fitted to the benchmark rows, the held-out production rows scored against them, and (unless skipped) the
held-out trends; with the fit to ship as mcflops/data/layout_fit.json. The command line prints and writes it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from mcflops.layoutfit import fit as lf
from mcflops.layoutfit import holdout as lh
from mcflops.layoutfit import validate as lv


@dataclass(frozen=True)
class LayoutCalibration:
    """``data``: what layout_validation.json holds (``fit``, ``posterior``, ``priors``, ``production``,
    ``production_targets``, with the trends ``trends`` and the grouped hold-outs ``holdout``, and ``seconds``),
    JSON types only. ``to_ship``: the priors to ship as layout_fit.json, JSON types only."""

    data: dict[str, Any]
    to_ship: dict[str, Any]


def command_line(seed: int, chains: int, draws: int) -> str:
    """The command the shipped fit names as its maker."""
    return f"mcflops calibrate --layout --seed {seed} --chains {chains} --draws {draws}"


def calibrate_layout(*, seed: int, chains: int, draws: int, trends: bool = True, holdout: bool = False,
                     phase: Callable[[str], None] | None = None) -> LayoutCalibration:
    """NUTS on the benchmark rows (``chains`` x ``draws``, as many warm-up draws; fixed key ``seed``), the
    production rows predicted from the shipped priors it yields, and with ``trends`` the refit without the trend
    series (half the chains, half the draws, at least 100), with ``holdout`` (off by default, as the CLI's
    ``--holdout``: ten minutes on 2 cores) a refit without each paper, each accelerator generation and the
    largest scales (:mod:`mcflops.layoutfit.holdout`). ``phase`` is told each
    stage's name as it starts, for a display."""
    say = phase or (lambda text: None)
    t = time.perf_counter()
    say(f"fitting the layout model to the benchmark rows (NUTS, {chains} chains x {draws} draws)")
    rs = lf.rows()
    f = lf.fit(rs, seed, chains, draws, draws)
    fit_json = lv.export(f, command_line(seed, chains, draws), seed)
    say("predicting the held-out production rows")
    prod = lv.production(fit_json)
    data: dict[str, Any] = {"fit": fit_json["fit"], "posterior": f.summary,
                            "priors": {"default": fit_json["default"], "accelerator": fit_json["accelerator"],
                                       "stack": fit_json.get("stack", {})},
                            "production": prod, "production_targets": lv.table(prod)}
    if trends:
        say("refitting without the trend series")
        data["trends"] = lv.trends(rs, seed, max(1, chains // 2), max(100, draws // 2), max(100, draws // 2))
    if holdout:
        data["holdout"] = lh.validate(rs, lh.settings_for(chains, draws), seed, phase=say)
    data["seconds"] = time.perf_counter() - t
    return LayoutCalibration(lv.to_json(data), lv.to_json(fit_json))
