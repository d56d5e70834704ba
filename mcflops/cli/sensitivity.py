"""`mcflops sensitivity`: what moves the estimate (tornado, Sobol and Shapley indices, correlations,
sweeps) through analysis.sensitivity, printed as tables or --json; with --out, sensitivity.json and
the figures. Also the two lines `mcflops run` prints of the same analysis (``brief_lines``)."""

from __future__ import annotations

from typing import Any

from mcflops.output import figures
from mcflops.cli.session import analysis_command, plain
from mcflops.cli.tables import QUARTILES, Fitted, table, unpadded
from mcflops.numbers import format_number as fmt


def command(args) -> int:
    return analysis_command(args, compute, "sensitivity.json", figures.sensitivity, show_sensitivity)


def compute(args, progress) -> dict[str, Any]:
    from mcflops import api
    from mcflops.spec import load_spec, sensitivity_options

    spec = load_spec(args.file)
    opts = sensitivity_options(spec, output=args.output, sweeps=args.sweep, points=args.points,
                               sobol_samples=args.sobol_samples)
    res = api.run(spec, samples=args.samples, seed=args.seed, progress=progress, sensitivity=opts)
    data = {"name": spec.name, "seed": res.seed, "samples": res.samples, **res.sensitivity}
    return plain(data)


def show_sensitivity(con, d: dict[str, Any]) -> None:
    out = d["output"]
    t = d["tornado"]
    con.print(f"[bold]{d.get('name', '')}[/bold]  sensitivity of {out}  [dim](seed {d.get('seed')})[/dim]\n")
    others = "the others at their medians given it" if t.get("conditional") else "the others at their medians"
    tt = table(f"Tornado: {out} with one input at its p5 / p95, {others} "
               f"(all at medians: {fmt(t['base'])})", ["input", "input p5", "input p95", f"{out} at p5",
                                                        f"{out} at p95", "swing"])
    for b in t["inputs"]:
        tt.add_row(b["input"], fmt(b["input_p5"]), fmt(b["input_p95"]), fmt(b["at_p5"]), fmt(b["at_p95"]),
                   f"{100 * b['swing_rel']:.1f}%")
    con.print(Fitted(tt, ("input p5", "input p95")))  # narrow: the output's ends and the swing stay
    if d.get("unused"):
        con.print(f"  [dim]{', '.join(d['unused'])} do not enter {out}[/dim]")
    if d.get("sobol"):
        info = d.get("sobol_info", {})
        st = table(f"Sobol indices ({info.get('base_samples', 0):,} base draws; ± one standard error)",
                   ["input", f"first (log {out})", f"total (log {out})", f"first ({out})", f"total ({out})"])
        lin = d.get("sobol_linear", {})
        for n, s in sorted(d["sobol"].items(), key=lambda kv: -kv[1]["total"]):
            row = [f"{s['first']:.3f} ± {s['first_se']:.3f}", f"{s['total']:.3f} ± {s['total_se']:.3f}"]
            if n in lin:
                row += [f"{lin[n]['first']:.3f} ± {lin[n]['first_se']:.3f}",
                        f"{lin[n]['total']:.3f} ± {lin[n]['total_se']:.3f}"]
            st.add_row(n, *row)
        con.print(Fitted(st, (f"first ({out})", f"total ({out})", f"first (log {out})")))  # the log total stays
    line = shapley_line(d)
    if line:
        con.print(line)
    corr = d.get("correlations") or {}
    if corr.get("prior"):
        cols = ["input", "prior Pearson (logs)", "prior Spearman"]
        post = corr.get("posterior")
        if post:
            cols += ["posterior Pearson (logs)", "posterior Spearman"]
        ct = table(f"Correlation of each input with {out}", cols)
        for n, r in corr["prior"]["pearson_log"].items():
            row = [f"{r:+.3f}", f"{corr['prior'].get('spearman', {}).get(n, float('nan')):+.3f}"]
            if post:
                row += [f"{post['pearson_log'].get(n, float('nan')):+.3f}",
                        f"{post.get('spearman', {}).get(n, float('nan')):+.3f}"]
            ct.add_row(n, *row)
        con.print(Fitted(ct, ("prior Spearman", "posterior Spearman")))
    for name, sw in (d.get("sweeps") or {}).items():
        given = ", drawn given each value" if sw.get("conditional") else ""
        wt = table(f"Sweep of {name} ({sw['samples']:,} draws of the other inputs{given}, the same at every value)",
                   [name, "p5", "p25", "p50", "p75", "p95", "p50 vs first"])
        for i, v in enumerate(sw["values"]):
            wt.add_row(unpadded(v), *(fmt(sw[k][i]) for k in ("p5", "p25", "p50", "p75", "p95")),
                       f"x{sw['p50_vs_first'][i]:.4g}")
        con.print(Fitted(wt, (*QUARTILES, "p50 vs first")))
        r = sw["p50_vs_first"][-1]
        con.print(f"  {name} {unpadded(sw['values'][0])} -> {unpadded(sw['values'][-1])}: median {out} "
                  f"{fmt(sw['p50'][0])} -> {fmt(sw['p50'][-1])} ({'+' if r >= 1 else ''}{100 * (r - 1):.1f}%)")
    for name, sw in (d.get("layout_sweeps") or {}).items():
        for which in ("prior", "posterior"):
            part = sw.get(which)
            if not part:
                continue
            wt = table(f"Layout sweep of {name} ({which}, {part['draws']:,} kept draws, each at its MFU quantile)",
                       [name, "MFU p50", "p5", "p25", "p50", "p75", "p95", "p50 vs first"])
            for i, v in enumerate(sw["values"]):
                wt.add_row(str(v), f"{part['mfu']['p50'][i]:.3f}",
                           *(fmt(part[k][i]) for k in ("p5", "p25", "p50", "p75", "p95")),
                           f"x{part['p50_vs_first'][i]:.4g}")
            con.print(Fitted(wt, (*QUARTILES, "p50 vs first")))
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {note}")


def brief_lines(sens: dict[str, Any] | None) -> list[str]:
    """Two lines for `mcflops run`'s terminal output: what moves the output most (tornado; Sobol, or Shapley
    effects when correlations withhold Sobol)."""
    if not sens or not sens.get("tornado", {}).get("inputs"):
        return []
    out = sens["output"]
    bars = sens["tornado"]["inputs"][:4]
    others = "others at their medians given it" if sens["tornado"].get("conditional") else "others at medians"
    lines = [f"What moves {out} (one input at its p5 / p95, {others}): " + ", ".join(
        f"{b['input']} {fmt(min(b['at_p5'], b['at_p95']))}-{fmt(max(b['at_p5'], b['at_p95']))}" for b in bars)]
    sob = sens.get("sobol")
    if sob:
        top = sorted(sob.items(), key=lambda kv: -kv[1]["first"])[:4]
        lines.append(f"Share of the variance of log {out} (Sobol first-order): "
                     + ", ".join(f"{n} {s['first']:.2f}" for n, s in top))
    elif sens.get("shapley"):
        lines.append(shapley_line(sens, se=False))
    return lines


def shapley_line(sens: dict[str, Any], se: bool = True) -> str:
    """One line: each input's Shapley effect (share of the variance of the log output; they sum to 1)."""
    sh = sens.get("shapley")
    if not sh:
        return ""
    how = "correlated" if (sens.get("shapley_info") or {}).get("correlated") else "independent"
    items = sorted(sh.items(), key=lambda kv: -kv[1]["effect"])
    return (f"Shapley effects (share of Var log {sens['output']}, {how} inputs): "
            + ", ".join(f"{n} {v['effect']:.3f} ± {v['se']:.3f}" if se else f"{n} {v['effect']:.2f}"
                        for n, v in items))
