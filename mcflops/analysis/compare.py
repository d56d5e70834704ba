"""``compare``: two prior files on one set of draws, how each input of B is drawn against A chosen. Computation only.

How an uncertain input of B is drawn against the same input of A (its "draws"):

- shared: the two priors are the same resolved distribution (family, parameters, truncation, mixture; the
  source text aside): B takes A's normal score z, so the input cancels from B / A draw by draw (exact common
  random numbers: ``fold_in(key, crc32(name))``, the draws ``mcflops run`` makes for A);
- coupled: the user set a rank (Spearman) correlation rho_s (``--couple mfu=0.7``): a Gaussian copula on the
  scores, ``z_B = rho z_A + sqrt(1 - rho^2) w`` with w from the independent stream below, and the normal-score
  correlation ``rho = 2 sin(pi rho_s / 6)`` (the inverse of Kruskal 1958, "Ordinal measures of association",
  JASA 53, Eq. 4.4: rho_s = (6/pi) asin(rho/2)). Both marginals stay exact, and since z -> x is increasing,
  (x_A, x_B) have rank correlation rho_s whatever the two priors are;
- independent: the priors differ and nothing was set: w alone, ``fold_in(fold_in(key, COMPARE), crc32(name))``
  (engine.streams), a stream no other pass draws from;
- ratio to A: B writes the input as ``{relative_to: A.yaml, ratio: <prior>}`` (mcflops.spec.ratio): B's value is
  A's draw times a ratio drawn from w, ``log x_B = log x_A + log r``, so B / A for that input is the ratio
  prior exactly, draw by draw (B's own prior, the product's quantile table, is what `mcflops run B` uses).

Each file's own ``correlations:`` copula is applied after, to B's combined scores (which are independent
standard normals again), so B's joint prior is exactly its file's. One jitted pass evaluates both models and
reduces the histograms of both outputs and of log(B / A) (the engine's extra rows, ``engine.extras``); with
``posterior=True`` the pair is weighted by both files' likelihoods (the joint posterior: a shared input learns
from both files' observations, an independent one from its own file's only).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.analysis.plan import weighed
from mcflops.errors import SpecError, UsageError
from mcflops.model.compute import Model, build_model, evaluate, outputs
from mcflops.model.copula import apply as apply_copula
from mcflops.model.samplers import make_sampler
from mcflops.numbers import parse_number

PROBS = (0.05, 0.25, 0.5, 0.75, 0.95)
NAMES = ("p5", "p25", "p50", "p75", "p95")
SHARED, COUPLED, INDEPENDENT, FIXED, RATIO = "shared", "coupled", "independent", "fixed", "ratio to A"


def normal_score(rho_s: float) -> float:
    """The normal-score correlation of a Gaussian copula whose rank correlation is ``rho_s``:
    2 sin(pi rho_s / 6) (Kruskal 1958, Eq. 4.4, inverted); +-1 exactly at +-1."""
    return math.copysign(1.0, rho_s) if abs(rho_s) == 1.0 else 2.0 * math.sin(math.pi * rho_s / 6.0)


def _bare(d) -> tuple:
    """A prior as its resolved distribution only (its source text and line left out)."""
    return (d.family, tuple(sorted(d.params.items())), d.low, d.high, tuple(_bare(c) for c in d.components),
            tuple(d.weights))


def same_prior(a, b) -> bool:
    """Whether two priors (mcflops.priors.Dist) are the same distribution, whatever their sources say."""
    return _bare(a) == _bare(b)


def parse_couple(items: Mapping[str, Any] | Sequence[str] | None) -> dict[str, float]:
    """``["mfu=0.7", ...]`` or ``{"mfu": 0.7}`` -> {input: rank correlation in [-1, 1]}; UsageError on ``couple``."""
    if not items:
        return {}
    pairs = list(items.items()) if isinstance(items, Mapping) else []
    if not isinstance(items, Mapping):
        for it in items:
            name, eq, value = str(it).partition("=")
            if not eq or not name.strip():
                raise UsageError(f"expected INPUT=RHO (a rank correlation, e.g. mfu=0.7), got {it!r}", arg="couple")
            pairs.append((name.strip(), value.strip()))
    out: dict[str, float] = {}
    for name, value in pairs:
        rho = parse_number(value)
        if rho is None or not -1.0 <= rho <= 1.0:
            raise UsageError(f"{name}: expected a rank correlation between -1 and 1, got {value!r}", arg="couple")
        if name in out:
            raise UsageError(f"{name} is coupled twice", arg="couple")
        out[str(name)] = float(rho)
    return out


def coupling(spec_a, spec_b, couple: Mapping[str, Any] | Sequence[str] | None = None,
             tag: str = "B") -> list[dict[str, Any]]:
    """How every input of either file is drawn in B against A: one row per input (A's order, then B's new
    ones) with ``name``, ``a`` and ``b`` (the priors in words, None where absent), ``draws`` (shared, coupled,
    independent or fixed), ``spearman`` (the rank correlation of A's and B's draws: 1 shared, the requested
    one coupled, 0 independent; None fixed) and, when coupled, ``by`` (``--couple`` or ``compare:``).
    ``couple``: the command line's, as :func:`parse_couple` takes it; it adds to B's ``compare: {couple:
    ...}`` block and overrides it (``tag``: how messages name B)."""
    given = parse_couple(couple)
    block = {n: line for (n, _), line in zip(spec_b.compare.couple, spec_b.compare.lines) if n not in given}
    couple = {**dict(spec_b.compare.couple), **given}
    pa, pb = spec_a.priors, spec_b.priors
    _check_ratios(spec_a, spec_b, couple)
    rows = []
    for name in [*pa, *(n for n in pb if n not in pa)]:
        da, db = pa.get(name), pb.get(name)
        ua, ub = da is not None and da.family != "point", db is not None and db.family != "point"
        extra = {}
        ratio = spec_b.compare.ratio(name)
        if ratio is not None:
            rows.append({"name": name, "a": da.describe(), "b": f"A's {name} x {ratio.ratio.describe()}",
                         "draws": RATIO, "spearman": None, "ratio": ratio.ratio.describe(),
                         "relative_to": ratio.relative_to})
            continue
        if name in couple:
            if not ua:  # B's own block was checked against B at load
                state = "absent from" if da is None else "a point value in"
                why = f"{name} is {state} A: only an input uncertain in both files can be coupled"
                raise (SpecError(why, path=spec_b.path, line=block[name], field=f"compare.couple.{name}")
                       if name in block else UsageError(why, arg="couple"))
            if not ub:
                raise UsageError(f"{name} is {'absent from' if db is None else 'a point value in'} {tag}: only an "
                                 "input uncertain in both files can be coupled", arg="couple")
            how, rho = COUPLED, couple.pop(name)
            extra = {"by": "compare:" if name in block else "--couple"}
        elif ua and ub and same_prior(da, db):
            how, rho = SHARED, 1.0
        elif ua or ub:
            how, rho = INDEPENDENT, 0.0
        else:
            how, rho = FIXED, None
        rows.append({"name": name, "a": da.describe() if da is not None else None,
                     "b": db.describe() if db is not None else None, "draws": how, "spearman": rho, **extra})
    if couple:
        raise UsageError(f"{', '.join(couple)}: not an input of either file", arg="couple")
    return rows


def _check_ratios(spec_a, spec_b, couple: Mapping[str, float]) -> None:
    """B's ratio priors are relative to this A, are not coupled too, and are not in B's own correlations."""
    import os

    corr = {n for c in spec_b.correlations for n in (c.a, c.b)}
    for r in spec_b.compare.ratios:
        at = dict(path=spec_b.path, line=r.line, field=f"priors.{r.name}.relative_to")
        try:
            same = spec_a.path is not None and os.path.samefile(spec_a.path, r.path)
        except OSError:
            same = False
        if not same:
            raise SpecError(f"{r.name} is relative to {r.relative_to}, but A here is {spec_a.path}: compare "
                            f"{r.relative_to} with this file, or give {r.name} its own prior", **at)
        if r.name in couple:
            raise UsageError(f"{r.name} is a ratio to A (relative_to:): its draws are A's times the ratio's, so it "
                             "cannot also be coupled", arg="couple")
        if r.name in corr:
            raise SpecError(f"{r.name} is a ratio to A (relative_to:) and also in this file's correlations: in "
                            "compare its draws are A's times the ratio's; drop the correlation or the ratio",
                            path=spec_b.path, field="correlations")


def _raw(key, model: Model, block, size, at=None) -> dict[str, jax.Array]:
    """A file's standard-normal scores before its own copula: the draws ``mcflops run`` makes."""
    return engine.draw_z(key, dataclasses.replace(model, copula=None), block, size, at)


def _paired(key, params, block, size, plan, at=None):
    """Both files' centred log inputs and outputs on one block's draws (``plan``: B's (input, draws) pairs;
    ``at``: draws at .. at + size - 1 of the block, None: its first ``size``)."""
    a, b, rho, comp, ratios = params
    return tuple(scenario_values(key, (a, ((b, rho, comp, ratios),)), block, size,
                                 (tuple((n, how, 0) for n, how in plan),), at))


SCENARIO = 0x8000_0000  # scenario k >= 2's own sub-stream of COMPARE: above every input's 31-bit id


def scenario_values(key, params, block, size, plans, at=None) -> list:
    """Every scenario's centred log inputs and outputs on one block's draws: A's as ``mcflops run A`` draws
    them, then each other scenario's against A (``params``: (model A, ((model, rho, sqrt(1 - rho^2), ratios),
    ...)); ``plans``: per other scenario its (input, draws, source) triples, source k > 0 meaning "the same
    prior and the same relation to A as scenario k": its scores, so scenarios that share an input share its
    draws). Scenario 1's own stream is compare's second file's; scenario k >= 2 draws from
    ``fold_in(fold_in(key, COMPARE), SCENARIO | k)`` (engine.streams), one stream no other pass draws from."""
    a, others = params
    za = _raw(key, a, block, size, at)
    va = evaluate(a, apply_copula(a, za))
    wkey = jax.random.fold_in(key, engine.COMPARE)
    vals, scores = [va], []
    for k, ((b, rho, comp, ratios), plan) in enumerate(zip(others, plans), start=1):
        skey = wkey if k == 1 else jax.random.fold_in(wkey, SCENARIO | k)
        zb, j = {}, 0
        for name, how, src in plan:
            if how == SHARED:
                zb[name] = za[name]
                continue
            if src:
                zb[name] = scores[src - 1][name]
                j += how == COUPLED
                continue
            kk = jax.random.fold_in(jax.random.fold_in(skey, engine.stable_id(name)), block)
            w = engine.normals(kk, (size,)) if at is None else engine.normals_at(kk, at, size)
            if how == COUPLED:
                zb[name] = rho[j] * za[name] + comp[j] * w  # Gaussian copula, normal-score correlation rho
                j += 1
            else:
                zb[name] = w  # independent, or the ratio's own score
        scores.append(zb)
        vals.append(_evaluate_b(b, apply_copula(b, zb), va, ratios, tuple(n for n, how, _ in plan if how == RATIO)))
    return vals


def _evaluate_b(b: Model, z, va, ratios, names: tuple[str, ...]):
    """B's centred logs (model.compute.evaluate), the ratio inputs as A's value times the ratio's:
    d_B = d_A + d_r + (c_A + c_r - c_B), each d centred on its own float64 centre c."""
    if not names:
        return evaluate(b, z)
    samplers, offsets = ratios
    d = {}
    for name, s in zip(b.inputs, b.samplers):
        if name in names:
            k = names.index(name)
            d[name] = va[name] + samplers[k](z[name]) + offsets[k]
        else:
            d[name] = s(z[name]) if name in z else jnp.broadcast_to(s.a, ())
    return {**d, **outputs(b, d)}


_paired_call = jax.jit(_paired, static_argnames=("size", "plan"))


def _compare_rows(key, params, lik, block, at, size, output: str, plan):
    """Both models' centred log output and their difference (log B/A minus a constant); the log-likelihood."""
    va, vb = _paired(key, params, block, size, plan, at)
    da, db = (jnp.broadcast_to(v[output], (size,)) for v in (va, vb))
    ll = None
    if lik is not None:
        la, lb = lik
        ll = sum(engine.log_likelihood(li, v) for li, v in ((la, va), (lb, vb)) if li is not None)
    return jnp.stack([da, db, db - da]), ll


def _params(spec_a, spec_b, rows):
    """(model A, model B, rho, sqrt(1 - rho^2), (the ratios' samplers, their offsets)) and B's static plan
    from the coupling rows."""
    ma, mb = build_model(spec_a), build_model(spec_b)
    how = {r["name"]: r["draws"] for r in rows}
    plan = tuple((n, how[n]) for n, s in zip(mb.inputs, mb.samplers) if s.kind != "const")
    spear = {r["name"]: r["spearman"] for r in rows if r["draws"] == COUPLED}
    rhos = [normal_score(spear[n]) for n, h in plan if h == COUPLED]  # in the order the draws consume them
    rho = jnp.asarray(np.asarray(rhos, np.float32))
    comp = jnp.asarray(np.sqrt(np.maximum(0.0, 1.0 - np.square(np.asarray(rhos, np.float64)))).astype(np.float32))
    names = [n for n, h in plan if h == RATIO]
    samplers = tuple(make_sampler(spec_b.compare.ratio(n).ratio) for n in names)
    offsets = np.asarray([ma.centers[n] + s.center - mb.centers[n] for n, s in zip(names, samplers)], np.float64)
    return (ma, mb, rho, comp, (samplers, jnp.asarray(offsets.astype(np.float32)))), plan


def paired_draws(spec_a, spec_b, couple: Mapping[str, float] | None = None, *, size: int = 1 << 16,
                 seed: int | None = None, key: jax.Array | None = None) -> tuple[dict, dict]:
    """The first ``size`` paired draws of both files' inputs and outputs (linear units), as ``compare``
    makes them: for checking the coupling, and for a notebook's own plots."""
    params, plan = _params(spec_a, spec_b, coupling(spec_a, spec_b, couple))
    key = engine.seed_key(spec_a.seed if seed is None else int(seed)) if key is None else key
    va, vb = _paired_call(key, params, jnp.uint32(0), size=size, plan=plan)
    lin = lambda m, v: {k: np.exp(m.centers[k] + np.broadcast_to(np.asarray(x, np.float64), (size,)))
                        for k, x in v.items()}
    return lin(params[0], va), lin(params[1], vb)


def _notes(spec_a, spec_b, ma, mb, rows, posterior: bool, tag: str = "B") -> list[str]:
    """What a reviewer would question about B against A (``tag``: how the notes name B: a scenario's letter)."""
    notes = []
    ca, cb = (set(m.copula.names) if m.copula is not None else set() for m in (ma, mb))
    if ca != cb or (ma.copula is not None and ma.copula.names != mb.copula.names):
        notes.append(f"A and {tag} correlate different inputs, so the shared inputs' draws differ where the "
                     "correlations do")
    inside = [r["name"] for r in rows if r["draws"] == COUPLED and r["name"] in ca | cb]
    if inside:
        notes.append(f"{', '.join(inside)}: also correlated with other inputs inside a file, so the A-{tag} rank "
                     "correlation differs somewhat from the one requested (the coupling acts before each file's "
                     "own correlations)")
    indep = [r["name"] for r in rows if r["draws"] == INDEPENDENT and r["a"] is not None and r["b"] is not None]
    if indep:
        notes.append(f"drawn independently in A and {tag} (their priors differ): {', '.join(indep)}; if both files "
                     f"mean the same quantity, say how closely they move together with --couple {indep[0]}=RHO "
                     "(a rank correlation), or make the priors identical to share the draws")
    for r in rows:
        if r["draws"] == RATIO:
            notes.append(f"{r['name']}: {tag}'s draw is A's times an independent draw of the ratio {r['ratio']} "
                         f"({tag}'s relative_to: {r['relative_to']}), so {tag} / A for {r['name']} is that prior exactly")
    ha, hb = spec_a.hardware, spec_b.hardware
    if ha.accelerator and hb.accelerator and ha.accelerator != hb.accelerator and ha.peak_flops is not None \
            and ha.peak_flops == hb.peak_flops:
        only = (set(spec_a.priors) == set(spec_b.priors)
                and all(same_prior(d, spec_b.priors[n]) for n, d in spec_a.priors.items())
                and spec_a.flops == spec_b.flops and spec_a.architecture == spec_b.architecture
                and ha.precision == hb.precision and ha.count == hb.count)
        notes.append(f"{ha.accelerator} and {hb.accelerator} have the same catalogue dense peak at "
                     f"{hb.precision} ({ha.peak_flops / 1e12:.1f} TFLOP/s): {tag} / A is exactly 1 through peak "
                     f"FLOP/s, so any gain of {hb.accelerator} (memory, bandwidth) must come through its MFU prior"
                     + (f" - and nothing else differs here, so {tag} / A is 1 for every draw" if only else ""))
    shared = [r["name"] for r in rows if r["draws"] == SHARED and r["name"] in ("mfu", "goodput")]
    if shared and ha.accelerator and hb.accelerator and ha.accelerator != hb.accelerator:
        # one prior, one draw for both chips: the peak ratio then passes through as a certainty
        them = " and ".join(shared)
        peaks = (f" (peak {ha.peak_flops / 1e12:,.0f} vs {hb.peak_flops / 1e12:,.0f} TFLOP/s)"
                 if ha.peak_flops and hb.peak_flops else "")
        notes.append(f"{them}: one prior for {ha.accelerator} and {hb.accelerator}, the same draw on both, so {tag} / A "
                     f"takes the datasheets' ratio{peaks} as certain and none of the doubt about how the other "
                     f"accelerator runs this stack (a new generation's software often lags its peak); say how they "
                     f"relate with a ratio prior in {tag} ({shared[0]}: {{relative_to: A's file, ratio: PRIOR, source: "
                     f"...}}), or give {tag} its own prior and --couple {shared[0]}=RHO")
    if spec_a.compare.couple and spec_a.compare.couple != spec_b.compare.couple:
        notes.append(f"A's `compare:` block is not read: the couplings come from {tag}'s and from --couple")
    observed = [t for t, s in (("A", spec_a), (tag, spec_b)) if s.observe]
    if observed and not posterior:
        notes.append(f"{' and '.join(observed)} {'has' if len(observed) == 1 else 'have'} an `observe:` block: "
                     "this compares the priors; --posterior compares the importance-weighted posteriors")
    return notes


def compare(spec_a, spec_b, *, output: str = "gpu_hours", samples: int | None = None, seed: int | None = None,
            couple: Mapping[str, float] | None = None, posterior: bool = False,
            progress: Callable[[int, int], None] | None = None, key: jax.Array | None = None) -> dict[str, Any]:
    """B against A: both outputs' quantiles and the distribution of B / A, each input shared, coupled
    (``couple``: {input: rank correlation}) or independent (``key``: in place of ``jax.random.key(seed)``;
    ``posterior``: weighted by both files' observations)."""
    for s in (spec_a, spec_b):
        if output not in s.outputs:
            raise UsageError(f"'{output}' is not an output of this file (outputs: {', '.join(s.outputs)})",
                             arg="output", path=s.path)
    if posterior and not (spec_a.observe or spec_b.observe):
        raise UsageError("needs an `observe:` block in A or B", arg="posterior", path=spec_b.path)
    n = spec_a.samples if samples is None else int(samples)
    seed = spec_a.seed if seed is None else int(seed)
    rows = coupling(spec_a, spec_b, couple)
    params, plan = _params(spec_a, spec_b, rows)
    ma, mb = params[0], params[1]
    lik = None
    if posterior:
        lik = (engine.build_likelihood(spec_a, ma), engine.build_likelihood(spec_b, mb))
    shift = mb.centers[output] - ma.centers[output]  # log(B/A) = shift + (dB - dA)
    key = engine.seed_key(seed) if key is None else key
    h = weighed(engine.run_rows(key, engine.extra(key, _compare_rows, params, lik, static=(output, plan),
                                                  thresholds=[0.0, 0.0, -shift]), n, progress=progress))

    def side(spec, m, row):
        return {"name": spec.name, "path": spec.path, "accelerator": spec.hardware.accelerator,
                **dict(zip(NAMES, np.exp(m.centers[output] + engine.row_quantiles(h, row, PROBS)).tolist()))}

    ratio = dict(zip(NAMES, np.exp(shift + engine.row_quantiles(h, 2, PROBS)).tolist()))
    total = float(h["s0"])
    ratio.update(min=float(np.exp(shift + h["min"][2])), max=float(np.exp(shift + h["max"][2])),
                 prob_b_greater=float(h["above"][2] / total), prob_b_less=float(h["below"][2] / total))
    hist = h["hist"][2][1:-1].reshape(-1, engine.NBINS // 64).sum(axis=1)  # 64 coarse bins for the plot
    edges = h["lo"][2] + h["width"][2] * (engine.NBINS // 64) * np.arange(65)
    out = {"output": output, "seed": seed, "samples": n, "distribution": "posterior" if posterior else "prior",
           "a": side(spec_a, ma, 0), "b": side(spec_b, mb, 1), "ratio": ratio, "inputs": rows,
           "shared_inputs": [r["name"] for r in rows if r["draws"] == SHARED],
           "coupled_inputs": {r["name"]: r["spearman"] for r in rows if r["draws"] == COUPLED},
           "independent_inputs": [r["name"] for r in rows if r["draws"] == INDEPENDENT],
           "ratio_inputs": {r["name"]: r["ratio"] for r in rows if r["draws"] == RATIO},
           "ratio_hist": {"log_edges": (shift + edges).tolist(), "weights": (hist / total).tolist()},
           "notes": _notes(spec_a, spec_b, ma, mb, rows, posterior)}
    if posterior:
        out["ess"] = engine.ess(total, float(h["s0w2"]))
        out["observed"] = {t: sorted(s.observe) for t, s in (("a", spec_a), ("b", spec_b)) if s.observe}
    return out
