"""Observations compiled for the kernel (``Likelihood``, from a Spec's ``observe:`` block) and their
log-likelihood for every draw, up to constants."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from mcflops.model import to_device
from mcflops.model.compute import Model
from mcflops.spec import Spec


@dataclass(frozen=True)
class Likelihood:
    """Observations compiled for the kernel. Static: what is observed and how; leaves: the numbers."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]  # lognormal | normal | between
    target: jax.Array  # centred log of the observed value (lognormal/normal)
    scale: jax.Array  # sigma of log (lognormal) or value/sd (normal)
    low: jax.Array  # between: centred log bounds
    high: jax.Array


jax.tree_util.register_dataclass(Likelihood, data_fields=["target", "scale", "low", "high"],
                                 meta_fields=["names", "kinds"])


def build_likelihood(spec: Spec, model: Model) -> Likelihood | None:
    if not spec.observe:
        return None
    t, s, lo, hi = [], [], [], []
    for name, o in spec.observe.items():
        c = model.centers[name]
        if o.noise == "between":
            t.append(0.0), s.append(1.0)
            lo.append(math.log(o.low) - c if o.low > 0 else -np.inf), hi.append(math.log(o.high) - c)
        else:
            t.append(math.log(o.value) - c)
            s.append(o.scale if o.noise == "lognormal" else o.value / o.scale)
            lo.append(0.0), hi.append(0.0)
    return Likelihood(tuple(spec.observe), tuple(o.noise for o in spec.observe.values()),
                      *(to_device(x, np.float32) for x in (t, s, lo, hi)))


def log_likelihood(lik: Likelihood, v: Mapping[str, jax.Array]) -> jax.Array:
    """Sum of the observations' log-likelihoods (up to constants) for each draw."""
    total = 0.0
    for i, (name, kind) in enumerate(zip(lik.names, lik.kinds)):
        d = v[name]
        if kind == "lognormal":  # log(observed) ~ Normal(log q, sigma)
            total = total - 0.5 * jnp.square((d - lik.target[i]) / lik.scale[i])
        elif kind == "normal":  # observed ~ Normal(q, sd): (q - v)/sd = (v/sd)(e^{d-t} - 1)
            total = total - 0.5 * jnp.square(lik.scale[i] * jnp.expm1(d - lik.target[i]))
        else:  # uniform likelihood on [low, high]
            total = total + jnp.where((d >= lik.low[i]) & (d <= lik.high[i]), 0.0, -jnp.inf)
    return total
