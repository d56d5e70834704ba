"""The ladder's report, "MFU in context": Markdown and one self-contained HTML page from a ``ladder --out``
folder, and the same section in a run's report (:func:`context`, from summary.json's ``mfu_context``, shorter).
Computation-free: everything comes from ``ladder.json`` or summary.json (analysis.ladder's result)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Mapping

from mcflops.report.blocks import C, Document, Items, P, Section, Table, fmt, interval, num
from mcflops.report.markup import to_html, to_markdown

DATA = "ladder.json"
TITLE = "MFU in context"


def render(folder: str | Path) -> dict[str, str]:
    """{"report.md": ..., "report.html": ...} for the ladder in ``folder`` (nothing is written)."""
    from mcflops import reading

    folder = Path(folder)
    data = reading.read_json(folder / DATA, str(folder / DATA), kind=f"a {DATA} mcflops wrote",
                             limit=reading.SUMMARY_BYTES, why="a ladder is tens of KB")
    doc = build(data)
    return {"report.md": to_markdown(doc), "report.html": to_html(doc)}


def _q(name: str, s: Mapping[str, Any] | None) -> str:
    if not s or not num(s.get("p50")):
        return "n/a"
    return f"{fmt(name, s['p50'])} ({interval(name, s.get('p5'), s.get('p95'))})"


def _mcse(rows) -> str:
    """The largest Monte Carlo error of a GPU-hours median, in words (a ladder.json before it had none: nothing)."""
    m = [r["gpu_hours_mcse_p50"] for r in rows if num(r.get("gpu_hours_mcse_p50"))]
    return f"; a GPU-hours median's Monte Carlo standard error at most {100 * max(m):.2g}% of it" if m else ""


def _gpus(x: Mapping[str, Any] | None) -> str:
    if not x:
        return "n/a"
    if x.get("gpus") is None:
        return "out of reach"
    return f"{x['gpus']:,} ({x.get('method', '')})"


def _p50(name: str, s: Mapping[str, Any] | None) -> str:
    return fmt(name, s["p50"]) if isinstance(s, Mapping) and num(s.get("p50")) else "n/a"


INTRO = ("The same run under each MFU prior a planner can reach: the file's own, the calibrated prior from published "
         "runs on this accelerator at this size, the layout model's when a layout is given. Everything else shares "
         "its draws (common random numbers), so the rungs differ by their MFU prior only.")


def section(d: Mapping[str, Any], title: str = f"1. {TITLE}", compact: bool = False) -> Section:
    """The rungs side by side, what each rung's prior is, and the notes where they disagree. ``compact`` (a run's
    report): GPU-hours, days and the intervals of MFU only, the quantities a reviewer reads the prior by."""
    rows, dl = d["rungs"], d.get("deadline")
    sec = Section("mfu-context", title)
    cells = ("MFU and MFU x goodput cells are the median and its 90% interval; GPU-hours and days, the median."
             if compact else "Each cell is the median and its 90% interval.")
    sec.blocks.append(P([f"{INTRO} {cells}"]))
    days = f"days on {d['count']:,}" if d.get("count") else "days"
    header = ["rung", "MFU", "MFU x goodput", "GPU-hours", days]
    if dl:
        header.append(f"accelerators for {dl['days']:g} days at {dl['prob']:g}")
    body = []
    q = _p50 if compact else _q
    for r in rows:
        mfu = "in MFU x goodput" if r["kind"] == "calibrated" else _q("mfu", r.get("mfu"))
        line = [f"{r['tag']}: {r['label']}", mfu, _q("mfu", r.get("effective")), q("gpu_hours", r.get("gpu_hours")),
                q("wall_days", r.get("wall_days"))]
        if dl:
            line.append(_gpus(r.get("deadline")))
        body.append(line)
    n_u = rows[0].get("effective_draws") if rows else None
    sec.blocks.append(Table(header, body, num=frozenset(range(1, len(header))), stack=True,
                            caption=f"MFU quantiles are the priors' own (exact); MFU x goodput from the first "
                            f"{n_u:,} draws; GPU-hours and days from every draw ({d.get('samples', 0):,}{_mcse(rows)})."
                            if n_u else None))
    sec.blocks.append(Items([[f"{r['tag']}: {r['prior']}"] for r in rows]))
    notes = d.get("notes") or []
    if notes:
        sec.blocks.append(Items([[n] for n in notes], notes=True))
    return sec


def context(run) -> Section | None:
    """A run's "MFU in context" (summary.json's ``mfu_context``, analysis.context): the ladder's section, shorter,
    with the command that gives the full ladder (and a layout rung); None when the run has none."""
    d = run.summary.get("mfu_context")
    if not isinstance(d, Mapping) or not isinstance(d.get("rungs"), list) or not d["rungs"]:
        return None
    title = TITLE + (" (the priors, before the published figure)" if d.get("observed") else "")
    sec = section(d, title, compact=True)
    more = [P(["The same rungs with their 90% intervals, and a layout model's rung with ", C("--layout tp=8,pp=8"),
               " (the file's own layout, if any, is a rung already): ", C(command(d)), "."])]
    sec.blocks += more
    return sec


def command(d: Mapping[str, Any]) -> str:
    """The command line that repeats this ladder."""
    words = ["mcflops", "ladder", str(d.get("path")), "--seed", str(d.get("seed")), "--samples", str(d.get("samples"))]
    lay = d.get("layout")
    if lay:
        words += ["--layout", ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in lay.items())]
    for p in d.get("pilots") or []:
        measure = next(k for k in ("tflops_per_gpu", "tokens_per_s_per_gpu", "step_time_s") if k in p)
        fields = {"count": p["count"], measure: f"{p[measure]:g}", "sigma": f"{p['sigma']:g}",
                  **({"preset": p["preset"]} if p.get("preset") else {}), **(p.get("layout") or {})}
        words += ["--pilot", ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in fields.items())]
    return shlex.join(words)


def build(d: Mapping[str, Any]) -> Document:
    meta = f"seed {d.get('seed', '?')} · {d.get('samples', 0):,} draws · priors"
    acc = f"{d.get('accelerator')} x {d['count']:,}" if d.get("count") else str(d.get("accelerator"))
    return Document(f"{d.get('name')}: {TITLE}", f"{d.get('path')} ({acc})", meta,
                    [section(d), Section("reproduce", "2. Reproduce",
                                         [P(["Every number here comes again from ", C(command(d)), "."])])])
