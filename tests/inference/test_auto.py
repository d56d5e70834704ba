"""How ``--method auto`` chooses, against oracles we did not write.

- The flagship (priors/llama405b.yaml) with the card's figure taken as exact to four digits (sigma 0.0003):
  importance sampling keeps ~3,000 effective draws of 1M with k-hat far below its threshold, so auto keeps
  it, and its posterior matches a NumPy/scipy importance-sampling oracle (tests/oracles.py, 2^22 draws from
  the prior file's distributions as scipy.stats, Kish's ESS ~12,000, so the oracle's own MCSE of goodput's
  p5 is ~0.0008). gpu_hours, narrower than two histogram bins, is summarised from the resampled draws.
- A NUTS answer that disagrees with importance sampling beyond their joint errors is said (a note and
  posterior.checks); one that agrees is not.

Tolerance: |a - b| < 4 sqrt(mcse_a^2 + mcse_b^2), a 6.3e-5 two-sided false-failure rate per check for
normal errors (about 1e-3 for the ~15 checks of the file). Seeds are fixed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import mcflops
from mcflops import inference
from mcflops.inference import crosscheck, psis
from mcflops.spec import load_spec
from tests import oracles

ROOT = Path(__file__).resolve().parents[2]
PROBS = {"p5": 0.05, "p50": 0.5, "p95": 0.95}
K = 4.0
SIGMA, VALUE = 3e-4, 30.84e6
ORACLE_DRAWS = 1 << 22


def sharp_flagship() -> dict:
    from ruamel.yaml import YAML

    spec = YAML(typ="safe", pure=True).load((ROOT / "priors" / "llama405b.yaml").read_text())
    spec["observe"]["gpu_hours"]["sigma"] = SIGMA
    spec.pop("sensitivity")
    return spec


@pytest.fixture(scope="module")
def sharp():
    spec = sharp_flagship()
    res = mcflops.run(spec)  # auto, the file's 1M samples
    oracle = oracles.gpu_hours_importance(load_spec(spec), VALUE, SIGMA, ORACLE_DRAWS, seed=20,
                                          names=("mfu", "goodput", "tokens", "gpu_hours"))
    return res, oracle


def test_auto_keeps_importance_sampling_when_it_is_adequate(sharp):
    res, _ = sharp
    post = res.posterior
    assert post["method"] == "importance", res.notes
    assert post["ess"] >= inference.ESS_MIN and post["pareto_k"] <= psis.khat_threshold(res.samples)
    assert "checks" not in post  # adequate: no failed verdict
    assert not any(n.startswith("WARNING") for n in res.notes), res.notes
    assert any("gpu_hours, wall_days is narrower than 2 histogram bins" in n and "resampled" in n
               for n in res.notes), res.notes


@pytest.mark.parametrize("name", ["goodput", "mfu", "tokens", "gpu_hours"])
def test_sharp_flagship_matches_the_numpy_oracle(sharp, name):
    res, oracle = sharp
    est = res.posterior[name]
    ref = oracles.weighted_summary(oracle[name], oracle["logw"], PROBS)
    assert ref["ess"] > 5000  # the oracle's own error is well below the run's
    for k in ("mean", "sd", *PROBS):
        se = math.hypot(est[f"mcse_{k}"], ref[f"mcse_{k}"])
        assert abs(est[k] - ref[k]) < K * se, (name, k, est[k], ref[k], se)
    if name == "gpu_hours":  # summarised from the resample, whose effective size is what the MCSEs use
        assert est["sd"] > 0 and est["ess"] <= res.posterior["ess"]


def test_khat_threshold():
    # Vehtari et al. 2024, Sec. 3.2: min(1 - 1/log10(S), 0.7)
    assert psis.khat_threshold(100) == pytest.approx(0.5)
    assert psis.khat_threshold(1000) == pytest.approx(2 / 3)
    assert psis.khat_threshold(10**6) == 0.7 and psis.khat_threshold(2155) == 0.7
    assert psis.khat_threshold(2000) < 0.7


def _fake_sampler(given, shift: dict[str, float]):
    """A stand-in for nuts.run_nuts returning given centred-log draws, some shifted: a sampler we can bias."""
    def run(key, model, lik, *, chains=4, warmup=0, draws=0):
        d = {n: (np.asarray(v, np.float64) + shift.get(n, 0.0)).reshape(chains, -1) for n, v in given.items()}
        return {"d": d, "z": {}, "ess": {n: float(v.size) for n, v in d.items()},
                "rhat": dict.fromkeys(d, 1.0), "divergences": 0, "chains": chains, "draws": d["mfu"].shape[1],
                "warmup": warmup, "seconds": 0.0, "interval_handling": {}}
    return run


@pytest.fixture(scope="module")
def beta2():
    from tests.inference.test_update import beta2_spec

    res = mcflops.run(beta2_spec(0.05, 1 << 15), method="is")
    from mcflops import engine
    from mcflops.model import compute

    m = compute.build_model(res.spec)
    return res, m, engine.build_likelihood(res.spec, m)


def test_nuts_that_disagrees_with_importance_sampling_is_said(beta2):
    import jax

    res, m, lik = beta2
    key = jax.random.key(res.seed)
    d, _ = inference.reservoir_draws(res.sums, key)  # equally weighted posterior draws: what NUTS should give
    k = 4 * (d.shape[1] // 4)
    draws = {n: d[i, :k] for i, n in enumerate(res.sums.names)}
    sd_log = float(np.std(draws["goodput"]))
    good = inference.posterior(key, res.spec, m, res.sums, lik, method="nuts", sampler=_fake_sampler(draws, {}))
    c = good.summary["nuts_vs_importance"]
    assert c["agree"] and c["compared"] >= 8 and c["max_z"] < K, c
    assert "checks" not in good.summary and not any("disagree" in n for n in good.notes)
    bad = inference.posterior(key, res.spec, m, res.sums, lik, method="nuts",
                              sampler=_fake_sampler(draws, {"goodput": 0.5 * sd_log}))
    c = bad.summary["nuts_vs_importance"]
    assert not c["agree"] and c["worst"].startswith("goodput") and c["max_z"] > K, c
    assert any(n.startswith("WARNING: NUTS and importance sampling disagree") and "goodput" in n for n in bad.notes)
    checks = bad.summary["checks"]
    assert checks["passed"] is False and any("disagree" in w for w in checks["why"])


def test_no_comparison_where_importance_sampling_cannot_judge(beta2, monkeypatch):
    # Kish's ESS under ESS_COMPARE: importance sampling's own error bar is not to be trusted, so no verdict
    import jax

    res, m, lik = beta2
    key = jax.random.key(res.seed)
    d, _ = inference.reservoir_draws(res.sums, key)
    k = 4 * (d.shape[1] // 4)
    draws = {n: d[i, :k] + 1.0 for i, n in enumerate(res.sums.names)}  # far off, but nothing to judge it by
    monkeypatch.setattr(crosscheck, "ESS_COMPARE", 10 * res.samples)
    post = inference.posterior(key, res.spec, m, res.sums, lik, method="nuts", sampler=_fake_sampler(draws, {}))
    assert "nuts_vs_importance" not in post.summary and not any("disagree" in n for n in post.notes)
    # a fixed quantity is not compared; with nothing compared there is no verdict (and no NaN for summary.json)
    fixed = {"sd": 0.0, "mean": 1.0, "mcse_mean": 0.1, "p5": 1.0, "p50": 1.0, "p95": 1.0}
    c = crosscheck.compare({"x": fixed}, {"x": {**fixed, "mean": 5.0}}, ["x"])
    assert c["agree"] and c["compared"] == 0 and c["nuts"] is None
