"""The public API a notebook uses, and the CLI wraps: load a spec, run it, get a result."""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from mcflops import chain as napkin
from mcflops._version import version, versions

from mcflops.errors import SpecError
from mcflops.spec import SensitivityOptions, Spec, check_samples, load_spec, resolved_dict


def device_name() -> str:
    import jax

    d = jax.devices()[0]
    kind = getattr(d, "device_kind", "") or ""
    return f"{d.platform}:{kind} x{jax.device_count()}" if kind else f"{d.platform} x{jax.device_count()}"


@dataclass
class Result:
    """What a run produced: summaries as plain data, a bounded set of draws, and the raw sums. :func:`run`
    assembles it from what the layers return; nothing below this module writes into it."""

    spec: Spec
    seed: int
    samples: int
    chain: dict[str, float]
    prior: dict[str, dict[str, float]]
    observed: dict[str, dict[str, Any]]
    draws: dict[str, np.ndarray]  # kept prior draws (linear units), at most engine.KEEP each
    posterior: dict[str, Any] | None = None
    posterior_draws: dict[str, np.ndarray] | None = None
    sensitivity: dict[str, Any] | None = None
    device: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    sums: Any = field(default=None, repr=False)
    model: Any = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The content of summary.json (plain JSON types)."""
        d: dict[str, Any] = {
            "name": self.spec.name, "description": self.spec.description, "seed": self.seed,
            "samples": self.samples, "device": self.device, "version": version(),
            "versions": versions(), "spec_hash": self.spec.digest(), "flops_convention": self.spec.flops,
            "chain": self.chain, "prior": self.prior, "observed": self.observed,
        }
        if self.posterior is not None:
            d["posterior"] = self.posterior
        if self.sensitivity is not None:
            d["sensitivity"] = self.sensitivity
        if self.notes:
            d["notes"] = self.notes
        d["timings"] = self.timings
        return jsonable(d)


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


def run(spec: Spec | str | Path | Mapping, *, samples: int | None = None, seed: int | None = None,
        progress: Callable[[int, int], None] | None = None, posterior: bool = True,
        method: str = "auto", sensitivity: bool | SensitivityOptions = False, nuts: Mapping[str, int] | None = None) -> Result:
    """Run a spec: the prior predictive of every output, and the posterior when it observes something.

    ``spec`` may be a :class:`Spec`, a path to a prior file, or a mapping (a notebook's dict).
    ``sensitivity``: True for the analysis the file's ``sensitivity:`` block asks for, or the options
    themselves (``mcflops.spec.sensitivity_options(spec, ...)``, e.g. with command-line overrides).
    ``nuts``: NUTS's ``chains``, ``warmup`` and ``draws``.
    """
    import jax

    from mcflops import engine
    from mcflops.model import compute as model_mod
    from mcflops.engine import summary

    engine.setup()  # devices and hosts, before the first JAX computation (idempotent)
    if not isinstance(spec, Spec):
        spec = load_spec(spec)
    samples = spec.samples if samples is None else int(samples)
    check_samples(samples, lambda m, *a: SpecError(m, field="--samples"))
    seed = spec.seed if seed is None else int(seed)
    if seed < 0:
        raise SpecError("expected a seed >= 0", field="--seed")
    if samples != spec.samples or seed != spec.seed:
        spec = Spec(**{**spec.__dict__, "samples": samples, "seed": seed})
    # the file's sensitivity: block (checked at load), or options with the command line's overrides
    sens_opts = sensitivity if isinstance(sensitivity, SensitivityOptions) else spec.sensitivity if sensitivity else None
    t0 = time.perf_counter()
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    key = jax.random.key(seed)
    with _alongside(m, sens_opts, key) as background:
        sums = engine.run(key, m, lik, samples, progress=progress)
        t1 = time.perf_counter()
        prior = summary.summarize(sums, m.centers, "prior")
        for name, dist in spec.priors.items():  # point masses: exact, no sampling error
            if name not in prior:
                v = dist.params["value"]
                prior[name] = {"mean": v, "sd": 0.0, **{k: v for k in summary.QUANTILES}, "mcse_p50": 0.0}
        draws = {n: np.exp(m.centers[n] + sums.first[i]) for i, n in enumerate(sums.names)}
        observed: dict[str, dict[str, Any]] = {}
        for i, (name, o) in enumerate(spec.observe.items()):
            entry: dict[str, Any] = {"noise": o.noise, "source": o.source}
            if o.noise == "between":
                entry.update(low=o.low, high=o.high, prior_probability_inside=float(sums.inside[i] / sums.n))
            else:
                entry.update(value=o.value, sigma=o.scale if o.noise == "lognormal" else None,
                             prior_percentile=summary.percentile_of(sums, i))
            observed[name] = entry
        post = None
        if lik is not None and posterior:
            from mcflops import inference
            from mcflops.inference import nuts as nuts_mod

            sampler = nuts_mod.run_nuts if nuts_mod.available() else None
            post = inference.posterior(key, spec, m, sums, lik, method=method, sampler=sampler,
                                       **(nuts or {}))  # chains, warmup, draws
        sens_out = None
        if sens_opts is not None:  # tornado, Sobol, correlations, sweeps -> summary.json "sensitivity"
            from mcflops.analysis import sensitivity as sens

            part = background.result() if background is not None else None
            sens_out = sens.analyze(key, m, sums, draws, post.draws if post is not None else None, sens_opts,
                                    prior_part=part)
        timings = {"sampling_s": round(t1 - t0, 3), "total_s": round(time.perf_counter() - t0, 3)}
        return Result(spec=spec, seed=seed, samples=samples, chain=napkin.chain(spec), prior=prior,
                      observed=observed, draws=draws, posterior=post.summary if post is not None else None,
                      posterior_draws=post.draws if post is not None else None, sensitivity=sens_out,
                      device=device_name(), timings=timings, sums=sums, model=m,
                      notes=list(post.notes) if post is not None else [])


@contextmanager
def _alongside(m, sens_opts, key):
    """The sensitivity analysis's prior part (tornado, Sobol, Shapley, sweeps) as a future, computed in a thread
    while the caller samples and updates: it needs only the model and the key, so on a first run its programs
    compile on the other core. Its numbers do not depend on this (every pass is keyed). None without a
    sensitivity analysis, and across hosts, where every process must issue its collectives in the same order.
    On an error or Ctrl-C in the caller the analysis stops at its next stage, not at its end."""
    import jax

    if sens_opts is None or jax.process_count() > 1:
        yield None
        return
    from concurrent.futures import ThreadPoolExecutor

    from mcflops.analysis import sensitivity as sens

    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcflops-sensitivity")
    try:
        yield pool.submit(sens.prior_analysis, key, m, sens_opts, stop=stop.is_set)
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["Result", "run", "load_spec", "resolved_dict", "version", "device_name"]
