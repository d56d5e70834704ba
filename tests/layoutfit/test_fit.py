"""The layout calibration: the sources' FLOP conventions (mcflops.chain.published_per_token) against published
arithmetic, the fit recovering known parameters from rows simulated through mcflops.layout, and the shipped
layout_fit.json."""

import dataclasses
import json
import math

import numpy as np
import pytest

from mcflops.arch import Shape, counts
from mcflops.chain import published_per_token as per_token
from mcflops.layout import PARAMS, mfu
from mcflops.layout.fit import FIT
from mcflops.layoutfit import fit as lf
from mcflops.layoutfit.predictive import predictive
from mcflops.layoutfit.data import benchmark_rows, production_rows

GPT175 = Shape(layers=96, d_model=12288, heads=128, vocab=64000, seq_len=2048, glu=False)


def test_megatron_count_is_megascales_flops_per_token():
    # MegaScale's Megatron-LM rows: aggregate PFLOP/s / tokens/s = 1.077e12 FLOP per token (layout_runs.yaml)
    assert per_token("megatron", GPT175, 175e9) == pytest.approx(1.077e12, rel=5e-4)


def test_hfu_is_narayanan_eq3_expanded():
    l, h, s, v = 96, 12288, 2048, 64000
    hfu = 96 * l * h * h + 16 * l * h * s + 6 * h * v  # 96 B s l h^2 (1 + s/6h + V/16lh), multiplied out
    assert per_token("hfu", GPT175, 175e9, "full") == pytest.approx(hfu, rel=1e-12)
    # without full recompute: rho x the model count (selective: 1 + s / (18 h + 3 s)), the layout model's rho
    # as the fit converts an HFU figure
    rho = 1 + s / (18 * h + 3 * s)
    true = counts(GPT175).training_flops_per_token
    assert lf.to_true("hfu", GPT175, 175e9, "selective") == pytest.approx(true / (rho * (72 * l * h * h + 12 * l * h * s + 6 * h * v)))
    assert lf.to_true("hfu", GPT175, 175e9, "none") == pytest.approx(true / (72 * l * h * h + 12 * l * h * s + 6 * h * v))


@pytest.mark.parametrize("run_id, without, with_", [("mt-nlg-530b", 0.297, 0.302), ("palm-540b", 0.457, 0.462)])
def test_attention_term_matches_published_pairs(run_id, without, with_):
    # PaLM Table 3 / App. B print MFU without and with the attention FLOPs: their ratio is palm / 6nd
    run = next(r for r in production_rows() if r.id == run_id)
    shape, _ = lf.shape_of(run)
    ratio = per_token("palm", shape, run.params["total"]) / per_token("6nd", shape, run.params["total"])
    assert ratio == pytest.approx(with_ / without, abs=0.006)  # the printed figures' rounding (3 digits)


def test_causal_and_true_counts():
    n = 175e9
    assert per_token("causal", GPT175, n) == 6 * n + 6 * 96 * 12288 * 2048
    assert per_token("unstated", GPT175, n) == per_token("palm", GPT175, n) == 6 * n + 12 * 96 * 12288 * 2048
    with pytest.raises(ValueError, match="architecture"):
        per_token("architecture", GPT175, n)  # a spec's convention, never a source's
    # true FLOPs: 3 x forward; without GQA/GLU the forward is 2 (4 h^2 + 8 h^2) per layer + causal scores + logits
    fwd = 96 * 2 * 12 * 12288 ** 2 + 2 * 96 * 12288 * 2 * 2048 / 2 + 2 * 12288 * 64000
    assert counts(GPT175).training_flops_per_token == pytest.approx(3 * fwd, rel=1e-12)


def test_rows_convert_each_convention():
    by = {r.id: r for r in lf.rows(benchmark_rows())}
    # llm-foundry (palm) and a throughput-only torchtitan row (tokens/s x true FLOPs / peak)
    r = by["foundry-h100-bf16-70b-s2048-g64-mb8-gb2048"]
    shape = Shape(layers=80, d_model=8192, heads=64, vocab=50368, seq_len=2048, glu=False, ffn=32768)
    assert r.y == pytest.approx(0.4257 * counts(shape).training_flops_per_token / (6 * 64862437376.0 + 12 * 80 * 8192 * 2048))
    t = by["torchtitan-8b-fsdp-8"]
    tshape = Shape(layers=32, d_model=4096, heads=32, vocab=128256, seq_len=8192, kv_heads=8, ffn=14336, glu=True)
    assert t.y == pytest.approx(5762.0 * counts(tshape).training_flops_per_token / 989.4e12)
    assert "architecture.seq_len" in t.imputed and t.noise > 1
    assert all(0 < x.y < 1 for x in by.values())


def _synthetic(seed=0):
    """Rows with the terms of real A100 rows (vTrain and MegaScale: varied TP, DP and bubbles), two stacks of two
    series each, MFU simulated through mcflops.layout.mfu from known parameters (GEMM efficiency per series, the
    communication multiplier per stack; the memory-bound multiplier and the attention core's efficiency common),
    Student-t(4) noise of a scale of each stack's own. Every row's overlap flags and
    recompute are known (its terms as stated, one component): the mixture over unknown ones is checked against
    scipy in test_layoutmix; 40 rows in two short chains do not also recover which setting each row ran."""
    rng = np.random.default_rng(seed)
    real = [r for r in lf.rows(benchmark_rows()) if r.series.startswith(("vtrain", "megascale"))][::3][:40]
    truth = {"gemm": {"s0a": 0.50, "s0b": 0.60, "s1a": 0.65, "s1b": 0.75}, "tp_comm": {"s0": 0.5, "s1": 0.2},
             "dp_comm": 0.1, "straggler_cv": 0.004, "sigma": {"s0": 0.03, "s1": 0.12}, "elementwise": 10.0,
             "attention": 0.6}
    rows = []
    for i, r in enumerate(real):
        st = "s0" if i % 2 else "s1"
        se = st + "ab"[i // 2 % 2]
        d = {"gemm": np.array([truth["gemm"][se]]), "tp_comm": np.array([truth["tp_comm"][st]]),
             "dp_comm": np.array([truth["dp_comm"]]), "ep_comm": np.array([1.0]),
             "straggler_cv": np.array([truth["straggler_cv"]]), "elementwise": np.array([truth["elementwise"]]),
             "attention": np.array([truth["attention"]])}
        y = float(mfu(r.terms, d)[0]) * math.exp(truth["sigma"][st] * rng.standard_t(4))
        rows.append(dataclasses.replace(r, stack=st, series=se, family="a100", y=y, noise=1.0, mix=(r.terms,), unknown=(),
                                        modes=r.modes[:1]))
    return rows, truth


def test_fit_recovers_known_parameters():
    rows, truth = _synthetic()
    # 250 + 250: what the one family and the two stacks leave to their priors (tau_family, tau_stack_gemm beside the
    # series term) mixes slowly, and at 150 + 150 its R-hat was 1.12; tree depth 8: the two stacks' own residual
    # scales (one 4x the other) sharpen the posterior past what depth 6 crosses
    f = lf.fit(rows, seed=0, chains=2, warmup=250, draws=250, max_tree_depth=8, attention=True)
    s = f.samples
    assert f.r_hat_max < 1.1
    k = {st: f.data.stacks.index(st) for st in ("s0", "s1")}
    fam = f.data.families.index("a100")
    # each checked quantity inside its central 99.45% posterior interval: 9 checks, a false-failure rate <= 5%
    checks = {"elementwise": (np.exp(s["mu_log_elementwise"]), truth["elementwise"])}
    for se in truth["gemm"]:
        st = se[:2]
        logit = (s["mu_gemm"] + s["tau_family"] * s["z_family"][:, fam] + s["tau_stack_gemm"] * s["z_stack_gemm"][:, k[st]]
                 + lf.series_effect(f, se, None))
        checks[f"gemm {se}"] = (1 / (1 + np.exp(-logit)), truth["gemm"][se])
    for st in ("s0", "s1"):
        checks[f"tp {st}"] = (np.exp(s["mu_log_tp_comm"] + s["tau_stack_tp_comm"] * s["z_stack_tp_comm"][:, k[st]]),
                              truth["tp_comm"][st])
        checks[f"sigma {st}"] = (lf.stack_sigma(f, st), truth["sigma"][st])
    for name, (draws, true) in checks.items():
        lo, hi = np.quantile(draws, [0.00275, 0.99725])
        assert lo <= true <= hi, (name, lo, true, hi)
    # and the fit is informative: the series inside a stack, the two stacks' GEMM efficiencies and their residual
    # scales are told apart
    assert np.mean(checks["gemm s0b"][0] > checks["gemm s0a"][0]) > 0.95
    assert np.mean(checks["gemm s1a"][0] > checks["gemm s0a"][0]) > 0.95
    assert np.mean(checks["sigma s1"][0] > checks["sigma s0"][0]) > 0.95
    # a stated stack's predictive is its fitted effects (the same draws the rows are scored with); a new stack's
    # draws its effects afresh: (log draw - mu) / tau is a standard normal, independent of every fitted stack's
    # z (4 standard errors each at n draws: sd(sample sd) = 1 / sqrt(2n), sd(r) = 1 / sqrt(n))
    known = predictive(f, "a100", 0, 0.0, "s1")
    assert np.array_equal(known["tp_comm"], checks["tp s1"][0])
    new = predictive(f, "a100", 0, 0.0)
    n = len(s["mu_gemm"])
    for p in ("tp_comm", "dp_comm"):
        z = (np.log(new[p]) - s[f"mu_log_{p}"]) / s[f"tau_stack_{p}"]
        assert abs(np.std(z) - 1) < 4 / math.sqrt(2 * n), p
        for st in ("s0", "s1"):
            assert abs(np.corrcoef(z, s[f"z_stack_{p}"][:, k[st]])[0, 1]) < 4 / math.sqrt(n), (p, st)
    with pytest.raises(ValueError, match="no stack 's9'"):
        predictive(f, "a100", 0, 0.0, "s9")


def test_shipped_fit_parses_and_is_the_fit():
    from mcflops.layoutfit.validate import SCHEMA, efficiency_for, layout_prior

    doc = json.loads(FIT.read_text())
    # the efficiency parameters and the memory-bound operations' multiplier the fit now has (not the attention
    # core's: fit() says why)
    assert doc["schema"] == SCHEMA and set(doc["default"]) == {*PARAMS, "elementwise"}
    assert "independent" in doc["status"] and "marginal" in doc["status"].lower()
    assert {"rows", "families", "stacks", "r_hat_max", "ess_min", "sigma_obs", "date", "command"} <= set(doc["fit"])
    assert doc["fit"]["r_hat_max"] < 1.05
    for acc in ("h100-sxm", "h800", "a100"):
        assert efficiency_for(doc, acc)["gemm"] == doc["accelerator"][acc]["gemm"]
    for p, d in doc["default"].items():
        assert "calibration" in d["source"] or (p == "ep_comm" and "not fitted" in d["source"])
    # the residual's row part: a share of the fit's, its source saying how it was measured (layoutfit.rowres)
    row = doc["row_residual"]
    assert 0 < row["sigma"] <= doc["fit"]["sigma_obs"]["p95"] and row["df"] == lf.DF
    assert "rowres" in row["source"] and "ANOVA" in row["source"] and "by unit" in row["source"]
    # each fitted stack's own priors and residual, which a file stating it reads (mcflops.spec.layoutspec)
    assert set(doc["stack"]) == set(doc["fit"]["stacks"])
    from mcflops.layout.fit import stack_entry
    from mcflops.spec import load_spec

    for name, entry in doc["stack"].items():
        assert entry["rows"] > 0 and 0 < entry["residual"] and set(entry["default"]) == {*PARAMS, "elementwise"}
        assert stack_entry(doc, name) is entry
    name = "megatron-core-2024"
    spec = load_spec({"name": "s", "hardware": {"accelerator": "h100-sxm", "count": 1024},
                      "architecture": {"preset": "llama3.1-70b"},
                      "priors": {"tokens": "15T", "mfu": {"layout": {"tp": 8, "pp": 4, "global_batch": 2048},
                                                          "stack": name}}})
    lp = spec.count_dependent["mfu"]
    assert lp.stack == name and lp.row_sigma == doc["stack"][name]["residual"]
    from mcflops.priors.quantiles import ppf

    got = [float(ppf(lp.efficiency["tp_comm"], q)) for q in (0.05, 0.95)]
    assert got == pytest.approx(doc["stack"][name]["default"]["tp_comm"]["lognormal"], rel=1e-9)
    assert lp.to_dict()["stack"] == name
    # every prior parses through the grammar: the Llama 3 production row's layout prior at its count
    run = next(r for r in production_rows() if r.id == "llama3-405b-table4-row1")
    lp = layout_prior(run, doc, layout={"vpp": 4, "zero": 2})
    m = lp.factor_draws()["mfu"]
    assert 0.1 < np.median(m) < 0.7 and np.all((m > 0) & (m <= 1))


def test_flagship_layout_file_loads():
    from pathlib import Path

    from mcflops.spec import load_spec

    path = Path(__file__).resolve().parents[2] / "priors" / "llama405b-layout.yaml"
    if not path.exists():
        pytest.skip("priors/llama405b-layout.yaml is not in this checkout")
    spec = load_spec(path)
    assert "mfu" in spec.count_dependent


def test_held_out_rows_are_predicted_as_production_rows_are():
    """validate.held_out is the production check's prediction for rows the fit never saw: on the production rows
    without overrides (their recompute unstated or stated, flags unknown) it gives production()'s quantiles; and it
    takes an accelerator with no family of the fit (B200), where production() cannot, on the default priors."""
    from mcflops.layoutfit import validate as va
    from mcflops.layoutfit.data import load_layout_runs

    doc = json.loads(FIT.read_text())
    plain = [r for r in production_rows() if r.series not in va.PRODUCTION]
    assert {r.id for r in plain} >= {"bloom-176b", "mt-nlg-530b", "nemotron4-15b-stage1"}
    ours = {r["id"]: r for r in va.held_out(doc, plain)}
    for p in va.production(doc, plain):
        o = ours[p["id"]]
        assert (o["p5"], o["p50"], o["p95"]) == pytest.approx((p["p5"], p["p50"], p["p95"]), rel=1e-12), p["id"]
        assert o["measured"] == p["published"] and o["covered_90"] == p["covered_90"]
        assert o["ratio"] == pytest.approx(p["p50"] / p["published"], rel=1e-12)
    b200 = next(r for r in load_layout_runs() if r.accelerator == "b200")
    with pytest.raises(StopIteration):
        lf.family(b200)
    assert va.efficiency_for(doc, "b200")["gemm"] == doc["default"]["gemm"]
    (o,) = va.held_out(doc, [b200])
    assert 0 < o["p5"] < o["p50"] < o["p95"] <= 1 and o["p95_over_p5"] == pytest.approx(o["p95"] / o["p5"])
