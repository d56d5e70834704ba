"""`mcflops run` and `mcflops sample`: a prior file through api.run, then the summary printed (tables,
or --json) and, for `run`, the run folder written (output.write_run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcflops import chain
from mcflops import output
from mcflops.cli.progress import progress
from mcflops.cli.tables import fmt, headline_lines, stats_table
from mcflops.cli.session import primary, setup_jax
from mcflops.cli.signals import check_interrupt
from mcflops.spec import INPUTS, load_spec


def _context(args, spec) -> bool:
    """``--context`` / ``--no-context`` as given; unsaid, on for a forward run (a plan: the context is what the
    forecast is read against) and off for a file that observes a figure, whose answer is the posterior and whose
    published-runs rung may hold the very run it observes (the flagship's does)."""
    given = getattr(args, "context", None)
    return (not spec.observe) if given is None else bool(given)


def command(args) -> int:
    spec = load_spec(args.file)
    out = Path(args.out) if getattr(args, "out", None) else Path("reports") / spec.name
    if args.command == "run":  # refuse a bad --out before sampling, not after
        args.session.claim_out(out)
    with progress(args.quiet or args.json) as bar:
        bar.phase("starting")  # JAX's import and set-up take seconds: say so from the first one
        setup_jax()
        from mcflops import api

        res = api.run(spec, samples=args.samples, seed=args.seed, progress=bar, phase=bar.phase,
                      posterior=args.command == "run", method=getattr(args, "method", "auto"),
                      sensitivity=args.command == "run",
                      context=args.command == "run" and _context(args, spec))
        data = res.to_dict()
        if primary() and args.command == "run":
            bar.phase("plotting")  # the figures, then the report
            output.write_run(out, res.record, data, check=check_interrupt)
            data["out"] = str(out)
    if not primary():
        return 0
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print_result(res, data)
    return 0


def _f(x, spec: str) -> str:
    """``x`` formatted, or "n/a" where summary.json holds null (a NaN or inf: a zero-variance input's
    correlation, an implied MFU out of range)."""
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


def _console():
    import os
    import sys

    from rich.console import Console

    # a pipe gets wide lines unless COLUMNS says how wide (rich reads it)
    return Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=120)


def print_result(res, data: dict[str, Any]) -> None:
    """The run's tables on stdout, then the folder written, if any."""
    from rich.markup import escape

    con = _console()
    _show(con, res, data)
    if "out" in data:
        con.print(f"\n[dim]wrote {escape(str(data['out']))}/[/dim]")


def _show(con, res, data: dict[str, Any]) -> None:
    from rich.markup import escape as _escape

    from mcflops.errors import one_line

    def escape(text: str) -> str:  # user text: shown as text, never as markup or terminal control
        return _escape(one_line(text))

    spec = res.spec
    ch = data["chain"]
    checks = (data.get("posterior") or {}).get("checks") or {}
    if checks.get("passed") is False:  # the first line, before any number
        con.print(f"[bold red]WARNING:[/bold red] the posterior failed its checks ({escape('; '.join(checks['why']))}): "
                  "its numbers below are not reliable; do not quote them")
    con.print(f"[bold]{escape(spec.name)}[/bold]  {escape(spec.description)}")
    con.print(f"[dim]seed {res.seed} · {res.samples:,} draws · {res.device} · "
              f"{_f(res.timings.get('total_s', 0), '.2f')} s · flops convention {spec.flops}[/dim]\n")
    for line in headline_lines(data):  # the answer first: the posterior when there is a (healthy) one
        con.print(line)
    con.print()
    con.print("[bold]Napkin chain[/bold] (each input at its median)")
    peak = ch["peak_flops"]
    from mcflops.priors.calibrated import describe as calibrated_describe

    # a calibrated mfu prior is effective utilization (MFU x goodput; its goodput is 1): the chain says so
    mfu_label = "MFU x goodput (calibrated)" if calibrated_describe(spec.priors.get("mfu")) else "MFU"
    per_token = chain.CONVENTIONS[spec.flops].napkin.format(params=fmt(ch.get("params", 0)),
                                                              flops_per_token=fmt(ch["flops_per_token"]))
    lines = [f"  FLOPs = {per_token} x {fmt(ch['tokens'])} = {fmt(ch['flops'], 3)}",
             f"  GPU-hours = FLOPs / (peak {fmt(peak)} x {mfu_label} {_f(ch['mfu'], '.3f')} x goodput {_f(ch['goodput'], '.3f')}) / 3600"
             f" = {fmt(ch['gpu_hours'])}"]
    if "wall_days" in ch:
        lines.append(f"  wall-clock = {fmt(ch['gpu_hours'])} / {spec.hardware.count:,} / 24 = {_f(ch['wall_days'], '.1f')} days")
    if "implied_mfu" in ch:
        lines.append(f"  backwards: the published {fmt(ch['observed_gpu_hours'])} hours imply MFU x goodput = "
                     f"{_f(ch['implied_mfu_x_goodput'], '.4f')}, i.e. MFU {_f(ch['implied_mfu'], '.3f')} at goodput 1, "
                     f"{_f(ch['implied_mfu_at_median_goodput'], '.3f')} at the median goodput {_f(ch['goodput'], '.3f')}")
    for line in lines:
        con.print(line)
    con.print()
    names = list(res.spec.uncertain) + list(res.spec.outputs)
    con.print(stats_table("Prior predictive", res.prior, names))
    for name, o in data.get("observed", {}).items():
        if o.get("prior_percentile") is not None:
            con.print(f"  published {name} {fmt(o['value'])} sits at the {_f(o['prior_percentile'], '.1f')}th percentile "
                      "of the prior predictive")
        elif "prior_probability_inside" in o:
            con.print(f"  observed {name} in [{fmt(o['low'])}, {fmt(o['high'])}]: prior probability "
                      f"{_f(o['prior_probability_inside'], '.3f')}")
    post = data.get("posterior")
    if post:
        con.print()
        diag = f"method {post.get('method')}, ESS {_f(post.get('ess'), ',.0f')}"
        k = post.get("pareto_k")
        if k is not None:  # Vehtari et al. 2024: below 0.7 the importance-sampling estimates are reliable
            verdict = "" if not isinstance(k, (int, float)) else " < 0.7: reliable" if k < 0.7 else \
                " >= 0.7: unreliable"
            diag += f", weights' k-hat {_f(k, '.2f')}{verdict}"
        con.print(stats_table(f"Posterior ({diag})", post, names))
        if "corr_mfu_goodput_log" in post:
            con.print(f"  posterior correlation of log MFU and log goodput: {_f(post['corr_mfu_goodput_log'], '+.2f')} "
                      "(the data constrain their product)")
        for name, claim in (post.get("reported") or {}).items():  # the prior file's `reported:` claims
            f = (lambda x: f"{100 * x:g}%") if INPUTS.get(name, ("", "", ""))[2] == "fraction" else fmt
            (lo, hi), what = claim["range"], "MFU" if name == "mfu" else name
            con.print(escape(f"  P({f(lo)} <= {what} <= {f(hi)}): prior {_f(claim['prior_probability'], '.2f')}, "
                             f"posterior {_f(claim['posterior_probability'], '.2f')}"))
    if data.get("layout"):  # the MFU prior came from a parallel layout: where the FLOP/s go
        from mcflops.cli.layout import layout_lines

        con.print()
        for line in layout_lines(data["layout"]):
            con.print(escape(line))
    sens = data.get("sensitivity")
    if sens:
        from mcflops.cli.sensitivity import brief_lines

        con.print()
        for line in brief_lines(sens):
            con.print(escape(line))
        for sw in (sens.get("sweeps") or {}).values():
            vals, p50 = sw["values"], sw["p50"]
            picks = sorted({0, len(vals) - 1, *(i for i, v in enumerate(vals) if abs(v - 0.40) < 1e-9)})
            con.print(escape(f"Sweep of {sw['input']} (others sampled): median {sw['output']} "
                             + ", ".join(f"{fmt(vals[i], 3)} -> {fmt(p50[i])}" for i in picks)))
    ctx = data.get("mfu_context")
    if ctx and ctx.get("rungs"):  # the MFU prior beside published runs' (analysis.context); notes below
        from mcflops.cli.ladder import ladder_table
        from mcflops.cli.tables import Fitted

        con.print()
        con.print(Fitted(ladder_table(ctx, "MFU in context" + (" (the priors)" if ctx.get("observed") else "")
                                      + ": median, 90% interval below"), ()))
    if data.get("plan"):  # the file's plan: block
        from mcflops.cli.plan import answers

        con.print(f"\n[bold]Plan[/bold] (the file's plan: block, on the {data['plan']['distribution']})")
        answers(con, data["plan"])
    seen = set((data.get("plan") or {}).get("notes", ()))  # printed with the plan
    for note in [*data.get("notes", []), *((ctx or {}).get("notes") or ())]:
        if note not in seen:
            seen.add(note)
            con.print(f"[yellow]note:[/yellow] {escape(note)}")
