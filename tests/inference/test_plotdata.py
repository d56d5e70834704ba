"""The figures' plot data (mcflops.inference.plotdata) against closed forms: the density read from
log-space histogram sums, as the engine keeps them, is the lognormal's; the draws' histogram density
integrates to the share of draws it covers."""

import numpy as np
from scipy import stats

from mcflops.inference import plotdata


def test_hist_density_is_the_lognormal_density():
    """z ~ N(0, 1) binned in log space (tails in the first and last bins, as engine.Sums holds them): the
    density on a linear grid is the exact lognormal CDF differenced on the same grid, within 4 Monte Carlo
    standard errors of a differenced empirical CDF, sqrt(p (1 - p) / n) / step (false-failure rate ~6e-5
    per point), plus the CDF's linear interpolation between log-space edges 0.01 apart (< 1e-3 here)."""
    n, lo, width, bins = 400_000, -6.0, 0.01, 1200
    z = np.random.default_rng(0).standard_normal(n)
    k = np.floor((z - lo) / width).astype(int)
    hist = np.bincount(np.clip(k + 1, 0, bins + 1), minlength=bins + 2).astype(float)
    grid = np.linspace(0.2, 3.0, 160)
    got = plotdata.hist_density(hist, 0.0, lo, width, grid)
    exact_cdf = stats.norm.cdf(np.log(grid))
    mid, step = 0.5 * (grid[1:] + grid[:-1]), np.diff(grid)
    want = np.interp(grid, mid, np.diff(exact_cdf) / step)
    p = np.interp(grid, mid, np.diff(exact_cdf))
    se = np.sqrt(p * (1 - p) / n) / step[0]
    assert np.all(np.abs(got - want) <= 4 * se + 1e-3), np.max(np.abs(got - want) / se)
    assert abs(np.sum(0.5 * (got[1:] + got[:-1]) * step) - (exact_cdf[-1] - exact_cdf[0])) < 0.01


def test_draws_density_covers_the_draws_inside_its_range():
    x = np.random.default_rng(1).beta(8.0, 12.0, 20_000)
    grid = np.linspace(0.0, 1.0, 2001)
    f = plotdata.draws_density(x, grid)
    inside = np.mean((x >= np.quantile(x, 0.0005)) & (x <= np.quantile(x, 0.9995)))
    assert abs(np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(grid)) - inside) < 0.01
    assert np.all(plotdata.draws_density(np.full(50, 0.3), grid) == 0)  # no spread: nothing to draw
