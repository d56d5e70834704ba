"""`mcflops calibrate --layout --pilot-holdout`: the pilot validated on scaling series held out of the layout fit
(mcflops.layoutfit.pilots): each series refitted out, its smallest-scale row taken as the pilot, the others
predicted; printed as a table or --json, with --out DIR written to DIR/layout_pilot_validation.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcflops.cli.session import primary, setup_jax, write_json

FILE = "layout_pilot_validation.json"


def command(args, phases) -> int:
    from mcflops.layoutfit import holdout as lh
    from mcflops.layoutfit import pilots
    from mcflops.layoutfit.validate import to_json

    setup_jax()
    with phases(args.quiet or args.json) as phase:
        data = to_json(pilots.validate(args.seed, lh.settings_for(args.chains, args.draws), phase=phase))
    if not primary():
        return 0
    if args.out:
        data["out"] = write_json(Path(args.out), FILE, data)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        show(data)
    return 0


def _q(r: dict[str, Any]) -> str:
    return f"{r['p50']:.3f} [{r['p5']:.3f}, {r['p95']:.3f}]"


def _t(q) -> dict[str, float]:
    """(p5, p50, p95) as the mapping _q reads."""
    return dict(zip(("p5", "p50", "p95"), q))


def show(data: dict[str, Any]) -> None:
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console() if sys.stdout.isatty() else Console(width=160)
    st = data["settings"]
    bad = [s["series"] for s in data["series"] if (s.get("r_hat_max") or 0) > 1.1]
    if bad:
        con.print(f"[yellow]{len(bad)} of {len(data['series'])} refits did not converge (R-hat > 1.1) at this "
                  f"budget[/yellow]: {escape(', '.join(bad))}")
    t = Table(title=f"The pilot on held-out scaling series (refit without each: NUTS {st['chains']} x {st['draws']} "
                    f"draws, tree depth {st['max_tree_depth']}; pilot sigma {st['sigma']:g}): measured MFU (true "
                    "model FLOPs) vs predicted", title_justify="left", header_style="bold")
    for c in ("series / row", "GPUs", "measured", "given the pilot [90%]", "layout prior alone [90%]", "in 90%"):
        t.add_column(c, justify="left" if c == "series / row" else "right")
    for s in data["series"]:
        p = s["pilot"]
        t.add_row(f"[bold]{escape(s['series'])}[/bold] pilot {escape(p['id'])}", f"{p['count']:,}", f"{p['y']:.3f}",
                  _q(_t(p["predicted_posterior"])), _q(_t(p["predicted_prior"])), "")
        for r in s["rows"]:
            t.add_row(f"  {escape(r['id'])}", f"{r['count']:,}", f"{r['y']:.3f}", _q(r),
                      _q(_t(r["prior"])), "yes" if r["p5"] <= r["y"] <= r["p95"] else "no")
    con.print(t)
    s = Table(title="Scores over the predicted rows (the pilot's own row excluded)", title_justify="left",
              header_style="bold")
    for c in ("series", "rows", "90% cov.", "med. |log err|", "p95/p5 at production", "prior: cov., |log err|",
              "pilot's MFU kept: |log err|", "ESS", "R-hat"):
        s.add_column(c, justify="left" if c == "series" else "right", overflow="fold")
    pools = [dict(data["pooled"], series="pooled")]
    if "pooled_one_model" in data:
        pools.append(dict(data["pooled_one_model"], series="pooled, one model at every count"))
    stated = [dict(x["stack_stated"], series=f"{x['series']}, stack {x['stack_stated']['stack']} stated")
              for x in data["series"] if x.get("stack_stated")]
    if "pooled_stack_stated" in data:
        stated.append(dict(data["pooled_stack_stated"], series="pooled, one model at every count, stack stated"))
    if "pooled_two_pilots" in data:  # a second pilot at the next count, and the first alone on the same rows
        two = data["pooled_two_pilots"]
        stated += [dict(two, series="two pilots (the two smallest counts), one model at every count"),
                   dict(two["one_pilot_same_rows"], series="  the first pilot alone, on the same rows")]
    for x in data["series"] + pools + stated:
        m, pr = x["model"], x["prior"]
        rh = x.get("r_hat_max")
        s.add_row(escape(x["series"]), str(m["rows"]), f"{m['coverage_90']:.2f}", f"{m['median_abs_log_error']:.3f}",
                  f"{x['production_p95_over_p5']:.2f}", f"{pr['coverage_90']:.2f}, {pr['median_abs_log_error']:.3f}",
                  f"{x['constant_median_abs_log_error']:.3f}", f"{x['ess']:,.0f}" if "ess" in x else "",
                  "" if rh is None else f"{rh:.2f}")
    con.print(s)
    tg = data["targets"]
    for label, key in (("pooled", "met"), ("pooled, one model at every count (what a pilot: block states)",
                                           "met_one_model"), ("the same, the stack stated", "met_stack_stated"),
                       ("two pilots, one model at every count", "met_two_pilots")):
        if key in data:
            met = data[key]
            con.print(f"  targets ({label}; production p95/p5 is the median over the series): " + "; ".join(
                f"{k} {'<=' if k != 'coverage_90' else '>='} {tg[k]} "
                f"{'[green]met[/green]' if met[k] else '[red]missed[/red]'}"
                for k in ("median_abs_log_error", "coverage_90", "production_p95_over_p5")))
    if "out" in data:
        con.print(f"[dim]wrote {data['out']}[/dim]")
