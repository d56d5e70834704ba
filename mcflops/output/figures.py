"""Which figures each command's output gets, each as file name -> draw(path): the plot data a run's record
holds (computed by inference.plotdata) or the summary's own dicts, drawn by plots/. output.folder puts them in place.

A figure is a :class:`Draw`: the plots/ function and its plain data (NumPy arrays, numbers, dicts), computed
before anything is drawn. Nothing here imports matplotlib until a figure is drawn; ``can_draw`` says whether
it can be.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mcflops.output.record import PlotData

Figures = dict[str, Callable[[Path], str]]  # file name -> draw the PNG at the path given, return it


@dataclass(frozen=True)
class Draw:
    """One figure: ``function(path, *args)`` of the plots/ module ``module``, its data already computed."""

    module: str
    function: str
    args: tuple

    def __call__(self, path: Path) -> str:
        return getattr(importlib.import_module(self.module), self.function)(path, *self.args)


@dataclass(frozen=True)
class Batch:
    """A run folder's writer (output.Writer) of ``figures``, each PNG stamped with ``spec_hash``."""

    figures: Figures
    spec_hash: str | None = None

    def __call__(self, folder: Path) -> list[str]:
        return draw(folder, self.figures, self.spec_hash)

PRIOR_POSTERIOR = "posterior_inputs.png"
RIDGE = "mfu_goodput_ridge.png"


def can_draw() -> bool:
    """Whether matplotlib is installed (the figures are optional: `pip install 'mcflops[full]'`), found without
    importing it (a run without figures to draw never pays its import)."""
    import importlib.util

    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a module "matplotlib" set to None, or without a spec
        return False


def draw(folder: Path, figures: Figures, spec_hash: str | None = None) -> list[str]:
    """Draw every figure into ``folder``; each PNG records ``spec_hash`` (Spec.digest()) in its metadata
    when given (plots.style.provenance). Returns the paths."""
    from mcflops.plots import style

    with style.provenance(spec_hash):
        return [fig(Path(folder) / name) for name, fig in figures.items()]


def posterior(plots: PlotData) -> Figures:
    """A run's posterior figures: prior vs posterior of the inputs, the MFU-goodput ridge when both are
    uncertain, and each observed quantity's predictive (those ``plots`` holds the data of)."""
    mod = "mcflops.plots.posterior"
    out: Figures = {}
    if plots.inputs is not None:
        out[PRIOR_POSTERIOR] = Draw(mod, "prior_posterior", (plots.inputs,))
    if plots.ridge is not None:
        out[RIDGE] = Draw(mod, "ridge", (plots.ridge,))
    for name, data in plots.predictive.items():
        out[f"predictive_{name}.png"] = Draw(mod, "predictive", (data,))
    return out


def headline(plots: PlotData, count: int | None, summary: Mapping[str, Any]) -> Figures:
    """The report's headline figure (GPU-hours before and after the published figure), when the run kept
    GPU-hours draws; ``count``: the accelerators the title names; ``summary``: summary.json's content."""
    from mcflops.report import HEADLINE_FIGURE

    if plots.headline is None:
        return {}
    return {HEADLINE_FIGURE: Draw("mcflops.plots.report", "headline", (plots.headline, count, summary))}


def sensitivity(sens: Mapping[str, Any] | None) -> Figures:
    """tornado.png, sobol.png and sweep_<input>.png of a sensitivity analysis (`run` and `sensitivity`)."""
    plots = "mcflops.plots.sensitivity"
    if not sens:
        return {}
    out: Figures = {}
    if (sens.get("tornado") or {}).get("inputs"):
        out["tornado.png"] = Draw(plots, "tornado", (sens,))
    if sens.get("sobol"):
        out["sobol.png"] = Draw(plots, "sobol_bars", (sens,))
    for name, sw in (sens.get("sweeps") or {}).items():
        out[f"sweep_{name}.png"] = Draw(plots, "sweep_fan", (sw,))
    return out


def layout(data: Mapping[str, Any] | None) -> Figures:
    """waterfall.png: peak to achieved to delivered FLOP/s, when the MFU prior comes from a layout."""
    if not data or "waterfall" not in data:
        return {}
    return {"waterfall.png": Draw("mcflops.plots.layout", "waterfall", (data,))}


def plan(data: Mapping[str, Any]) -> Figures:
    """plan.png: the probability of finishing in time against the accelerator count (with --deadline-days)."""
    return {"plan.png": Draw("mcflops.plots.sensitivity", "plan_curve", (data,))} if "curve" in data else {}


def compare(data: Mapping[str, Any]) -> Figures:
    """compare.png: the histogram of B / A (two files); scenarios.png: every scenario's distribution on one axis."""
    out: Figures = {}
    if "ratio" in data:
        out["compare.png"] = Draw("mcflops.plots.sensitivity", "compare_ratio", (data,))
    if data.get("scenarios"):
        out["scenarios.png"] = Draw("mcflops.plots.scenarios", "scenarios", (data,))
    return out


def calibration(data: Mapping[str, Any]) -> Figures:
    """calibration.png: leave-one-out predictions against the published hours (when it ran)."""
    loo = data.get("loo")
    if not loo:
        return {}

    def fig(path: Path) -> str:
        from mcflops.plots.calibration import loo_plot

        return loo_plot(loo["rows"], path, loo)

    return {"calibration.png": fig}
