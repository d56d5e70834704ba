"""NUTS (NumPyro) on the same model: the check on importance sampling, and the fallback when it is poor.

The model is non-centred, in the engine's z-space: one z ~ N(0, 1) per uncertain input (through the
same Gaussian copula as ``engine.draw_z`` when the file has ``correlations:``), x through the same
``distributions.Sampler`` maps, ``model.evaluate`` for every output, and the observations'
log-likelihood as a ``numpyro.factor`` (``engine.log_likelihood``: the same formula the importance
weights use). Geometry: z-space is isotropic a priori; an observed product such as gpu_hours turns
it into a thin ridge, so the sampler adapts a dense mass matrix (a handful of dimensions).

Interval observations (``between: [lo, hi]``, a uniform likelihood) have no gradient, so:

- on an uncertain, uncorrelated *input* (``mfu: {between: [0.38, 0.43]}``) the box is exact: that
  input's z is drawn from N(0, 1) truncated to [z(lo), z(hi)], the sampler map inverted at the bounds;
  the uniform likelihood times the prior is exactly the prior truncated to the interval;
- on an *output*, or an input in a ``correlations:`` copula (no single z to truncate), the box is
  smoothed: log L = log sigmoid((d - lo) / tau) + log sigmoid((hi - d) / tau) in log space, with
  tau = (hi - lo) / 50. The sigmoid minus the step is odd about each edge, so the first-order error
  cancels: the mass moved is -(pi^2 / 6) tau^2 f'(edge), well under 1% of the interval for smooth
  posteriors. Importance sampling keeps the exact box.

NumPyro is imported inside these functions only (the engine runs where it is absent).
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcflops.model import copula
from mcflops.model.samplers import z_grid
from mcflops.engine import streams
from mcflops.engine.likelihood import Likelihood, log_likelihood
from mcflops.errors import SpecError
from mcflops.model.compute import Model, evaluate

SMOOTH_FRACTION = 50.0  # tau = (hi - lo) / SMOOTH_FRACTION for interval observations of outputs


def available() -> bool:
    """Whether NumPyro is installed, without importing it (its import changes JAX's trace settings, so
    every compiled kernel would retrace on the next run)."""
    import importlib.util

    try:
        return importlib.util.find_spec("numpyro") is not None
    except (ImportError, ValueError):  # a blocked or half-installed module
        return False


def _z_of(model: Model, name: str, d: float) -> float | None:
    """The z at which input ``name``'s map reaches centred log value ``d`` (None: beyond its range)."""
    s = model.sampler(name)
    if s.kind == "affine":
        return (d - float(s.a)) / float(s.b)
    table = np.asarray(s.table, np.float64)
    if d <= table[0] or d >= table[-1]:
        return None
    return float(np.interp(d, table, z_grid()))


def _split(model: Model, lik: Likelihood):
    """Observations handled by truncating an input's z, and the rest (a sub-Likelihood, or None)."""
    trunc: dict[str, tuple[float | None, float | None]] = {}
    keep = []
    uncertain = set(model.uncertain)
    correlated = set(model.copula.names) if getattr(model, "copula", None) is not None else set()
    for i, (name, kind) in enumerate(zip(lik.names, lik.kinds)):
        if kind == "between" and name in uncertain and name not in correlated:
            lo, hi = float(lik.low[i]), float(lik.high[i])
            zlo = _z_of(model, name, lo) if np.isfinite(lo) else None
            zhi = _z_of(model, name, hi)
            if name in trunc:  # two boxes on one input: intersect
                a, b = trunc[name]
                zlo = zlo if a is None else (a if zlo is None else max(a, zlo))
                zhi = zhi if b is None else (b if zhi is None else min(b, zhi))
            if zlo is not None and zhi is not None and zlo >= zhi:
                raise SpecError(f"the interval observed for {name} lies outside its prior's range",
                                field=f"observe.{name}")
            trunc[name] = (zlo, zhi)
        else:
            keep.append(i)
    rest = None
    if keep:
        idx = np.asarray(keep)
        rest = Likelihood(tuple(lik.names[i] for i in keep), tuple(lik.kinds[i] for i in keep),
                          lik.target[idx], lik.scale[idx], lik.low[idx], lik.high[idx])
    return trunc, rest


def smooth_log_likelihood(lik: Likelihood, v) -> jax.Array:
    """engine.log_likelihood with each uniform box replaced by its sigmoid smoothing (see module doc)."""
    hard = tuple(k != "between" for k in lik.kinds)
    total = jnp.float32(0.0)
    if any(hard):
        idx = np.flatnonzero(hard)
        sub = Likelihood(tuple(lik.names[i] for i in idx), tuple(lik.kinds[i] for i in idx),
                         lik.target[idx], lik.scale[idx], lik.low[idx], lik.high[idx])
        total = total + log_likelihood(sub, v)
    for i, (name, kind) in enumerate(zip(lik.names, lik.kinds)):
        if kind == "between":
            lo, hi = lik.low[i], lik.high[i]
            tau = (hi - jnp.where(jnp.isfinite(lo), lo, hi - 1.0)) / SMOOTH_FRACTION
            d = v[name]
            upper = jax.nn.log_sigmoid((hi - d) / tau)
            lower = jnp.where(jnp.isfinite(lo), jax.nn.log_sigmoid((d - lo) / tau), 0.0)
            total = total + lower + upper
    return total


ZBOUND = 8.5  # an open end of a truncated z (the sampler tables stop at |z| = 8; Phi(-8.5) = 1e-17)


def numpyro_model(names: tuple[str, ...], truncated: tuple[str, ...]):
    """The NumPyro model ``fn(model, lik, bounds)``: z per uncertain input, the observations as a factor.

    Numbers arrive as arguments (pytrees), so one compiled sampler serves every spec of one structure.
    """
    import numpyro
    import numpyro.distributions as dist

    def fn(model: Model, lik: Likelihood | None, bounds: dict[str, jax.Array]):
        z = {}
        for name in names:
            if name in truncated:
                lo, hi = bounds[name][0], bounds[name][1]
                z[name] = numpyro.sample(name, dist.TruncatedNormal(0.0, 1.0, low=lo, high=hi))
            else:
                z[name] = numpyro.sample(name, dist.Normal(0.0, 1.0))
        if lik is not None:
            numpyro.factor("observations", smooth_log_likelihood(lik, evaluate(model, copula.apply(model, z))))

    return fn


_DRIVERS: dict[tuple, Any] = {}  # one compiled sampler per model structure and run size


def _driver(model: Model, rest: Likelihood | None, bounds: dict, names: tuple[str, ...], truncated: tuple[str, ...],
            chains: int, warmup: int, draws: int):
    """A jitted ``run(key, model, lik, bounds) -> (z samples [chains, draws], diverging)``.

    NumPyro's functional NUTS (``numpyro.infer.hmc.hmc`` with a potential generated from the model's
    arguments), chains vectorized with ``vmap``, warmup and sampling as two ``lax.scan``. The numbers
    (sampler tables, observations, bounds) are arguments, so the compile is paid once per structure and
    can come from the persistent compilation cache. Warmup: NumPyro's windowed adaptation of the step
    size (dual averaging) and a dense mass matrix (Hoffman & Gelman 2014; Stan's schedule).
    """
    key = (jax.tree.structure(model), None if rest is None else jax.tree.structure(rest), names, truncated,
           chains, warmup, draws)
    if key in _DRIVERS:
        return _DRIVERS[key]
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model

    fn = numpyro_model(names, truncated)
    info = initialize_model(jax.random.key(0), fn, model_args=(model, rest, bounds), dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=info.potential_fn, algo="NUTS")
    post = info.postprocess_fn

    def one_chain(k, model, lik, bounds):
        args = (model, lik, bounds)
        k_init, k_run = jax.random.split(k)
        u0 = {n: jax.random.uniform(jax.random.fold_in(k_init, i), (), minval=-2.0, maxval=2.0)
              for i, n in enumerate(names)}  # NumPyro's init_to_uniform, in unconstrained space
        state = init_kernel(u0, warmup, dense_mass=True, target_accept_prob=0.9, model_args=args, rng_key=k_run)

        def step(st, _):  # one scan for warmup and sampling: the NUTS body is compiled once
            st = sample_kernel(st, model_args=args)
            return st, (post(*args)(st.z), st.diverging)

        _, (zs, div) = jax.lax.scan(step, state, None, length=warmup + draws)
        return {n: zs[n][warmup:] for n in names}, div[warmup:]

    def run(k, model, lik, bounds):
        return jax.vmap(one_chain, in_axes=(0, None, None, None))(jax.random.split(k, chains), model, lik, bounds)

    jitted = jax.jit(run)
    try:  # the sampling itself is short next to the compile: trade XLA's backend optimisation for compile time
        run = jitted.lower(jax.random.key(0), model, rest, bounds).compile(
            compiler_options={"xla_backend_optimization_level": 0})
    except (ValueError, RuntimeError, TypeError):  # an XLA without that option: the default compile
        run = jitted
    _DRIVERS[key] = run
    if len(_DRIVERS) > 8:
        _DRIVERS.pop(next(iter(_DRIVERS)))
    return run


def run_nuts(key: jax.Array, model: Model, lik: Likelihood, *, chains: int = 4, warmup: int = 1000,
             draws: int = 1000) -> dict[str, Any]:
    """Sample the posterior with NUTS. Returns centred logs of every tracked quantity, [chains, draws],
    with per-quantity bulk ESS and split R-hat (numpyro.diagnostics), divergences and timing."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    t0 = time.perf_counter()
    trunc, rest = _split(model, lik)
    truncated = tuple(sorted(trunc))
    names = model.uncertain
    bounds = {n: jnp.asarray([-ZBOUND if lo is None else max(lo, -ZBOUND), ZBOUND if hi is None else min(hi, ZBOUND)],
                             jnp.float32) for n, (lo, hi) in trunc.items()}
    run = _driver(model, rest, bounds, names, truncated, chains, warmup, draws)
    zs, div = jax.device_get(run(jax.random.fold_in(key, streams.NUTS), model, rest, bounds))
    z = {k: np.asarray(v) for k, v in zs.items()}
    v = evaluate(model, copula.apply(model, {k: jnp.asarray(a) for k, a in z.items()}))
    d = {n: np.broadcast_to(np.asarray(v[n], np.float64), (chains, draws)) for n in model.names}
    ess, rhat = {}, {}
    for n, a in d.items():
        if np.ptp(a) > 0:
            ess[n] = float(effective_sample_size(a))
            rhat[n] = float(split_gelman_rubin(a)) if chains > 1 else math.nan
        else:
            ess[n], rhat[n] = float(a.size), 1.0
    return {"d": d, "z": z, "ess": ess, "rhat": rhat, "divergences": int(np.sum(div)), "chains": chains,
            "draws": draws, "warmup": warmup, "seconds": time.perf_counter() - t0,
            "interval_handling": {**{n: f"sigmoid-smoothed box, tau = width / {SMOOTH_FRACTION:g}"
                                     for n, k in zip(lik.names, lik.kinds) if k == "between"},
                                  **{n: "truncated z (exact)" for n in trunc}}}
