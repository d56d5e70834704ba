"""The posterior as an ArviZ DataTree (ArviZ 1.x) and its netCDF file, ``DIR/posterior.nc``.

Groups (ArviZ's InferenceData schema, chain and draw dimensions):

- ``posterior``: equally weighted draws of every uncertain input and output in linear units; NUTS:
  its chains; importance sampling: one "chain" resampled from the engine's weighted reservoir
  (inference.reservoir_draws);
- ``prior``: the first prior draws the engine kept (one chain);
- ``observed_data``: each observed figure (an interval observation stores its midpoint, with the
  bounds in the variable's attributes);
- ``log_likelihood``: each observation's normalized log density at each posterior draw: lognormal
  log N(log y; log q, sigma) - log y, normal log N(y; q, sd), interval -log(hi - lo) inside, -inf outside.

ArviZ (arviz-base) and h5netcdf are imported inside the functions, so the engine runs without them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

_LOG_2PI = math.log(2.0 * math.pi)


def available() -> bool:
    try:
        import arviz_base  # noqa: F401
        import h5netcdf  # noqa: F401
    except ImportError:
        return False
    return True


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


def to_datatree(res) -> Any:
    """The run's prior, posterior, observed data and log-likelihood as an ArviZ DataTree."""
    from arviz_base import from_dict

    spec, post = res.spec, res.posterior or {}
    chains = int(post.get("chains", 1) or 1)
    posterior = {n: _chains(v, chains) for n, v in (res.posterior_draws or {}).items()}
    prior = {n: _chains(v, 1) for n, v in res.draws.items()}
    fixed = {n: float(d.params["value"]) for n, d in spec.priors.items() if d.family == "point"}

    def values(draws: Mapping[str, np.ndarray], like: np.ndarray) -> dict[str, np.ndarray]:
        return {n: draws[n] if n in draws else np.full(like.shape, fixed[n]) for n in spec.observe}

    like = next(iter(posterior.values())) if posterior else np.zeros((1, 1))
    data: dict[str, dict[str, Any]] = {"posterior": posterior, "prior": prior}
    if spec.observe:
        data["log_likelihood"] = pointwise_log_likelihood(spec, values(posterior, like))
        data["observed_data"] = {n: np.asarray(o.value if o.noise != "between" else 0.5 * (o.low + o.high))
                                 for n, o in spec.observe.items()}
    attrs = {"mcflops_name": spec.name, "seed": int(res.seed), "samples": int(res.samples),
             "method": str(post.get("method", "")), "flops_convention": spec.flops}
    dt = from_dict(data)
    dt.attrs.update(attrs)
    for n, o in spec.observe.items():
        node = dt["observed_data"][n]
        node.attrs.update({"noise": o.noise, "source": o.source or ""})
        if o.noise == "between":
            node.attrs.update({"low": o.low, "high": o.high})
        else:
            node.attrs["scale"] = o.scale
    return dt


def write_netcdf(res, path: str | Path) -> Path:
    """Write ``to_datatree(res)`` to netCDF-4 with h5netcdf (openable with ``arviz.from_netcdf``)."""
    path = Path(path)
    to_datatree(res).to_netcdf(path, engine="h5netcdf")
    return path


def output_hook(folder: Path, res, summary: dict) -> None:
    """cli._OUTPUT_HOOKS entry: DIR/posterior.nc when there is a posterior; a note when ArviZ is missing."""
    if res.posterior is None:
        return
    if not available():
        note = "posterior.nc not written: install arviz and h5netcdf (pip install 'mcflops[full]')"
        res.notes.append(note)
        summary.setdefault("notes", []).append(note)
        return
    write_netcdf(res, Path(folder) / "posterior.nc")
