"""The shipped fit (mcflops/data/calibration_fit.json) is what `mcflops calibrate --write` makes: refitting with
its configuration and seed reproduces its draws, and the choices the validation made are in it."""

import jax
import numpy as np

from mcflops import calibration as cal
from mcflops import engine
from mcflops.priors import calibrated as derived


def test_refit_with_the_shipped_seed_reproduces_the_shipped_draws():
    shipped = derived.load_fit()
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in shipped["config"].items()}
    cfg = cal.Config(**fields)
    assert cfg == cal.Config(chains=4, warmup=300, draws=300)  # the CLI's defaults, the model it chose
    assert shipped["fit_id"] == cal.fit_id(cfg, shipped["seed"])
    fit = cal.fit(jax.random.fold_in(engine.seed_key(shipped["seed"]), 0), cal.load_runs(), cfg)
    again = cal.export(fit, shipped["seed"])
    for name, draws in shipped["draws"].items():  # the file keeps 5 significant digits
        np.testing.assert_allclose(np.asarray(again["draws"][name]), np.asarray(draws), rtol=2e-4, atol=1e-8,
                                   err_msg=name)
    assert again["peak_range"] == shipped["peak_range"]


def test_the_shipped_fit_carries_its_validation():
    shipped = derived.load_fit()
    splits = {r["split"] for r in shipped["validation"]}
    assert {"loo", "org", "generation"} <= splits
    assert {r["model"] for r in shipped["validation"]} == {"model", "constant", "rule", "generation"}
