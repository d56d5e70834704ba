"""The calibration page (reports/calibration/report.md and report.html): what the calibrated prior is, the
validation table (the model against the baselines on every split), each held-out run's interval against its
published figure, the PIT histogram, and the prior per accelerator family. Rendered from calibration.json's
data and the figures `mcflops calibrate` draws, with the run report's blocks and markup."""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.calibration import describe_structure
from mcflops.numbers import format_number
from mcflops.report.blocks import B, C, Document, Fig, Items, P, Section, Table
from mcflops.priors.calibrated import LABEL
from mcflops.report.markup import to_html, to_markdown

NAMES = {"model": "the model", "constant": "constant logit-normal", "rule": "30-40% rule",
         "generation": "one constant per generation"}
FIGURES = {"validation_intervals.png": "Each held-out run's predictive interval against its published hours, per "
           "split: the model's 50% (thick) and 90% (thin) intervals and median, as predicted / published; the "
           "constant baseline's 90% interval in grey below it.",
           "validation_pit.png": "PIT histograms: F(published) under each held-out run's predictive. Flat when the "
           "intervals are calibrated; piled at the ends when they are too narrow; in the middle when too wide.",
           "calibration.png": "Leave one run out: predicted against published hours (left) and the ratio per run "
           "(right)."}


def _f(x: Any, d: str = ".3f") -> str:
    return "-inf" if x is None else format(x, d)


def build(data: Mapping[str, Any], figures: Mapping[str, bytes]) -> Document:
    n = data.get("runs", "?")
    cfg = data.get("config", {})
    terms, unseen = describe_structure(cfg)
    meta = f"seed {data.get('seed', '?')} · fit {data.get('fit_id', '?')} · {n} published runs"
    intro = Section("what", "1. What the calibrated prior is", [P([
        C("mfu: {calibrated: ...}"), " is a prior on ", B(LABEL), ", u = MFU x goodput, calibrated on "
        f"{n} published runs (mcflops/data/published_runs.yaml): the posterior predictive of a hierarchical model "
        "of logit u (an intercept, ", *(["the covariates ", C(", ".join(cfg["covariates"]))] if cfg.get("covariates")
                                        else ["no covariates"]),
        f", {terms}). {unseen[:1].upper() + unseen[1:]}, and the prior says so in its source."])])
    secs = [intro]
    v = data.get("validation")
    if v:
        secs.append(_validation(data, v, figures))
    secs.append(_population(data))
    if data.get("selection"):
        secs.append(_selection(data["selection"]))
    secs.append(Section("reproduce", "Reproduce", [P(["Regenerate this page with ",
                                                      C("mcflops calibrate --out reports/calibration"),
                                                      f" (seed {data.get('seed', 0)}); add ", C("--select"),
                                                      " for the model comparison, ", C("--write"),
                                                      " to refit the shipped fit."])]))
    return Document("Calibration of MFU x goodput", f"{LABEL}, calibrated on {n} published runs, "
                    "and how well it predicts runs it has not seen", meta, secs)


def _validation(data: Mapping[str, Any], v: Mapping[str, Any], figures: Mapping[str, bytes]) -> Section:
    labels = {s["name"]: s["label"] for s in v["splits"]}
    sec = Section("validation", "2. Validation", [P([
        "Each split holds runs out, fits the model and the baselines to the rest, and scores the held-out runs' "
        "published hours against their predictive: coverage of the 50% and 90% intervals, the median of "
        "|log(p50 / published)|, the median p95/p5, and two proper scores of log hours (Gneiting & Raftery 2007): "
        "the CRPS (lower is better; about the typical relative error) and the mean log score (higher is better; "
        "-inf when a run falls outside a predictive's support, as the 30-40% rule's often do). Leaving one run out "
        "keeps its siblings in the fit; leaving its organisation or accelerator generation out does not.",
        f" All folds were sampled in one joint NUTS run ({v['config']['chains']} chains x {v['config']['draws']} "
        f"draws, {v['divergences']} divergences, {v['seconds']:.0f} s)."])])
    rows = [[labels[r["split"]], [B(NAMES[r["model"]])] if r["model"] == "model" else NAMES[r["model"]],
             str(r["runs"]), f"{r['coverage_50']:.2f}", f"{r['coverage_90']:.2f}", f"{r['median_abs_log_error']:.3f}",
             f"{r['median_p95_over_p5']:.2f}", f"{r['crps']:.3f}", _f(r["log_score"], "+.2f")]
            for r in data["validation_table"]]
    sec.blocks.append(Table(["split", "predictor", "runs", "50% cov.", "90% cov.", "med. |log err|", "med. p95/p5",
                             "CRPS", "log score"], rows, num=frozenset(range(2, 9)),
                            caption="The model and the baselines on every split."))
    skipped = [s for s in v["splits"] if s.get("skipped")]
    if skipped:
        sec.blocks.append(Items([[B(s["label"]), f": not made: {s['skipped']}."] for s in skipped]))
    tg = data.get("targets") or {}
    if tg:
        items = []
        for split, res in tg.items():
            parts = [f"{k}: {_f(x['value']) if isinstance(x['value'], float) else x['value']} "
                     f"({'met' if x['met'] else 'missed'}; target {x['target']})" for k, x in res.items()]
            items.append([B(labels[split]), ": " + "; ".join(parts)])
        sec.blocks.append(P(["Targets, per split, for the model:"]))
        sec.blocks.append(Items(items))
    for name in ("validation_intervals.png", "validation_pit.png", "calibration.png"):
        if name in figures:
            sec.blocks.append(Fig(name, figures[name], FIGURES[name]))
    sec.blocks.append(_per_run(v))
    return sec


def _per_run(v: Mapping[str, Any]) -> Table:
    made = [s for s in v["splits"] if not s.get("skipped")]
    by = [{r["id"]: r for r in s["rows"]["model"]} for s in made]
    ids = sorted({k for b in by for k in b}, key=lambda k: next(b[k]["published"] for b in by if k in b))
    rows = []
    for k in ids:
        first = next(b[k] for b in by if k in b)
        row = [[C(k)], first["kind"].replace("_", " "), format_number(first["published"])]
        for b in by:
            r = b.get(k)
            row.append("" if r is None else f"{r['p50'] / r['published']:.2f} [{r['p5'] / r['published']:.2f}, "
                       f"{r['p95'] / r['published']:.2f}]{'' if r['covered_90'] else ' ✗'}")
        rows.append(row)
    return Table(["run", "figure", "published hours"] + [s["label"] for s in made], rows,
                 num=frozenset(range(2, 3 + len(made))),
                 caption="Per run and split: the model's median and 90% interval as multiples of the published "
                 "hours (✗: outside).")


def _population(data: Mapping[str, Any]) -> Section:
    rows = [[r["accelerator"], format_number(r["params"]), f"{r['p50']:.3f}", f"[{r['p5']:.3f}, {r['p95']:.3f}]",
             r.get("note", "")] for r in data.get("population", [])]
    return Section("prior", "3. The calibrated prior", [Table(
        ["accelerator", "params", "median", "90% interval", "note"], rows, num=frozenset({1, 2, 3}), src=frozenset({4}),
        caption=f"{LABEL} for a new organisation's dense run, calibrated on {data.get('runs', '?')} published runs.")])


def _selection(sel) -> Section:
    rows = []
    for r in sel:
        sp = r["splits"]
        rows.append([[B(r["candidate"])] if r["chosen"] else r["candidate"], ", ".join(r["covariates"]) or "none",
                     "t(4)" if r["run_df"] else "normal", f"{r['crps']:.4f}"]
                    + [f"{sp[k]['coverage_90']:.2f} / {sp[k]['median_abs_log_error']:.3f}" for k in sorted(sp)])
    keys = sorted(sel[0]["splits"]) if sel else []
    return Section("selection", "4. The model the validation chose", [P([
        "Each candidate was scored on the grouped splits only; the lowest CRPS averaged over them wins, a tie "
        "within 0.005 going to the simpler candidate (the one listed first). The rule was fixed before any score "
        "was seen; mcflops/calibration/select.py says when and why each later candidate was added."]), Table(
        ["candidate", "covariates", "run effects", "grouped CRPS"] + [f"{k}: 90% cov. / err" for k in keys], rows,
        num=frozenset(range(3, 4 + len(keys))))])


def render(data: Mapping[str, Any], figures: Mapping[str, bytes]) -> dict[str, str]:
    """{"report.md": ..., "report.html": ...} of the calibration page (nothing is written)."""
    doc = build(data, figures)
    return {"report.md": to_markdown(doc), "report.html": to_html(doc)}
