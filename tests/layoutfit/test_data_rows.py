"""The layout-resolved rows added from torchtitan's 2025 benchmarks, Megatron-Core's MoE model zoo, DeepSeek-V3,
Korthikanti et al. 2022 and MLPerf Training's GPT-3 175B results.

Each check compares the typed rows with a second figure the source prints (a speedup column, a step time beside
a throughput, an MFU beside an iteration time) or with a count we did not write (Narayanan's model FLOPs,
mcflops.arch's parameter count), so a mistyped number fails; tolerances are the printed figures' rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from mcflops import hardware
from mcflops.layoutfit import data as ld


@pytest.fixture(scope="module")
def runs():
    return {r.id: r for r in ld.load_layout_runs()}


def _series(runs, prefix):
    return [r for r in runs.values() if r.series.startswith(prefix)]


def _whole_layout(r):
    lay = r.layout
    assert lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"] == r.count, r.id
    assert r.source.strip() and r.licence.strip() and r.status in ld.STATUSES, r.id
    if not r.fit:
        assert r.fit_reason.strip(), r.id


# the async-TP file's third column, "Async TP speedup", printed to two decimals
SPEEDUP = {("70b", "bf16"): 1.09, ("70b", "fp8-tensorwise"): 1.16, ("70b", "fp8-rowwise"): 1.04,
           ("8b", "bf16"): 1.10, ("8b", "fp8-tensorwise"): 1.10, ("8b", "fp8-rowwise"): 1.06}


def test_torchtitan_async_tp_rows_reproduce_the_printed_speedups(runs):
    rows = _series(runs, "torchtitan-asynctp-")
    assert len(rows) == 12
    for r in rows:
        _whole_layout(r)
        assert r.precision == ("bf16" if "-bf16-" in r.id else "fp8") and r.memory_gb == 96.0
        assert r.layout["tp_comm_overlap"] == r.id.endswith(("-async-256", "-async-64"))
        assert r.layout["global_batch"] == {256: 16 * 32, 64: 12 * 8}[r.count]
    for (model, q), printed in SPEEDUP.items():
        n = 256 if model == "70b" else 64
        tps = {m: runs[f"torchtitan-asynctp-{model}-{q}-{m}-{n}"].measured["tokens_per_s_per_gpu"]
               for m in ("vanilla", "async")}
        assert tps["async"] / tps["vanilla"] == pytest.approx(printed, abs=0.005 + 1e-9), (model, q)
    # only the baseline the source itself calls defective is out of the fit
    assert {r.id for r in rows if not r.fit} == {"torchtitan-asynctp-70b-fp8-rowwise-vanilla-256",
                                                 "torchtitan-asynctp-8b-fp8-rowwise-vanilla-64"}


def test_torchtitan_h200_rows(runs):
    rows = _series(runs, "torchtitan-h200-")
    assert [(r.count, r.measured["tokens_per_s_per_gpu"]) for r in rows] == [(32, 10938.0), (64, 10753.0)]
    for r in rows:
        _whole_layout(r)
        assert r.accelerator == "h200" and r.precision == "fp8" and r.layout["dp"] == r.count
        # 6N at the printed throughput sits below the FP8 peak (a mistyped throughput would not)
        assert 6 * r.params["total"] * r.measured["tokens_per_s_per_gpu"] < hardware.get("h200").peak("fp8")


GA = {"xnode-ep32-256": 128, "xnode-ep32-a2a-overlap-256": 128, "intranode-ep8-fsdp-256": 4,
      "intranode-ep8-pp32-a2a-256": 512, "intranode-ep8-tp4-256": 256}


def test_qwen3_moe_rows_agree_with_their_step_times_and_the_shape_count(runs):
    """TF/GPU x step x GPUs / (GBS x seq) is the FLOPs per token Megatron counted: it must be the Shape's causal
    training count (mcflops.arch.counts) to the printed rounding (TF and step to 3 figures: <= 0.6%) plus the
    small terms Megatron's formula weighs differently (router, norms: under 1%); a mistyped figure is off by more."""
    from mcflops.arch import Shape, counts

    rows = _series(runs, "megatron-moe-zoo-qwen3-235b-")
    assert len(rows) == 13 and all(r.moe and not r.fit for r in rows)
    keys = ("layers", "d_model", "heads", "vocab", "seq_len", "kv_heads", "head_dim", "ffn", "glu", "experts",
            "experts_active", "shared_experts", "moe_ffn", "dense_layers")
    for r in rows:
        _whole_layout(r)
        lay = r.layout
        assert (lay["tp"] * lay["dp"] * lay["cp"]) % (lay["ep"] * lay["etp"]) == 0, r.id
        c = counts(Shape(**{k: r.architecture[k] for k in keys}))
        # the model's name, 235B-A22B, against the counted shape
        assert c.params_total == pytest.approx(r.params["total"], rel=0.005)
        assert c.params_active == pytest.approx(r.params["active"], rel=0.01)
        m = r.measured
        if m["iteration_time_s"] is None:
            continue
        tokens = lay["global_batch"] * r.architecture["seq_len"] / (m["iteration_time_s"] * r.count)
        assert m["tokens_per_s_per_gpu"] == pytest.approx(tokens, abs=0.05)
        per_token = m["tflops_per_gpu"] * 1e12 / tokens
        assert per_token == pytest.approx(c.training_flops_per_token, rel=0.015), r.id
    timed = [r for r in rows if r.measured["iteration_time_s"]]
    assert len(timed) == 5
    for r in timed:  # the table's EDP column: the expert layers regroup each stage's tp*dp*cp ranks exactly
        lay = r.layout
        assert lay["ep"] * lay["etp"] * lay["edp"] == lay["tp"] * lay["dp"] * lay["cp"], r.id
        # the table's GA column (gradient-accumulation steps) = GBS / (MBS x DP)
        assert lay["global_batch"] == GA[r.id.removeprefix("mcore-moe-qwen3-235b-")] * lay["micro_batch"] * lay["dp"]


def test_deepseek_v3_row(runs):
    """Sec. 1 prints 180K H800 hours per trillion tokens and 2664K hours for 14.8T tokens: both give the throughput;
    the architecture's count gives the report's 671B total and 37B activated."""
    from mcflops.arch import Shape, counts

    r = runs["deepseek-v3-pretraining"]
    assert r.kind == "production" and not r.fit and r.moe and r.precision == "fp8" and r.accelerator == "h800"
    _whole_layout(r)
    assert (r.layout["pp"], r.layout["ep"], r.layout["tp"], r.layout["zero"]) == (16, 64, 1, 1)
    tps = r.measured["tokens_per_s_per_gpu"]
    assert tps == pytest.approx(1e12 / (180e3 * 3600), abs=0.05)
    assert tps == pytest.approx(14.8e12 / (2664e3 * 3600), rel=1e-3)  # the two printed figures, to their rounding
    c = counts(Shape(**{k: v for k, v in r.architecture.items() if k != "source" and v is not None}))
    assert c.params_total == pytest.approx(671e9, rel=0.001)
    assert c.params_active == pytest.approx(37e9, rel=0.02)  # 37B as printed; the count includes the input row


# Korthikanti et al. 2022 Table 5's "Throughput Increase" column: full-recompute time over present-work time, less 1
INCREASE = {"22b": 0.290, "175b": 0.318, "530b": 0.297, "1t": 0.321}


def test_korthikanti_rows_mfu_recomputed_from_iteration_time(runs):
    """Narayanan et al. 2021's model FLOPs, 72 B s l h^2 (1 + s/6h + V/12lh), over iteration time x GPUs x the A100
    peak reproduces each printed MFU within the rounding of its inputs (time to 0.01 s, MFU to 0.1 point); the
    full-recompute rows' MFU, derived by the time ratio, inherit the present-work row's error scaled down."""
    rows = _series(runs, "korthikanti2022-")
    assert len(rows) == 10 and all(r.fit and r.accelerator == "a100" for r in rows)
    timed = [r for r in rows if r.measured["iteration_time_s"]]
    assert len(timed) == 9
    for r in rows:
        _whole_layout(r)
        assert r.measured["convention"] == "megatron"
    a = {k: np.array([r.architecture[k] for r in timed], float) for k in ("layers", "d_model", "vocab", "seq_len")}
    l, h, V, s = a["layers"], a["d_model"], a["vocab"], a["seq_len"]
    B = np.array([r.layout["global_batch"] for r in timed], float)
    t = np.array([r.measured["iteration_time_s"] for r in timed])
    n = np.array([r.count for r in timed], float)
    mfu = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h)) / (t * n * 312e12)
    printed = np.array([r.mfu for r in timed])
    assert np.all(np.abs(mfu - printed) <= mfu * 0.005 / t + 0.0005 + 1e-4 * (printed != np.round(printed, 3)))
    for name, inc in INCREASE.items():
        full = next(r for r in timed if r.id.startswith(f"korthikanti2022-{name}-full"))
        now = next(r for r in timed if r.id.startswith(f"korthikanti2022-{name}-selective") and r.layout["dp"] == 1)
        ratio = full.measured["iteration_time_s"] / now.measured["iteration_time_s"] - 1
        assert ratio == pytest.approx(inc, abs=0.0015), name
        # the paper: hardware over model FLOPs ~ 1 + s/6h under selective recompute
        hs = now.architecture["seq_len"] / (6 * now.architecture["d_model"])
        assert now.measured["hfu"] / now.mfu == pytest.approx(1 + hs, abs=0.004), name
    # the abstract: 54.2% is "29% faster" than full recompute's 42.1% at 2240 GPUs
    assert runs["korthikanti2022-530b-selective-sp-2240"].mfu / runs["korthikanti2022-530b-full-recompute-2240"].mfu \
        == pytest.approx(1.29, abs=0.005)


# MLPerf Training's gpt3 benchmark: the reference's figures (mlcommons/training large_language_model/megatron-lm:
# run_gpt3.sh and README.md), typed here from the reference, not from the rows
MLPERF_GPT3 = {"layers": 96, "d_model": 12288, "heads": 96, "ffn": 4 * 12288, "vocab": 50257, "seq_len": 2048, "glu": False}
# submitted systems per round (the results repositories' gpt3 result folders on accelerators the catalogue has,
# duplicates filed twice counted once; TPU v5p's int8 submissions excluded)
MLPERF_ROUNDS = {"v3.0": 5, "v3.1": 8, "v4.0": 4, "v4.1": 5}


def test_mlperf_gpt3_rows_mfu_from_step_time_and_the_flop_count(runs):
    """Each row's MFU is Narayanan et al. 2021's model FLOPs for a step, 72 B s l h^2 (1 + s/6h + V/12lh), over the
    step time x GPUs x the dense FP8 peak, the step time rounded to 4 figures and the MFU to 4 decimals: an
    independent NumPy line reproduces it, the chain's own megatron count per token agrees with that line, and the
    tokens per GPU-second are the global batch's tokens over the same time."""
    from mcflops.arch import Shape, counts
    from mcflops.chain import published_per_token

    rows = _series(runs, "mlperf-")
    assert {s: sum(r.series == f"mlperf-{s}-gpt3" for r in rows) for s in MLPERF_ROUNDS} == MLPERF_ROUNDS
    assert len(rows) == sum(MLPERF_ROUNDS.values())
    peak = {"h100-sxm": 1978.9e12, "b200": 4.5e15}  # accelerators.yaml's dense FP8 figures, as typed there
    for r in rows:
        _whole_layout(r)
        lay, a = r.layout, r.architecture
        assert r.kind == "benchmark" and r.status == "D" and r.precision == "fp8" and "Apache-2.0" in r.licence
        assert {k: a[k] for k in MLPERF_GPT3} == MLPERF_GPT3, r.id
        assert hardware.get(r.accelerator).peak("fp8") == peak[r.accelerator]
        # Megatron's interleaved schedule: whole layers per virtual stage, whole micro-batches per replica
        assert a["layers"] % (lay["pp"] * lay["vpp"]) == 0 and lay["schedule"] == "interleaved", r.id
        assert lay["global_batch"] % (lay["dp"] * lay["micro_batch"]) == 0, r.id
        assert lay["tp"] <= hardware.get(r.accelerator).nvlink_domain and lay["zero"] == 1, r.id
        B, s, l, h, V = lay["global_batch"], a["seq_len"], a["layers"], a["d_model"], a["vocab"]
        t, n = r.measured["iteration_time_s"], r.count
        flops = 72.0 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
        mfu = flops / (t * n * peak[r.accelerator])
        assert abs(r.mfu - mfu) <= 0.5e-4 + mfu * 0.5e-3, r.id  # MFU to 4 decimals, the time to 4 figures
        assert r.measured["tokens_per_s_per_gpu"] == pytest.approx(B * s / (t * n), abs=0.05 + 1e-9), r.id
        shape = Shape(**{k: a[k] for k in MLPERF_GPT3})
        assert published_per_token("megatron", shape, r.params["total"]) == pytest.approx(flops / (B * s), rel=1e-12)
        # the benchmark's name, 175B, against the counted shape (tied input/output embedding counted once or twice:
        # 0.6B, within the 0.5%)
        assert counts(shape).params_total == pytest.approx(r.params["total"], rel=0.005)
    # the FP8 peak's utilisation sits below the BF16 one's bound: a step time mistyped by 2x would break one side
    assert all(0.2 < r.mfu < 0.5 for r in rows)
    # only the B200 preview (no family in the fit) and Oracle's two (recompute unstated) are kept out of the fit
    assert {r.id for r in rows if not r.fit} == {"mlperf-v4.1-gpt3-nvidia-b200-64", "mlperf-v4.1-gpt3-oracle-1536",
                                                  "mlperf-v4.1-gpt3-oracle-3072"}
    assert {r.count for r in rows} >= {64, 256, 512, 10752, 11616}


def test_no_dense_layout_a_run_used_is_refused(runs):
    """The dense rows where a refusal would come from, built through the prior-file grammar as a user's file would
    be: every production and MLPerf row, and per series the rows of the most pipeline chunks (pp x vpp against the
    layers), the largest micro-batch and the largest count (memory and the count's degrees). The model refuses
    none of these layouts that ran (the MoE rows: test_moecheck). Unstated settings are mixed, so a row's gaps are
    no reason to refuse; production rows take the settings the check assumes (validate.PRODUCTION). A subset,
    for the suite's time: every dense row is the same loop over all of them (benchmarks/RESULTS.md gives it)."""
    from mcflops.layout import load_fit
    from mcflops.layoutfit import validate as lv

    fit = load_fit()
    dense = [r for r in runs.values() if not r.moe]
    chosen = {r.id: r for r in dense if r.kind == "production" or r.series.startswith("mlperf")}
    by_series: dict[str, list] = {}
    for r in dense:
        by_series.setdefault(r.series, []).append(r)
    for rows in by_series.values():
        for key in (lambda r: (r.layout.get("pp") or 1) * (r.layout.get("vpp") or 1) / r.architecture["layers"],
                    lambda r: r.layout.get("micro_batch") or 0, lambda r: r.count):
            top = max(rows, key=key)
            chosen[top.id] = top
    assert len(chosen) > 60
    refused = []
    for r in chosen.values():
        arch, lay = lv.PRODUCTION.get(r.series, ({}, {}))
        try:
            lv.layout_prior(r, fit, arch or None, lay or None)
        except Exception as x:  # noqa: BLE001 - any refusal is the finding
            refused.append((r.id, str(x)))
    assert refused == []
