"""The comparison report's scenarios section: one table (a row per scenario: GPU-hours, days, cost, energy,
each median over its 90% interval, with its per-draw ratio to A; the deadline's accelerators and P(done by
it)), then the figure of every scenario on one axis. Computation-free: compare.json's ``scenarios``."""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.report.blocks import B, Fig, P, Section, Table, fmt, interval, label, num


def _q(name: str, s: Mapping[str, Any] | None) -> str:
    return "n/a" if not s else f"{fmt(name, s.get('p50'))} ({interval(name, s.get('p5'), s.get('p95'))})"


def _r(r: Mapping[str, Any] | None) -> str:
    if not r or not num(r.get("p50")):
        return "n/a"
    if r.get("min") == r.get("max"):
        return f"×{r['p50']:.4g} every draw"
    return f"×{r['p50']:.3g} ({r['p5']:.3g}–{r['p95']:.3g}), P(<1) {r['prob_less']:.3f}"


def section(d: Mapping[str, Any], png: bytes | None, figure: str, title: str | None = None) -> Section:
    sc = d["scenarios"]
    rows, qs, dl = sc["table"], sc["quantities"], sc.get("deadline")
    n = 2 if "ratio" in d else 1
    sec = Section("scenarios", title or f"{n}. Scenarios side by side")
    sec.blocks.append(P([f"Each scenario's median and 90% interval; under it, the ratio to A ({rows[0]['name']}) "
                         "draw by draw: its median, its 90% interval and ", B("P(<1)"), ", the probability the "
                         "scenario needs less than A. Inputs with the same prior share their draws (common random "
                         "numbers), so a ratio moves only with what differs."]))
    header = ["", *(f"{e['tag']}: {e['name']}" for e in rows)]
    body = []
    for q in qs:
        body.append([label(q), *(_q(q, e.get(q)) for e in rows)])
        body.append([f"{label(q)} / A", "–", *(_r((e.get("ratio") or {}).get(q)) for e in rows[1:])])
    if dl:
        body.append([f"accelerators for {dl['days']:g} days at {dl['prob']:g}", *(_gpus(e.get("deadline")) for e in rows)])
        body.append([f"P(done in {dl['days']:g} days)", *(_done(e.get("deadline")) for e in rows)])
    sec.blocks.append(Table(header, body, num=frozenset(range(1, len(header))), stack=True,
                            caption="Ratios are quantiles of the ratio draw by draw, not ratios of the quantiles."))
    if png is not None:
        sec.blocks.append(Fig(figure, png, f"Every scenario's {label(sc['hist']['quantity'])} on one log axis "
                              f"({figure})"))
    return sec


def _gpus(x: Mapping[str, Any] | None) -> str:
    if not x:
        return "n/a"
    if x.get("gpus") is None:
        return "out of reach"
    if x.get("need_p5") is None:
        return f"{x['gpus']:,} ({x.get('method', '')})"
    return f"{x['gpus']:,} (need {x['need_p5']:,}–{x['need_p95']:,})"


def _done(x: Mapping[str, Any] | None) -> str:
    if not x or not num(x.get("prob_done")):
        return "n/a"
    return f"{x['prob_done']:.3f} on {x['gpus_count']:,}"
