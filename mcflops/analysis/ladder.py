"""One forecast, a ladder of information: the same run under each MFU prior a planner can reach, side by side.

The rungs, for one prior file: the file's MFU prior as written; the calibrated population prior for its
accelerator and size (``mfu: {calibrated: true}``, the posterior predictive of published runs); the layout
model's prior when a layout is given (``mfu: {layout: ...}``). Each rung is the file with its ``priors.mfu``
replaced and nothing else, loaded and checked as a file is; the calibrated rung also drops the file's goodput,
because the calibrated prior is effective utilization (MFU x goodput) and already holds the downtime.

The rungs go through one pass of ``analysis.scenarios`` (the first rung as A): an input whose prior is the same
in two rungs shares its draws (common random numbers), so tokens, parameters and price are drawn once and the
rungs differ by their MFU (and, for the calibrated one, the goodput it folds in) only. Each rung reports its
MFU prior's exact quantiles, MFU x goodput from the pass's first draws, GPU-hours and days on the file's count,
and the accelerators for the file's deadline. Notes say where the rungs disagree: the file's guess against the
comparable published runs (``spec.evidence.published_band``) and against the other rungs' 90% bands.
Computation only: the CLI prints, ``report.ladder`` renders.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mcflops.analysis.pilot import PILOT
from mcflops.errors import SpecError, UsageError

PROBS = (0.05, 0.5, 0.95)
U_DRAWS = 1 << 16  # draws that give each rung's MFU x goodput quantiles (MCSE of a median ~0.4% of its spread)
KINDS = {"hand-set": "your prior", "calibrated": "published runs", "layout": "layout", "pilot": "pilot"}
BAND = {"calibrated": "the published runs' (the calibrated prior)", "layout": "the layout model's",
        "pilot": "the pilot-conditioned layout model's"}


def layout_options(items: Sequence[str] | None) -> dict[str, Any] | None:
    """``--layout tp=8,pp=8 --layout global_batch=2048`` as the mapping ``mfu: {layout: ...}`` takes (numbers,
    true/false, names; the layout's own parser checks each field); None when none is given."""
    from mcflops.analysis.pilot import key_values

    if not items:
        return None
    out: dict[str, Any] = {}
    for item in items:
        out.update(key_values(item, "layout"))
    return out


def kind_of(written: Any) -> str:
    from mcflops.spec import recipes

    if recipes.is_calibrated(written):
        return "calibrated"
    if isinstance(written, Mapping) and "layout" in written:
        return "layout"
    return "hand-set"


def rungs(path: str | Path | Mapping, layout: Mapping[str, Any] | None = None,
          pilots: Sequence[Mapping[str, Any]] = (), base=None) -> list[dict[str, Any]]:
    """Each rung's kind, label and Spec: the file as written first, then the rungs it does not already hold;
    with ``pilots`` (analysis.pilot.parse_pilot's), last the layout rung's MFU conditioned on them. ``base``:
    ``path`` already loaded (a run's Spec: its first rung, not loaded again)."""
    from mcflops.spec import load_spec
    from mcflops.spec.reader import read_yaml

    if base is None:
        base = load_spec(path)  # the file's own mistakes are reported first, with its lines
    data = copy.deepcopy(dict(path)) if isinstance(path, Mapping) else read_yaml(Path(path))  # a notebook's dict
    written = data["priors"].get("mfu")
    own = "pilot" if base.pilots else kind_of(written)
    label = KINDS["hand-set"] + ("" if own == "hand-set" else f" ({own})")
    out = [{"kind": own, "label": label, "spec": base}]
    if base.pilots:  # the file's own pilot: its rung is the layout rung conditioned on it
        out[0]["pilot"] = _pilot_info(base.count_dependent["mfu"])
    if own != "calibrated":
        node = {"calibrated": True, "source": "mcflops ladder: the calibrated prior in place of the file's"}
        try:
            out.append({"kind": "calibrated", "label": KINDS["calibrated"],
                        "spec": _variant(data, base, node, "calibrated", drop_goodput=True)})
        except SpecError as e:  # the file's units are not the calibrated prior's (a FLOPs convention, FP8)
            out[0]["skipped"] = f"no rung from published runs: {e.message}"
    if layout is None and base.pilots:  # the file's layout prior without its pilot: what the pilot narrowed
        out.append({"kind": "layout", "label": f"{KINDS['layout']} (the file's, without its pilot)",
                    "spec": _variant(data, base, written, "layout")})
    if layout is not None:
        text = ", ".join(f"{k} {v}" for k, v in layout.items())
        node = {"layout": dict(layout), "source": f"mcflops ladder --layout: {text}"}
        out.append({"kind": "layout", "label": f"{KINDS['layout']} {text}",
                    "spec": _variant(data, base, node, "layout", arg="layout")})
    if pilots:
        lay = next((r["spec"] for r in reversed(out) if r["kind"] == "layout"), None)
        if lay is None:
            raise UsageError("a pilot conditions the layout model: give the production layout as well (the "
                             "layout option, or an mfu: {layout: ...} prior in the file)", **PILOT)
        out.append(_pilot_rung(lay, pilots))
    return out


def _pilot_rung(lay, pilots) -> dict[str, Any]:
    """The layout rung with its MFU conditioned on the pilots (analysis.pilot, as a file's ``pilot:`` block is):
    the layout prior's draws, reweighted, re-solved at any count on the same weights."""
    from mcflops.analysis.pilot import condition, to_pilot

    res = condition(lay.count_dependent["mfu"], pilots)
    spec = dataclasses.replace(lay, name=lay.name.rsplit(".", 1)[0] + ".pilot",
                               priors={**lay.priors, "mfu": res["dist"]},
                               count_dependent={**lay.count_dependent, "mfu": res["prior"]},
                               pilots=tuple(to_pilot(p) for p in pilots))
    text = "; ".join(_short(to_pilot(p)) for p in pilots)
    return {"kind": "pilot", "label": f"{KINDS['pilot']} {text}", "spec": spec, "pilot": _pilot_info(res["prior"])}


def _short(p) -> str:
    unit = {"tflops_per_gpu": "TFLOP/s", "tokens_per_s_per_gpu": "tokens/s per GPU", "step_time_s": "s per step"}
    return f"{p.count:,} at {p.value:g} {unit[p.measure]}"


def _pilot_info(prior) -> dict[str, Any]:
    """What a rung's pilot-conditioned prior (mcflops.spec.pilots.PilotedPrior) says of its pilots."""
    from mcflops.layout import DRAWS

    return {"ess": prior.ess, "draws": DRAWS, "pilots": [dict(c) for c in prior.checks]}


def _variant(data: Mapping, base, mfu: Mapping, tag: str, drop_goodput: bool = False, arg: str | None = None):
    """The file with its mfu prior replaced (and, for an effective-utilization prior, no goodput of its own)."""
    from mcflops.spec import load_spec

    d = copy.deepcopy(data)
    d["name"] = f"{base.name}.{tag}"
    d["priors"]["mfu"] = dict(mfu)
    if drop_goodput:  # and any correlation that names it: the input is gone
        d["priors"].pop("goodput", None)
        if isinstance(d.get("correlations"), list):
            d["correlations"] = [c for c in d["correlations"]
                                 if not (isinstance(c, Mapping) and "goodput" in (c.get("between") or ()))]
            if not d["correlations"]:
                d.pop("correlations")
    d.pop("pilot", None)  # a rung of its own (the pilot conditions the layout prior only)
    d.pop("observe", None)  # a forecast: the rungs are priors, like the file's own rung
    d.pop("reported", None)
    try:
        return load_spec(d, path=base.path)
    except SpecError as e:  # name the option that made this rung, not a line of a file that does not hold it
        if arg is None:
            raise
        raise UsageError(f"{e.field}: {e.message}" if e.field else e.message, arg=arg) from None


def ladder(path: str | Path | Mapping, layout: Sequence[str] | Mapping[str, Any] | None = None, *,
           pilots: Sequence[str | Mapping[str, Any]] = (), samples: int | None = None, seed: int | None = None, key=None,
           progress: Callable[[int, int], None] | None = None, base=None) -> dict[str, Any]:
    """The ladder of ``path`` (module docstring): ``rungs`` (a row per rung), ``deadline`` and ``notes``.
    ``base``: ``path`` already loaded as a Spec (``mcflops run``'s, analysis.context), the first rung as it is."""
    from mcflops import engine
    from mcflops.analysis import scenarios as scen
    from mcflops.analysis.pilot import parse_pilot

    lay = layout if isinstance(layout, Mapping) or layout is None else layout_options(layout)
    pil = [parse_pilot(p) if isinstance(p, str) else p for p in pilots or ()]
    rs = rungs(path, lay, pil, base=base)
    specs = [r["spec"] for r in rs]
    base = specs[0]
    n = base.samples if samples is None else int(samples)
    seed = base.seed if seed is None else int(seed)
    key = engine.seed_key(seed) if key is None else key
    # scenarios compares two or more: a file with one rung (its own calibrated prior, no layout) is set beside
    # itself, which shares every draw, and the copy is dropped
    pair = specs if len(specs) > 1 else [base, base]
    deadline = scen.deadline_of(pair)
    sc = scen.scenarios(pair, samples=n, seed=seed, deadline=deadline, key=key, progress=progress)
    draws = scen.scenario_draws(pair, size=min(U_DRAWS, n), key=key)
    rows = []
    for r, entry, dr in zip(rs, sc["table"], draws):
        s = r["spec"]
        rows.append({"tag": entry["tag"], "kind": r["kind"], "label": r["label"], "name": s.name,
                     "prior": _prior(s, r["kind"]), "mfu": _exact(s.priors["mfu"]),
                     "goodput": None if r["kind"] == "calibrated" else _exact(s.priors["goodput"]),
                     "effective": _sample_q(dr["mfu"] * dr["goodput"]),
                     "effective_draws": int(dr["mfu"].size),
                     "gpu_hours": entry["gpu_hours"], "wall_days": entry["wall_days"],
                     "gpu_hours_mcse_p50": median_mcse(dr["gpu_hours"], n),
                     "cost": entry.get("cost"), "deadline": entry.get("deadline"),
                     "accelerator": s.hardware.accelerator, "count": s.hardware.count,
                     "count_dependent": sorted(s.count_dependent)})
        if "pilot" in r:
            rows[-1]["pilot"] = r["pilot"]
    u = {r["tag"]: {"MFU": np.asarray(dr["mfu"]), "MFU x goodput": np.asarray(dr["mfu"] * dr["goodput"])}
         for r, dr in zip(rows, draws)}
    return {"name": base.name, "path": base.path, "seed": seed, "samples": n, "layout": dict(lay) if lay else None,
            "pilots": [dict(p, layout=dict(p["layout"])) for p in pil],
            "accelerator": base.hardware.accelerator, "count": base.hardware.count, "deadline": deadline,
            "rungs": rows, "notes": _notes(rs, rows, u, sc["notes"])}


def _prior(spec, kind: str) -> str:
    """The rung's MFU prior in words: a calibrated, layout or pilot prior by its quantiles (its text is a long
    table)."""
    from mcflops.priors import calibrated

    d = spec.priors["mfu"]
    short = calibrated.describe(d)
    if short:
        return short
    if kind in ("layout", "pilot"):
        q = _exact(d)
        what = "the layout model's MFU" + (" given the pilot (posterior predictive)" if kind == "pilot" else "")
        return f"{what}: median {q['p50']:.3f}, 90% [{q['p5']:.3f}, {q['p95']:.3f}]"
    return d.describe()


def _exact(d) -> dict[str, float]:
    from mcflops.priors.quantiles import ppf

    return dict(zip(("p5", "p50", "p95"), (float(x) for x in ppf(d, list(PROBS)))))


def median_mcse(x, n: int) -> float:
    """The Monte Carlo standard error of the median of ``n`` draws, relative to it: sqrt(p (1 - p) / n) / f(q)
    at p = 1/2 (the order statistic's asymptotic sd; Serfling 1980, Sec. 2.3.3), 1 / f(q) read from ``x`` (the
    first draws) as the spread of its 45th-55th percentiles over 0.1."""
    q45, q50, q55 = np.quantile(np.asarray(x, float), [0.45, 0.5, 0.55])
    return float(0.5 / np.sqrt(n) * (q55 - q45) / 0.1 / q50)


def _sample_q(x) -> dict[str, float]:
    return dict(zip(("p5", "p50", "p95"), (float(v) for v in np.quantile(np.asarray(x, float), PROBS))))


def _notes(rs, rows, u, scenario_notes) -> list[str]:
    """Where the rungs disagree, the file's warnings about its priors, and what the deadline holds fixed."""
    notes: list[str] = [r["skipped"] for r in rs if "skipped" in r]
    for r in rs:  # the load's warnings (a guess outside published runs, a calibrated fallback), once each
        notes += [x for x in r["spec"].notes if x.startswith("WARNING") and x not in notes]
    first = rows[0]
    by_kind = {row["kind"]: row for row in rows[1:]}
    if first["kind"] == "hand-set":
        notes += _against_published(rs[0]["spec"], first)
        for kind in ("calibrated", "layout", "pilot"):
            other = by_kind.get(kind)
            if other is None:
                continue
            # the calibrated band is on MFU x goodput; the layout's is on MFU alone (goodput is the file's)
            what, mine, theirs = (("MFU x goodput", first["effective"], other["effective"]) if kind == "calibrated"
                                  else ("MFU", first["mfu"], other["mfu"]))
            x, lo, hi = mine["p50"], theirs["p5"], theirs["p95"]
            side = "above" if x > hi else "below" if x < lo else "inside"
            share = float(np.mean(u[other["tag"]][what] < x))
            notes.append(f"your {what} median {x:.3f} is {side} {BAND[kind]} 90% band [{lo:.3f}, {hi:.3f}] "
                         f"(median {theirs['p50']:.3f}, {other['tag']}); {share:.0%} of {other['tag']}'s {what} draws "
                         f"are below it, and {other['tag']}'s GPU-hours median is {_ratio(other, first)} yours")
    cal = by_kind.get("calibrated") or (first if first["kind"] == "calibrated" else None)
    lay = by_kind.get("layout") or (first if first["kind"] == "layout" else None)
    if cal is not None and lay is not None:
        x, lo, hi = lay["effective"]["p50"], cal["effective"]["p5"], cal["effective"]["p95"]
        side = "above" if x > hi else "below" if x < lo else "inside"
        notes.append(f"the layout model's MFU x goodput median {x:.3f} is {side} the published runs' 90% band "
                     f"[{lo:.3f}, {hi:.3f}]: the layout rung is what the stated layout's physics allows with the "
                     "fitted efficiencies and the file's goodput; the calibrated rung is what published runs of "
                     "this size reached, downtime included; a pilot on this stack would narrow either")
    for r, row in zip(rs, rows):  # the layout rung's width and the prior it mostly comes from (layout.explain)
        if row["kind"] == "layout":
            from mcflops.layout.explain import width_parts

            parts = width_parts(r["spec"].count_dependent["mfu"])
            if parts["fixed"]:
                top = min(parts["fixed"], key=parts["fixed"].get)
                notes.append(f"the layout rung's MFU spans {parts['all']:.2f}x (p95/p5); with {parts['names'][top]} "
                             f"at its median it would span {parts['fixed'][top]:.2f}x: that is the prior to state (a "
                             "fitted stack's) or to measure with a pilot")
    if cal is not None:
        g = rs[0]["spec"].priors.get("goodput")
        own = first["kind"] != "calibrated" and g is not None and not (g.family == "point" and g.params["value"] == 1)
        notes.append("the calibrated rung is effective utilization (MFU x goodput): its MFU is that product"
                     + (", and the file's goodput prior is left out of it (it would count the downtime twice)"
                        if own else ""))
    unstated: dict[str, list[str]] = {}  # what a layout rung took for the settings it was not told, once per text
    for r, row in zip(rs, rows):
        for x in getattr(r["spec"].count_dependent.get("mfu"), "notes", lambda: [])():
            if "is not stated" in x:
                unstated.setdefault(x, []).append(row["tag"])
    notes += [f"{', '.join(tags)}: {x}" for x, tags in unstated.items()]
    pilot = by_kind.get("pilot") or (first if first["kind"] == "pilot" else None)
    if pilot is not None:
        for c in pilot["pilot"]["pilots"]:
            pp = c["predicted_prior"]
            notes.append(f"the pilot on {c['count']:,} measured MFU {c['observed_mfu']:.3f} (architecture's FLOPs); "
                         f"the layout model had predicted {pp['p50']:.3f} [{pp['p5']:.3f}, {pp['p95']:.3f}] there, "
                         f"and after conditioning {c['predicted_posterior']['p50']:.3f}")
        notes.append(f"the pilot rung ({pilot['tag']}) reweights the layout model's efficiency draws by the pilot's "
                     f"likelihood (effective sample size {pilot['pilot']['ess']:,.0f} of {pilot['pilot']['draws']:,}); "
                     "its MFU is the posterior predictive at the production layout and the file's count, "
                     "re-solved on the same weighted draws at the count a deadline asks for")
        if len({c["count"] for c in pilot["pilot"]["pilots"]}) == 1:  # docs/layout.md, "A pilot on held-out series"
            notes.append("one pilot count pins the efficiencies' product at that count; what changes with the count "
                         "(the bubble's share, exposed communication) stays as uncertain as its priors: a second "
                         "pilot at another count (--pilot twice) narrows production further")
    notes += [x for x in scenario_notes if x.startswith("what moves with the accelerator count")]
    return notes


def _ratio(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    r = a["gpu_hours"]["p50"] / b["gpu_hours"]["p50"]
    return f"{r:.2f}x"


def _against_published(spec, row) -> list[str]:
    """The hand-set guess against each comparable published run (same generation, within 3x the parameters)."""
    from mcflops.priors.calibrated import FAMILY, accelerator_family
    from mcflops.priors.quantiles import median
    from mcflops.spec.evidence import published_band

    acc, params = spec.hardware.accelerator, spec.priors.get("params")
    if acc not in FAMILY or params is None or spec.flops != "6nd":
        return []
    moe = bool(spec.architecture is not None and getattr(spec.architecture, "experts", None))
    band = published_band(acc, float(median(params)), moe)
    if band is None or not band[4]:
        return []
    near, x = band[4], row["effective"]["p50"]
    above = [f"{i} {v:.3f}" for i, v in near if v < x]
    below = [f"{i} {v:.3f}" for i, v in near if v >= x]
    fam = accelerator_family(acc)
    where = ("above every" if not below else "below every" if not above else
             f"above {len(above)} of the {len(near)}")
    text = (f"your MFU x goodput median {x:.3f} (MFU median {row['mfu']['p50']:.3f}, goodput median "
            f"{row['goodput']['p50']:.3f}) sits {where} comparable published run{'s' if len(near) > 1 else ''} "
            f"on {fam} ({'MoE' if moe else 'dense'}, within 3x the parameters; 6ND / (peak x hours), downtime "
            f"included): ")
    parts = []
    if above:
        parts.append(("above " if below else "") + ", ".join(above))
    if below and above:
        parts.append("below " + ", ".join(below))
    elif below:
        parts.append(", ".join(below))
    return [text + "; ".join(parts)]
