"""Small holes in reading a prior file: a name must match its pattern in full (a final newline is not a
letter), and a seed is an integer read exactly (never through a float, which rounds above 2**53)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcflops.cli.main import main
from mcflops.errors import SpecError
from mcflops.spec import load_spec

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"


def with_line(tmp_path: Path, old: str, new: str) -> Path:
    f = tmp_path / "case.yaml"
    text = OK.read_text()
    assert old in text
    f.write_text(text.replace(old, new))
    return f


@pytest.mark.parametrize("name", ['"abc\\n"', '"abc\\n\\n"', "\"abc\\r\""])
def test_a_name_ending_in_a_newline_is_refused(name, tmp_path):
    f = with_line(tmp_path, "name: small", f"name: {name}")
    with pytest.raises(SpecError) as e:
        load_spec(f)
    msg = str(e.value)
    assert "\n" not in msg and f"{f}:2" in msg and "expected a name" in msg, msg


def test_a_name_in_a_mapping_must_match_in_full():
    base = {"priors": {"params": 1e9, "tokens": 1e12, "mfu": {"beta": [0.3, 0.5]}},
            "hardware": {"accelerator": "h100-sxm"}}
    assert load_spec({"name": "abc", **base}).name == "abc"
    with pytest.raises(SpecError):
        load_spec({"name": "abc\n", **base})


@pytest.mark.parametrize("seed", [2**53 + 1, 2**63 - 1, 2**53 - 1, 0])
def test_seeds_are_read_exactly(seed, tmp_path):
    assert load_spec(with_line(tmp_path, "seed: 7", f"seed: {seed}")).seed == seed


@pytest.mark.parametrize("written, seed", [("1e3", 1000), ("2K", 2000), ("1_000_001", 1_000_001)])
def test_seeds_in_other_spellings(written, seed, tmp_path):
    assert load_spec(with_line(tmp_path, "seed: 7", f"seed: {written}")).seed == seed


@pytest.mark.parametrize("written, fragment", [(str(2**63), "below 2**63"), ("-1", ">= 0"), ("1.5", "whole number"),
                                               ("true", "")])
def test_bad_seeds_are_refused(written, fragment, tmp_path):
    f = with_line(tmp_path, "seed: 7", f"seed: {written}")
    with pytest.raises(SpecError) as e:
        load_spec(f)
    assert f"{f}:4" in str(e.value) and fragment in str(e.value), str(e.value)


def test_cli_seed_is_exact_and_bounded(capsys):
    seed = 2**53 + 1
    assert main(["sample", str(OK), "--seed", str(seed), "--samples", "1000", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == seed
    with pytest.raises(SystemExit) as e:  # argparse's usage error
        main(["sample", str(OK), "--seed", str(2**63), "--json", "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "below 2**63" in err and "Traceback" not in err, err
