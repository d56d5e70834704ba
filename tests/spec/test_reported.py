"""The prior file's `reported:` block: claims to check against the posterior, validated at load, written back
by resolved_dict (spec.resolved.yaml repeats them), described by the JSON Schema."""

from __future__ import annotations

import json

import pytest

from mcflops.cli.main import main
from mcflops.errors import SpecError
from mcflops.spec import load_spec, resolved_dict
from mcflops.spec.schema import json_schema

HEAD = """name: claims
hardware: {accelerator: h100-sxm, count: 1024}
priors:
  params: 70e9
  tokens: {lognormal: [1.8e12, 2.2e12]}
  mfu: {beta: [0.3, 0.5]}
reported:
"""


def load(tmp_path, block: str):
    f = tmp_path / "claims.yaml"
    f.write_text(HEAD + block)
    return f, load_spec(f)


def test_claims_parse_and_round_trip(tmp_path):
    _, spec = load(tmp_path, '  mfu: {between: [0.38, 0.43], source: "Llama 3 paper Table 4"}\n'
                             '  gpu_hours: {between: [1e5, 2e5], source: a card}\n')
    r = spec.reported["mfu"]
    assert (r.name, r.low, r.high, r.source, r.line) == ("mfu", 0.38, 0.43, "Llama 3 paper Table 4", 8)
    assert spec.reported["gpu_hours"].low == 1e5
    d = resolved_dict(spec)
    assert d["reported"] == {"mfu": {"between": [0.38, 0.43], "source": "Llama 3 paper Table 4"},
                             "gpu_hours": {"between": [1e5, 2e5], "source": "a card"}}
    again = load_spec(d)
    assert again.reported == {k: type(v)(v.name, v.low, v.high, v.source, None) for k, v in spec.reported.items()}
    assert again.digest() == spec.digest()


def test_a_file_without_claims_has_none_and_keeps_its_hash(tmp_path):
    f = tmp_path / "plain.yaml"
    f.write_text(HEAD.replace("reported:\n", ""))
    spec = load_spec(f)
    assert spec.reported == {} and "reported" not in resolved_dict(spec)
    _, claimed = load(tmp_path, '  mfu: {between: [0.38, 0.43], source: "x"}\n')
    assert claimed.digest() != spec.digest()  # what made an output includes the claims it checked


@pytest.mark.parametrize("block, fragment, field", [
    ('  mfx: {between: [0.38, 0.43], source: "x"}\n', "cannot check a claim on 'mfx'; did you mean 'mfu'?",
     "reported.mfx"),
    ('  price: {between: [1, 2], source: "x"}\n', "cannot check a claim on 'price'", "reported.price"),
    ('  mfu: {betwen: [0.38, 0.43], source: "x"}\n', "unknown key 'betwen'; did you mean 'between'?",
     "reported.mfu.betwen"),
    ('  mfu: {between: [0.43, 0.38], source: "x"}\n', "expected 0 <= low < high", "reported.mfu.between"),
    ('  mfu: {between: [-0.1, 0.38], source: "x"}\n', "expected 0 <= low < high", "reported.mfu.between"),
    ('  mfu: {between: 0.4, source: "x"}\n', "expected between: [low, high]", "reported.mfu.between"),
    ('  mfu: {between: [a, b], source: "x"}\n', "expected two numbers", "reported.mfu.between"),
    ('  mfu: {between: [0.38, 0.43]}\n', "missing source:", "reported.mfu"),
    ('  mfu: {source: "x"}\n', "missing between:", "reported.mfu"),
    ('  mfu: {between: [0.38, 0.43], source: 3}\n', "expected source: to be text", "reported.mfu.source"),
    ('  mfu: 0.4\n', "expected a mapping", "reported.mfu"),
    ('  - mfu\n', "expected a mapping", "reported"),
])
def test_bad_claims_are_one_line(tmp_path, capsys, block, fragment, field):
    f = tmp_path / "claims.yaml"
    f.write_text(HEAD + block)
    with pytest.raises(SpecError) as e:
        load_spec(f)
    assert fragment in e.value.message and e.value.field == field and e.value.line in (7, 8), str(e.value)
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"claims.yaml:{e.value.line}: {field}:" in err


def test_unknown_top_key_suggests_reported(tmp_path):
    f = tmp_path / "typo.yaml"
    f.write_text(HEAD.replace("reported:", "reportd:") + '  mfu: {between: [0.38, 0.43], source: "x"}\n')
    with pytest.raises(SpecError, match="did you mean 'reported'"):
        load_spec(f)


def test_schema_describes_claims():
    schema = json_schema()
    claim = schema["properties"]["reported"]["properties"]["mfu"]
    assert claim["required"] == ["between", "source"] and set(claim["properties"]) == {"between", "source"}
    json.dumps(schema)
