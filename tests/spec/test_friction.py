"""The small frictions of writing a prior file: lower-case suffixes, a percentage where a fraction goes,
`validate` on many files, and a command-line flag's error naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcflops.cli.main import main
from mcflops.errors import SpecError
from mcflops.numbers import parse_number
from mcflops.spec import load_spec

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
BAD = [HERE / "bad" / "count_zero.yaml", HERE / "bad" / "mfu_percent.yaml"]


@pytest.mark.parametrize("text, value", [("15t", 15e12), ("70b", 70e9), ("5m", 5e6), ("2k", 2e3), ("1g", 1e9),
                                         ("3p", 3e15), ("15.6t", 15.6e12), ("1_000k", 1e6)])
def test_lower_case_suffixes_read_as_upper_case(text, value):
    assert parse_number(text) == parse_number(text.upper()) == pytest.approx(value, rel=1e-15)


def test_lower_case_suffixes_in_a_file(tmp_path):
    f = tmp_path / "lower.yaml"
    f.write_text(OK.read_text().replace("params: 8.0e9", "params: 8b").replace("[1.4T, 1.6T]", "[1.4t, 1.6t]")
                 .replace("value: 60K", "value: 60k"))
    assert load_spec(f).priors == load_spec(OK).priors
    assert load_spec(f).observe["gpu_hours"].value == 60e3


@pytest.mark.parametrize("prior, hint", [("40", "did you mean 0.40?"),
                                         ("{uniform: [30, 50]}", "did you mean [0.30, 0.50]?")])
def test_a_percentage_for_a_fraction_says_did_you_mean(tmp_path, prior, hint):
    f = tmp_path / "pct.yaml"
    f.write_text(OK.read_text().replace("mfu: {beta: [0.3, 0.5], source: \"made up for tests\"}", f"mfu: {prior}"))
    with pytest.raises(SpecError) as e:
        load_spec(f)
    assert e.value.field == "priors.mfu" and e.value.message.endswith(hint), str(e.value)


def test_no_hint_when_a_fraction_just_overshoots(tmp_path):
    f = tmp_path / "over.yaml"
    f.write_text(OK.read_text().replace("mfu: {beta: [0.3, 0.5]", "mfu: {uniform: [0.3, 1.2]"))
    with pytest.raises(SpecError) as e:
        load_spec(f)
    assert "did you mean" not in e.value.message


def test_validate_reports_every_file(capsys):
    rc = main(["validate", str(BAD[0]), str(OK), str(BAD[1])])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out.splitlines() == [f"{OK}: ok: small, 3 uncertain inputs (tokens, mfu, goodput), observes gpu_hours"]
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("mcflops: ") for line in lines)
    assert lines[0].startswith(f"mcflops: {BAD[0]}:4: hardware.count:") and lines[1].startswith(f"mcflops: {BAD[1]}:8:")
    assert main(["validate", str(OK), str(OK)]) == 0


@pytest.mark.parametrize("argv, line", [
    (["sample", str(OK), "--samples", "10"], "mcflops: --samples: expected at least 1000 samples"),
])
def test_flag_errors_name_the_flag(argv, line, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and "<spec>" not in err and len(err.splitlines()) == 1, err


def test_spec_error_formats():
    assert str(SpecError("m", field="--seed")) == "--seed: m"
    assert str(SpecError("m", path="f.yaml", line=3, field="priors.mfu")) == "f.yaml:3: priors.mfu: m"
    assert str(SpecError("m", path="f.yaml")) == "f.yaml: m"
    assert str(SpecError("m")) == "<spec>: m"
