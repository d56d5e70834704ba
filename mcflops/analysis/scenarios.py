"""Scenarios side by side: ``compare`` of N >= 2 prior files on one set of draws. Computation only.

Scenario A (the first file) is drawn as ``mcflops run A`` draws it; every other scenario is drawn against A
exactly as ``compare A B`` draws B (``analysis.compare``: an input with A's prior is shared, one coupled by
``--couple`` or the scenario's ``compare:`` block goes through a Gaussian copula, a ratio to A is A's draw times
the ratio's, the rest is independent). Between the other scenarios, an input with the same prior and the same
relation to A takes the earlier scenario's scores, so scenarios that share an input share its draws (common
random numbers) and a difference between two files is the only thing that moves their ratio.

One pass of the engine (its extra rows, ``engine.extras``) reduces, for every scenario, the histograms of
GPU-hours, wall-clock days, cost and energy (those the file has) and of the per-draw log ratio of each to A's; P(ratio < 1) and
P(done by the deadline) are exact counts of the draws (the pass's thresholds), not read off a histogram.

The deadline question is ``plan``'s (``analysis.plan``): accelerators to finish within D days with probability
p, ``ceil(q_p(GPU-hours) / (24 D))``, with the per-draw need's 90% interval ``ceil(q(GPU-hours) / (24 D))`` at
5% and 95%; P(done) is ``P(GPU-hours <= 24 D G)`` on the file's own count G (hardware.count). D and p are the
first file's ``plan:`` (or the first that has one), so every scenario answers the same question; a scenario
whose inputs depend on the count (a layout's MFU, a failures model's goodput) takes plan's fixed point.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.analysis import compare as pair
from mcflops.analysis.plan import weighed
from mcflops.errors import UsageError

QUANTITIES = ("gpu_hours", "wall_days", "cost", "energy_mwh")
TAGS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
COARSE = 128  # bins of each scenario's histogram kept for the figure


def tags(n: int) -> list[str]:
    return list(TAGS[:n])


def _relation(spec, name: str, row: Mapping[str, Any]) -> tuple:
    """What decides an input's draws in a scenario: how it is drawn against A and the prior it has there."""
    ratio = spec.compare.ratio(name)
    prior = pair._bare(ratio.ratio) if ratio is not None else pair._bare(spec.priors[name])
    return row["draws"], row.get("spearman"), prior


def setup(specs: Sequence[Any], couple: Mapping[str, float] | None = None):
    """(params, plans, rows): the pass's parameters, each other scenario's static plan of (input, draws,
    source) and its coupling rows against A (``couple``: {input: rank correlation}, for every scenario)."""
    a, given = specs[0], dict(couple or {})
    used: set[str] = set()
    others, plans, all_rows, seen = [], [], [], []
    for k, s in enumerate(specs[1:], start=1):
        mine = {n: r for n, r in given.items() if n in a.priors or n in s.priors}
        used.update(mine)
        rows = pair.coupling(a, s, mine, tag=TAGS[k])
        (ma, mb, rho, comp, ratios), plan = pair._params(a, s, rows)
        by_name = {r["name"]: r for r in rows}
        rel = {n: _relation(s, n, by_name[n]) for n, how in plan if how != pair.SHARED}
        triples = []
        for n, how in plan:
            src = 0
            if how != pair.SHARED:  # the first earlier scenario that draws it the same way shares its scores
                src = next((j for j, r in enumerate(seen, start=1) if r.get(n) == rel[n]), 0)
            triples.append((n, how, src))
        seen.append(rel)
        others.append((mb, rho, comp, ratios))
        plans.append(tuple(triples))
        all_rows.append(rows)
    unused = [n for n in given if n not in used]
    if unused:
        raise UsageError(f"{', '.join(unused)}: not an input of any file", arg="couple")
    return (ma, tuple(others)), tuple(plans), all_rows


def _rows(key, params, lik, block, at, size, plans, layout):
    """Each scenario's centred logs of its quantities, then each one's log ratio to A's (minus a constant)."""
    vals = pair.scenario_values(key, params, block, size, plans, at)
    own, ratio = layout
    rows = [jnp.broadcast_to(vals[k][q], (size,)) for k, q in own]
    rows += [jnp.broadcast_to(vals[k][q] - vals[0][q], (size,)) for k, q in ratio]
    ll = None
    if lik is not None:
        ll = sum(engine.log_likelihood(li, v) for li, v in zip(lik, vals) if li is not None)
    return jnp.stack(rows), ll


def scenario_draws(specs, couple: Mapping[str, float] | None = None, *, size: int = 1 << 16,
                   seed: int | None = None, key: jax.Array | None = None) -> list[dict[str, np.ndarray]]:
    """The first ``size`` draws of every scenario's inputs and outputs (linear units), as the pass makes them:
    for checking the table against the draws, and for a notebook's own plots."""
    params, plans, _ = setup(specs, pair.parse_couple(couple))
    key = engine.seed_key(specs[0].seed if seed is None else int(seed)) if key is None else key
    vals = _values_call(key, params, jnp.uint32(0), size=size, plans=plans)
    models = [params[0], *(o[0] for o in params[1])]
    return [{k: np.exp(m.centers[k] + np.broadcast_to(np.asarray(x, np.float64), (size,))) for k, x in v.items()}
            for m, v in zip(models, vals)]


# kept across processes (engine.program): `mcflops run`'s MFU in context and `ladder` call it once per process
_values_call = engine.program(pair.scenario_values, static_argnames=("size", "plans"))


def deadline_of(specs, deadline_days: float | None = None, prob: float | None = None) -> dict[str, Any] | None:
    """The one deadline question every scenario answers: the given one, else the first file's ``plan:`` that
    has a deadline (its tag says which); None when none asks."""
    src = next((k for k, s in enumerate(specs) if s.plan.deadline_days is not None), None)
    if deadline_days is None and src is None:
        return None
    days = float(deadline_days) if deadline_days is not None else specs[src].plan.deadline_days
    p = float(prob) if prob is not None else (specs[src].plan.prob if src is not None else 0.9)
    return {"days": days, "prob": p, "from": TAGS[src] if deadline_days is None else "--deadline-days"}


def scenarios(specs: Sequence[Any], *, samples: int | None = None, seed: int | None = None,
              couple: Mapping[str, float] | None = None, posterior: bool = False, output: str = "gpu_hours",
              deadline: Mapping[str, Any] | None = None, progress: Callable[[int, int], None] | None = None,
              key: jax.Array | None = None, b_over_a: bool = False) -> dict[str, Any]:
    """The side-by-side table of ``specs`` (A first): each scenario's quantities with their 90% intervals,
    the deadline's accelerators and P(done by it), and the per-draw ratios to A (``deadline``: as
    :func:`deadline_of` returns it; ``output``: the quantity the figure shows, GPU-hours or days).

    ``b_over_a`` (two files, ``output`` one of QUANTITIES both have): the result also holds ``b_over_a``, B / A
    for ``output`` in ``analysis.compare.compare``'s shape, read from this same pass (the same draws, rows
    and histograms: that function's answer without a second pass)."""
    if len(specs) < 2 or len(specs) > len(TAGS):
        raise UsageError(f"expected 2 to {len(TAGS)} prior files, got {len(specs)}", arg="specs", flag="FILE")
    if posterior and not any(s.observe for s in specs):
        raise UsageError("needs an `observe:` block in one of the files", arg="posterior", path=specs[0].path)
    a = specs[0]
    n = a.samples if samples is None else int(samples)
    seed = a.seed if seed is None else int(seed)
    key = engine.seed_key(seed) if key is None else key
    params, plans, rows = setup(specs, couple)
    models = [params[0], *(o[0] for o in params[1])]
    own = tuple((k, q) for k, s in enumerate(specs) for q in QUANTITIES if q in s.outputs)
    ratio = tuple((k, q) for k, s in enumerate(specs) if k for q in QUANTITIES if q in s.outputs and q in a.outputs)
    c = lambda k, q: models[k].centers[q]  # noqa: E731 - the float64 centre of a centred log
    thr = []
    for k, q in own:
        G = specs[k].hardware.count
        ok = deadline is not None and q == "gpu_hours" and G
        thr.append(math.log(24.0 * deadline["days"] * G) - c(k, q) if ok else 0.0)
    thr += [-(c(k, q) - c(0, q)) for k, q in ratio]  # log ratio < 0 iff the centred difference < -shift
    lik = tuple(engine.build_likelihood(s, m) for s, m in zip(specs, models)) if posterior else None
    rows_of = engine.extra(key, _rows, params, lik, static=(plans, (own, ratio)), thresholds=thr)
    h = weighed(engine.run_rows(key, rows_of, n, progress=progress))
    total = float(h["s0"])
    ess = engine.ess(total, float(h["s0w2"])) if posterior else float(n)
    at = {kq: i for i, kq in enumerate(own)}
    at_ratio = {kq: len(own) + i for i, kq in enumerate(ratio)}

    def qs(row: int, centre: float) -> dict[str, float]:
        return dict(zip(pair.NAMES, np.exp(centre + engine.row_quantiles(h, row, pair.PROBS)).tolist()))

    names = tags(len(specs))
    table = []
    for k, s in enumerate(specs):
        entry: dict[str, Any] = {"tag": names[k], "name": s.name, "path": s.path,
                                 "accelerator": s.hardware.accelerator, "count": s.hardware.count}
        for q in QUANTITIES:
            entry[q] = qs(at[(k, q)], c(k, q)) if (k, q) in at else None
        if k:
            entry["ratio"] = {}
            for q in QUANTITIES:
                if (k, q) not in at_ratio:
                    entry["ratio"][q] = None
                    continue
                i, shift = at_ratio[(k, q)], c(k, q) - c(0, q)
                r = qs(i, shift)
                r.update(min=float(np.exp(shift + h["min"][i])), max=float(np.exp(shift + h["max"][i])),
                         prob_less=float(h["below"][i] / total), prob_greater=float(h["above"][i] / total))
                entry["ratio"][q] = r
        if deadline is not None:
            entry["deadline"] = _deadline(s, h, at[(k, "gpu_hours")], c(k, "gpu_hours"), deadline, total, ess,
                                          n=n, key=key, posterior=posterior)
        table.append(entry)
    quantity = output if output in ("gpu_hours", "wall_days") and all(output in s.outputs for s in specs) \
        else "gpu_hours"
    hist = [_coarse(h, at[(k, quantity)], c(k, quantity), total) for k in range(len(specs))]
    out = {"tags": names, "quantities": [q for q in QUANTITIES if any(q in s.outputs for s in specs)],
           "table": table, "deadline": dict(deadline) if deadline is not None else None,
           "hist": {"quantity": quantity, "scenarios": hist}, "inputs": _inputs(specs, rows, plans),
           "notes": _notes(specs, models, rows, plans, deadline, posterior)}
    if posterior:
        out["ess"] = ess
    if b_over_a:
        out["b_over_a"] = _b_over_a(specs, h, output, at[(0, output)], at[(1, output)], at_ratio[(1, output)],
                            (c(0, output), c(1, output)), rows[0], models, posterior, n, seed)
    return out


def pairable(specs, output: str) -> bool:
    """Whether this pass can answer ``compare A B`` for ``output`` too (see :func:`scenarios`' ``b_over_a``)."""
    return len(specs) == 2 and output in QUANTITIES and all(output in s.outputs for s in specs)


def _b_over_a(specs, h, output, ra, rb, rr, centres, rows, models, posterior, n, seed) -> dict[str, Any]:
    """B / A for ``output`` as analysis.compare.compare gives it, from this pass's rows: A's and B's own
    (ra, rb) and the per-draw log ratio's (rr)."""
    (ca, cb), (a, b), total = centres, specs, float(h["s0"])
    shift = cb - ca  # log(B/A) = shift + (dB - dA)

    def side(spec, centre, row):
        return {"name": spec.name, "path": spec.path, "accelerator": spec.hardware.accelerator,
                **dict(zip(pair.NAMES, np.exp(centre + engine.row_quantiles(h, row, pair.PROBS)).tolist()))}

    ratio = dict(zip(pair.NAMES, np.exp(shift + engine.row_quantiles(h, rr, pair.PROBS)).tolist()))
    ratio.update(min=float(np.exp(shift + h["min"][rr])), max=float(np.exp(shift + h["max"][rr])),
                 prob_b_greater=float(h["above"][rr] / total), prob_b_less=float(h["below"][rr] / total))
    step = engine.NBINS // 64  # 64 coarse bins for the figure, as analysis.compare draws them
    hist = h["hist"][rr][1:-1].reshape(-1, step).sum(axis=1)
    edges = h["lo"][rr] + h["width"][rr] * step * np.arange(65)
    out = {"output": output, "seed": seed, "samples": n, "distribution": "posterior" if posterior else "prior",
           "a": side(a, ca, ra), "b": side(b, cb, rb), "ratio": ratio, "inputs": rows,
           "shared_inputs": [r["name"] for r in rows if r["draws"] == pair.SHARED],
           "coupled_inputs": {r["name"]: r["spearman"] for r in rows if r["draws"] == pair.COUPLED},
           "independent_inputs": [r["name"] for r in rows if r["draws"] == pair.INDEPENDENT],
           "ratio_inputs": {r["name"]: r["ratio"] for r in rows if r["draws"] == pair.RATIO},
           "ratio_hist": {"log_edges": (shift + edges).tolist(), "weights": (hist / total).tolist()},
           "notes": pair._notes(a, b, models[0], models[1], rows, posterior)}
    if posterior:
        out["ess"] = engine.ess(total, float(h["s0w2"]))
        out["observed"] = {t: sorted(s.observe) for t, s in (("a", a), ("b", b)) if s.observe}
    return out


def _deadline(spec, h, row: int, centre: float, dl, total: float, ess: float, *, n, key, posterior):
    """Accelerators to finish within the deadline with its probability, the per-draw need's median and 90%
    interval, and P(done) on the file's own count (exact: the draws under the pass's threshold)."""
    D, p = dl["days"], dl["prob"]
    G = spec.hardware.count
    P = float(h["below"][row] / total) if G else None
    out: dict[str, Any] = {"gpus_count": G, "prob_done": P,
                           "prob_done_mcse": math.sqrt(P * (1 - P) / max(ess, 1.0)) if P is not None else None}
    if spec.count_dependent:  # what depends on the count is re-solved at each one: plan's fixed point
        from mcflops.analysis import plan as plan_mod
        from mcflops.spec import PlanOptions

        res = plan_mod.plan(spec, PlanOptions(deadline_days=D, prob=p), samples=n, key=key, posterior=posterior)
        d = res["deadline"]
        out.update(gpus=d.get("gpus"), need_p5=None, need_p50=d.get("gpus_p50"), need_p95=None,
                   method="fixed point")
        return out
    hq = np.exp(centre + engine.row_quantiles(h, row, [p, 0.05, 0.5, 0.95])) / (24.0 * D)  # accelerator-days per day
    need = [int(math.ceil(x - 1e-9)) for x in hq]
    out.update(gpus=need[0], gpus_exact=float(hq[0]), need_p5=need[1], need_p50=need[2], need_p95=need[3],
               method="closed form")
    return out


def _coarse(h, row: int, centre: float, total: float) -> dict[str, Any]:
    """A scenario's histogram on COARSE bins, trimmed to the bins that hold draws: what the figure draws."""
    step = engine.NBINS // COARSE
    w = h["hist"][row][1:-1].reshape(-1, step).sum(axis=1) / total
    edges = centre + h["lo"][row] + h["width"][row] * step * np.arange(COARSE + 1)
    held = np.flatnonzero(w > 0)
    lo, hi = (held[0], held[-1] + 1) if held.size else (0, 0)
    return {"log_edges": edges[lo:hi + 1].tolist(), "weights": w[lo:hi].tolist(),
            "log_min": float(centre + h["min"][row]), "log_max": float(centre + h["max"][row])}


def _inputs(specs, rows, plans) -> list[dict[str, Any]]:
    """One row per input: each scenario's prior in words and how it is drawn against A (``with``: the earlier
    scenario whose draws it shares)."""
    names: list[str] = []
    for r in rows:
        names += [x["name"] for x in r if x["name"] not in names]
    out = []
    for name in names:
        d0 = specs[0].priors.get(name)
        entry = {"name": name, "priors": [d0.describe() if d0 is not None else None], "draws": [None],
                 "spearman": [None], "with": [None], "summary": [_summary(specs[0], name, d0)]}
        for k, (r, plan) in enumerate(zip(rows, plans), start=1):
            row = next((x for x in r if x["name"] == name), None)
            src = next((s for n, _, s in plan if n == name), 0)
            ratio = row is not None and specs[k].compare.ratio(name) is not None
            entry["summary"].append(None if row is None or ratio else
                                    _summary(specs[k], name, specs[k].priors.get(name)))
            entry["priors"].append(None if row is None else row["b"])
            entry["draws"].append(None if row is None else row["draws"])
            entry["spearman"].append(None if row is None else row.get("spearman"))
            entry["with"].append(TAGS[src] if src else None)
        out.append(entry)
    return out


LONG_MIXTURE = 4  # a mixture of more parts than this is a quantile table: a reader gets its quantiles (as in
# report.priors, which states the run report's priors by the same rule)


def _summary(spec, name: str, d) -> dict[str, Any] | None:
    """What a report needs to state a prior in a reader's units instead of its text: a fixed value, or a derived
    prior's (a recipe's, the calibrated one, any long mixture) exact p5, median and p95 and where it comes from;
    None for a prior its text already states (a lognormal's 90% interval, a beta's parameters)."""
    from mcflops.priors import calibrated
    from mcflops.priors.quantiles import ppf

    if d is None:
        return None
    if d.family == "point":
        return {"value": float(d.params["value"])}
    recipe = spec.count_dependent.get(name)
    derived = ("layout" if hasattr(recipe, "layout") else "failures" if recipe is not None else
               "calibrated" if calibrated.describe(d) else None)
    if derived is None and not (d.family == "mixture" and len(d.components) > LONG_MIXTURE):
        return None
    p5, p50, p95 = (float(x) for x in ppf(d, [0.05, 0.5, 0.95]))
    return {"p5": p5, "p50": p50, "p95": p95, "derived": derived, "parts": len(d.components) or None}


def _notes(specs, models, rows, plans, deadline, posterior: bool) -> list[str]:
    """Each scenario's notes against A (analysis.compare's, naming it by its letter), once each; two other
    scenarios on different accelerators sharing one MFU or goodput draw; the deadline's source and what the
    plan holds fixed as the count moves."""
    from mcflops.analysis.plan import held

    a, notes = specs[0], []
    for k, (s, r) in enumerate(zip(specs[1:], rows), start=1):
        notes += [x for x in pair._notes(a, s, models[0], models[k], r, posterior, TAGS[k]) if x not in notes]
    for k, plan in enumerate(plans, start=1):
        for name, how, src in plan:
            if src and name in ("mfu", "goodput"):
                h1, h2 = specs[src].hardware.accelerator, specs[k].hardware.accelerator
                if h1 and h2 and h1 != h2:
                    notes.append(f"{name}: {TAGS[src]} ({h1}) and {TAGS[k]} ({h2}) have the same prior and the same "
                                 f"draws, so {TAGS[k]} / {TAGS[src]} takes the datasheets' ratio as certain; give "
                                 f"{TAGS[k]} its own prior or a ratio to A to say how they differ")
    if deadline is not None:
        D, p = deadline["days"], deadline["prob"]
        src = deadline["from"]
        asked = "the command line's" if src == "--deadline-days" else f"{src}'s plan:"
        differ = [TAGS[k] for k, s in enumerate(specs) if s.plan.deadline_days not in (None, D)
                  or (s.plan.deadline_days is not None and s.plan.prob != p)]
        notes.append(f"every scenario answers one deadline, {asked} {D:g} days at probability {p:g}"
                     + (f" ({', '.join(differ)} ask{'s' if len(differ) == 1 else ''} another in {'its' if len(differ) == 1 else 'their'} own plan:)" if differ else "")
                     + "; P(done) is on each file's own hardware.count")
        notes.append(_held_once(specs, held))
    return notes


_SET_FOR = re.compile(r" \(it was set for ([\d,]+) accelerators\)")
_HELD = "what moves with the accelerator count: "


def _held_once(specs, held) -> str:
    """What the plan holds and re-solves as the count moves, one note for every scenario: scenarios that hold
    the same things share a clause (each file's own count named once), instead of a note per scenario."""
    groups: dict[str, list[tuple[str, str | None]]] = {}
    for k, s in enumerate(specs):
        text = held(s).removeprefix(_HELD)
        m = _SET_FOR.search(text)
        groups.setdefault(_SET_FOR.sub("", text), []).append((TAGS[k], m.group(1) if m else None))
    clauses = []
    for text, who in groups.items():
        counts = [f"{t} {c}" if len(who) > 1 else c for t, c in who if c]
        if len(who) > 1:
            text = text.replace("the file's prior", "each file's prior")
        if counts:  # the count each file's prior was set for, once per scenario, beside the clause
            at = text.find(" at every count")
            where = at + len(" at every count") if at >= 0 else len(text)
            text = f"{text[:where]} (set for {', '.join(counts)} accelerators){text[where:]}"
        tags_ = [t for t, _ in who]
        clauses.append(f"{', '.join(tags_[:-1]) + ' and ' + tags_[-1] if len(tags_) > 1 else tags_[0]}: {text}.")
    return _HELD.rstrip(": ") + ". " + " ".join(clauses)
