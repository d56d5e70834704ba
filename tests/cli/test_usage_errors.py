"""A wrong argument is named in the caller's own words: ``mcflops.compare(couple=)`` through the API, ``--couple``
through the command line, ``couple=`` from the layer below (the function its caller called). Each check is
raised where the argument is used (analysis/, inference/, api/, the command's own module), so each case is
called both ways: the API raises a UsageError (a ValueError) naming its argument; the command line prints
one line naming the flag, exits 2 and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

import mcflops
from mcflops.cli.main import main
from mcflops.errors import SpecError, UsageError

F = "tests/bad/ok/small.yaml"  # observes gpu_hours


@pytest.fixture(scope="module")
def unobserved(tmp_path_factory) -> str:
    """small.yaml without its observe: block (a file --posterior cannot weight)."""
    yaml = YAML()
    data = yaml.load(Path(F).read_text())
    del data["observe"]
    path = tmp_path_factory.mktemp("usage") / "unobserved.yaml"
    with path.open("w") as f:
        yaml.dump(data, f)
    return str(path)


def _api(call, fn: str, arg: str, says: str, path: str | None = None) -> UsageError:
    with pytest.raises(UsageError) as e:
        call()
    err = e.value
    assert isinstance(err, ValueError) and not isinstance(err, SpecError)
    assert (err.fn, err.arg, err.path) == (fn, arg, path), (err.fn, err.arg, err.path)
    line = str(err)
    want = f"{path}: " if path else ""
    assert line.startswith(f"{want}mcflops.{fn}({arg}=): ") and says in line and "\n" not in line, line
    assert "--" not in line.split(": ", 2 if path else 1)[-1], line  # no flag in the API's message
    return err


def _cli(argv, flag: str, says: str, capsys, tmp_path, out: bool = True, quiet: bool = True) -> str:
    target = tmp_path / "out"
    assert main([*argv, *(["--out", str(target)] if out else []), *(["--quiet"] if quiet else [])]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("mcflops: ") and says in err, err
    assert f"{flag}: " in err and "mcflops." not in err and "=): " not in err, err
    assert captured.out == "" and not target.exists() and list(tmp_path.iterdir()) == []
    return err


def test_couple_out_of_range(capsys, tmp_path):
    _api(lambda: mcflops.compare(F, F, couple=["mfu=2"]), "compare", "couple", "between -1 and 1")
    _api(lambda: mcflops.compare(F, F, couple={"mfu": 2}), "compare", "couple", "between -1 and 1")
    _cli(["compare", F, F, "--couple", "mfu=2"], "--couple", "between -1 and 1", capsys, tmp_path)


def test_couple_not_an_input_and_not_a_pair(capsys, tmp_path):
    _api(lambda: mcflops.compare(F, F, couple={"flux": 0.5}), "compare", "couple", "flux: not an input")
    _cli(["compare", F, F, "--couple", "flux=0.5"], "--couple", "flux: not an input", capsys, tmp_path)
    _api(lambda: mcflops.compare(F, F, couple=["mfu"]), "compare", "couple", "expected INPUT=RHO")
    _cli(["compare", F, F, "--couple", "mfu"], "--couple", "expected INPUT=RHO", capsys, tmp_path)
    # params is a point value in small.yaml: the check of the pair, not of the text
    _api(lambda: mcflops.compare(F, F, couple={"params": 0.5}), "compare", "couple", "point value in A")
    _cli(["compare", F, F, "--couple", "params=0.5"], "--couple", "point value in A", capsys, tmp_path)


def test_couple_with_three_files(capsys, tmp_path):
    """Three files take the scenarios' pass, whose own check names the same argument."""
    _api(lambda: mcflops.compare(F, F, F, couple={"flux": 0.5}), "compare", "couple", "not an input of any file")
    _cli(["compare", F, F, F, "--couple", "flux=0.5"], "--couple", "not an input of any file", capsys, tmp_path)


@pytest.mark.parametrize("files", [2, 3])
def test_posterior_without_an_observation(files, unobserved, capsys, tmp_path):
    _api(lambda: mcflops.compare(*[unobserved] * files, posterior=True), "compare", "posterior",
         "needs an `observe:` block", path=unobserved)
    err = _cli(["compare", *[unobserved] * files, "--posterior"], "--posterior", "needs an `observe:` block",
               capsys, tmp_path)
    assert err.count("--posterior") == 1, err  # named once, by the flag


def test_plan_posterior_without_an_observation(unobserved, capsys, tmp_path):
    _api(lambda: mcflops.plan(unobserved, posterior=True), "plan", "posterior", "needs an `observe:` block",
         path=unobserved)
    _cli(["plan", unobserved, "--posterior"], "--posterior", "needs an `observe:` block", capsys, tmp_path)


@pytest.mark.parametrize("files", [2, 3])
def test_an_output_no_file_has(files, capsys, tmp_path):
    _api(lambda: mcflops.compare(*[F] * files, output="flux"), "compare", "output", "'flux' is not an output",
         path=F)
    _cli(["compare", *[F] * files, "--output", "flux"], "--output", "'flux' is not an output", capsys, tmp_path)


def test_a_value_checked_against_the_file(capsys, tmp_path):
    """The plan's options are checked with the file's plan: block (spec.plan_options): still the argument."""
    err = _api(lambda: mcflops.plan(F, deadline_days=-3), "plan", "deadline_days", "expected a number > 0", path=F)
    assert err.flag == "--deadline-days"
    _cli(["plan", F, "--deadline-days", "-3"], "--deadline-days", "expected a number > 0", capsys, tmp_path)
    err = _api(lambda: mcflops.sensitivity(F, sweeps=["mfu=0.5:0.4"]), "sensitivity", "sweeps", "low < high",
               path=F)
    assert err.flag == "--sweep"


def test_method(capsys, tmp_path):
    """The API's own check; below it, the update names its own argument (argparse refuses --method foo)."""
    from mcflops.inference import update

    _api(lambda: mcflops.run(F, method="foo"), "run", "method", "expected one of 'auto', 'is', 'nuts'")
    with pytest.raises(UsageError) as e:
        update.posterior(None, None, None, None, None, method="foo")
    assert str(e.value) == "method=: expected one of 'auto', 'is', 'nuts', got 'foo'"
    assert e.value.as_flag() == "--method: expected one of 'auto', 'is', 'nuts', got 'foo'"
    with pytest.raises(SystemExit) as stop:
        main(["run", F, "--method", "foo", "--out", str(tmp_path / "out"), "--quiet"])
    assert stop.value.code == 2 and "--method" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_ladder_names_its_arguments(capsys, tmp_path):
    """No API function wraps the ladder: its caller's words are the function's own arguments."""
    from mcflops.analysis import ladder

    with pytest.raises(UsageError) as e:
        ladder.ladder(F, pilots=["count=512"])
    assert str(e.value).startswith("pilots=: missing one measurement=") and e.value.flag == "--pilot"
    with pytest.raises(UsageError) as e:
        ladder.ladder(F, ["tp8"])
    assert str(e.value).startswith("layout=: expected KEY=VALUE")
    _cli(["ladder", F, "--pilot", "count=512"], "--pilot", "missing one measurement=", capsys, tmp_path)


@pytest.mark.parametrize("argv, flag, says", [
    (["compare", F], "FILE", "expected two or more prior files"),
    (["plan", F, "--samples", "10"], "--samples", "at least 1000 samples"),
    (["calibrate", "--chains", "0"], "--chains", "chains >= 1"),
    (["calibrate", "--draws", "49"], "--draws", "draws >= 50"),
    (["arch", F, "--seq-len", "0"], "--seq-len", "expected a positive integer"),
    (["watch", F, "--poll", "0"], "--poll", "seconds in (0, 60]"),
])
def test_the_commands_own_checks(argv, flag, says, capsys, tmp_path):
    _cli(argv, flag, says, capsys, tmp_path, out=argv[0] != "arch", quiet=argv[0] not in ("arch", "watch"))


def test_the_two_spellings_of_one_error():
    e = UsageError("expected a number > 0, got -3", arg="deadline_days", fn="plan", path="a.yaml")
    assert str(e) == "a.yaml: mcflops.plan(deadline_days=): expected a number > 0, got -3"
    assert e.as_flag() == "a.yaml: --deadline-days: expected a number > 0, got -3"
    below = UsageError("bad\nvalue", arg="sweeps", flag="--sweep", item="['mfu']")
    assert str(below) == "sweeps=['mfu']: bad\\nvalue"  # one line, whatever the message holds
    assert str(below.called("sensitivity")) == "mcflops.sensitivity(sweeps=)['mfu']: bad\\nvalue"
    assert below.as_flag() == "--sweep: bad\\nvalue"
