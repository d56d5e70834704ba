"""The layout fit's residual split into the part one model's configurations share and the row's own (mcflops.layoutfit.rowres), against oracles
outside it: the one-way ANOVA against a per-group loop and against the variance components it was drawn with
(synthetic data, fixed seed, tolerances from the replicates' own standard error); the NumPy model MFU of each
row's settings against mcflops.layout.mfu (the prior's path); the residual of a row whose source leaves settings
out against the setting it was generated from."""

import dataclasses
import math

import numpy as np
import pytest

from mcflops.layout import mfu
from mcflops.layoutfit import fit as lf
from mcflops.layoutfit import rowres
from mcflops.layoutfit.mix import Data
from tests.layoutfit.test_mix import _draws_by_hand, _params, _runs


def _groups(seed=0, j=30):
    """j series of 2 to 10 rows (unbalanced, as the benchmark's are)."""
    sizes = np.random.default_rng(seed).integers(2, 11, size=j)
    return np.repeat(np.arange(j), sizes), sizes


def test_anova_is_the_per_group_loop():
    g, sizes = _groups(1)
    e = np.random.default_rng(2).standard_normal(len(g))
    got = rowres.anova(e, [f"s{k}" for k in g])
    # by hand, one group at a time
    means = {k: e[g == k].mean() for k in set(g)}
    n, j = len(e), len(sizes)
    ss_w = sum(((e[g == k] - means[k]) ** 2).sum() for k in means)
    ms_b = sum((g == k).sum() * (means[k] - e.mean()) ** 2 for k in means) / (j - 1)
    n0 = (n - (sizes ** 2).sum() / n) / (j - 1)
    assert got["df_within"] == n - j and got["groups"] == j
    assert got["ms_within"] == pytest.approx(ss_w / (n - j), rel=1e-12)
    assert got["between"] == pytest.approx(max(0.0, (ms_b - ss_w / (n - j)) / n0), rel=1e-12)
    assert got["share"] == pytest.approx(got["ms_within"] / (got["ms_within"] + got["between"]), rel=1e-12)
    with pytest.raises(ValueError, match="two groups"):
        rowres.anova(e[:3], ["a", "a", "a"])


def test_anova_recovers_the_split_it_was_drawn_with():
    """2,000 synthetic benchmarks (30 series, sd 0.08 between and 0.12 within, normal): the within mean square is
    unbiased for 0.12^2 and the between component for 0.08^2 (its clamp at 0 moves the mean by ~2e-6, the
    probability of a negative estimate being ~0.4%); each within 4 standard errors of the replicates' mean
    (a false failure about 6e-5 of the time each)."""
    g, _ = _groups(3)
    rng = np.random.default_rng(4)
    reps, sb, sw = 2000, 0.08, 0.12
    e = sb * rng.standard_normal((reps, g.max() + 1))[:, g] + sw * rng.standard_normal((reps, len(g)))
    got = rowres.anova(e, g)
    for key, truth in (("ms_within", sw ** 2), ("between", sb ** 2)):
        x = got[key]
        assert abs(x.mean() - truth) < 4 * x.std(ddof=1) / math.sqrt(reps), key


def _fake_fit(rows, params, log_y=None):
    d = Data.of(rows)
    if log_y is not None:
        d = dataclasses.replace(d, arrays={**d.arrays, "log_y": np.asarray(log_y, float)})
    samples = {k: np.asarray(v, float)[None] for k, v in params.items()}
    return lf.Fit(d, samples, 1.0, 100.0, 0, 0.0, 1, 1, {}, True)  # with the attention term, as _params has it


def _oracle(rows, d, p):
    """Each row's components' log MFU from mcflops.layout.mfu on its terms, the parameters by hand."""
    out = []
    for r in rows:
        draws = _draws_by_hand(r, d, p)
        out.append([math.log(float(mfu(t, draws)[0])) for t in r.mix])
    return out


def test_log_model_is_the_layout_models_mfu_for_each_setting():
    rows = [lf.prepare(r) for r in _runs()]
    d = Data.of(rows)
    p = _params(d)
    got = rowres.log_model(_fake_fit(rows, p), np.array([0]))[0]
    for i, want in enumerate(_oracle(rows, d, p)):
        np.testing.assert_allclose(got[i, :len(want)], want, rtol=1e-10)


def test_a_mixed_rows_residual_is_against_the_setting_it_came_from():
    """Each row's measurement made exactly one of its settings' model MFU, plus a known offset: with a small
    residual scale the responsibilities find that setting, so the residual is the offset (to the scale); the
    settings' plain mean would be off by the settings' spread (vTrain's 24 differ by far more)."""
    rows = [lf.prepare(r) for r in _runs()]
    d = Data.of(rows)
    # one residual scale for every stack (a fit without per-stack scales): small, so the responsibilities are sharp
    p = {k: v for k, v in _params(d).items() if k not in ("log_sigma_stack", "tau_sigma")} | {"sigma_obs": np.asarray(1e-4)}
    lm = _oracle(rows, d, p)
    rng = np.random.default_rng(5)
    pick = [int(rng.integers(len(x))) for x in lm]
    offset = np.array([0.0, 2e-4, -1e-4, 3e-4, -2e-4])
    log_y = [x[c] + o * r.noise for x, c, o, r in zip(lm, pick, offset, rows)]
    e, keep = rowres.residuals(_fake_fit(rows, p, log_y), lf.DF)
    assert list(keep) == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(e[0], offset, atol=3e-4)
    naive = np.array([(y - np.mean(x)) / r.noise for y, x, r in zip(log_y, lm, rows)])
    assert np.max(np.abs(naive - offset)) > 0.02  # the test can tell the two apart


def test_residuals_are_in_units_of_each_rows_stack_scale():
    """With per-stack scales, a row's residual is divided by its stack's scale (the floor in quadrature) over
    sigma_obs, so the ANOVA's share is one figure for stacks of different spread."""
    rows = [lf.prepare(r) for r in _runs()]
    d = Data.of(rows)
    p = _params(d)
    f = _fake_fit(rows, p)
    got = rowres._stack_factor(f, np.array([0]))[0]
    own = np.exp(np.asarray(p["log_sigma_stack"])[np.asarray(d.arrays["stack"])])
    np.testing.assert_allclose(got, np.hypot(own, lf.FLOOR) / p["sigma_obs"], rtol=1e-12)
    flat = {k: v for k, v in p.items() if k not in ("log_sigma_stack", "tau_sigma")}
    e1, _ = rowres.residuals(f, lf.DF)
    e0, _ = rowres.residuals(_fake_fit(rows, {**flat, "sigma_obs": np.asarray(1e3)}), lf.DF)  # flat responsibilities
    ef, _ = rowres.residuals(_fake_fit(rows, {**p, "log_sigma_stack": np.full(len(d.stacks), math.log(1e3))}), lf.DF)
    np.testing.assert_allclose(ef[0] * np.hypot(1e3, lf.FLOOR) / p["sigma_obs"], e0[0], rtol=1e-6)
    assert e1.shape == e0.shape


def test_held_rows_are_left_out_and_the_split_keeps_the_total():
    rows = [lf.prepare(r) for r in _runs()]
    f = _fake_fit(rows, _params(Data.of(rows)))
    held = dataclasses.replace(f, data=Data.of(rows, held={rows[3].id}))
    _, keep = rowres.residuals(held, lf.DF)
    assert list(keep) == [0, 1, 2, 4]
    s = np.array([0.1, 0.17, 0.3])
    np.testing.assert_allclose(rowres.shared_scale(s, 0.12) ** 2 + 0.12 ** 2, np.maximum(s ** 2, 0.12 ** 2))


def test_a_unit_is_one_models_configurations_on_one_stack():
    """What a pilot shares with production: rows of one series that differ only in layout and count share a unit;
    another model, sequence length or precision in the same series is another unit."""
    rs = {r.id: r for r in lf.rows()}
    units = {}
    for r in rs.values():
        units.setdefault(r.unit, []).append(r)
    assert all(len({r.series for r in v}) == 1 for v in units.values())
    multi = [v for v in units.values() if len(v) > 1]
    assert multi  # the within part has degrees of freedom
    from mcflops.layoutfit.data import benchmark_rows
    runs = {r.id: r for r in benchmark_rows()}
    for v in multi:
        first = runs[v[0].id]
        for r in v[1:]:
            other = runs[r.id]
            assert (other.model, other.accelerator, other.precision, other.architecture.get("seq_len")) == \
                (first.model, first.accelerator, first.precision, first.architecture.get("seq_len"))
    series = {}
    for r in rs.values():
        series.setdefault(r.series, set()).add(r.unit)
    assert any(len(u) > 1 for u in series.values())  # a series can hold several units (llm-foundry's models)
