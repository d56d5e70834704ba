"""`mcflops calibrate`: the calibration layer's fit of effective utilization (MFU x goodput) to the published
runs and its validation (leave one run, organisation, accelerator generation out, and a time split; the model
against three baselines), printed as tables or --json; calibration.json, the figures and the page report.md /
report.html go to --out and, with --write, the fit to ship as mcflops/data/calibration_fit.json."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcflops import output
from mcflops.output import figures
from mcflops.cli.session import primary, setup_jax
from mcflops.errors import SpecError
from mcflops.numbers import format_number as fmt

# per split, for the model: (key, op, value); "beats" compares the CRPS with every baseline's
TARGETS = (("coverage_90", "in", (0.85, 0.95)), ("median_abs_log_error", "<=", 0.20),
           ("median_p95_over_p5", "<=", 3.0), ("crps", "beats", "every baseline"))
LOO_TARGETS = {"coverage_90": (">=", 0.85), "median_error_pct": ("<", 30.0), "median_p95_over_p5": ("<", 3.0)}


class Phases:
    """One progress line per phase on stderr (a terminal only; never with --quiet or --json): each phase's
    bar fills when the next one starts, with the time it took; ``tick(done, total)`` fills the current one
    as it goes (a validation split's scored runs)."""

    def __init__(self, quiet: bool):
        import sys

        self.bar, self.task = None, None
        if quiet or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True))

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __call__(self, text: str) -> None:
        if self.bar is None:
            return
        if self.task is not None:
            self.bar.update(self.task, completed=1)
            self.bar.stop_task(self.task)
        self.task = self.bar.add_task(text, total=1)

    def tick(self, done: int, total: int) -> None:
        if self.bar is not None and self.task is not None and total > 0:
            self.bar.update(self.task, completed=done / total)

    def __exit__(self, *exc):
        if self.bar is not None:
            if self.task is not None:
                self.bar.update(self.task, completed=1)
            self.bar.stop()
        return False


def command(args) -> int:
    if args.chains < 1 or args.draws < 50:
        raise SpecError("expected --chains >= 1 and --draws >= 50", field="--draws")
    setup_jax()
    compile_cache()
    data, export = compute(args)
    if not primary():
        return 0
    out = Path(args.out)
    output.write_outputs(out, "calibration.json", data, {**figures.calibration(data), **page_figures(data)})
    write_page(out, data)
    if export is not None:
        target = fit_path()
        output.write_fit(target, export, where=out)
        data["wrote_fit"] = str(target)
    data["out"] = str(out)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        show(data)
    return 0


def compile_cache() -> None:
    """Keep the compiled NUTS samplers between runs (JAX's persistent compilation cache, in
    $XDG_CACHE_HOME/mcflops/jax or ~/.cache/mcflops/jax) unless a cache folder is already configured: a
    second `mcflops calibrate` skips most of its compiles. Set MCFLOPS_NO_JAX_CACHE=1 to switch it off."""
    import os

    import jax

    if os.environ.get("MCFLOPS_NO_JAX_CACHE") or jax.config.jax_compilation_cache_dir:
        return
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    try:
        (root / "mcflops" / "jax").mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: compile every time
        return
    jax.config.update("jax_compilation_cache_dir", str(root / "mcflops" / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def page_figures(data: dict[str, Any]) -> dict[str, Any]:
    """The page's figures: each held-out run's interval against its published figure, per split, and the PIT."""
    if not data.get("validation"):
        return {}
    from mcflops.plots import validation as plots

    return {"validation_intervals.png": lambda p: plots.intervals(data["validation"], p),
            "validation_pit.png": lambda p: plots.pit_histogram(data["validation"], p)}


def write_page(out: Path, data: dict[str, Any]) -> None:
    """report.md and report.html of the calibration, from calibration.json's data and the figures in ``out``."""
    from mcflops.report.calibration import render

    figs = {p.name: p.read_bytes() for p in sorted(out.glob("*.png"))}
    try:
        for name, text in render(data, figs).items():
            output.replace_text(out / name, text)
    except OSError as e:
        raise SpecError(f"cannot write: {e.strerror}", path=str(e.filename or out), field="--out") from None


def fit_path() -> Path:
    """Where the shipped fit lives (inside the package: regenerated by --write)."""
    from mcflops.priors.calibrated import FIT_FILE

    return Path(__file__).resolve().parents[1] / "data" / FIT_FILE


def compute(args) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The fit, its summary and (unless --no-loo) the validation as data, and with --write the fit to ship
    (else None). The validation samples fewer draws (half the chains, half the draws, at least 100) than the
    fit: every fold of every split is one joint NUTS run."""
    import jax

    from mcflops import calibration as cal
    from mcflops import engine

    cfg = cal.Config(chains=args.chains, warmup=args.draws, draws=args.draws)
    vcfg = replace(cfg, chains=max(1, args.chains // 2), warmup=max(100, args.draws // 2),
                   draws=max(100, args.draws // 2))
    runs = cal.load_runs()
    key = engine.seed_key(args.seed)
    with Phases(args.quiet or args.json) as phase:
        phase(f"fitting the model to {runs.n} published runs (NUTS, {cfg.chains} chains x {cfg.draws} draws)")
        fit = cal.fit(jax.random.fold_in(key, 0), runs, cfg)
        data: dict[str, Any] = cal.fit_summary(fit, cfg, args.seed)
        v = None
        if not args.no_loo:
            v = cal.validate(jax.random.fold_in(key, 1), runs, vcfg, phase=phase, tick=phase.tick)
            data["validation"] = v.to_dict()
            data["validation_table"] = v.table()
            data["targets"] = targets(v.table())
            data["loo"] = loo_block(data["validation"])
        if getattr(args, "select", False):
            data["selection"] = cal.compare_models(jax.random.fold_in(key, 2), runs, vcfg, phase=phase)
    export = cal.export(fit, args.seed, None, validation=data.get("validation_table")) if args.write else None
    if export is not None and "loo" in data:
        export["loo"] = {k: v for k, v in data["loo"].items() if k != "rows"}
    return data, export


def loo_block(validation: dict[str, Any]) -> dict[str, Any]:
    """The leave-one-out split's model rows in the form calibration.png draws (and its old metrics)."""
    split = next(s for s in validation["splits"] if s["name"] == "loo")
    rows = [{**r, "covered": r["covered_90"]} for r in split["rows"]["model"]]
    sc = split["scores"]["model"]
    m = {"runs": sc["runs"], "coverage_90": sc["coverage_90"], "median_abs_log_error": sc["median_abs_log_error"],
         "median_error_pct": 100.0 * math.expm1(sc["median_abs_log_error"]),
         "median_p95_over_p5": sc["median_p95_over_p5"], "seconds": validation["seconds"]}
    return {**m, "rows": rows}


def targets(table: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per split, each target and whether the model met it."""
    out: dict[str, dict[str, Any]] = {}
    for split in dict.fromkeys(r["split"] for r in table):
        rows = {r["model"]: r for r in table if r["split"] == split}
        m = rows["model"]
        res = {}
        for key, op, val in TARGETS:
            if op == "in":
                ok, text = val[0] <= m[key] <= val[1], f"{val[0]:g}-{val[1]:g}"
            elif op == "<=":
                ok, text = m[key] <= val, f"<= {val:g}"
            else:
                ok, text = all(m["crps"] < r["crps"] for k, r in rows.items() if k != "model"), "below every baseline"
            res[key] = {"target": text, "value": m[key], "met": bool(ok)}
        out[split] = res
    return out


def show(data: dict[str, Any]) -> None:
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from mcflops.priors.calibrated import LABEL

    con = Console() if sys.stdout.isatty() else Console(width=120)
    con.print(f"[bold]Calibration[/bold] of {LABEL} on {data['runs']} published runs  [dim]seed {data['seed']} · "
              f"fit {data['fit_id']} · {data['fit_seconds']:.0f} s · {data['divergences']} divergences · max R-hat "
              f"{data['max_r_hat']:.3f} · min ESS {data['min_ess']:.0f}[/dim]\n")
    t = Table(title="Posterior (logit scale unless noted)", title_justify="left", header_style="bold")
    for c in ("parameter", "mean", "sd", "p5", "p95", "R-hat", "ESS"):
        t.add_column(c, justify="left" if c == "parameter" else "right")
    for name, s in data["posterior"].items():
        t.add_row(escape(name), f"{s['mean']:+.3f}", f"{s['sd']:.3f}", f"{s['p5']:+.3f}", f"{s['p95']:+.3f}",
                  f"{s['r_hat']:.3f}", f"{s['ess']:.0f}")
    con.print(t)
    con.print("  [dim]sigma[...] and throughput_offset are on log hours; a_org/a_acc are partially pooled "
              "effects; beta per decade of N, per doubling of peak FLOP/s[/dim]\n")
    p = Table(title=f"Calibrated prior: {LABEL}, calibrated on {data['runs']} published runs (a new org, dense)",
              title_justify="left", header_style="bold")
    for c in ("accelerator", "params", "median", "90% interval", "note"):
        p.add_column(c, justify="left" if c in ("accelerator", "note") else "right")
    for r in data["population"]:
        p.add_row(r["accelerator"], fmt(r["params"]), f"{r['p50']:.3f}", f"[{r['p5']:.3f}, {r['p95']:.3f}]",
                  escape(r.get("note", "")))
    con.print(p)
    if data.get("validation"):
        show_validation(con, data)
    for sel in data.get("selection") or []:
        con.print(f"  model {escape(sel['candidate'])}: grouped CRPS {sel['crps']:.4f}"
                  f"{'  [bold](chosen)[/bold]' if sel['chosen'] else ''}")
    if "out" in data:
        con.print(f"\n[dim]wrote {data['out']}/ (calibration.json, report.md, report.html, figures)[/dim]")
    if "wrote_fit" in data:
        con.print(f"[dim]wrote {data['wrote_fit']}[/dim]")


def show_validation(con, data: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from mcflops.calibration.baselines import LABELS
    from mcflops.calibration.splits import SHORT

    names = {"model": "the model", **{k: v.replace("one constant per generation", "per generation") for k, v in LABELS.items()}}
    con.print()
    t = Table(title="Validation: each held-out run's published hours against its predictive", title_justify="left",
              header_style="bold")
    for c in ("split", "predictor", "runs", "50% cov.", "90% cov.", "med. |log err|", "med. p95/p5", "CRPS",
              "log score"):
        t.add_column(c, justify="left" if c in ("split", "predictor") else "right")
    labels = {s["name"]: SHORT.get(s["name"], s["label"]) for s in data["validation"]["splits"]}
    for r in data["validation_table"]:
        ls = "-inf" if r["log_score"] is None else f"{r['log_score']:+.2f}"
        bold = r["model"] == "model"
        t.add_row(escape(labels[r["split"]]), ("[bold]" if bold else "") + names[r["model"]] + ("[/bold]" if bold else ""),
                  str(r["runs"]), f"{r['coverage_50']:.2f}", f"{r['coverage_90']:.2f}",
                  f"{r['median_abs_log_error']:.3f}", f"{r['median_p95_over_p5']:.2f}", f"{r['crps']:.3f}", ls)
    con.print(t)
    for s in data["validation"]["splits"]:
        if s.get("skipped"):
            con.print(f"  [yellow]{escape(s['label'])}: skipped[/yellow] ({escape(s['skipped'])})")
    con.print("  [dim]CRPS and log score of log hours (Gneiting & Raftery 2007); lower CRPS and higher log score "
              "are better; -inf: a run outside the predictive's support[/dim]")
    for split, res in data["targets"].items():
        marks = ", ".join(f"{k} {'[green]met[/green]' if v['met'] else '[red]missed[/red]'} ({v['target']})"
                          for k, v in res.items())
        con.print(f"  {escape(labels[split])}: {marks}")
