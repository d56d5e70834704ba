"""`mcflops ladder`: one run under each MFU prior a planner can reach, side by side (analysis.ladder): the file's
own, the calibrated prior from published runs, the layout model's (--layout); printed as a table or --json;
with --out, ladder.json and a report (report.md, report.html) whose section is "MFU in context"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcflops.cli.session import analysis_command, plain, samples
from mcflops.cli.tables import Fitted, table
from mcflops.numbers import format_number as fmt


def add_parser(sub, common) -> None:
    la = sub.add_parser("ladder", help="one run under each MFU prior side by side: yours, published runs', the "
                        "layout model's",
                        description="The same run under each MFU prior a planner can reach, side by side: the "
                        "file's own as written, the calibrated prior from published runs on its accelerator at its "
                        "size (effective utilization, MFU x goodput), and the layout model's when --layout is "
                        "given; each with its MFU, GPU-hours, days on the file's count and accelerators for the "
                        "file's deadline, and notes where they disagree. Inputs other than the MFU share their "
                        "draws (common random numbers).")
    common(la, out=False)
    la.add_argument("--out", help="also write ladder.json and a report (report.md, report.html; its section: MFU in "
                    "context) into this folder (created if missing)")
    la.add_argument("--layout", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                    help="a parallel layout for the layout rung, as mfu: {layout: ...} takes it, e.g. "
                    "tp=8,pp=8,global_batch=2048; repeatable")
    la.add_argument("--pilot", action="append", metavar="count=N,tflops_per_gpu=T[,sigma=S][,preset=MODEL][,LAYOUT FIELDS]",
                    help="a measured pilot on the same stack: N accelerators at T TFLOP/s per GPU (counted with the "
                    "architecture's FLOPs, attention included; or tokens_per_s_per_gpu= or step_time_s= in its "
                    "place), its log-scale error S (default 0.05), the pilot's model where it is not the file's (a "
                    "preset, e.g. preset=llama3.1-8b) and the layout fields where it differs from --layout's; "
                    "conditions the layout model's efficiencies and adds the rung of the production MFU "
                    "given it; repeatable (one observation each); a prior file's pilot: block does the same")


def command(args) -> int:
    return analysis_command(args, compute, "ladder.json", lambda d: {}, show_ladder, write=write)


def compute(args, progress) -> dict[str, Any]:
    from mcflops.analysis.ladder import layout_options
    from mcflops.analysis.pilot import parse_pilot
    from mcflops.api import ladder

    # the flags parsed here, so that a mistake names the flag; the API computes what it returns
    return plain(ladder(args.file, layout=layout_options(args.layout), pilots=[parse_pilot(p) for p in args.pilot or ()],
                        samples=samples(args.samples), seed=args.seed, progress=progress))


def write(out: Path, data: dict[str, Any]) -> None:
    """ladder.json, then the report rendered from it."""
    from mcflops import output
    from mcflops.report.ladder import render

    output.write_outputs(out, "ladder.json", data, {}, where=str(out), pages=render)


def _cell(q: dict[str, Any] | None, pct: bool = False) -> str:
    if not q:
        return "n/a"
    if pct:  # a fraction as a percentage, the interval's unit once
        return f"{100 * q['p50']:.1f}%\n[dim]{100 * q['p5']:.1f}–{100 * q['p95']:.1f}%[/dim]"
    return f"{fmt(q['p50'], 3)}\n[dim]{fmt(q['p5'], 3)}–{fmt(q['p95'], 3)}[/dim]"


def _gpus(dl: dict[str, Any] | None) -> str:
    if not dl:
        return "n/a"
    if dl.get("gpus") is None:
        return "out of reach"
    return f"{dl['gpus']:,}"


def show_ladder(con, d: dict[str, Any]) -> None:
    from rich.markup import escape

    con.print(f"[bold]ladder[/bold] {escape(d['name'])}: the MFU in context  [dim](seed {d['seed']}, "
              f"{d['samples']:,} draws, the priors)[/dim]\n")
    con.print(Fitted(ladder_table(d, "one run, a ladder of information: median, 90% interval below"), ()))
    for r in d["rungs"]:
        con.print(f"  [dim]{r['tag']}: {escape(r['prior'])}[/dim]")
    for note in d.get("notes", []):
        con.print(f"[yellow]note:[/yellow] {escape(note)}")


def ladder_table(d: dict[str, Any], title: str):
    """The rungs side by side (a rich table): also `mcflops run`'s MFU in context."""
    from rich.markup import escape

    dl = d.get("deadline")
    cols = ["rung", "MFU", "MFU x goodput", "GPU-hours", f"days on {d['count']:,}" if d.get("count") else "days"]
    if dl:
        cols.append(f"GPUs for {dl['days']:g} d at {dl['prob']:g}")
    t = table(title, cols)
    for r in d["rungs"]:
        row = [f"{r['tag']} {escape(r['label'])}", "in MFU x\ngoodput" if r["kind"] == "calibrated"
               else _cell(r["mfu"], True), _cell(r["effective"], True), _cell(r["gpu_hours"]), _cell(r["wall_days"])]
        if dl:
            row.append(_gpus(r.get("deadline")))
        t.add_row(*row)
    return t
