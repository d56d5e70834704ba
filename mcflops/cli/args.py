"""The argument parser of the command line: every command, its options and their help; no side effects."""

from __future__ import annotations

import argparse

from mcflops.cli import arch, ladder, watch

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        self.exit(EXIT_BAD_INPUT, f"mcflops: {message} (see mcflops {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"mcflops: {message} (see mcflops --help)\n")


def _positive_int(text: str) -> int:
    from mcflops.numbers import parse_number

    digits = text.strip().replace("_", "")
    if digits.isascii() and digits.isdigit() and len(digits) <= 100:  # exactly, not through a float
        return int(digits)
    x = parse_number(text)
    if x is None or x != int(x) or x < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number like 1e6 or 1_000_000, got '{text}'")
    return int(x)


def _seed(text: str) -> int:
    seed = _positive_int(text)
    if seed >= 2**63:  # the bound a prior file's seed: has too
        raise argparse.ArgumentTypeError(f"expected a seed below 2**63, got '{text}'")
    return seed


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mcflops", description="Training-compute estimates as distributions: prior files in, "
                "GPU-hour distributions, posteriors and reports out.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    def common(sp, out=True):
        sp.add_argument("file", help="prior file (YAML), e.g. priors/llama405b.yaml")
        sp.add_argument("--samples", type=_positive_int, help="Monte Carlo draws (default: the file's samples:)")
        sp.add_argument("--seed", type=_seed, help="random seed (default: the file's seed:)")
        sp.add_argument("--json", action="store_true", help="print the summary as JSON on stdout instead of tables")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")
        if out:
            sp.add_argument("--out", help="output folder (default: reports/<name>/); replaced as a whole, atomically")

    r = sub.add_parser("run", help="prior predictive, posterior (if the file observes something), files in reports/",
                       description="Run a prior file end to end: the napkin chain, the Monte Carlo distribution of "
                       "every output, the update on observed figures; writes summary.json and the resolved prior "
                       "file to the output folder.")
    common(r)
    r.add_argument("--method", choices=("auto", "is", "nuts"), default="auto",
                   help="posterior method: importance sampling (is), NUTS, or auto (IS, NUTS when IS is poor)")
    r.add_argument("--context", action=argparse.BooleanOptionalAction, default=None,
                   help="the MFU in context: the file's MFU prior beside the calibrated prior from published runs, "
                   "as `mcflops ladder` sets them (a second pass of the engine). Default: on for a forward run, off "
                   "for a file that observes a published figure, whose answer is the posterior")
    s = sub.add_parser("sample", help="prior predictive only (no update, no files): quick looks and timing",
                       description="Draw the prior predictive and print the summary; writes nothing.")
    common(s, out=False)
    v = sub.add_parser("validate", help="check a prior file and print what it resolves to",
                       description="Validate a prior file: exit 0 and a one-line summary if it is good, exit 2 and "
                       "one line naming file, line and field if not.")
    v.add_argument("file", nargs="+", help="prior file(s)")
    sub.add_parser("schema", help="print the JSON Schema of prior files (for editors)",
                   description="Print a JSON Schema of the prior-file format, for editor completion and checks.")
    rp = sub.add_parser("report", help="re-render report.md and report.html of a run folder (no sampling)",
                        description="Re-render DIR/report.md and DIR/report.html from DIR/summary.json, the resolved "
                        "prior file and the figures in DIR, without sampling again (fast; no JAX).")
    rp.add_argument("dir", help="a run folder written by `mcflops run`, e.g. reports/llama405b")
    _sens_parsers(sub, common)
    ladder.add_parser(sub, common)
    arch.add_parser(sub)
    watch.add_parser(sub, _positive_int, _seed)
    ca = sub.add_parser("calibrate", help="fit effective utilization (MFU x goodput) to the published runs; "
                        "leave-one-out check",
                        description="Fit the hierarchical model of effective utilization u = MFU x goodput to the "
                        "published runs in mcflops/data/published_runs.yaml (NUTS), print the posterior and the "
                        "calibrated prior that `mfu: {calibrated: true}` uses, and predict each run's hours from "
                        "the others (leave-one-out: coverage of 90% intervals, median error, interval width). "
                        "Writes calibration.json and calibration.png to --out.")
    ca.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    ca.add_argument("--chains", type=_positive_int, default=4, help="NUTS chains (default 4)")
    ca.add_argument("--draws", type=_positive_int, default=300, help="warm-up and kept draws per chain (default 300)")
    ca.add_argument("--no-loo", action="store_true", help="skip the validation (one fit only)")
    ca.add_argument("--select", action="store_true", help="also compare the candidate models on the grouped "
                    "validation (leave one organisation / generation out, the time split) and mark the one it "
                    "chooses (slow)")
    ca.add_argument("--holdout", action="store_true", help="with --layout: also refit without each paper, each "
                    "accelerator generation and the runs past 1,024 accelerators, and score the held-out series "
                    "against a constant MFU per accelerator (slow: about 10 minutes on 2 cores)")
    ca.add_argument("--pilot-holdout", action="store_true", help="with --layout: only the pilot's validation: refit "
                    "without each scaling series (MegaScale 175B strong scaling, Megatron-Core strong and weak "
                    "scaling, Llama 3 405B 8K to 16K GPUs), condition on its smallest-scale row as a pilot and "
                    "predict the others (slow: five refits, several minutes on 2 cores); --out DIR writes "
                    "layout_pilot_validation.json")
    ca.add_argument("--write", action="store_true",
                    help="also regenerate the shipped fit, mcflops/data/calibration_fit.json (what calibrated "
                    "priors read)")
    ca.add_argument("--out", default=None, help="folder for calibration.json and calibration.png "
                    "(default reports/calibration; created if missing); with --layout, for layout_validation.json "
                    "(written only when given)")
    ca.add_argument("--layout", action="store_true", help="fit the layout MFU model's efficiency priors to the "
                    "layout-resolved benchmark rows instead, validate on the held-out production rows and trends; "
                    "with --write, regenerate mcflops/data/layout_fit.json")
    ca.add_argument("--json", action="store_true", help="print the result as JSON on stdout instead of tables")
    ca.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def _sens_parsers(sub, common) -> None:
    """`sensitivity`, `plan` and `compare`."""
    out_help = "also write <command>.json and the figures (PNG) into this folder (created if missing)"
    se = sub.add_parser("sensitivity", help="what moves the estimate: tornado, Sobol and Shapley indices, "
                        "correlations, sweeps",
                        description="Which input moves the output most: a tornado (each input at its p5 and p95, the "
                        "others at their medians, given it when the file declares correlations), Sobol first-order "
                        "and total indices (Saltelli sampling, Jansen estimators, with standard errors) on log output "
                        "and on the output, Shapley effects (variance shares that hold for correlated inputs too), "
                        "rank correlations (under the posterior too when the file observes something), and sweeps "
                        "of one input.")
    common(se, out=False)
    se.add_argument("--out", help=out_help)
    se.add_argument("--output", help="the output to analyse (default: the file's sensitivity.output, else gpu_hours)")
    se.add_argument("--sweep", action="append", metavar="INPUT=LO:HI|INPUT=V1,V2",
                    help="sweep one input: a grid from LO to HI (--points values) or the listed values, e.g. "
                    "mfu=0.40,0.30 answers 'what if MFU falls from 40%% to 30%%'; repeatable")
    se.add_argument("--points", type=_positive_int, help="grid points of a LO:HI sweep (default 16)")
    se.add_argument("--sobol-samples", type=_positive_int,
                    help="Saltelli base draws N (default 65536; the model is evaluated N x (inputs + 2) times)")
    pl = sub.add_parser("plan", help="accelerators for a deadline, days on a cluster, tokens in a budget",
                        description="Run the estimate backwards, each answer with a probability: how many "
                        "accelerators finish within --deadline-days with probability --prob, how many days --gpus "
                        "accelerators need, how many tokens fit in --budget-hours or --budget-usd. Defaults come "
                        "from the file's plan: block; uses the prior predictive unless --posterior.")
    common(pl, out=False)
    pl.add_argument("--out", help=out_help)
    pl.add_argument("--deadline-days", metavar="D", help="finish within D days of wall-clock time")
    pl.add_argument("--prob", metavar="P", help="probability each answer must hold with (default 0.9)")
    pl.add_argument("--gpus", metavar="N", help="cluster size for the days question (default: hardware.count)")
    pl.add_argument("--budget-hours", metavar="H", help="accelerator-hour budget: tokens that fit (e.g. 2M)")
    pl.add_argument("--budget-usd", metavar="B", help="dollar budget: tokens that fit (needs a price prior)")
    pl.add_argument("--posterior", action="store_true",
                    help="plan on the posterior (importance-weighted by the file's observe: block)")
    cp = sub.add_parser("compare", help="scenarios side by side (two or more prior files, each against the first)",
                        description="Compare scenarios (e.g. H100 vs B200 vs more H100s for the same run): one table of "
                        "GPU-hours, days, cost, energy, accelerators for a deadline and P(done by it), each with its 90% "
                        "interval, and each scenario's per-draw ratio to the first (A). An input whose prior is "
                        "identical in two files shares its draws (it cancels from their ratio), one whose priors "
                        "differ is drawn independently unless --couple gives the rank correlation of its draws with "
                        "A's. With two files, also B / A of --output. Seed and sample count come from file A unless "
                        "given.")
    cp.add_argument("files", nargs="+", metavar="FILE",
                    help="prior files: A (the reference), B, and any more scenarios")
    cp.add_argument("--output", default="gpu_hours", help="the output to compare (default gpu_hours)")
    cp.add_argument("--samples", type=_positive_int, help="Monte Carlo draws (default: A's samples:)")
    cp.add_argument("--seed", type=_seed, help="random seed (default: A's seed:)")
    cp.add_argument("--couple", action="append", metavar="INPUT=RHO",
                    help="draw INPUT in A and B with rank (Spearman) correlation RHO in [-1, 1] (a Gaussian copula; "
                    "1: the same draws), e.g. mfu=0.7; repeatable")
    cp.add_argument("--posterior", action="store_true",
                    help="compare the posteriors (every file weighted by its observe: block)")
    cp.add_argument("--deadline-days", metavar="D",
                    help="the deadline every scenario answers (default: the first file's plan: that has one)")
    cp.add_argument("--prob", metavar="P", help="probability the deadline's accelerator count must hold with")
    cp.add_argument("--json", action="store_true", help="print the result as JSON on stdout instead of tables")
    cp.add_argument("--quiet", action="store_true", help="no progress bar")
    cp.add_argument("--out", help="also write compare.json, scenarios.png (and with two files compare.png) and a "
                    "report (report.md, report.html) "
                    "into this folder (created if missing)")
