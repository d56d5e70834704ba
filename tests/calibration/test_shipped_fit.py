"""The shipped fit (mcflops/data/calibration_fit.json) is what `mcflops calibrate --write` makes: refitting with
its configuration and seed reproduces what it claims (every parameter's posterior mean and sd, and the
calibrated prior it yields for a run), and the choices the validation made are in it.

Not draw for draw: a NUTS chain is chaotic in its last bits, so on another CPU's SIMD path (another order of
float32 additions) the same seed gives another, equally valid chain. Two fits of the same posterior differ
by their Monte Carlo error: each summary is compared within Z standard errors of the difference,
sqrt(MCSE_a^2 + MCSE_b^2), with MCSE = sd / sqrt(ESS). The ESS is the fit's smallest over all parameters
(its diagnostics), halved for the 600 of 1,200 draws kept: a lower bound, so the tolerance errs wide rather
than failing falsely. Z = 4.5 gives a false-failure rate of 7e-6 per comparison, 1.3e-4 for the 19 here
(16 means and sds, 3 quantiles).
"""

import jax
import numpy as np

from mcflops import calibration as cal
from mcflops import engine
from mcflops.priors import calibrated

Z = 4.5
KEPT_OVER_DRAWN = 600 / 1200  # export keeps 600 of the 4 x 300 draws (thinned)


def _columns(draws: dict) -> dict[str, np.ndarray]:
    """Every scalar parameter of a fit's draws as a column of draws (a vector parameter split by index;
    the fixed zeros of a reporting kind without noise left out)."""
    out = {}
    for name, v in draws.items():
        a = np.asarray(v, float).reshape(len(v), -1)
        for j in range(a.shape[1]):
            if np.ptp(a[:, j]) > 0:
                out[f"{name}[{j}]"] = a[:, j]
    return out


def _refit():
    shipped = calibrated.load_fit()
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in shipped["config"].items()}
    cfg = cal.Config(**fields)
    assert cfg == cal.Config(chains=4, warmup=300, draws=300)  # the CLI's defaults, the model it chose
    assert shipped["fit_id"] == cal.fit_id(cfg, shipped["seed"])
    fit = cal.fit(jax.random.fold_in(engine.seed_key(shipped["seed"]), 0), cal.load_runs(), cfg)
    return shipped, cal.export(fit, shipped["seed"])


def test_refit_with_the_shipped_seed_reproduces_the_shipped_posterior_and_prior():
    shipped, again = _refit()
    assert again["diagnostics"]["divergences"] == 0 and again["diagnostics"]["max_r_hat"] < 1.05
    assert again["peak_range"] == shipped["peak_range"]
    assert (again["runs"], again["families"], again["kinds"]) == (shipped["runs"], shipped["families"], shipped["kinds"])
    ess = {"shipped": shipped["diagnostics"]["min_ess"] * KEPT_OVER_DRAWN,
           "again": again["diagnostics"]["min_ess"] * KEPT_OVER_DRAWN}
    a, b = _columns(shipped["draws"]), _columns(again["draws"])
    assert sorted(a) == sorted(b)
    for name in a:
        x, y = a[name], b[name]
        se_mean = np.hypot(x.std() / np.sqrt(ess["shipped"]), y.std() / np.sqrt(ess["again"]))
        se_sd = np.hypot(x.std() / np.sqrt(2 * ess["shipped"]), y.std() / np.sqrt(2 * ess["again"]))
        assert abs(x.mean() - y.mean()) < Z * se_mean, (name, x.mean(), y.mean(), se_mean)
        assert abs(x.std() - y.std()) < Z * se_sd, (name, x.std(), y.std(), se_sd)

    # the prior each fit gives a run like Llama 3.1 405B on H100s: its log quantiles, whose Monte Carlo
    # error is that of the per-draw predictive's mean and spread (delta method over the kept draws)
    probs = np.array([0.05, 0.5, 0.95])
    z = np.array([-1.6449, 0.0, 1.6449])
    got = {}
    for which, fit in (("shipped", shipped), ("again", again)):
        u, _ = calibrated.calibrated_prior(fit, 405e9, "h100-sxm", False, None, probs)
        mean, sd, _, sigma = calibrated.predictive(fit, 405e9, "h100-sxm", False)
        spread = np.sqrt(sd**2 + sigma**2)
        mcse = np.sqrt(mean.var() + (z * spread.std()) ** 2) / np.sqrt(ess[which])
        got[which] = (np.log(u), mcse)
    (qa, ea), (qb, eb) = got["shipped"], got["again"]
    assert np.all(np.abs(qa - qb) < Z * np.hypot(ea, eb)), (qa, qb, np.hypot(ea, eb))


def test_the_shipped_fit_carries_its_validation():
    shipped = calibrated.load_fit()
    splits = {r["split"] for r in shipped["validation"]}
    assert {"loo", "org", "generation"} <= splits
    assert {r["model"] for r in shipped["validation"]} == {"model", "constant", "rule", "generation"}
