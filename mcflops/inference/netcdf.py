"""The posterior as an ArviZ DataTree (ArviZ 1.x) and its netCDF file, ``DIR/posterior.nc``.

Groups (ArviZ's InferenceData schema, chain and draw dimensions):

- ``posterior``: equally weighted draws of every uncertain input and output in linear units; NUTS:
  its chains; importance sampling: one "chain" resampled from the engine's weighted reservoir
  (inference.importance.reservoir_draws);
- ``prior``: the first prior draws the engine kept (one chain);
- ``observed_data``: each observed figure (an interval observation stores its midpoint, with the
  bounds in the variable's attributes);
- ``log_likelihood``: each observation's normalized log density at each posterior draw: lognormal
  log N(log y; log q, sigma) - log y, normal log N(y; q, sd), interval -log(hi - lo) inside, -inf outside.

Root attributes name the run: mcflops_name, seed, samples, method, flops_convention, spec_hash
(Spec.digest(), as summary.json's) and mcflops_version. :func:`groups` computes them from a run's
draws (plain arrays: :class:`Groups`); ``write_netcdf`` writes them with h5netcdf directly (importing
xarray and ArviZ is slow, and every run would pay it); ``to_datatree`` builds the same content as an
ArviZ DataTree for notebooks. Both libraries are imported inside the functions,
so the engine runs without them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mcflops._version import version
from mcflops.spec import Spec

_LOG_2PI = math.log(2.0 * math.pi)


def available() -> bool:
    """Whether posterior.nc can be written: h5netcdf and its h5py installed (not ArviZ), found without
    importing them, so that the import is paid where the file is written (by `mcflops run`, while the
    figures are drawn), not before."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(m) is not None for m in ("h5netcdf", "h5py"))
    except (ImportError, ValueError):  # a module set to None, or without a spec
        return False


def _chains(x: np.ndarray, chains: int) -> np.ndarray:
    x = np.asarray(x, np.float64).ravel()
    return x.reshape(chains, -1) if chains > 1 and x.size % chains == 0 else x[None, :]


def pointwise_log_likelihood(spec, values: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each observation's normalized log-likelihood at draws ``values`` (linear units of the observed quantities)."""
    out = {}
    for name, o in spec.observe.items():
        q = np.asarray(values[name], np.float64)
        if o.noise == "lognormal":
            z = (math.log(o.value) - np.log(q)) / o.scale
            out[name] = -0.5 * z * z - math.log(o.scale) - 0.5 * _LOG_2PI - math.log(o.value)
        elif o.noise == "normal":
            z = (o.value - q) / o.scale
            out[name] = -0.5 * z * z - math.log(o.scale) - 0.5 * _LOG_2PI
        else:
            inside = (q >= o.low) & (q <= o.high)
            out[name] = np.where(inside, -math.log(o.high - o.low), -np.inf)
    return out


@dataclass(frozen=True)
class Groups:
    """posterior.nc's content: ``data`` {group: {variable: array}} (sample groups as chain x draw), each
    observed variable's attributes (``var_attrs``), and the root attributes (``attrs``: which run made the file)."""

    data: Mapping[str, Mapping[str, np.ndarray]]
    var_attrs: Mapping[str, Mapping[str, Any]]
    attrs: Mapping[str, Any]


def groups(spec: Spec, *, seed: int, samples: int, draws: Mapping[str, np.ndarray],
           posterior_draws: Mapping[str, np.ndarray] | None, posterior: Mapping[str, Any] | None) -> Groups:
    """The groups of a run of ``spec``: its kept prior ``draws``, and its ``posterior_draws`` with the posterior's
    summary (``posterior``: its ``method`` and ``chains``) when there is a posterior."""
    post = posterior or {}
    chains = int(post.get("chains", 1) or 1)
    posterior_g = {n: _chains(v, chains) for n, v in (posterior_draws or {}).items()}
    prior = {n: _chains(v, 1) for n, v in draws.items()}
    fixed = {n: float(d.params["value"]) for n, d in spec.priors.items() if d.family == "point"}

    def values(kept: Mapping[str, np.ndarray], like: np.ndarray) -> dict[str, np.ndarray]:
        return {n: kept[n] if n in kept else np.full(like.shape, fixed[n]) for n in spec.observe}

    # only the groups that hold something: an empty posterior group (a prior-only run) makes ArviZ's
    # summaries raise, and a log-likelihood belongs to posterior draws
    data: dict[str, dict[str, np.ndarray]] = {"posterior": posterior_g, "prior": prior} if posterior_g else \
        {"prior": prior}
    var_attrs: dict[str, dict[str, Any]] = {}
    if spec.observe:
        if posterior_g:
            like = next(iter(posterior_g.values()))
            data["log_likelihood"] = pointwise_log_likelihood(spec, values(posterior_g, like))
        data["observed_data"] = {n: np.asarray(o.value if o.noise != "between" else 0.5 * (o.low + o.high),
                                               np.float64) for n, o in spec.observe.items()}
        for n, o in spec.observe.items():
            a: dict[str, Any] = {"noise": o.noise, "source": o.source or ""}
            a.update({"low": o.low, "high": o.high} if o.noise == "between" else {"scale": o.scale})
            var_attrs[n] = a
    attrs = {"mcflops_name": spec.name, "seed": int(seed), "samples": int(samples),
             "method": str(post.get("method", "")), "flops_convention": spec.flops,
             "spec_hash": spec.digest(), "mcflops_version": version()}
    return Groups(data, var_attrs, attrs)


def to_datatree(g: Groups) -> Any:
    """The run's prior, posterior, observed data and log-likelihood as an ArviZ DataTree (arviz_base.from_dict)."""
    from arviz_base import from_dict

    dt = from_dict({k: dict(v) for k, v in g.data.items()})
    dt.attrs.update(g.attrs)
    for n, a in g.var_attrs.items():
        dt["observed_data"][n].attrs.update(a)
    return dt


def write_netcdf(g: Groups, path: str | Path) -> Path:
    """Write the groups ``g`` to netCDF-4 with h5netcdf directly (no xarray, no ArviZ:
    a faster start); ``arviz.from_netcdf`` and ``xarray.open_datatree`` read it as they read
    ``to_datatree(g).to_netcdf(path, engine="h5netcdf")``: the same groups, dimensions, coordinates
    (chain and draw: 0, 1, ...), NaN fill values and attributes (creation_library: mcflops)."""
    import datetime

    import h5netcdf

    path = Path(path)
    with h5netcdf.File(path, "w") as f:
        f.attrs.update(g.attrs)
        for group, variables in g.data.items():
            h = f.create_group(group)
            h.attrs.update({"created_at": datetime.datetime.now(datetime.UTC).isoformat(),
                            "creation_library": "mcflops", "creation_library_version": version(),
                            "creation_library_language": "Python"})
            if group == "observed_data":  # no sample dimensions (as arviz_base.from_dict writes it)
                h.attrs["sample_dims"] = np.zeros(0)
                for n, v in variables.items():
                    h.create_variable(n, (), data=v, fillvalue=np.nan).attrs.update(g.var_attrs.get(n, {}))
                continue
            h.attrs["sample_dims"] = ["chain", "draw"]
            if not variables:  # an empty group, as from_dict writes it
                continue
            shape = next(iter(variables.values())).shape
            h.dimensions = {"chain": shape[0], "draw": shape[1]}
            h.create_variable("chain", ("chain",), data=np.arange(shape[0], dtype=np.int64))
            h.create_variable("draw", ("draw",), data=np.arange(shape[1], dtype=np.int64))
            for n, v in variables.items():
                h.create_variable(n, ("chain", "draw"), data=np.asarray(v, np.float64), fillvalue=np.nan)
    return path

