"""`mcflops compare`'s side-by-side table: one column per scenario, one row per quantity (its median over its
90% interval), each followed by the per-draw ratio to A and P(ratio < 1); then the deadline's accelerators and
P(done by it)."""

from __future__ import annotations

from typing import Any

from mcflops.cli.tables import Fitted, table
from mcflops.numbers import format_number

LABELS = {"gpu_hours": "GPU-hours", "wall_days": "days", "cost": "cost (USD)", "energy_mwh": "energy (MWh)"}


def _q(x: Any) -> str:
    return format_number(x, 3) if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


def _cell(s: dict[str, Any] | None) -> str:
    """Median over its 90% interval."""
    if not s:
        return "n/a"
    return f"{_q(s['p50'])}\n[dim]{_q(s['p5'])}–{_q(s['p95'])}[/dim]"


def _ratio(r: dict[str, Any] | None) -> str:
    if not r:
        return "n/a"
    if r["min"] == r["max"]:
        return f"×{r['p50']:.4g}\n[dim]every draw[/dim]"
    return f"×{r['p50']:.3g}\n[dim]{r['p5']:.3g}–{r['p95']:.3g}[/dim]"


def show_scenarios(con, d: dict[str, Any], which: str = "priors", header: bool = True) -> None:
    """The table of ``d["scenarios"]`` (analysis.scenarios), fitted to the terminal."""
    from rich.markup import escape

    sc = d["scenarios"]
    rows = sc["table"]
    if header:
        con.print(f"[bold]compare[/bold] {len(rows)} scenarios, each against A = {escape(rows[0]['name'])}  "
                  f"[dim](seed {d['seed']}, {d['samples']:,} draws, the {which})[/dim]\n")
    cols = [f"{e['tag']} {e['name']}" for e in rows]
    t = table("scenarios side by side: median, 90% interval below; ratios to A draw by draw", ["", *map(escape, cols)])
    for q in sc["quantities"]:
        t.add_row(LABELS.get(q, q), *(_cell(e.get(q)) for e in rows))
        t.add_row(f"  {LABELS.get(q, q)} / A", "–", *(_ratio((e.get("ratio") or {}).get(q)) for e in rows[1:]))
        t.add_row("  P(< A)", "–", *(_p(e, q) for e in rows[1:]))
    dl = sc.get("deadline")
    if dl:
        t.add_row(f"accelerators for {dl['days']:g} days at {dl['prob']:g}", *(_gpus(e["deadline"]) for e in rows))
        t.add_row(f"P(done in {dl['days']:g} days)", *(_done(e["deadline"]) for e in rows))
    con.print(Fitted(t, ()))
    for e in rows:
        con.print(f"  [dim]{e['tag']} = {escape(str(e['path']))} ({escape(str(e['accelerator']))} x "
                  f"{e['count']:,})[/dim]" if e.get("count") else f"  [dim]{e['tag']} = {escape(str(e['path']))}[/dim]")


def _p(e: dict[str, Any], q: str) -> str:
    r = (e.get("ratio") or {}).get(q)
    return "n/a" if not r else f"{r['prob_less']:.3f}"


def _gpus(dl: dict[str, Any]) -> str:
    if dl.get("gpus") is None:
        return "out of reach"
    if dl.get("need_p5") is None:
        return f"{dl['gpus']:,}\n[dim]median need {dl['need_p50']:,}[/dim]" if dl.get("need_p50") else f"{dl['gpus']:,}"
    return f"{dl['gpus']:,}\n[dim]need {dl['need_p5']:,}–{dl['need_p95']:,}[/dim]"


def _done(dl: dict[str, Any]) -> str:
    if dl.get("prob_done") is None:
        return "n/a"
    return f"{dl['prob_done']:.3f}\n[dim]on {dl['gpus_count']:,}[/dim]"


def show_draws(con, d: dict[str, Any]) -> None:
    """How each scenario draws each uncertain input against A, one line per scenario."""
    from rich.markup import escape

    sc = d["scenarios"]
    for k, tag in enumerate(sc["tags"][1:], start=1):
        parts: dict[str, list[str]] = {}
        for row in sc["inputs"]:
            how = row["draws"][k]
            if how in (None, "fixed"):
                continue
            word = f"{row['name']}" + (f" (as {row['with'][k]})" if row["with"][k] else "")
            if how == "coupled":
                word += f" ({row['spearman'][k]:g})"
            parts.setdefault(how, []).append(word)
        text = "; ".join(f"{how} {', '.join(v)}" for how, v in parts.items()) or "nothing uncertain"
        con.print(f"  {tag}'s draws against A: {escape(text)}")
