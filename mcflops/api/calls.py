"""The API's functions: a prior file's path, a mapping (a notebook's dict) or a :class:`Spec` in; a
:class:`~mcflops.api.result.Result` (``run``, ``sample``) or the plain dict the CLI writes (``plan``,
``compare``, ``sensitivity``, ``calibrate``) out. Each assembles what the layers below return."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from mcflops import chain
from mcflops.spec import SensitivityOptions, Spec, check_samples, load_spec, plan_options, sensitivity_options
from mcflops.api.args import Call, speaking
from mcflops.api.result import Result, jsonable, device_name
from mcflops.errors import UsageError
from mcflops.errors import kind as _kind

SpecLike = Spec | str | Path | Mapping
Progress = Callable[[int, int], None] | None
Phase = Callable[[str], None] | None  # told the name of each stage of a run as it starts


@speaking
def run(spec: SpecLike, *, samples: int | None = None, seed: int | None = None, key=None,
        progress: Progress = None, posterior: bool = True, method: str = "auto",
        sensitivity: bool | SensitivityOptions = False, nuts: Mapping[str, int] | None = None,
        phase: Phase = None, context: bool = False) -> Result:
    """Run a spec: the prior predictive of every output, and the posterior when it observes something.

    ``spec`` may be a :class:`Spec`, a path to a prior file, or a mapping (a notebook's dict).
    ``key``: a JAX key in place of ``jax.random.key(seed)`` (``seed`` is still what the result records).
    ``sensitivity``: True for the analysis the file's ``sensitivity:`` block asks for, or the options
    themselves (``mcflops.spec.sensitivity_options(spec, ...)``, e.g. with command-line overrides).
    ``nuts``: NUTS's ``chains``, ``warmup`` and ``draws``.
    ``context``: also the run's MFU in context (analysis.context: the file's MFU prior beside the calibrated
    prior from published runs, and the layout model's without a pilot's, as ``mcflops ladder`` sets them, on
    the run's key and draws), summary.json's ``mfu_context`` and the report's section; a spec given as a
    Spec without a file (``spec.path`` None) has none.
    ``phase``: called with the name of each stage as it starts ("compiling", then ``progress`` counts the
    blocks; "analysing: ..."), for a display; it computes nothing.
    """
    return _run(Call("run"), spec, samples=samples, seed=seed, key=key, progress=progress, posterior=posterior,
                method=method, sensitivity=sensitivity, nuts=nuts, phase=phase, context=context)


def _run(call: Call, spec: SpecLike, *, samples, seed, key, progress, posterior, method, sensitivity, nuts,
         phase, context: bool = False) -> Result:
    """run's work, its arguments checked in the name of ``call`` (run, sample or sensitivity)."""
    from mcflops import engine
    from mcflops.engine import summary
    from mcflops.inference.update import METHODS
    from mcflops.model import compute as model_mod

    # the file (or mapping) the context's rungs vary: a loaded Spec names its own
    source = spec.path if isinstance(spec, Spec) else spec
    spec = _overridden(call, spec, samples, seed)
    progress, phase = call.callback(progress, "progress"), call.callback(phase, "phase")
    posterior = call.flag(posterior, "posterior")
    context = call.flag(context, "context") and source is not None
    method = call.choice(method, "method", METHODS)
    if not isinstance(sensitivity, SensitivityOptions):
        sensitivity = call.flag(sensitivity, "sensitivity")
    nuts = call.nuts(nuts)
    engine.setup()  # devices and hosts, before the first JAX computation (idempotent)
    key = call.key(key)
    samples, seed = spec.samples, spec.seed
    # the file's sensitivity: block (checked at load), or options with the command line's overrides
    sens_opts = sensitivity if isinstance(sensitivity, SensitivityOptions) else spec.sensitivity if sensitivity else None
    t0 = time.perf_counter()
    m = model_mod.build_model(spec)
    lik = engine.build_likelihood(spec, m)
    key = engine.seed_key(seed) if key is None else key
    say = phase or (lambda name: None)
    weigh = lik is not None and posterior  # a posterior, and the plan's answers weighted as it is
    plan_rows = None
    if spec.plan.written is not None:  # the file's plan: block: its rows reduced in the run's own pass
        from mcflops.analysis import plan as plan_mod

        plan_rows = plan_mod.request(spec, spec.plan, key=key, posterior=weigh)
    with _alongside(m, sens_opts, key) as background, _beside(context, spec, source, key, samples) as rungs:
        say("compiling")  # the first block is sampled by the program being compiled; progress then counts
        sums = engine.run(key, m, lik, samples, progress=progress, extra=plan_rows)
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
        from mcflops.inference import scope_warnings

        scope = scope_warnings(spec, sums)  # a published figure in the prior predictive's outer 1%
        post = None
        if weigh:
            from mcflops import inference
            from mcflops.inference import nuts as nuts_mod

            say("analysing: the posterior")
            sampler = nuts_mod.run_nuts if nuts_mod.available() else None
            post = inference.posterior(key, spec, m, sums, lik, method=method, sampler=sampler,
                                       **nuts)  # chains, warmup, draws
        point_chain = chain.chain(spec)  # the napkin chain at each input's median
        sens_out = None
        if sens_opts is not None:  # tornado, Sobol, correlations, sweeps -> summary.json "sensitivity"
            from mcflops.analysis import sensitivity as sens

            say("analysing: sensitivity")
            part = background.result() if background is not None else None
            sens_out = sens.analyze(key, m, sums, draws, post.draws if post is not None else None, sens_opts,
                                    prior_part=part, mfu_prior=spec.priors.get("mfu"))
        plan_out = None
        if plan_rows is not None:  # the file's plan: block, answered as `mcflops plan` answers it
            plan_out = jsonable(plan_mod.plan(spec, spec.plan, key=key, posterior=weigh, rows=sums.rows))
        # the failures model's degenerate regimes at the file's count (goodput under 0.5, interval far off)
        notes = [x for dep in spec.count_dependent.values() for x in dep.notes()]
        layout_out = _layout(spec, post)
        context_out = None
        if rungs is not None:  # the ladder's rungs for this file, on the run's key (analysis.context)
            from mcflops.analysis import context as context_mod

            say("analysing: MFU in context")
            context_out = jsonable(context_mod.observed(rungs(), spec, post.summary if post is not None else None))
        timings = {"sampling_s": round(t1 - t0, 3), "total_s": round(time.perf_counter() - t0, 3)}
        return Result(spec=spec, seed=seed, samples=samples, chain=point_chain, prior=prior,
                      observed=observed, draws=draws, posterior=post.summary if post is not None else None,
                      posterior_draws=post.draws if post is not None else None, sensitivity=sens_out,
                      device=device_name(), timings=timings, sums=sums, model=m,
                      notes=[*notes, *scope, *spec.notes, *(post.notes if post is not None else ())],
                      plan=plan_out, layout=layout_out, context=context_out)


def _layout(spec: Spec, post) -> dict[str, Any] | None:
    """A layout MFU prior's account (mcflops.layout.explain): prior, and posterior when there is one."""
    from mcflops.layout import LayoutPrior, explain
    from mcflops.priors.quantiles import median

    lp = spec.count_dependent.get("mfu")
    if not isinstance(lp, LayoutPrior):
        return None
    pm = (post.draws or {}).get("mfu") if post is not None else None
    g = post.summary.get("goodput", {}).get("p50") if post is not None else median(spec.priors["goodput"])
    return jsonable(explain(lp, posterior_mfu=pm, goodput=g))


def _overridden(call: Call, spec: SpecLike, samples: Any, seed: Any) -> Spec:
    """``spec`` loaded (a path or a mapping), with ``samples`` and ``seed`` checked as a prior file's are."""
    spec = call.spec(spec)
    samples = spec.samples if samples is None else call.samples(samples)
    seed = spec.seed if seed is None else call.seed(seed)
    if samples != spec.samples or seed != spec.seed:
        spec = Spec(**{**spec.__dict__, "samples": samples, "seed": seed})
    return spec


@speaking
def sample(spec: SpecLike, *, samples: int | None = None, seed: int | None = None, key=None,
           progress: Progress = None) -> Result:
    """The prior predictive only (``mcflops sample``): no posterior, no sensitivity analysis."""
    return _run(Call("sample"), spec, samples=samples, seed=seed, key=key, progress=progress, posterior=False,
                method="auto", sensitivity=False, nuts=None, phase=None)


@speaking
def plan(spec: SpecLike, *, deadline_days=None, prob=None, gpus=None, budget_hours=None, budget_usd=None,
         posterior: bool = False, samples: int | None = None, seed: int | None = None, key=None,
         progress: Progress = None) -> dict[str, Any]:
    """``mcflops plan``: accelerators for a deadline, days on a cluster, tokens in a budget (the options
    override the file's ``plan:`` block and are checked as it is); what plan.json holds."""
    from mcflops import engine
    from mcflops.analysis import plan as plan_mod

    call = Call("plan")
    spec = _overridden(call, spec, samples, seed)
    opts = plan_options(spec, deadline_days=deadline_days, prob=prob, gpus=gpus, budget_hours=budget_hours,
                        budget_usd=budget_usd, label=call.label)
    posterior, progress = call.flag(posterior, "posterior"), call.callback(progress, "progress")
    engine.setup()
    key = call.key(key)
    return jsonable(plan_mod.plan(spec, opts, posterior=posterior, key=key, progress=progress))


@speaking
def compare(spec_a: SpecLike, spec_b: SpecLike, *more: SpecLike, output: str = "gpu_hours",
            samples: int | None = None, seed: int | None = None, couple: Mapping[str, float] | list[str] | None = None,
            posterior: bool = False, deadline_days: float | str | None = None, prob: float | str | None = None,
            key=None, progress: Progress = None) -> dict[str, Any]:
    """``mcflops compare``: scenarios side by side, the first (A) the reference (samples and seed: A's unless
    given); what compare.json holds.

    Inputs with identical priors share their draws, the others are independent unless ``couple`` gives
    their rank correlation (``{"mfu": 0.7}`` or ``["mfu=0.7"]``; it adds to and overrides each scenario's
    ``compare: {couple: ...}`` block); ``posterior``: every file weighted by its ``observe:`` block.
    ``scenarios`` holds the side-by-side table (GPU-hours, days, cost, energy, the accelerators for a deadline
    and P(done by it), the per-draw ratios to A); with two files the result also holds B / A for ``output``
    (``a``, ``b``, ``ratio``). ``deadline_days``, ``prob``: the deadline every scenario answers (default: the
    first file's ``plan:`` that has one)."""
    from mcflops import engine
    from mcflops.analysis import compare as compare_mod
    from mcflops.analysis import scenarios as scen

    call = Call("compare")
    a = _overridden(call, spec_a, samples, seed)
    specs = [a, *(Call("compare").spec(s) for s in (spec_b, *more))]
    if not isinstance(output, str):
        raise call.error("output", f"expected the name of an output (gpu_hours, wall_days, ...), got {_kind(output)}")
    if couple is not None and not isinstance(couple, (Mapping, list, tuple)):
        raise call.error("couple", f"expected a mapping like {{'mfu': 0.7}} or a list like ['mfu=0.7'], "
                                   f"got {_kind(couple)}")
    couple = compare_mod.parse_couple(couple) if couple is not None else None
    posterior, progress = call.flag(posterior, "posterior"), call.callback(progress, "progress")
    opts = plan_options(a, deadline_days=deadline_days, prob=prob, label=call.label)
    deadline = scen.deadline_of(specs, opts.deadline_days if deadline_days is not None else None,
                                opts.prob if prob is not None else None)
    engine.setup()
    key = call.key(key)
    one_pass = scen.pairable(specs, output)  # B / A read from the scenarios' pass: one pass, not two
    if len(specs) == 2 and not one_pass:
        out = compare_mod.compare(a, specs[1], output=output, couple=couple, posterior=posterior, key=key,
                                  progress=progress)
    elif len(specs) == 2:
        out = {}
    else:
        for s in specs:
            if output not in s.outputs:
                raise UsageError(f"'{output}' is not an output of this file (outputs: {', '.join(s.outputs)})",
                                 arg="output", path=s.path)
        out = {"output": output, "seed": a.seed, "samples": a.samples,
               "distribution": "posterior" if posterior else "prior"}
    sc = scen.scenarios(specs, couple=couple, posterior=posterior, output=output, deadline=deadline, key=key,
                        progress=progress, b_over_a=one_pass)
    if one_pass:
        out = sc.pop("b_over_a")
    out["scenarios"] = sc
    out["notes"] = [*out.get("notes", []), *(n for n in sc["notes"] if n not in out.get("notes", []))]
    if posterior and len(specs) > 2:
        out["ess"] = sc["ess"]
        out["observed"] = {t.lower(): sorted(s.observe) for t, s in zip(sc["tags"], specs) if s.observe}
    return jsonable(out)


@speaking
def sensitivity(spec: SpecLike, *, output: str | None = None, sweeps: list[str] | None = None,
                points: int | None = None, sobol_samples: int | None = None, samples: int | None = None,
                seed: int | None = None, key=None, progress: Progress = None) -> dict[str, Any]:
    """``mcflops sensitivity``: tornado, Sobol and Shapley indices, correlations, sweeps (the options override
    the file's ``sensitivity:`` block; ``sweeps`` as ``["mfu=0.30:0.45"]``); what sensitivity.json holds."""
    call = Call("sensitivity")
    spec = _overridden(call, spec, samples, seed)
    if sweeps is not None and not isinstance(sweeps, (Mapping, list, tuple)):
        raise call.error("sweeps", f"expected a mapping like {{'mfu': [0.3, 0.45]}} or a list like "
                                   f"['mfu=0.30:0.45'], got {_kind(sweeps)}")
    opts = sensitivity_options(spec, output=output, sweeps=sweeps, points=points, sobol_samples=sobol_samples,
                               label=call.label)
    res = _run(call, spec, samples=None, seed=None, key=key, progress=progress, posterior=True, method="auto",
               sensitivity=opts, nuts=None, phase=None)
    return jsonable({"name": spec.name, "seed": res.seed, "samples": res.samples, **res.sensitivity})


@speaking
def calibrate(*, chains: int = 4, draws: int = 300, seed: int = 0, key=None, loo: bool = True,
              select: bool = False) -> dict[str, Any]:
    """``mcflops calibrate``: the fit of effective utilization (MFU x goodput) to the published runs that ship
    with the package (so it takes no spec) and, with ``loo``, its validation (leave one run, organisation,
    accelerator generation out, a time split; against the baselines; each split's targets); what
    calibration.json holds, computed by the same function as the command line's. ``draws``: NUTS's warm-up
    and kept draws per chain (the validation samples half as many, at least 100, on half the chains);
    ``select``: also compare the candidate models on the grouped validation (slow)."""
    from mcflops import engine
    from mcflops.calibration import results

    call = Call("calibrate")
    chains, draws = call.whole(chains, "chains", 1, 64), call.whole(draws, "draws", 50, 100_000)
    seed, loo, select = call.seed(seed), call.flag(loo, "loo"), call.flag(select, "select")
    engine.setup()
    key = call.key(key)
    key = engine.seed_key(seed) if key is None else key
    res = results.calibrate(key, chains=chains, draws=draws, seed=seed, validation=loo, select=select)
    return jsonable(res.data)


@speaking
def write(kind: str, data: Mapping[str, Any], out: str | Path) -> None:
    """Write what ``mcflops KIND --out OUT`` writes from the dict :func:`plan`, :func:`compare`,
    :func:`sensitivity` or :func:`calibrate` returned (``kind``: their name): the JSON file and its figures."""
    from mcflops import output
    from mcflops.output.folder import ANALYSES

    call = Call("write")
    kind_ = call.choice(kind, "kind", tuple(ANALYSES))
    if not isinstance(data, Mapping):
        raise call.error("data", f"expected the dict mcflops.{kind_}() returned, got {_kind(data)}")
    if not isinstance(out, (str, Path)) or not str(out).strip():
        raise call.error("out", f"expected a folder's path, got {_kind(out)}")
    output.write_analysis(kind_, data, Path(out), where=str(out))


@contextmanager
def _beside(wanted: bool, spec: Spec, source, key, samples: int):
    """The run's MFU in context (analysis.context) as a function that returns it: computed in a thread while
    the caller samples (it needs only the file and the key: its programs load, or compile, on the other core),
    or where that cannot be (across hosts, which must issue their collectives in one order), when called.
    None when not ``wanted``. Its numbers do not depend on this (every pass is keyed)."""
    if not wanted:
        yield None
        return
    import jax

    from mcflops.analysis.context import context

    if jax.process_count() > 1:
        yield lambda: context(spec, source, key=key, samples=samples)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcflops-context")
    try:
        future = pool.submit(context, spec, source, key=key, samples=samples)
        yield future.result
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


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
