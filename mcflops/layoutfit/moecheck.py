"""The mixture-of-experts check: the ``fit: false`` MoE rows of layout_runs.yaml predicted with the shipped priors.

Nothing here is fitted or tuned: each row goes through the prior-file grammar (:func:`mcflops.spec.load_spec`, the
layout inline, the efficiency priors the shipped fit gives its accelerator: :func:`mcflops.layoutfit.validate.
efficiency_for`), as :func:`mcflops.layoutfit.validate.layout_prior` predicts the production rows, with the whole
architecture (the experts' widths, shared experts, dense layers and MLA, which the dense fit's ``shape_of``
leaves out). The measured MFU is in true model FLOPs (the architecture's causal count, :mod:`mcflops.arch`): from
tokens/s/GPU where the source gives it (as :func:`mcflops.layoutfit.fit.prepare` does), else from Megatron's own
TFLOP/s per GPU, which the zoo's rows note agrees with the causal count of this shape within 1%.

What the sources state beyond the schema (:data:`STATED`; the row's ``notes`` quote them): every Qwen3 row runs
grouped GEMM and dropless routing; the ``a2a-overlap`` row overlaps the EP all-to-all ("+1f1b overlap"), its twin
and the long-context rows (``A2A_OVERLAP=0``) do not; the long-context ``forced-balance`` rows route with
``--moe-router-force-load-balancing`` (random, uniform routing); the rows' "selective" recompute is Megatron-Core's
recompute modules, not Korthikanti's attention recompute: "norm, act" (layernorm and the MoE activation:
elementwise, no GEMM FLOPs: taken as none) and, in the long-context command, "layernorm moe" (the whole MoE layer:
``recompute_moe``). DeepSeek-V3's global batch is the secondary's
15,360 sequences (S; the primary does not print it) and DualPipe overlaps its all-to-all by design (Sec. 3.2).

Run: ``python -m mcflops.layoutfit.moecheck`` (prints the table and its summary as JSON).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import numpy as np

from mcflops.layoutfit.data import ARCH_COUNTS, ARCH_INTS, ARCH_OPTIONAL, LayoutRun, unfitted_rows
from mcflops.layoutfit.validate import efficiency_for

# layout keys of the prior-file grammar a row's layout may carry (null: unstated, left out so it is mixed)
_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "recompute", "schedule", "zero",
         "sequence_parallel", "fsdp", "overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap")
# what each row's source states beyond the schema's columns (module docstring); keys the grammar does not know
# are dropped where the grammar has no such field (mcflops.spec.layoutspec.KEYS says which it has)
_QWEN = {"grouped_gemm": True}
# recompute "norm, act" (layernorm and moe_act modules): elementwise work only, no GEMM FLOPs (none); the
# long-context command's "--recompute-modules layernorm moe": the whole MoE layer (recompute_moe)
_NORM_ACT = {"recompute": "none"}
STATED: dict[str, dict[str, Any]] = {
    "mcore-moe-qwen3-235b-xnode-ep32-256": {**_QWEN, **_NORM_ACT, "ep_comm_overlap": False},
    "mcore-moe-qwen3-235b-xnode-ep32-a2a-overlap-256": {**_QWEN, **_NORM_ACT, "ep_comm_overlap": True},
    "mcore-moe-qwen3-235b-intranode-ep8-fsdp-256": dict(_QWEN),
    "mcore-moe-qwen3-235b-intranode-ep8-pp32-a2a-256": {**_QWEN, **_NORM_ACT},
    "mcore-moe-qwen3-235b-intranode-ep8-tp4-256": dict(_QWEN),
    "deepseek-v3-pretraining": {"global_batch": 15360},
}
for _s in (16, 32, 64, 128):
    for _r in ("forced-balance", "dropless"):
        _cp = {16: 1, 32: 2, 64: 4, 128: 8}[_s]
        STATED[f"mcore-moe-qwen3-235b-s{_s}k-cp{_cp}-{_r}-256"] = {
            **_QWEN, "ep_comm_overlap": False, "recompute": "none", "recompute_moe": True,
            **({"router": "uniform"} if _r == "forced-balance" else {})}


def moe_rows() -> list[LayoutRun]:
    """The MoE rows kept out of the fit (``fit: false``)."""
    return [r for r in unfitted_rows() if r.moe]


def _layout_doc(run: LayoutRun, model_keys: Sequence[str]) -> dict[str, Any]:
    lay = {k: run.layout[k] for k in _KEYS if run.layout.get(k) is not None}
    if run.layout.get("etp") is not None and "etp" in model_keys:
        lay["etp"] = run.layout["etp"]
    lay.update({k: v for k, v in STATED.get(run.id, {}).items() if k in model_keys or k in _KEYS})
    if lay.get("fsdp"):
        lay.pop("zero", None)
    return lay


def moe_prior(run: LayoutRun, fit_json: Mapping[str, Any]):
    """The row's LayoutPrior through the prior-file grammar, the whole architecture given."""
    from mcflops.spec import load_spec
    from mcflops.spec.layoutspec import KEYS

    arch = {k: run.architecture[k] for k in (*ARCH_INTS, *ARCH_OPTIONAL, *ARCH_COUNTS, "glu")
            if run.architecture.get(k) is not None}
    doc = {"name": run.id, "description": run.model, "seed": 0, "samples": 1000,
           "hardware": {"accelerator": run.accelerator, "precision": run.precision or "bf16", "count": run.count},
           "flops": "architecture", "architecture": arch | {"source": "layout_runs.yaml"},
           "priors": {"tokens": {"point": 1e12, "source": "placeholder"},
                      "mfu": {"layout": _layout_doc(run, KEYS), "efficiency": efficiency_for(fit_json, run.accelerator, run.precision),
                              "source": run.source}}}
    return load_spec(doc, path=f"layout_runs.yaml:{run.id}").count_dependent["mfu"]


def measured(run: LayoutRun, prior) -> float:
    """The row's MFU in true model FLOPs (module docstring)."""
    m = run.measured
    if m["tokens_per_s_per_gpu"] is not None:
        return m["tokens_per_s_per_gpu"] * prior.counts.training_flops_per_token / prior.peak
    return m["tflops_per_gpu"] * 1e12 / prior.peak


def check(fit_json: Mapping[str, Any], runs: Sequence[LayoutRun] | None = None) -> list[dict[str, Any]]:
    """Each MoE row: the prior's 5/50/95% quantiles (true model FLOPs) against the measured MFU."""
    from mcflops.errors import SpecError

    out = []
    for run in moe_rows() if runs is None else runs:
        try:
            pr = moe_prior(run, fit_json)
        except SpecError as x:  # a layout the model refuses (the report counts it)
            out.append({"id": run.id, "refused": str(x).split(": ", 1)[-1]})
            continue
        mfu = pr.factor_draws()["mfu"] / pr.counting
        q5, q50, q95 = (float(x) for x in np.quantile(mfu, [0.05, 0.5, 0.95]))
        y = measured(run, pr)
        out.append({"id": run.id, "measured": y, "p5": q5, "p50": q50, "p95": q95, "ratio": q50 / y,
                    "covered_90": q5 <= y <= q95, "width": q95 / q5})
    return out


def summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Over the rows predicted: median model/measured ratio, 90% coverage, median p95/p5, median |log ratio|; and
    the refused rows' ids."""
    refused = [x["id"] for x in rows if "refused" in x]
    rows = [x for x in rows if "refused" not in x]
    r = np.asarray([x["ratio"] for x in rows])
    return {"rows": len(rows), "refused": refused, "median_ratio": float(np.median(r)),
            "coverage_90": float(np.mean([x["covered_90"] for x in rows])),
            "median_width": float(np.median([x["width"] for x in rows])),
            "median_abs_log_error": float(np.median(np.abs(np.log(r)))) if len(r) else math.nan}


def main() -> None:
    from mcflops.layout import load_fit

    rows = check(load_fit())
    print(json.dumps({"rows": rows, "summary": summary(rows)}, indent=1))


if __name__ == "__main__":
    main()
