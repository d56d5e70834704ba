"""The pilot's held-out validation: its series and pilots are the data's, each refit holds out exactly the series'
benchmark rows, conditioning pulls the pilot's own predictive onto its measurement, a pilot with a huge error
leaves the layout prior as it was, and the scores are those of the rows. The refit is injected (the shipped fit,
no NUTS): the NUTS refit itself is tests/layoutfit/test_holdout.py's, and the real validation's figures are in
benchmarks/RESULTS.md."""

import math

import numpy as np
import pytest

from mcflops.layout.fit import load_fit
from mcflops.layoutfit import holdout as lh
from mcflops.layoutfit import pilots
from mcflops.layoutfit.data import load_layout_runs

SMALL = "megatron-core-2024-h100-strong"  # two rows: the cheapest series to predict


@pytest.fixture(scope="module")
def runs():
    return load_layout_runs()


def test_each_series_has_its_smallest_count_as_the_pilot(runs):
    for name in pilots.SERIES:
        mine = [r for r in runs if r.series == name]
        got = pilots.series_runs(name, runs)
        assert len(got) == len(mine) >= 2 and {r.id for r in got} == {r.id for r in mine}
        assert got[0].count == min(r.count for r in mine)
    assert {r.kind for r in pilots.series_runs("llama3-405b", runs)} == {"production"}
    with pytest.raises(ValueError, match="a pilot needs one more"):
        pilots.series_runs("bloom-176b", runs)


def test_the_pilot_pulls_its_own_predictive_onto_its_measurement(runs):
    """With no run-level residual (row_residual 0) the pilot's likelihood is its 5% error alone; with the shipped
    one it is sqrt(0.05^2 + sigma_row^2) wide (mcflops.spec.pilots.log_likelihood), so the pilot moves the
    shared draws less: its row's predictive is narrower than the prior's in both, and less narrow with it."""
    row = load_fit()["row_residual"]["sigma"]
    assert 0 < row
    got = {}
    for sigma_row in (0.0, row):
        fj = {**load_fit(), "row_residual": {"sigma": sigma_row}}
        res = pilots.transfer(pilots.series_runs(SMALL, runs), fj)
        p = res["pilot"]
        assert p["row_sigma"] == sigma_row
        lo, mid, hi = p["predicted_posterior"]
        width, prior = hi / lo, p["predicted_prior"][2] / p["predicted_prior"][0]
        got[sigma_row] = width, res["ess"]
        # given the pilot, its row is predicted within 2 likelihood sds of what it measured, more narrowly than
        # the prior does and than the likelihood alone would (a normal prior times a normal likelihood has the
        # smaller variance: 1 / (1/tau^2 + 1/s^2) < s^2, so its 90% log-width is below 2 x 1.645 s)
        s_lik = math.hypot(pilots.SIGMA, sigma_row)
        assert abs(math.log(mid / p["y"])) < 2 * s_lik
        assert math.log(width) < 2 * 1.6449 * s_lik and width < prior and 200 < res["ess"] < res["draws"]
    assert got[row][0] > got[0.0][0] and got[row][1] > got[0.0][1]


def test_an_uninformative_pilot_leaves_the_prior(runs):
    """sigma 1e3: every weight is 1 to 1e-6, so the predictive is the prior's sample: its weighted (Hazen)
    quantiles against NumPy's linear ones differ by less than the gap between neighbouring draws (1 / 65,536 of
    the probability, times the density; 1e-3 relative is well above it)."""
    res = pilots.transfer(pilots.series_runs(SMALL, runs), load_fit(), sigma=1e3)
    (row,) = res["rows"]
    assert np.allclose([row["p5"], row["p50"], row["p95"]], row["prior"], rtol=1e-3)
    assert res["ess"] > 0.999 * res["draws"]


def test_validate_holds_out_each_series_and_scores_its_rows(runs):
    seen = []

    def refit(held):
        seen.append(set(held))
        return {**load_fit(), "fit": {"r_hat_max": 1.0, "ess_min": 100.0, "divergences": 0}}

    out = pilots.validate(0, lh.Settings(1, 50, 50, 5), series=(SMALL, "llama3-405b"), refit=refit)
    assert seen == [{r.id for r in runs if r.series == SMALL}, set()]  # a production series is never in a fit
    s = out["series"][0]
    assert s["held_out"] == 2 and s["fit_rows"] == len([r for r in runs if r.kind == "benchmark" and r.fit]) - 2
    rows = [r for x in out["series"] for r in x["rows"]]
    assert out["pooled"]["rows"] == len(rows) == 1 + 2
    expect = lh.scores([r["y"] for r in rows], [r["p5"] for r in rows], [r["p50"] for r in rows],
                       [r["p95"] for r in rows])
    assert out["pooled"]["model"] == expect
    # the production scale: Llama 3's two rows on 16,384 GPUs (both), Megatron-Core's on 4,608
    top = pilots.production_rows(out["series"][1]["rows"])
    assert [r["count"] for r in top] == [16384, 16384]
    assert out["pooled"]["production_p95_over_p5"] == pytest.approx(np.median(
        [x["production_p95_over_p5"] for x in out["series"]]), rel=1e-12)
    assert set(out["met"]) == set(pilots.TARGETS)
    # both series keep one model at every count (a pilot: block's scope), so the one-model pool is the whole pool
    assert [x["one_model"] for x in out["series"]] == [True, True]
    assert out["pooled_one_model"]["model"] == expect and set(out["met_one_model"]) == set(pilots.TARGETS)


def test_a_series_whose_model_changes_is_left_out_of_the_one_model_pool(runs):
    """Megatron-Core's weak scaling grows the model with the count (1.7B on 48 GPUs to 462B on 6,144): a prior
    file's pilot keeps the file's architecture, so that series is scored but pooled apart."""
    weak = pilots.series_runs("megatron-core-2024-h100-weak", runs)
    assert len({r.model for r in weak}) > 1
    out = pilots.validate(0, lh.Settings(1, 50, 50, 5), series=(SMALL, "megatron-core-2024-h100-weak"),
                          refit=lambda held: {**load_fit(), "fit": {}})
    assert [x["one_model"] for x in out["series"]] == [True, False]
    assert out["pooled_one_model"]["rows"] == len(out["series"][0]["rows"])
    assert out["pooled"]["rows"] == sum(len(x["rows"]) for x in out["series"])


def test_the_command_writes_and_prints_the_validation(tmp_path, monkeypatch, capsys):
    """`mcflops calibrate --layout --pilot-holdout --out DIR`: the table and DIR/layout_pilot_validation.json,
    the refits replaced by the shipped fit (the command's plumbing, not NUTS)."""
    from mcflops import cli

    real = pilots.validate

    def quick(seed, settings, **kw):
        return real(seed, settings, series=(SMALL,), refit=lambda held: {**load_fit(), "fit": {"r_hat_max": 1.2}})

    monkeypatch.setattr(pilots, "validate", quick)
    assert cli.main(["calibrate", "--layout", "--pilot-holdout", "--quiet", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    import json

    data = json.loads((tmp_path / "layout_pilot_validation.json").read_text())
    assert [s["series"] for s in data["series"]] == [SMALL]
    assert "did not converge" in text.split("\n")[0]  # a refit past R-hat 1.1 is named before the table
    assert "mcore2024-strong-175b-4608" in text and "pooled" in text and "targets" in text


def test_two_pilots_weigh_the_draws_by_both_measurements(runs):
    """Two pilots: the draws weighted by the product of each pilot's likelihood (by hand: log-normal in the shared
    draws' MFU, sd sqrt(0.05^2 + sigma_row^2), the weighted median through the sorted CDF at Hazen's midpoints),
    the two pilots' rows no longer predicted, and the second pilot moves the prediction off the first one's alone."""
    from mcflops.layoutfit.pilots import mfu_draws
    from mcflops.layoutfit.validate import row_sigma

    fj = load_fit()
    series = pilots.series_runs("megascale-175b-strong-megascale", runs)
    second = sorted(series[1:], key=lambda r: r.count)[0]
    order = [series[0], second] + [r for r in series[1:] if r is not second]
    got = pilots.transfer(order, fj, pilots=2)
    assert [r["id"] for r in got["rows"]] == [r.id for r in order[2:]]
    s = math.hypot(pilots.SIGMA, row_sigma(fj))
    logw = sum(-0.5 * ((np.log(mfu_draws(r, fj, row=False)[1].y) - np.log(mfu_draws(r, fj, row=False)[0])) / s) ** 2
               for r in order[:2])
    w = np.exp(logw - logw.max())
    w /= w.sum()
    assert got["ess"] == pytest.approx(1 / np.sum(w ** 2), rel=1e-9)
    m, _ = mfu_draws(order[-1], fj)
    i = np.argsort(m)
    cdf = np.cumsum(w[i]) - 0.5 * w[i]  # Hazen's midpoints, as the weighted quantiles take them
    want = np.interp(0.5, cdf, m[i])
    assert got["rows"][-1]["p50"] == pytest.approx(want, rel=1e-6)
    one = pilots.transfer([series[0]] + order[2:], fj)
    assert [r["id"] for r in one["rows"]] == [r["id"] for r in got["rows"]]
    assert got["rows"][-1]["p50"] != pytest.approx(one["rows"][-1]["p50"], rel=1e-3)
