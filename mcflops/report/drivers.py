"""The report's section on what drives the estimate: tornado, Sobol indices, Shapley effects, correlations, sweeps.

Renders summary.json's "sensitivity" (the shape :func:`mcflops.sensitivity.analyze` gives) and, for any
other shape, readable tables of whatever is there.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from mcflops.numbers import format_number
from mcflops.report.blocks import _SENS, B, C, P, Section, Sub, Table, _fig_blocks, _figs, fmt, interval, label, missing, num
from mcflops.report.planning import FIGURE as PLAN_FIGURE

# ---- drivers -------------------------------------------------------------------------------


def _cell(v: Any) -> str:
    if num(v):
        return format_number(float(v), 3)
    if isinstance(v, list) and len(v) <= 8 and all(num(x) for x in v):
        return ", ".join(format_number(float(x), 3) for x in v)
    if isinstance(v, (list, Mapping)):
        t = json.dumps(v, default=str)
        return t if len(t) <= 80 else t[:77] + "..."
    return "" if v is None else str(v)


def data_blocks(obj: Any, title: str, depth: int = 0) -> list:
    """Readable tables for plain data of unknown shape (rows of records, columns of lists, scalars)."""
    if isinstance(obj, list) and obj and all(isinstance(r, Mapping) for r in obj):
        cols = list(dict.fromkeys(k for r in obj for k in r))
        return [Table(cols, [[_cell(r.get(c)) for c in cols] for r in obj], caption=title if depth else None)]
    if not isinstance(obj, Mapping) or not obj:
        return [P([f"{title}: {_cell(obj)}"])]
    vals = list(obj.values())
    if all(isinstance(v, Mapping) and v and all(not isinstance(x, (Mapping, list)) for x in v.values()) for v in vals):
        cols = list(dict.fromkeys(k for v in vals for k in v))
        return [Table(["", *cols], [[label(str(k)), *(_cell(v.get(c)) for c in cols)] for k, v in obj.items()],
                      num=frozenset(range(1, len(cols) + 1)), caption=title if depth else None)]
    lists = [v for v in vals if isinstance(v, list)]
    if lists and len(lists) == len(vals) and len({len(v) for v in lists}) == 1 and len(lists[0]) <= 40:
        cols = list(obj)
        return [Table(cols, [[_cell(obj[c][i]) for c in cols] for i in range(len(lists[0]))],
                      num=frozenset(range(len(cols))), caption=title if depth else None)]
    if all(not isinstance(v, (Mapping, list)) for v in vals):
        return [Table(["", "value"], [[label(str(k)), _cell(v)] for k, v in obj.items()], num=frozenset({1}),
                      caption=title if depth else None)]
    if depth >= 2:
        return [P([f"{title}: ", C(_cell(obj))])]
    out: list = []
    for k, v in obj.items():
        out += data_blocks(v, f"{title}: {k}", depth + 1)
    return out


def drivers(run) -> Section:
    sec = Section("drivers", "What drives it")
    sens = run.summary.get("sensitivity")
    figs = [n for n in _figs(run, _SENS) if n != PLAN_FIGURE]  # the plan curve: the planning section's
    if not isinstance(sens, Mapping) or not sens:
        sec.blocks.append(missing("no sensitivity analysis in summary.json"))
        sec.blocks += _fig_blocks(run, figs)
        return sec
    out = str(sens.get("output") or "gpu_hours")
    shown: set[str] = set()

    def figures(word: str) -> list:
        mine = [n for n in figs if word in n.lower() and n not in shown]
        shown.update(mine)
        return _fig_blocks(run, mine)

    sec.blocks.append(Sub("Tornado"))
    tor = sens.get("tornado")
    bars = tor.get("inputs") if isinstance(tor, Mapping) else None
    if isinstance(bars, list) and bars and all(isinstance(b, Mapping) and num(b.get("at_p5")) and
                                               num(b.get("at_p95")) for b in bars):
        sec.blocks += _tornado(out, tor, bars)
    elif tor:
        sec.blocks += data_blocks(tor, "Tornado")
    else:
        sec.blocks.append(missing("no tornado in summary.json"))
    sec.blocks += figures("tornado")

    sec.blocks.append(Sub("Sobol indices"))
    info = sens.get("sobol_info") if isinstance(sens.get("sobol_info"), Mapping) else {}
    found = False
    for key, scale in (("sobol", f"log {label(out)}"), ("sobol_linear", label(out))):
        for path, recs in _sobol_records(sens.get(key)):
            sec.blocks += _sobol_table(run, " / ".join((scale, *path)), recs, info)
            found = True
    if not found:
        why = "; ".join(str(n) for n in sens.get("notes") or () if "sobol" in str(n).lower() or "correlat" in str(n))
        sec.blocks.append(missing(f"no Sobol indices in summary.json{': ' + why if why else ''}"))
    sec.blocks += figures("sobol")
    sec.blocks += _shapley(out, sens)
    corr = sens.get("correlations")
    if isinstance(corr, Mapping) and any(isinstance(v, Mapping) for v in corr.values()):
        sec.blocks += _correlations(out, corr)

    sec.blocks.append(Sub("Sweeps"))
    sweeps = sens.get("sweeps")
    if isinstance(sweeps, Mapping) and sweeps:
        for name, sw in sweeps.items():
            ok = isinstance(sw, Mapping) and isinstance(sw.get("values"), list) and isinstance(sw.get("p50"), list)
            sec.blocks += _sweep(str(name), str(sw.get("output", out)), sw) if ok else data_blocks(sw, f"Sweep {name}")
    else:
        sec.blocks.append(missing("no sweep (add ", C("sensitivity: {sweep: {mfu: [0.30, 0.45]}}"),
                                  " to the prior file)"))
    sec.blocks += figures("sweep") + figures("fan")
    for note in sens.get("notes") or ():
        sec.blocks.append(P([f"Note: {note}"], "note"))
    sec.blocks += _fig_blocks(run, [n for n in figs if n not in shown])
    return sec


def _tornado(out: str, tor: Mapping, bars: list) -> list:
    base = tor.get("base")
    top = bars[0]
    inp = str(top.get("input"))
    lead = [B(label(inp)), f" moves {label(out)} most: {fmt(out, top['at_p5'])} with {label(inp)} at its p5 "
            f"({fmt(inp, top.get('input_p5'))}), {fmt(out, top['at_p95'])} at its p95 ({fmt(inp, top.get('input_p95'))})"]
    if num(base):
        lead.append(f", a swing of {100 * abs(top['at_p95'] - top['at_p5']) / base:.0f}% of the "
                    f"{fmt(out, base)} with every input at its median.")
    rows = [[label(str(b.get("input"))), f"{fmt(str(b.get('input')), b.get('input_p5'))} → {fmt(out, b['at_p5'])}",
             f"{fmt(str(b.get('input')), b.get('input_p95'))} → {fmt(out, b['at_p95'])}",
             f"{100 * abs(b['at_p95'] - b['at_p5']) / base:.1f}%" if num(base) else "n/a"] for b in bars]
    others = "at their medians given it (the prior's correlations)" if tor.get("conditional") else "at their medians"
    return [P(lead), Table(["input", f"at its p5 → {label(out)}", f"at its p95 → {label(out)}", "swing"], rows,
                           num=frozenset({1, 2, 3}), caption=f"Each uncertain input at its p5 and p95, the others "
                           f"{others}; sorted by swing (% of the all-medians value).")]


def _shapley(out: str, sens: Mapping) -> list:
    """Shapley effects (Owen 2014): each input's share of the output's variance, defined with correlated
    inputs too (where Sobol indices are not); they add up to 1."""
    info = sens.get("shapley_info") if isinstance(sens.get("shapley_info"), Mapping) else {}
    blocks: list = []
    for key, scale in (("shapley", f"log {label(out)}"), ("shapley_linear", label(out))):
        recs = sens.get(key)
        if not isinstance(recs, Mapping):
            continue
        recs = {k: v for k, v in recs.items() if isinstance(v, Mapping) and num(v.get("effect"))}
        if not recs:
            continue
        order = sorted(recs, key=lambda k: -recs[k]["effect"])
        rows = [[label(k), f"{recs[k]['effect']:.3f}" + (f" ± {recs[k]['se']:.3f}" if num(recs[k].get("se")) else "")]
                for k in order]
        if not blocks:
            blocks.append(Sub("Shapley effects"))
            corr = " (the inputs are correlated: these shares account for it)" if info.get("correlated") else ""
            blocks.append(P([B(label(order[0])), f" carries the largest share of the variance of {scale}: "
                             f"{recs[order[0]]['effect']:.2f}{corr}. Shapley effects split the variance among the "
                             "inputs, interactions and dependence shared fairly, and add up to 1."]))
        first = len(blocks) == 2  # the estimator is named under the first table only
        blocks.append(Table(["input", "Shapley effect (± s.e.)"], rows, num=frozenset({1}),
                            caption=f"Shapley effects of {scale}" + (f" ({info['estimator']})" if first and
                                                                     info.get("estimator") else "") + "."))
    return blocks


def _correlations(out: str, corr: Mapping) -> list:
    cols, data = [], {}
    for which, block in corr.items():
        if not isinstance(block, Mapping):
            continue
        for kind, name in (("pearson_log", "Pearson (logs)"), ("spearman", "Spearman (ranks)")):
            if isinstance(block.get(kind), Mapping):
                cols.append(f"{which}: {name}")
                for inp, v in block[kind].items():
                    data.setdefault(inp, {})[cols[-1]] = v
    if not cols:
        return []
    rows = [[label(k), *(f"{v[c]:+.2f}" if num(v.get(c)) else "n/a" for c in cols)] for k, v in data.items()]
    return [Table(["input", *cols], rows, num=frozenset(range(1, len(cols) + 1)),
                  caption=f"Correlation of each input with {label(out)} (meaningful with correlated inputs, where "
                  "Sobol indices are not).")]


def _sweep(name: str, out: str, sw: Mapping) -> list:
    vals, p50 = sw["values"], sw["p50"]
    p5, p95 = sw.get("p5") or [None] * len(vals), sw.get("p95") or [None] * len(vals)
    if not vals or len(p50) != len(vals):
        return data_blocks(dict(sw), f"Sweep {name}")
    text = [f"With {label(name)} fixed at {fmt(name, vals[0])}, the median {label(out)} is ",
            B(fmt(out, p50[0])), f" (90%: {interval(out, p5[0], p95[0])}); at {fmt(name, vals[-1])} it is ",
            B(fmt(out, p50[-1])), f" (90%: {interval(out, p5[-1], p95[-1])})"]
    if num(p50[0]) and num(p50[-1]) and p50[-1]:
        text.append(f", a factor of {p50[0] / p50[-1]:.2f}. The other inputs are sampled from their priors.")
    rows = [[fmt(name, v), fmt(out, b), fmt(out, a), fmt(out, c)] for v, a, b, c in zip(vals, p50, p5, p95)]
    return [P(text), Table([label(name), "p5", "median", "p95"], rows, num=frozenset({0, 1, 2, 3}),
                           caption=f"{label(out)} along the sweep of {label(name)}.")]


def _sobol_records(obj: Any, path: tuple = (), depth: int = 0):
    """(path, {input: {first, total, ...}}) of every Sobol table inside ``obj``."""
    if not isinstance(obj, Mapping) or depth > 3:
        return
    recs = {k: v for k, v in obj.items() if isinstance(v, Mapping) and num(v.get("first")) and num(v.get("total"))}
    if recs:
        yield path, recs
        return
    for k, v in obj.items():
        yield from _sobol_records(v, (*path, str(k)), depth + 1)


def _sobol_table(run, where: str, recs: Mapping, info: Mapping) -> list:
    order = sorted(recs, key=lambda k: -recs[k]["total"])

    def pm(r: Mapping, k: str) -> str:
        se = r.get(f"{k}_se")
        return f"{r[k]:.3f} ± {se:.3f}" if num(se) else f"{r[k]:.3f}"

    top = recs[order[0]]
    first_sum = sum(r["first"] for r in recs.values())
    out = [P([f"{where}: ", B(label(order[0])), f" explains the most: first-order index {top['first']:.2f}, "
              f"total {top['total']:.2f} (1 = all of the variance). The first-order indices add up to "
              f"{first_sum:.2f}" + (": the output is close to additive in these inputs." if abs(first_sum - 1) < 0.05
                                    else ": interactions carry the rest.")]),
           Table(["input", "first-order (± s.e.)", "total (± s.e.)"], [[label(k), pm(recs[k], "first"),
                 pm(recs[k], "total")] for k in order], num=frozenset({1, 2}),
                 caption=f"Sobol indices of {where}" + (f" ({info['estimators']}; {info.get('base_samples', '?')} "
                                                        "base draws)" if info.get("estimators") else "") + ".")]
    if "posterior" in where.lower() or (run.spec is not None and run.spec.correlations):
        out.append(P(["Caution: Sobol indices assume independent inputs; these inputs are correlated "
                      "(a copula, or the posterior's MFU-goodput ridge), so read the indices as rough."], "note"))
    return out
