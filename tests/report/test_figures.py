"""The report's figures: a panel that nothing moves is not drawn, a variance share stays in [0, 1], every axis
says its unit. The oracles: the model's own dependency list (mcflops.chain.depends), closed-form densities
(scipy), and matplotlib's own layout (window extents) of the drawn figure.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mcflops.plots import posterior, sensitivity, style


def _panel(name, prior, post, grid):
    return {"name": name, "grid": grid, "prior": prior.pdf(grid), "posterior": post.pdf(grid),
            "hdi90": (float(post.ppf(0.05)), float(post.ppf(0.95))), "prior_p50": float(prior.median()),
            "posterior_p50": float(post.median()), "percent": name in ("mfu", "goodput")}


def _data(price_moves: bool = False):
    g = np.linspace(0.05, 0.95, 200)
    p = np.linspace(0.5, 8.0, 200)
    price0 = stats.lognorm(0.3, scale=3.0)
    price1 = stats.lognorm(0.3, scale=3.6) if price_moves else price0  # 20% up: a correlated input that moved
    panels = [_panel("mfu", stats.beta(40, 60), stats.beta(80, 120), g), _panel("price", price0, price1, p)]
    return {"panels": panels, "finding": {"input": "mfu", "given": ["gpu_hours"], "posterior_p50": 0.4,
                                          "hdi90": (0.35, 0.45), "prior_p50": 0.4, "percent": True}}


def test_a_panel_nothing_moves_is_not_drawn():
    """GPU-hours do not depend on the price (chain.depends): with the posterior equal to the prior, its panel
    says nothing and is left out; MFU's stays."""
    d = _data()
    assert "price" not in {x for c in ("6nd", "palm") for x in __import__("mcflops").chain.depends("gpu_hours", c)}
    assert [p["name"] for p in posterior.moved(d["panels"], ["gpu_hours"])] == ["mfu"]
    # a price that the posterior moved visibly (through a correlation the plot cannot see) is drawn
    assert [p["name"] for p in posterior.moved(_data(True)["panels"], ["gpu_hours"])] == ["mfu", "price"]
    # an observed cost depends on the price: drawn even when it did not move
    assert [p["name"] for p in posterior.moved(d["panels"], ["cost"])] == ["mfu", "price"]
    assert len(posterior.moved(d["panels"], [])) == 2  # nothing observed: every panel


def _drawn(monkeypatch, draw, *args):
    figs = []
    monkeypatch.setattr(style, "save", lambda fig, path: (fig.tight_layout(), fig.canvas.draw(), figs.append(fig))
                        and str(path))
    draw("x.png", *args)
    return figs[0]


def test_prior_posterior_draws_the_moved_panels_with_units(monkeypatch):
    fig = _drawn(monkeypatch, posterior.prior_posterior, _data())
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.get_xlabel()]
    assert [ax.get_xlabel() for ax in shown] == ["mfu (%)"]
    fig = _drawn(monkeypatch, posterior.prior_posterior, _data(True))
    labels = [ax.get_xlabel() for ax in fig.axes if ax.get_visible() and ax.get_xlabel()]
    assert labels == ["mfu (%)", "price ($ per accelerator-hour)"]


@pytest.mark.parametrize("first, total", [(1.01, 1.02), (0.98, 0.99)])
def test_sobol_bars_clip_a_share_to_one_and_say_only_input(monkeypatch, first, total):
    sens = {"output": "gpu_hours", "sobol": {"mfu": {"first": first, "total": total, "first_se": 0.01,
                                                      "total_se": 0.01}}, "sobol_info": {"base_samples": 1024}}
    fig = _drawn(monkeypatch, sensitivity.sobol_bars, sens)
    ax = fig.axes[0]
    heights = [b.get_height() for b in ax.patches]
    assert heights and max(heights) <= 1.0 and min(heights) >= 0.0
    assert "only uncertain input" in ax.get_title() and "101" not in ax.get_title()
    assert ax.get_ylabel() == "share of the variance (0 to 1)"


def test_prior_posterior_legend_sits_above_the_curves(monkeypatch):
    """With no spare panel the legend goes in the first one: above both of its curves, none drawn under it."""
    fig = _drawn(monkeypatch, posterior.prior_posterior, _data(True))  # two panels in one row: no spare
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    box = ax.get_legend().get_window_extent(r).transformed(ax.transData.inverted())
    for line in ax.get_lines():
        x, y = line.get_data()
        under = (x >= box.x0) & (x <= box.x1)
        assert under.any() and np.max(np.asarray(y)[under]) < box.y0, line.get_label()


def test_plan_curve_labels_counts_between_powers_of_ten(monkeypatch):
    """A log count axis from 1,800 to 60,000 has 2,000, 5,000, 10,000, ... labelled (it showed one label,
    '10.0K'), each a whole number of accelerators."""
    g = np.geomspace(1800, 60000, 40)
    plan = {"curve": {"gpus": g.tolist(), "prob": stats.norm.cdf(np.log(g / 5000)).tolist(), "days": 60},
            "deadline": {"prob": 0.9, "gpus": 8232}, "cluster": {"gpus": 4096, "prob_within_deadline": 0.25},
            "distribution": "prior"}
    fig = _drawn(monkeypatch, sensitivity.plan_curve, plan)
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]
    assert shown == ["2,000", "5,000", "10,000", "20,000", "50,000"], shown
    assert ax.get_xlabel() == "accelerators"


def test_sweep_of_a_fraction_reads_in_percent(monkeypatch):
    x = [0.30, 0.35, 0.40, 0.45]
    sw = {"input": "mfu", "output": "gpu_hours", "values": x, "p50_vs_first": [1.0, 0.86, 0.75, 0.667],
          **{k: [1e7 / v * f for v in x] for k, f in (("p5", 0.9), ("p25", 0.95), ("p50", 1.0), ("p75", 1.05),
                                                      ("p95", 1.1))}}
    fig = _drawn(monkeypatch, sensitivity.sweep_fan, sw)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "MFU (%)" and ax.get_ylabel() == "GPU-hours"
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "30" in labels and "0.3" not in labels
