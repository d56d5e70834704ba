"""`mcflops calibrate` and :func:`mcflops.calibrate` are one path (calibration.results.calibrate): for the same
seed and sampler settings they give the same numbers, and they ask that function the same question for every
part (the fit, the validation, the model comparison)."""

import json
import math

import jax
import numpy as np
import pytest

import mcflops
from mcflops import cli
from mcflops.api import jsonable
from mcflops.calibration import results
from mcflops.calibration.runs import load_runs

TIMINGS = ("fit_seconds", "seconds")  # wall-clock, the one thing two runs of the same code do not share


def _numbers(d):
    """``d`` without its wall-clock timings (at any depth)."""
    if isinstance(d, dict):
        return {k: _numbers(v) for k, v in d.items() if k not in TIMINGS}
    if isinstance(d, list):
        return [_numbers(v) for v in d]
    return d


def test_cli_and_api_fit_the_same_numbers(tmp_path, capsys):
    """A real NUTS fit of the shipped runs (the suite's one fit through the API: tests/test_notebook_api.py
    checks only the API's argument errors) through both doors: printed, written and returned, the posterior and
    the calibrated prior agree exactly (same code, same machine)."""
    out = tmp_path / "out"
    assert cli.main(["calibrate", "--json", "--quiet", "--no-loo", "--chains", "1", "--draws", "50", "--seed", "3",
                     "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.pop("out") == str(out)
    api = mcflops.calibrate(chains=1, draws=50, seed=3, loo=False)
    assert _numbers(jsonable(printed)) == _numbers(api)
    assert _numbers(json.loads((out / "calibration.json").read_text())) == _numbers(api)
    # not vacuous: a fitted posterior of every parameter and the prior table are in what was compared
    assert api["runs"] == load_runs().n and api["seed"] == 3 and len(api["population"]) == 12
    assert "loo" not in api  # loo=False: no leave-one-out validation
    json.dumps(api)  # plain JSON as returned
    assert all(math.isfinite(s["mean"]) and s["sd"] > 0 for s in api["posterior"].values())


@pytest.mark.parametrize("flags, kw, asked", [
    ([], {}, {"validation": True, "select": False}),
    (["--no-loo"], {"loo": False}, {"validation": False, "select": False}),
    (["--select"], {"select": True}, {"validation": True, "select": True}),
])
def test_cli_and_api_ask_the_same_question(flags, kw, asked, monkeypatch, tmp_path, capsys):
    """With the validation and the comparison (a minute and more for real): both doors call
    results.calibrate with the same key, sampler settings, seed and parts, and give back what it returned."""
    calls = []
    canned = {"seed": 5, "runs": 0, "fit_id": "x", "config": {}, "fit_seconds": 1.0, "divergences": 0,
              "max_r_hat": 1.0, "min_ess": 500.0, "posterior": {}, "population": [], "marker": 0.125}

    def spy(key, **kw):  # the display's callbacks left out; ship's default (the API never ships) made explicit
        calls.append((np.asarray(jax.random.key_data(key)).tolist(),
                      {"ship": False, **{k: v for k, v in kw.items() if k not in ("phase", "tick")}}))
        return results.Calibration(dict(canned))

    monkeypatch.setattr(results, "calibrate", spy)
    assert cli.main(["calibrate", "--json", "--quiet", "--chains", "3", "--draws", "70", "--seed", "5",
                     "--out", str(tmp_path / "out"), *flags]) == 0
    printed = json.loads(capsys.readouterr().out)
    api = mcflops.calibrate(chains=3, draws=70, seed=5, **kw)
    assert calls[0] == calls[1]
    assert calls[0][1] == {"chains": 3, "draws": 70, "seed": 5, "ship": False, **asked}
    assert api == canned and {k: v for k, v in printed.items() if k != "out"} == canned
