"""`mcflops sensitivity | plan | compare`: call the layers, and print readable tables (rich).

``compute`` returns the data (what --json prints) and the figures the CLI may write with --out;
``show`` prints it. Files are written by cli.py only.
"""

from __future__ import annotations

from typing import Any, Callable

from mcflops.numbers import format_number as fmt

Figures = dict[str, Callable[[str], str]]


def _g(x: float) -> str:
    """A number the user gave, without padding zeros: 90 -> '90', 1e7 -> '10M', 0.30 -> '0.3'."""
    import re

    return re.sub(r"\.?0+(?=[KMBT]?$)", "", fmt(x)) if "." in fmt(x) else fmt(x)


def validate_extras(spec) -> None:
    """Check the blocks issue 4 owns (sensitivity, correlations, plan) eagerly, for `mcflops validate`."""
    from mcflops.model import copula
    from mcflops.analysis import plan
    from mcflops.analysis import sensitivity

    sensitivity.options(spec)
    pairs = copula.parse(spec)
    if pairs:
        copula.matrix(spec, pairs)
    plan.options(spec)


def _samples(n):
    from mcflops.errors import SpecError
    from mcflops.spec.load import check_samples

    if n is not None:
        check_samples(n, lambda m, *a: SpecError(m, field="--samples"))
    return n


def compute(args, progress) -> tuple[dict[str, Any], Figures]:
    from mcflops.spec.load import load_spec

    if args.command == "compare":
        from mcflops.analysis import plan

        a, b = load_spec(args.file_a), load_spec(args.file_b)
        data = _plain(plan.compare(a, b, output=args.output, samples=_samples(args.samples), seed=args.seed,
                                   progress=progress))
        return data, {"compare.png": lambda p: _plots().compare_ratio(p, data)}
    spec = load_spec(args.file)
    if args.command == "plan":
        from mcflops.analysis import plan

        opts = plan.options(spec, deadline_days=args.deadline_days, prob=args.prob, gpus=args.gpus,
                            budget_hours=args.budget_hours, budget_usd=args.budget_usd)
        data = _plain(plan.plan(spec, opts, samples=_samples(args.samples), seed=args.seed,
                                posterior=args.posterior, progress=progress))
        figs = {"plan.png": lambda p: _plots().plan_curve(p, data)} if "curve" in data else {}
        return data, figs
    from mcflops import api
    from mcflops.analysis import sensitivity

    opts = sensitivity.options(spec, output=args.output, sweeps=args.sweep, points=args.points,
                               sobol_samples=args.sobol_samples)
    res = api.run(spec, samples=args.samples, seed=args.seed, progress=progress, sensitivity=opts)
    data = {"name": spec.name, "seed": res.seed, "samples": res.samples, **res.sensitivity}
    data = _plain(data)
    figs: Figures = {}
    if data["tornado"]["inputs"]:
        figs["tornado.png"] = lambda p: _plots().tornado(p, data)
    if data.get("sobol"):
        figs["sobol.png"] = lambda p: _plots().sobol_bars(p, data)
    for name, sw in data["sweeps"].items():
        figs[f"sweep_{name}.png"] = lambda p, sw=sw: _plots().sweep_fan(p, sw)
    return data, figs


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """JSON types only (NaN and inf become null), as summary.json."""
    from mcflops.api import _jsonable

    return _jsonable(d)


def _plots():
    from mcflops.plots import sensitivity as plots

    return plots


def _table(title: str, cols: list[str]):
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold")
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right")
    return t


def show(command: str, data: dict[str, Any]) -> None:
    from rich.console import Console

    con = Console()
    {"sensitivity": show_sensitivity, "plan": show_plan, "compare": show_compare}[command](con, data)
    if "out" in data:
        con.print(f"\n[dim]wrote {data['out']}/[/dim]")


def show_sensitivity(con, d: dict[str, Any]) -> None:
    out = d["output"]
    t = d["tornado"]
    con.print(f"[bold]{d.get('name', '')}[/bold]  sensitivity of {out}  [dim](seed {d.get('seed')})[/dim]\n")
    others = "the others at their medians given it" if t.get("conditional") else "the others at their medians"
    tt = _table(f"Tornado: {out} with one input at its p5 / p95, {others} "
                f"(all at medians: {fmt(t['base'])})", ["input", "input p5", "input p95", f"{out} at p5",
                                                         f"{out} at p95", "swing"])
    for b in t["inputs"]:
        tt.add_row(b["input"], fmt(b["input_p5"]), fmt(b["input_p95"]), fmt(b["at_p5"]), fmt(b["at_p95"]),
                   f"{100 * b['swing_rel']:.1f}%")
    con.print(tt)
    if d.get("unused"):
        con.print(f"  [dim]{', '.join(d['unused'])} do not enter {out}[/dim]")
    if d.get("sobol"):
        info = d.get("sobol_info", {})
        st = _table(f"Sobol indices ({info.get('base_samples', 0):,} base draws; ± one standard error)",
                    ["input", f"first (log {out})", f"total (log {out})", f"first ({out})", f"total ({out})"])
        lin = d.get("sobol_linear", {})
        for n, s in sorted(d["sobol"].items(), key=lambda kv: -kv[1]["total"]):
            row = [f"{s['first']:.3f} ± {s['first_se']:.3f}", f"{s['total']:.3f} ± {s['total_se']:.3f}"]
            if n in lin:
                row += [f"{lin[n]['first']:.3f} ± {lin[n]['first_se']:.3f}",
                        f"{lin[n]['total']:.3f} ± {lin[n]['total_se']:.3f}"]
            st.add_row(n, *row)
        con.print(st)
    line = shapley_line(d)
    if line:
        con.print(line)
    corr = d.get("correlations") or {}
    if corr.get("prior"):
        cols = ["input", "prior Pearson (logs)", "prior Spearman"]
        post = corr.get("posterior")
        if post:
            cols += ["posterior Pearson (logs)", "posterior Spearman"]
        ct = _table(f"Correlation of each input with {out}", cols)
        for n, r in corr["prior"]["pearson_log"].items():
            row = [f"{r:+.3f}", f"{corr['prior'].get('spearman', {}).get(n, float('nan')):+.3f}"]
            if post:
                row += [f"{post['pearson_log'].get(n, float('nan')):+.3f}",
                        f"{post.get('spearman', {}).get(n, float('nan')):+.3f}"]
            ct.add_row(n, *row)
        con.print(ct)
    for name, sw in (d.get("sweeps") or {}).items():
        given = ", drawn given each value" if sw.get("conditional") else ""
        wt = _table(f"Sweep of {name} ({sw['samples']:,} draws of the other inputs{given}, the same at every value)",
                    [name, "p5", "p25", "p50", "p75", "p95", "p50 vs first"])
        for i, v in enumerate(sw["values"]):
            wt.add_row(_g(v), *(fmt(sw[k][i]) for k in ("p5", "p25", "p50", "p75", "p95")),
                       f"x{sw['p50_vs_first'][i]:.4g}")
        con.print(wt)
        r = sw["p50_vs_first"][-1]
        con.print(f"  {name} {_g(sw['values'][0])} -> {_g(sw['values'][-1])}: median {out} "
                  f"{fmt(sw['p50'][0])} -> {fmt(sw['p50'][-1])} ({'+' if r >= 1 else ''}{100 * (r - 1):.1f}%)")
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {note}")


def show_plan(con, d: dict[str, Any]) -> None:
    p = d["prob"]
    con.print(f"[bold]{d['name']}[/bold]  planning on the {d['distribution']} "
              f"[dim](seed {d['seed']}, {d['samples']:,} draws)[/dim]\n")
    h = d["gpu_hours"]
    con.print(f"  GPU-hours: p50 {fmt(h['p50'])}, p90 {fmt(h['p90'])} (90% interval {fmt(h['p5'])} to {fmt(h['p95'])})")
    if "deadline" in d:
        dl = d["deadline"]
        con.print(f"  to finish within {_g(dl['days'])} days with probability {p:g}: [bold]{dl['gpus']:,}[/bold] "
                  f"accelerators ({dl['gpus_p50']:,} for an even chance)")
    if "cluster" in d:
        c = d["cluster"]
        line = (f"  on {c['gpus']:,} accelerators: {c['days_p50']:.1f} days at p50, {c['days_p90']:.1f} at p90"
                + (f", {c['days_at_prob']:.1f} at p{100 * p:g}" if p not in (0.5, 0.9) else ""))
        if "prob_within_deadline" in c:
            line += f"; P(done within {_g(d['deadline']['days'])} days) = {c['prob_within_deadline']:.3f}"
        con.print(line)
    for key, unit in (("budget_hours", "GPU-hours"), ("budget_usd", "USD")):
        if key in d:
            b = d[key]
            con.print(f"  a budget of {_g(b['budget'])} {unit} fits [bold]{fmt(b['tokens'])}[/bold] tokens with "
                      f"probability {p:g} ({fmt(b['tokens_p50'])} at even odds)")
    if not any(k in d for k in ("deadline", "cluster", "budget_hours", "budget_usd")):
        con.print("  [dim]ask a question: --deadline-days D, --gpus N, --budget-hours H or --budget-usd B[/dim]")


def show_compare(con, d: dict[str, Any]) -> None:
    from rich.markup import escape

    out = d["output"]
    con.print(f"[bold]compare[/bold] {out}: B = {d['b']['name']} ({escape(str(d['b']['path']))}) against "
              f"A = {d['a']['name']} ({escape(str(d['a']['path']))})  [dim](seed {d['seed']}, {d['samples']:,} draws, the same z "
              f"for shared inputs: {', '.join(d['shared_inputs']) or 'none'})[/dim]\n")
    t = _table(f"{out}", ["", "p5", "p25", "p50", "p75", "p95"])
    for tag in ("a", "b"):
        t.add_row(f"{tag.upper()} {d[tag]['name']}", *(fmt(d[tag][k]) for k in ("p5", "p25", "p50", "p75", "p95")))
    r = d["ratio"]
    t.add_row("B / A", *(f"{r[k]:.4g}" for k in ("p5", "p25", "p50", "p75", "p95")))
    con.print(t)
    con.print(f"  P(B > A) = {r['prob_b_greater']:.3f}, P(B < A) = {r['prob_b_less']:.3f}")
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
