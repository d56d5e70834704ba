"""A run's record (output.RunRecord) from what :func:`mcflops.run` computed: summary.json's content, the
figures' data (inference.plotdata) and posterior.nc's groups (inference.netcdf), each computed once, here,
so that everything below the API receives plain data and never the API's own objects. Also :func:`jsonable`,
the JSON types every output is given in."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from mcflops._version import version, versions
from mcflops.output.record import PlotData, RunRecord

if TYPE_CHECKING:
    from mcflops.engine.summary import Sums
    from mcflops.spec import Spec


def build(*, spec: Spec, seed: int, samples: int, device: str, chain: Mapping[str, float],
          prior: Mapping[str, Any], observed: Mapping[str, Any], draws: Mapping[str, np.ndarray],
          posterior: Mapping[str, Any] | None, posterior_draws: Mapping[str, np.ndarray] | None,
          sensitivity: Mapping[str, Any] | None, plan: Mapping[str, Any] | None, layout: Mapping[str, Any] | None,
          notes: list[str], timings: Mapping[str, float], sums: Sums | None,
          centers: Mapping[str, float], context: Mapping[str, Any] | None = None) -> RunRecord:
    """The record of a run (a Result's fields): its summary, kept draws, figures' data and posterior.nc's groups."""
    from mcflops.inference import netcdf

    d: dict[str, Any] = {
        "name": spec.name, "description": spec.description, "seed": seed, "samples": samples, "device": device,
        "version": version(), "versions": versions(), "spec_hash": spec.digest(), "flops_convention": spec.flops,
        "chain": chain, "prior": prior, "observed": observed,
    }
    counted = spec.architecture.counts() if spec.architecture is not None else None
    if counted is not None:  # parameters and FLOPs per token by component (mcflops.arch)
        d["architecture"] = counted.to_dict()
    # mfu_context: the run's rungs of the ladder (analysis.context), what the report's "MFU in context" renders
    for key, value in (("posterior", posterior), ("sensitivity", sensitivity), ("plan", plan), ("layout", layout),
                       ("mfu_context", context)):
        if value is not None:
            d[key] = value
    if notes:
        d["notes"] = notes
    d["timings"] = timings
    summary = jsonable(d)
    plots = plot_data(spec, sums, centers, summary=summary, prior=prior, posterior=posterior, chain=chain,
                      observed=observed, draws=draws, posterior_draws=posterior_draws)
    groups = netcdf.groups(spec, seed=seed, samples=samples, draws=draws, posterior_draws=posterior_draws,
                           posterior=posterior)
    return RunRecord(spec=spec, summary=summary, draws=draws, posterior_draws=posterior_draws, plots=plots,
                     groups=groups, notes=tuple(notes))


def jsonable(x: Any) -> Any:
    """``x`` in plain JSON types (str keys, lists, Python numbers; NaN and inf become None)."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    return x


def plot_data(spec: Spec, sums: Sums | None, centers: Mapping[str, float], *, summary: Mapping[str, Any],
              prior: Mapping[str, Any], posterior: Mapping[str, Any] | None, chain: Mapping[str, float],
              observed: Mapping[str, Any], draws: Mapping[str, np.ndarray],
              posterior_draws: Mapping[str, np.ndarray] | None) -> PlotData:
    """The data of the run's figures: the headline (when GPU-hours draws were kept) and, with a posterior, prior
    vs posterior of the inputs, the MFU-goodput ridge (both uncertain) and each observed quantity's predictive.
    ``summary``: summary.json's content (the headline's title and markers read it)."""
    from mcflops.inference import plotdata

    kept = posterior_draws or {}
    headline = None
    if draws.get("gpu_hours") is not None:
        headline = plotdata.headline(summary, draws["gpu_hours"], kept.get("gpu_hours"))
    if not posterior or sums is None:
        return PlotData(headline=headline)
    src = plotdata.Source(sums, centers, posterior.get("method"), kept)
    inputs = None
    if any(n in posterior for n in spec.uncertain):
        inputs = plotdata.posterior_inputs(src, prior, posterior, spec.uncertain, list(spec.observe))
    ridge = None
    if {"mfu", "goodput"} <= set(kept):
        ridge = plotdata.ridge(draws, kept, posterior, chain, spec.observe.get("gpu_hours"))
    predictive = {name: plotdata.predictive(src, name, prior[name], o, observed.get(name, {}))
                  for name, o in spec.observe.items() if name in sums.names}
    return PlotData(inputs=inputs, ridge=ridge, predictive=predictive, headline=headline)
