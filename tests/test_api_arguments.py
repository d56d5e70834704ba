"""The API's keyword arguments are checked as a prior file's fields are (issue 33, item 4): every bad value is
one UsageError naming the function and the argument (a bad mapping given as the spec: the SpecError of its
field), raised before anything is sampled; nothing deep inside
(pathlib, JAX's key types, numpy) surfaces, and nothing is silently rounded. Each case below was a raw
exception or a silent acceptance before."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import mcflops
from mcflops.cli.main import main
from mcflops.errors import SpecError, UsageError
from tests.test_api import SPEC

F = "tests/bad/ok/small.yaml"
SMALL = {**SPEC, "samples": 2000}


def _cycle_dict():
    d = dict(SMALL)
    d["self"] = d
    return d


def _cycle_list():
    loop: list = []
    loop.append(loop)
    return {**SMALL, "priors": {**SMALL["priors"], "mfu": {"beta": loop}}}


def _lattice():  # 40 levels of a list holding the level below twice: 2^40 values unrolled, 80 objects
    x: list = [0.3]
    for _ in range(40):
        x = [x, x]
    return {**SMALL, "priors": {**SMALL["priors"], "mfu": {"beta": x}}}


CASES = [  # (call, the argument the one line names, words it says)
    (lambda: mcflops.run(123), "run(spec=)", "got int 123"),
    (lambda: mcflops.run(None), "run(spec=)", "got nothing"),
    (lambda: mcflops.run(b"x.yaml"), "run(spec=)", "bytes"),
    (lambda: mcflops.load_spec(5), "load_spec(source=)", "got int 5"),
    (lambda: mcflops.sample(F, seed=1.5), "sample(seed=)", "float 1.5"),  # was recorded as seed 1
    (lambda: mcflops.sample(F, seed=True), "sample(seed=)", "boolean"),  # was seed 1
    (lambda: mcflops.sample(F, seed="a"), "sample(seed=)", "the text 'a'"),
    (lambda: mcflops.sample(F, seed=math.nan), "sample(seed=)", "nan"),
    (lambda: mcflops.sample(F, seed=2**63), "sample(seed=)", "a seed from 0 to 2**63 - 1"),
    (lambda: mcflops.sample(F, samples=1000.5), "sample(samples=)", "float 1000.5"),  # was 1000 draws
    (lambda: mcflops.sample(F, samples=math.inf), "sample(samples=)", "inf"),
    (lambda: mcflops.sample(F, samples=[1]), "sample(samples=)", "a list"),
    (lambda: mcflops.sample(F, samples=10), "sample(samples=)", "at least 1000"),
    (lambda: mcflops.run(F, method="foo"), "run(method=)", "'auto', 'is', 'nuts'"),
    (lambda: mcflops.run(F, nuts={"chains": -1}), "run(nuts=)", "chains: expected a whole number from 1"),
    (lambda: mcflops.run(F, nuts={"bogus": 1}), "run(nuts=)", "unknown key 'bogus'"),
    (lambda: mcflops.run(F, nuts=5), "run(nuts=)", "a mapping"),
    (lambda: mcflops.sample(F, key="k"), "sample(key=)", "the text 'k'"),
    (lambda: mcflops.sample(F, key=5), "sample(key=)", "int 5"),
    (lambda: mcflops.sample(F, key=jax.random.split(jax.random.key(0))), "sample(key=)", "one key"),
    (lambda: mcflops.sample(F, progress=5), "sample(progress=)", "a function"),
    (lambda: mcflops.run(F, posterior="no"), "run(posterior=)", "True or False"),
    (lambda: mcflops.run(F, sensitivity="yes"), "run(sensitivity=)", "True or False"),  # was taken as True
    (lambda: mcflops.plan(F, deadline_days="x"), "plan(deadline_days=)", "number > 0"),
    (lambda: mcflops.plan(F, gpus=1.5), "plan(gpus=)", "whole number"),
    (lambda: mcflops.plan(F, deadline_days=30, prob=True), "plan(prob=)", "number > 0"),
    (lambda: mcflops.compare(F, F, couple=5), "compare(couple=)", "a mapping"),
    (lambda: mcflops.compare(F, F, couple={"mfu": 2}), "compare(couple=)", "between -1 and 1"),
    (lambda: mcflops.compare(F, 7), "compare(spec=)", "int 7"),
    (lambda: mcflops.sensitivity(F, sweeps=5), "sensitivity(sweeps=)", "a mapping"),
    (lambda: mcflops.sensitivity(F, sweeps={"mfu": [0.45, 0.3]}), "sensitivity(sweeps=)['mfu']", "low < high"),
    (lambda: mcflops.sensitivity(F, sweeps={"nope": [0.3, 0.4]}), "sensitivity(sweeps=)['nope']", "unknown input"),
    (lambda: mcflops.sensitivity(F, sweeps=[3]), "sensitivity(sweeps=)", "text like"),
    (lambda: mcflops.sensitivity(F, points=2.5), "sensitivity(points=)", "whole number"),
    (lambda: mcflops.calibrate(chains="a"), "calibrate(chains=)", "the text 'a'"),
    (lambda: mcflops.calibrate(draws=49.5), "calibrate(draws=)", "float 49.5"),
    (lambda: mcflops.write("nonsense", {}, "/tmp/x"), "write(kind=)", "'plan'"),
    (lambda: mcflops.write("plan", 5, "/tmp/x"), "write(data=)", "int 5"),
    (lambda: mcflops.run(_cycle_dict()), "self", "contains itself"),  # grew to 23.8 GB before
    (lambda: mcflops.run(_cycle_list()), "priors.mfu.beta[0]", "contains itself"),  # hung before
    (lambda: mcflops.run(_lattice()), "priors.mfu.beta", "more than 200,000 values"),
    (lambda: mcflops.run({**SMALL, "seed": object()}), "seed", "got object"),
]


@pytest.mark.parametrize("call,names,says", CASES, ids=[c[1] + ":" + c[2] for c in CASES])
def test_a_bad_argument_is_one_line_naming_it(call, names, says):
    argument = "=)" in names and not names.startswith("load_spec(")  # load_spec's source is the prior file
    with pytest.raises(UsageError if argument else SpecError) as e:
        call()
    line = str(e.value)
    assert "\n" not in line and says in line and ("mcflops." + names if argument else names) in line, line
    if argument:  # the argument the line names is the one the error holds
        assert names.startswith(f"{e.value.fn}({e.value.arg}=)"), (names, e.value.fn, e.value.arg)


def test_good_values_of_every_kind_are_taken():
    """What a notebook writes: 1e4 for a whole number, NumPy integers, raw key data, sweeps in the prior
    file's own terms; the run records the values it was given."""
    a = mcflops.sample(SMALL, samples=1e4, seed=np.int64(5))
    assert (a.samples, a.seed) == (10_000, 5)
    b = mcflops.sample(SMALL, samples=10_000, key=jax.random.PRNGKey(5))  # raw uint32 key data
    assert b.prior == mcflops.sample(SMALL, samples=10_000, key=jax.random.key(5)).prior


def test_cli_flags_keep_their_names(capsys):
    """The commands hand their flags to the API; an error still names the flag, not the Python argument."""
    assert main(["plan", F, "--deadline-days", "-3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--deadline-days: expected a number > 0" in err and "mcflops.plan(" not in err
    assert main(["compare", F, F, "--couple", "mfu=2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--couple" in err and "mcflops.compare(" not in err


def test_sweeps_as_python_values_mean_what_the_command_line_means():
    """``{"mfu": [lo, hi]}`` is the file's grid, ``{"values": [...]}`` its listed values, a string the text after
    ``--sweep mfu=``: the same options as the command line's sweeps."""
    from mcflops.spec import sensitivity_options

    spec = mcflops.load_spec(F)
    grid = sensitivity_options(spec, sweeps=["mfu=0.3:0.45"], points=4)
    assert sensitivity_options(spec, sweeps={"mfu": [0.3, 0.45]}, points=4).sweeps == grid.sweeps
    assert sensitivity_options(spec, sweeps={"mfu": "0.3:0.45"}, points=4).sweeps == grid.sweeps
    listed = sensitivity_options(spec, sweeps={"mfu": {"values": [0.4, 0.3]}}).sweeps
    assert listed == sensitivity_options(spec, sweeps=["mfu=0.4,0.3"]).sweeps == (("mfu", (0.4, 0.3)),)
