"""The layout fit's grouped validation: its splits partition the rows, a held-out row adds nothing to the fit,
the constant baseline's interval has its stated coverage, and each split's scores are those of its rows."""

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest

from mcflops.layoutfit import fit as lf
from mcflops.layoutfit import holdout as ho
from mcflops.layoutfit.data import benchmark_rows
from mcflops.layoutfit.mix import Data


@pytest.fixture(scope="module")
def rows():
    return lf.rows(benchmark_rows())


def test_partitions_are_disjoint_and_cover_the_rows(rows):
    ids = [r.id for r in rows]
    for kind in ho.KINDS:
        groups = ho.partition(rows, kind)
        flat = [i for g in groups.values() for i in g]
        assert sorted(flat) == sorted(ids) and len(flat) == len(set(flat)), kind
    papers = ho.partition(rows, "paper")
    assert set(papers) == {"korthikanti2022-a100", "llm-foundry", "megascale", "megatron-2021", "megatron-core-2024",
                           "mlperf-training", "torchtitan", "vtrain"}
    by = {r.id: r for r in rows}
    assert {by[i].stack for i in papers["megascale"]} == {"megascale", "megatron-on-megascale"}
    # MLPerf Training's four rounds (one stack, a series each) are one paper: no round is predicted from its siblings
    assert {by[i].stack for i in papers["mlperf-training"]} == {"mlperf-training"}
    assert {by[i].series for i in papers["mlperf-training"]} == {f"mlperf-v{v}-gpt3" for v in ("3.0", "3.1", "4.0", "4.1")}
    assert {i for g, m in ho.partition(rows, "generation").items() for i in m if g == "hopper"} == \
        {r.id for r in rows if r.family in ("hopper", "hopper-fp8")}
    fs = ho.folds(rows)
    for kind in ("paper", "generation"):  # held out in turn: the folds' held-out rows are the partition
        held = [set(f.held) for f in fs if f.kind == kind]
        assert sum(map(len, held)) == len(rows) and set.union(*held) == set(ids)
    # series out, stack kept: two halves, each held-out series' stack keeps another series in the fit
    halves = [f for f in fs if f.kind == "series"]
    assert [f.group for f in halves] == ["A", "B"] and not set(halves[0].held) & set(halves[1].held)
    for f in halves:
        gone = {by[i].series for i in f.held}
        kept = {(by[i].stack, by[i].series) for i in ids if by[i].series not in gone}
        for s in gone:
            stack = next(by[i].stack for i in f.held if by[i].series == s)
            assert any(st == stack for st, _ in kept), s
            assert {i for i in f.held if by[i].series == s} == {i for i in ids if by[i].series == s}  # whole series
    (scale,) = [f for f in fs if f.kind == "scale"]
    assert set(scale.held) == {r.id for r in rows if r.terms.count > ho.SCALE_CUT} and 0 < len(scale.held) < len(rows)
    assert all(0 < len(f.held) < len(rows) for f in fs)


def test_a_held_out_row_adds_nothing_to_the_fit(rows):
    """The masked model's log joint is the model's on the training rows alone (same families and stacks)."""
    import jax
    import jax.numpy as jnp
    from numpyro.handlers import seed, trace
    from numpyro.infer.util import log_density

    sub = rows[::19]
    held = {r.id for r in sub[::3]}
    d = Data.of(sub, held=held)
    train = Data.of([r for r in sub if r.id not in held], d.families, d.stacks)
    nf, ns = len(d.families), len(d.stacks)

    arrays = {k: jnp.asarray(v) for k, v in d.arrays.items()}
    tr = trace(seed(lf.model, jax.random.PRNGKey(3))).get_trace(arrays, nf, ns)
    params = {k: s["value"] for k, s in tr.items() if s["type"] == "sample" and not s["is_observed"]}

    @jax.jit
    def density(arrays):
        return log_density(lf.model, (arrays, nf, ns), {}, params)[0]

    def joint(arrays):
        return float(density({k: jnp.asarray(v) for k, v in arrays.items()}))

    everything = Data.of(sub, d.families, d.stacks).arrays
    assert joint(d.arrays) == pytest.approx(joint(train.arrays), rel=1e-6)
    assert joint(everything) != pytest.approx(joint(train.arrays), rel=1e-6)  # the held-out rows did count before


def test_constant_baseline_interval_covers_90_percent():
    """One-way normal data (3 accelerators, 3-8 rows each): a new row of each accelerator, and of one without
    training rows where every mean is equal, falls in the 90% interval 90% of the time. 3,000 replications x 4
    predictions; pass within 4 binomial standard errors (a false-failure rate about 6e-5, independence taken)."""
    rng = np.random.default_rng(11)
    means, sizes, sd = {"a": -1.0, "b": -0.6, "c": -1.3}, {"a": 3, "b": 5, "c": 8}, 0.2
    hits, reps = [], 3000
    for _ in range(reps):
        train = [SimpleNamespace(y=math.exp(means[g] + sd * rng.standard_normal()), accelerator=g)
                 for g in means for _ in range(sizes[g])]
        new = [SimpleNamespace(y=math.exp(means[g] + sd * rng.standard_normal()), accelerator=g) for g in means]
        for r, (lo, mid, hi) in zip(new, ho.baseline(train, new)):
            hits.append(lo <= r.y <= hi)
            mine = [math.log(t.y) for t in train if t.accelerator == r.accelerator]
            assert mid == pytest.approx(math.exp(np.mean(mine)))
        same = [SimpleNamespace(y=math.exp(-1.0 + sd * rng.standard_normal()), accelerator="a") for _ in range(12)]
        unseen = [SimpleNamespace(y=math.exp(-1.0 + sd * rng.standard_normal()), accelerator="z")]
        (lo, _, hi), = ho.baseline(same, unseen)
        hits.append(lo <= unseen[0].y <= hi)
    n = len(hits)
    assert abs(np.mean(hits) - 0.9) < 4 * math.sqrt(0.09 / n)


def test_grouped_scores_are_those_of_their_rows(rows):
    """A tiny refit (12 rows of three papers, the largest counts held out, one short chain): the split's scores
    recomputed in NumPy from its per-row predictions, every row's interval ordered; and a pooled score is that
    of all its splits' rows."""
    pick = {}
    for r in rows:
        if r.stack in ("llm-foundry", "megascale", "torchtitan") and len(r.mix) <= 3:
            pick.setdefault(r.stack, []).append(r)
    pick["megascale"].sort(key=lambda r: -r.terms.count)  # its largest first: some rows past SCALE_CUT
    sub = [r for rs in pick.values() for r in rs[:4]]
    big = {r.id for r in sub if r.terms.count > ho.SCALE_CUT}
    assert len(sub) == 12 and 0 < len(big) < 12
    out = ho.validate(sub, ho.Settings(chains=1, warmup=20, draws=20, max_tree_depth=3), seed=0, kinds=("scale",))
    (s,) = out["splits"]
    assert {r["id"] for r in s["rows"]} == big and s["fit_rows"] == 12 - len(big) and out["pooled"] == []
    y = np.array([r["y"] for r in s["rows"]])
    assert np.allclose(y, [next(x.y for x in sub if x.id == r["id"]) for r in s["rows"]], rtol=0)
    for who, q in (("model", np.array([[r["p5"], r["p50"], r["p95"]] for r in s["rows"]])),
                   ("baseline", np.array([r["baseline"] for r in s["rows"]]))):
        assert np.all(q[:, 0] <= q[:, 1]) and np.all(q[:, 1] <= q[:, 2])
        got = s[who]
        assert got["rows"] == len(y)
        assert got["coverage_90"] == np.count_nonzero((q[:, 0] <= y) & (y <= q[:, 2])) / len(y)
        assert got["median_abs_log_error"] == pytest.approx(np.median(np.abs(np.log(q[:, 1]) - np.log(y))), rel=1e-12)
        assert got["median_p95_over_p5"] == pytest.approx(np.median(q[:, 2] / q[:, 0]), rel=1e-12)
    a = [{"y": 1.0, "p5": 0.5, "p50": 0.9, "p95": 1.2, "baseline": [0.2, 1.1, 3.0]}]
    b = [{"y": 2.0, "p5": 2.1, "p50": 2.5, "p95": 4.0, "baseline": [1.0, 2.0, 5.0]},
         {"y": 0.4, "p5": 0.1, "p50": 0.3, "p95": 0.9, "baseline": [0.3, 0.5, 0.6]}]
    pooled = ho.score_rows(a + b)
    assert pooled["model"] == {"rows": 3, "coverage_90": 2 / 3, "median_p95_over_p5": pytest.approx(2.4),
                               "median_abs_log_error": pytest.approx(math.log(2.5 / 2.0))}
    assert pooled["baseline"]["coverage_90"] == 1.0 and pooled["baseline"]["median_p95_over_p5"] == pytest.approx(5.0)


def test_unknown_kind_is_refused(rows):
    with pytest.raises(ValueError, match="paper, generation, scale"):
        ho.group_of("organisation", rows[0])
    budget = dataclasses.asdict(ho.settings_for(4, 300))
    assert budget == {"chains": 2, "warmup": 150, "draws": 150, "max_tree_depth": 10}


def test_the_command_line_names_a_refit_that_did_not_converge_first():
    from rich.console import Console

    from mcflops.cli.calibrate import holdout_show

    def split(label, rhat):
        rows = [{"id": "a", "y": 0.4, "p5": 0.3, "p50": 0.41, "p95": 0.5, "baseline": [0.1, 0.3, 0.35]}]
        return {"label": label, "held_out": 1, "r_hat_max": rhat, **ho.score_rows(rows)}

    con = Console(width=200, record=True)
    holdout_show(con, {"settings": dataclasses.asdict(ho.Settings(2, 150, 150, 7)), "targets": ho.TARGETS,
                       "splits": [split("paper out: x", 1.01), split("paper out: y", 1.3)], "pooled": []})
    text = con.export_text()
    lines = text.splitlines()
    assert "1 of 2 hold-out refits did not converge" in lines[0] and "paper out: y" in lines[0]
    assert "paper out: x" not in lines[0]
    row = next(l for l in lines if "paper out: x" in l)
    assert "1.00" in row and "0.025" in row  # coverage, |log(0.41 / 0.4)|
    assert "const. |log err|" in text and "0.85" in text  # the baseline's columns and the targets
