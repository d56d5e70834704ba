"""The layout fit's shipped priors, and its checks: held-out production runs, held-out benchmark trends.

:func:`export` turns a :class:`mcflops.layoutfit.fit.Fit` into ``layout_fit.json`` (schema
``layout_fit_v1``): the posterior predictive for a NEW run with a NEW software stack, on a known accelerator
family (``accelerator:``, GEMM efficiency and the attention core's: the other parameters do not depend on the
family) or on an
unseen one (``default:``), each parameter's marginal on its own. :func:`production` predicts each production
row from those priors through the prior-file grammar (:func:`mcflops.spec.load_spec`, the layout and
``efficiency:`` given inline), in the row's own FLOP convention, a flag its source does not state
``unknown`` (both settings mixed 1:1) and a recompute it does not state each mode that fits (mixed 1:1, as the
fit mixes them); :func:`trends` refits without the trend
series and compares each measured ratio with the model's.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any, Mapping, Sequence

import numpy as np

from mcflops.layout import OPTIONAL, OVERLAP_FLAGS, PARAMS
from mcflops.layout.fit import accelerator_priors, stack_entry
from mcflops.layoutfit import fit as lf
from mcflops.layoutfit.data import LayoutRun, benchmark_rows, production_rows
from mcflops.layoutfit.mix import draw_components, unknown_flags
from mcflops.layoutfit.predictive import marginals, predictive

SCHEMA = "layout_fit_v1"
EP_SOURCE = ("not fitted: no benchmark row is a mixture of experts, so the rows say nothing about ep_comm; the "
             "starting prior, DeepSeek-V3 Sec. 3.2 (cross-node expert-parallel all-to-all about 1:1 with compute "
             "before DualPipe's overlap)")
STATUS = ("fitted by `mcflops calibrate --layout --write` to the benchmark rows of layout_runs.yaml (production rows "
          "held out). The priors are independent marginals: each is the posterior predictive marginal for a new run "
          "with a new software stack; the fit's correlations (e.g. high GEMM efficiency with more exposed communication) are dropped, so the shipped "
          "MFU prior is somewhat wider than the joint predictive where parameters trade off, never narrower where they "
          "add. ep_comm keeps its starting prior (no mixture-of-experts rows). stack: each fitted stack's own "
          "posterior predictive marginals and row residual (its effects and residual scale as fitted), which a file "
          "that states the stack reads.")
# Production rows: what the paper says beyond the row (the flagship prior file's assumptions for Llama 3, whose
# FSDP variant keeps the weights after the forward: ZeRO-2 in memory terms, and overlaps its reduce-scatter and
# all-gather with compute as FSDP does by design; vpp not published, 4 assumed) and
# TPU v4's interconnect, which the catalogue lacks (GCP TPU v4 docs: 2,400 Gbps ICI per chip; a PaLM pod of
# 3,072 chips, PaLM Sec. 4; cross-pod DCN per chip assumed 25 GB/s).
PRODUCTION = {"llama3-405b": ({}, {"vpp": 4, "zero": 2, "overlap_grad_reduce": True, "overlap_param_gather": True}),
              "palm-540b": ({}, {"nvlink_gb_s": 300.0, "nvlink_domain": 3072, "network_gb_s": 25.0})}
ARCH_KEYS = ("layers", "d_model", "heads", "vocab", "seq_len", "kv_heads", "ffn", "glu")
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "recompute", "schedule", "zero",
               "grad_bytes", "nvlink_gb_s", "nvlink_domain", "network_gb_s", "sequence_parallel", *OVERLAP_FLAGS)


def export(f: lf.Fit, command: str, seed: int = 0) -> dict[str, Any]:
    """``layout_fit.json`` from a fit: the efficiency priors with the residual's part shared by one model's configurations folded
    into GEMM efficiency, and the row's own part (``row_residual``: a Student-t scale on log MFU that the layout
    prior draws afresh for each run; :mod:`mcflops.layoutfit.rowres`), measured on the fit's training rows."""
    from mcflops.layoutfit import rowres

    today = datetime.date.today().isoformat()
    n = len(f.data.arrays["log_y"])
    split = rowres.split(f, lf.DF)
    row = split["sigma_row"]

    def src(what: str) -> str:
        return (f"layout calibration ({today}; {command}): NumPyro fit to {n} benchmark rows of layout_runs.yaml "
                f"(Megatron-LM 2021/Megatron-Core 2024 README tables, MegaScale Tables 1-2, llm-foundry, torchtitan, "
                f"vTrain, Korthikanti et al. 2022, MLPerf Training GPT-3); posterior predictive for a new run {what} "
                "with a new software stack")

    def priors(stack: str | None, row: float, src) -> tuple[dict[str, Any], dict[str, Any]]:
        """(default, accelerator) entries for a new stack (``stack`` None) or a fitted one."""
        default = marginals(predictive(f, None, seed, row, stack), src("on an accelerator family not in the rows"))
        default["ep_comm"] = {"lognormal": list(lf.STARTING_EP), "source": EP_SOURCE}
        accel: dict[str, Any] = {}
        for fam, ids in lf.FAMILIES.items():
            if fam in f.data.families:
                g = _family_part(marginals(predictive(f, fam, seed, row, stack), src(f"on {fam} ({', '.join(ids)})")))
                accel.update({i: g for i in ids})
            # the FP8 rows are a family of their own (lf.family): GEMM efficiency against the FP8 peak, which a file
            # in fp8 on these accelerators reads (mcflops.layout.fit.accelerator_priors), not the BF16 one
            if f"{fam}-fp8" in f.data.families:
                g = _family_part(marginals(predictive(f, f"{fam}-fp8", seed, row, stack),
                                           src(f"in FP8 on {fam} ({', '.join(ids)}), against the FP8 peak")))
                accel.update({f"{i}/fp8": g for i in ids})
        return {p: default[p] for p in (*PARAMS, *OPTIONAL) if p in default}, accel

    default, accel = priors(None, row, src)
    stacks: dict[str, Any] = {}
    counts = np.bincount(np.asarray(f.data.arrays["stack"])[_training(f)], minlength=len(f.data.stacks))
    for k, name in enumerate(f.data.stacks):
        if "log_sigma_stack" not in f.samples or not counts[k]:
            continue
        own = split["stacks"][name]

        def ssrc(what: str, name=name, n_k=int(counts[k])) -> str:
            return (f"layout calibration ({today}; {command}): NumPyro fit to {n} benchmark rows of layout_runs.yaml; "
                    f"posterior predictive for a new run {what} on the stack {name} ({n_k} of the rows: its effects "
                    "and residual scale as fitted)")

        d, a = priors(name, own, ssrc)
        stacks[name] = {"rows": int(counts[k]), "residual": round(own, 4), "default": d, "accelerator": a}
    s = f.samples["sigma_obs"]
    return {"schema": SCHEMA, "status": STATUS, "default": default, "accelerator": accel, "stack": stacks,
            "row_residual": {"sigma": round(row, 4), "df": lf.DF,
                             "source": f"layout calibration ({today}; {command}): {rowres.describe(split)}"},
            "fit": {"rows": n, "families": list(f.data.families), "stacks": list(f.data.stacks),
                    "r_hat_max": round(f.r_hat_max, 4), "ess_min": round(f.ess_min, 1), "divergences": f.divergences,
                    "sigma_obs": {"p50": round(float(np.median(s)), 4), "p5": round(float(np.quantile(s, 0.05)), 4),
                                  "p95": round(float(np.quantile(s, 0.95)), 4)},
                    "chains": f.chains, "draws": f.draws, "seed": seed, "seconds": round(f.seconds, 1),
                    "date": today, "command": command,
                    "families_without_rows": [k for k in lf.FAMILIES if k not in f.data.families]}}


def _family_part(m: Mapping[str, Any]) -> dict[str, Any]:
    """What an accelerator family's entry carries of its marginals: GEMM efficiency, and the attention core's where the
    fit has the term (its kernels differ by family, and in FP8 it runs against the FP8 peak: mix.attention_scale)."""
    return {p: m[p] for p in ("gemm", "attention") if p in m}


def _training(f: lf.Fit) -> np.ndarray:
    """The fit's training rows (a held-out row's likelihood is masked out), as a boolean mask."""
    a = f.data.arrays
    return np.asarray(a.get("fit", np.ones(len(a["log_y"])))) > 0


def efficiency_for(fit_json: Mapping[str, Any], accelerator: str, precision: str | None = None) -> dict[str, Any]:
    """The priors a file on ``accelerator`` at ``precision`` gets from ``fit_json`` (default, then the accelerator's
    entries at that precision where the fit has them: mcflops.layout.fit.accelerator_priors)."""
    out = {**fit_json["default"], **accelerator_priors(fit_json, accelerator, precision)}
    return {p: {k: v for k, v in d.items() if k != "source"} | {"source": d.get("source", "")} for p, d in out.items()}


def row_sigma(fit_json: Mapping[str, Any]) -> float:
    """The run's own residual ``fit_json`` measured (0 for an export from before the split: all of it shared)."""
    return float(fit_json.get("row_residual", {}).get("sigma", 0.0))


def layout_prior(run: LayoutRun, fit_json: Mapping[str, Any], arch: Mapping | None = None, layout: Mapping | None = None,
                 stack: str | None = None):
    """The run's LayoutPrior through the prior-file grammar (true model FLOPs: flops: architecture); with ``stack``,
    that fitted stack's priors and residual in ``fit_json`` (as a file stating ``stack:`` reads the shipped fit's)."""
    part = stack_entry(fit_json, stack)
    from mcflops.spec import load_spec

    shape, _ = lf.shape_of(run, arch)
    lo, _ = lf.layout_of(run, shape, layout)
    lay = {k: getattr(lo, k) for k in LAYOUT_KEYS}
    # an overlap flag neither the row's source nor the overrides state is unknown: the prior mixes both settings,
    # as the fit does (mix; FSDP's data-parallel two stay on, by its design)
    lay.update({k: "unknown" for k in unknown_flags(run.layout, layout)})
    doc = {"name": run.id, "description": run.model, "seed": 0, "samples": 1000,
           "hardware": {"accelerator": run.accelerator, "precision": run.precision or "bf16", "count": run.count},
           "flops": "architecture",
           "architecture": {k: getattr(shape, k) for k in ARCH_KEYS if getattr(shape, k) is not None}
           | {"ffn": shape.ff, "source": "layout_runs.yaml"},
           "priors": {"tokens": {"point": 1e12, "source": "placeholder"},
                      "mfu": {"layout": lay, "efficiency": efficiency_for(part, run.accelerator, run.precision),
                              "residual": float(part["residual"]),
                              "source": run.source}}}
    return load_spec(doc, path=f"layout_runs.yaml:{run.id}").count_dependent["mfu"]


def production(fit_json: Mapping[str, Any], runs: Sequence[LayoutRun] | None = None) -> list[dict[str, Any]]:
    """Each held-out production row: the prior's median and 90% interval in the row's convention vs published."""
    out = []
    for run in production_rows() if runs is None else runs:
        arch, lay = PRODUCTION.get(run.series, ({}, {}))
        row = lf.prepare(run, arch, lay)
        shape, n = _n(run, arch)
        # an unstated recompute: each mode that fits, mixed 1:1 per draw as the fit mixes it (mix)
        true = [layout_prior(run, fit_json, arch, {**lay, "recompute": mode}).factor_draws()["mfu"] for mode in row.modes]
        m = draw_components([t / lf.to_true(row.convention, shape, n, mode) for t, mode in zip(true, row.modes)], (),
                            len(row.modes))
        true = draw_components(true, (), len(row.modes))
        q5, q50, q95 = (float(x) for x in np.quantile(m, [0.05, 0.5, 0.95]))
        pub = row.published
        out.append({"id": run.id, "accelerator": run.accelerator, "count": run.count, "convention": row.convention,
                    "published": pub, "p5": q5, "p50": q50, "p95": q95, "error": q50 / pub - 1.0,
                    "within_15pct": abs(q50 / pub - 1.0) <= 0.15, "covered_90": q5 <= pub <= q95,
                    "imputed": list(row.imputed), "recompute": "/".join(row.modes),
                    "p50_6nd": (float(np.median(true)) / lf.to_true("6nd", shape, n, row.modes[0])
                                if row.convention == "unstated" else None),
                    "note": "unstated FLOP count: converted as palm" if row.convention == "unstated" else ""})
    return out


def held_out(fit_json: Mapping[str, Any], runs: Sequence[LayoutRun]) -> list[dict[str, Any]]:
    """Any rows the shipped priors never saw (benchmark rows added after the fit included), predicted as
    :func:`production` predicts a production row: through the prior-file path, in the row's own FLOP convention,
    its unstated flags and recompute mixed. Unlike :func:`production` it needs no accelerator family of the fit
    (a B200 row takes the ``default:`` priors, as a prior file on it does). Each: measured, p5/p50/p95, p50 over
    measured, p95/p5, and whether the 90% interval covers the measurement."""
    out = []
    for run in runs:
        shape, n = _n(run, None)
        lo, _ = lf.layout_of(run, shape)
        modes = lf.recompute_modes(run, shape, lo)
        conv = run.measured["convention"]
        draws = [layout_prior(run, fit_json, None, {"recompute": m}).factor_draws()["mfu"] / lf.to_true(conv, shape, n, m)
                 for m in modes]
        q5, q50, q95 = (float(x) for x in np.quantile(draw_components(draws, (), len(modes)), [0.05, 0.5, 0.95]))
        y = run.mfu
        out.append({"id": run.id, "accelerator": run.accelerator, "precision": run.precision, "count": run.count,
                    "convention": conv, "measured": y, "p5": q5, "p50": q50, "p95": q95, "ratio": q50 / y,
                    "p95_over_p5": q95 / q5, "covered_90": q5 <= y <= q95, "recompute": "/".join(modes), "fit": run.fit})
    return out


def _n(run: LayoutRun, arch: Mapping | None) -> tuple:
    return lf.shape_of(run, arch)[0], run.params["active"]


def trend_sets(rs: Sequence[lf.Row]) -> dict[str, list[tuple[str, str]]]:
    """The held-out trend pairs (numerator row id, denominator row id) by trend."""
    by = {r.id: r for r in rs}
    out: dict[str, list[tuple[str, str]]] = {"strong_scaling": [], "interleaving": [], "tp_past_nvlink": []}
    for series in ("megascale-175b-strong-megatron", "megascale-175b-strong-megascale", "megatron-core-2024-h100-strong"):
        for gb in sorted({_gb(r) for r in rs if r.series == series}):
            part = sorted((r for r in rs if r.series == series and _gb(r) == gb), key=lambda r: r.terms.count)
            if len(part) > 1:
                out["strong_scaling"].append((part[-1].id, part[0].id))
    tt = [r for r in rs if r.series == "torchtitan-405b-pp-schedule"]
    if len(tt) == 2:
        inter = next(r for r in tt if "interleaved" in r.id)
        out["interleaving"].append((inter.id, next(r for r in tt if r is not inter).id))
    for r in rs:
        if r.series.startswith("vtrain") and "tp16" in r.id:
            twin = r.id.replace("tp16", "tp8").replace(f"dp{_dp(r)}", f"dp{2 * _dp(r)}")
            if twin in by:
                out["tp_past_nvlink"].append((r.id, twin))
    return out


def _gb(r: lf.Row) -> float:
    return round(r.terms.dp * r.terms.micro_batches)  # the global batch in micro-batches of 1 sequence x b


def _dp(r: lf.Row) -> int:
    return int(round(r.terms.dp))


def trends(rs: Sequence[lf.Row], seed: int = 0, chains: int = 2, warmup: int = 200, draws: int = 200) -> dict[str, Any]:
    """Refit without every row of a trend pair (one fit for all trends), then each pair's measured ratio against
    the model's posterior median ratio (the row's own family and stack, as fitted without the pair)."""
    sets = trend_sets(rs)
    held = {i for pairs in sets.values() for pair in pairs for i in pair}
    train = [r for r in rs if r.id not in held]
    f = lf.fit(train, seed, chains, warmup, draws)
    by = {r.id: r for r in rs}
    out: dict[str, Any] = {"held_out_rows": len(held), "fit_rows": len(train), "r_hat_max": f.r_hat_max,
                           "seconds": f.seconds, "trends": {}}
    for name, pairs in sets.items():
        res = []
        for a, b in pairs:
            ra, rb = by[a], by[b]
            pred = lf.row_draws(f, ra) / lf.row_draws(f, rb)
            lo, mid, hi = (float(x) for x in np.quantile(pred, [0.05, 0.5, 0.95]))
            meas = ra.y / rb.y
            res.append({"numerator": a, "denominator": b, "measured": meas, "p50": mid, "p5": lo, "p95": hi,
                        "same_direction": (meas - 1) * (mid - 1) > 0, "covered_90": lo <= meas <= hi})
        out["trends"][name] = res
    # llm-foundry publishes no recompute on/off pair (each configuration is one or the other); what it does
    # print is HFU beside MFU, whose ratio is the model's rho for full recompute (4/3, Korthikanti Sec. 5)
    full = [r for r in benchmark_rows() if r.measured["hfu"] and r.measured["mfu"] and r.layout["recompute"] == "full"]
    ratios = [r.measured["hfu"] / r.measured["mfu"] for r in full]
    out["full_recompute"] = {"rows": len(full), "hfu_over_mfu_median": float(np.median(ratios)) if ratios else None,
                             "model_rho": 4.0 / 3.0, "note": "no on/off pair in the data: the HFU/MFU ratio of the "
                             "full-recompute rows against the model's 4/3 (MFU = 3/4 HFU)"}
    return out


def table(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The production targets: medians within 15% for most, 90% intervals covering >= 80%."""
    n = len(rows)
    w = sum(r["within_15pct"] for r in rows)
    c = sum(r["covered_90"] for r in rows)
    return {"rows": n, "within_15pct": w, "covered_90": c, "coverage_90": c / n if n else math.nan,
            "median_abs_error": float(np.median([abs(r["error"]) for r in rows])) if n else math.nan,
            "targets_met": {"medians": w > n / 2, "coverage": c >= 0.8 * n}}


def to_json(x: Any) -> Any:
    """Plain JSON data (numpy scalars and bools to Python)."""
    if isinstance(x, Mapping):
        return {k: to_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_json(v) for v in x]
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if dataclasses.is_dataclass(x):
        return to_json(dataclasses.asdict(x))
    return x

