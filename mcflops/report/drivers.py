"""The report's section on what drives the estimate: tornado, Sobol indices, Shapley effects, correlations, sweeps.

Renders summary.json's "sensitivity" (the shape :func:`mcflops.sensitivity.analyze` gives) and, for any
other shape, readable tables of whatever is there.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from mcflops.numbers import format_number
from mcflops.report.blocks import _SENS, B, C, P, Section, Sub, Table, _fig_blocks, _figs, fmt, interval, label, missing, num
from mcflops.report.appendix import _sobol_records
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
    """The tornado and each input's share of the variance in one table, the tornado figure, the sweeps; the
    other variance tables (Sobol and Shapley, log and linear; correlations) are the appendix's."""
    sec = Section("drivers", "What drives it")
    sens = run.summary.get("sensitivity")
    figs = [n for n in _figs(run, _SENS) if n != PLAN_FIGURE and "sobol" not in n.lower()]  # sobol: the appendix's
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

    tor = sens.get("tornado")
    bars = tor.get("inputs") if isinstance(tor, Mapping) else None
    standard = isinstance(bars, list) and bars and all(isinstance(b, Mapping) and num(b.get("at_p5")) and
                                                       num(b.get("at_p95")) for b in bars)
    share = shares(sens)
    if standard:
        sec.blocks += _tornado(out, tor, bars, share)
    elif tor:
        sec.blocks += data_blocks(tor, "Tornado")
    else:
        sec.blocks.append(missing("no tornado in summary.json"))
    if share is None:
        why = "; ".join(str(n) for n in sens.get("notes") or () if "sobol" in str(n).lower() or "correlat" in str(n))
        sec.blocks.append(missing(f"no variance shares in summary.json{': ' + why if why else ''}"))
    elif not standard:
        sec.blocks.append(share_table(out, share))
    sec.blocks += figures("tornado")
    sweeps = sens.get("sweeps")
    if isinstance(sweeps, Mapping) and sweeps:
        sec.blocks.append(Sub("Sweeps"))
        for name, sw in sweeps.items():
            ok = isinstance(sw, Mapping) and isinstance(sw.get("values"), list) and isinstance(sw.get("p50"), list)
            sec.blocks += _sweep(str(name), str(sw.get("output", out)), sw) if ok else data_blocks(sw, f"Sweep {name}")
    else:
        sec.blocks.append(P(["No sweep: ", C("sensitivity: {sweep: {mfu: [0.30, 0.45]}}"), " in the prior file "
                             "adds one (the output along a grid of one input)."], "missing"))
    sec.blocks += figures("sweep") + figures("fan")
    sec.blocks += _fig_blocks(run, [n for n in figs if n not in shown])
    return sec


def shares(sens: Mapping) -> dict[str, Any] | None:
    """Each input's share of the variance of the log output: its Shapley effect (defined with correlated inputs
    too, and adding up to 1; Owen 2014), else its first-order Sobol index (Saltelli 2010); {"kind", "by":
    {input: share}}, each share clipped to [0, 1] (an estimate can stray past either end by its error)."""
    for key, kind, field in (("shapley", "Shapley effect", "effect"), ("sobol", "first-order Sobol index", "first")):
        recs = sens.get(key)
        if key == "sobol":  # the first table of indices, however deep summary.json nests it
            recs = next((r for _, r in _sobol_records(recs)), None)
        if not isinstance(recs, Mapping):
            continue
        by = {str(k): min(max(float(v[field]), 0.0), 1.0) for k, v in recs.items()
              if isinstance(v, Mapping) and num(v.get(field))}
        if by:
            return {"kind": kind, "by": by}
    return None


def _share_cell(share: Mapping | None, name: str) -> str:
    if share is None or name not in share["by"]:
        return "n/a"
    if len(share["by"]) == 1:
        return "all (the only uncertain input)"
    return f"{100 * share['by'][name]:.0f}%"


def share_table(out: str, share: Mapping) -> Table:
    order = sorted(share["by"], key=lambda k: -share["by"][k])
    return Table(["input", f"share of the variance of log {label(out)}"],
                 [[label(k), _share_cell(share, k)] for k in order], num=frozenset({1}),
                 caption=_share_caption(out, share))


def _share_caption(out: str, share: Mapping) -> str:
    return (f"Share: each input's {share['kind']} for log {label(out)} under the priors, clipped to 0-100% (the "
            "shares add up to at most 100%; the rest is interactions). The other variance tables are in the "
            "appendix.")


def _tornado(out: str, tor: Mapping, bars: list, share: Mapping | None = None) -> list:
    base = tor.get("base")
    top = bars[0]
    inp = str(top.get("input"))
    lead = [B(label(inp)), f" moves {label(out)} most: {fmt(out, top['at_p5'])} with {label(inp)} at its p5 "
            f"({fmt(inp, top.get('input_p5'))}), {fmt(out, top['at_p95'])} at its p95 ({fmt(inp, top.get('input_p95'))})"]
    if num(base):
        lead.append(f", a swing of {100 * abs(top['at_p95'] - top['at_p5']) / base:.0f}% of the "
                    f"{fmt(out, base)} with every input at its median.")
    if share is not None and inp in share["by"]:
        lead.append(f" It carries {_share_cell(share, inp)} of the variance of log {label(out)}."
                    if len(share["by"]) > 1 else " It is the only uncertain input.")
    rows = [[label(str(b.get("input"))), f"{fmt(str(b.get('input')), b.get('input_p5'))} → {fmt(out, b['at_p5'])}",
             f"{fmt(str(b.get('input')), b.get('input_p95'))} → {fmt(out, b['at_p95'])}",
             f"{100 * abs(b['at_p95'] - b['at_p5']) / base:.1f}%" if num(base) else "n/a"] for b in bars]
    header = ["input", f"at its p5 → {label(out)}", f"at its p95 → {label(out)}", "swing"]
    others = "at their medians given it (the prior's correlations)" if tor.get("conditional") else "at their medians"
    caption = (f"Each uncertain input at its p5 and p95, the others {others}; sorted by swing (% of the "
               "all-medians value).")
    if share is not None:
        header.append("share of the variance")
        for row, b in zip(rows, bars):
            row.append(_share_cell(share, str(b.get("input"))))
        caption += " " + _share_caption(out, share)
    return [P(lead), Table(header, rows, num=frozenset(range(1, len(header))), caption=caption)]


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
