"""Every block of a prior file is checked at load (sensitivity:, plan:, correlations: included), with one
vocabulary for the place of an error; the command line's overrides go through the same checks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mcflops.cli.main import main
from mcflops.errors import SpecError
from mcflops.spec import (Correlation, Fields, PlanOptions, SensitivityOptions, Spec, load_spec, plan_options,
                          resolved_dict, sensitivity_options)
from mcflops.spec.correlations import ENTRY_KEYS
from mcflops.spec.load import TOP_KEYS
from mcflops.spec.machine import ARCH_KEYS, HARDWARE_KEYS
from mcflops.spec.observe import OBS_KEYS
from mcflops.spec.options import PLAN_KEYS, SENSITIVITY_KEYS
from mcflops.spec.pilots import KEYS as PILOT_KEYS
from mcflops.spec.schema import json_schema

HEAD = """name: blocks
hardware: {accelerator: h100-sxm, count: 1024}
priors:
  params: 70e9
  tokens: {lognormal: [1e12, 2e12]}
  mfu: {beta: [0.3, 0.5]}
  goodput: {beta: [0.8, 0.97]}
"""
GOOD = HEAD + """sensitivity:
  sweep: {mfu: [0.30, 0.45]}
  points: 16
correlations:
  - {between: [mfu, goodput], spearman: 0.4, source: "a guess"}
plan:
  deadline_days: 90
  budget_hours: 2M
"""


def _file(tmp_path, text):
    p = tmp_path / "f.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("block, line, field, needle", [
    ("plan:\n  deadline_days: -3\n", 9, "plan.deadline_days", "expected a number > 0"),
    ("plan:\n  budget_usd: 1e6\n", 9, "plan.budget_usd", "needs a `price` prior"),
    ("plan: [90]\n", 8, "plan", "expected a mapping"),
    ("sensitivity:\n  points: 1\n", 9, "sensitivity.points", "grid points in [2, 256]"),
    ("sensitivity:\n  output: cost\n", 9, "sensitivity.output", "not an output of this file"),
    ("sensitivity:\n  sweep: {price: [1, 2]}\n", 9, "sensitivity.sweep.price", "no 'price' input"),
    ("correlations:\n  - {between: [mfu, goodput], rho: 0.9}\n  - {between: [goodput, tokens], rho: 0.9}\n"
     "  - {between: [mfu, tokens], rho: -0.9}\n", 8, "correlations", "not positive definite"),
    ("correlations:\n  - {between: [mfu, params], rho: 0.3}\n", 9, "correlations[0].between", "point mass"),
])
def test_every_block_is_checked_at_load(tmp_path, block, line, field, needle):
    p = _file(tmp_path, HEAD + block)
    with pytest.raises(SpecError) as e:
        load_spec(p)
    assert (e.value.path, e.value.line, e.value.field) == (str(p), line, field), str(e.value)
    assert needle in e.value.message
    assert str(e.value).startswith(f"{p}:{line}: {field}: ")


def test_validate_needs_nothing_but_load(tmp_path, capsys):
    p = _file(tmp_path, HEAD + "plan:\n  prob: 1.5\n")
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{p}:9: plan.prob: expected a probability strictly between 0 and 1" in err[0], err


def test_the_spec_carries_typed_blocks(tmp_path):
    spec = load_spec(_file(tmp_path, GOOD))
    assert not hasattr(spec, "raw") and not hasattr(spec, "extras")
    assert isinstance(spec.sensitivity, SensitivityOptions) and isinstance(spec.plan, PlanOptions)
    assert spec.sensitivity.output == "gpu_hours" and spec.sensitivity.points == 16
    np.testing.assert_allclose(dict(spec.sensitivity.sweeps)["mfu"], np.linspace(0.30, 0.45, 16))
    assert (spec.plan.deadline_days, spec.plan.budget_hours, spec.plan.prob, spec.plan.gpus) == (90, 2e6, 0.9, None)
    (c,) = spec.correlations
    assert isinstance(c, Correlation) and (c.a, c.b, c.source) == ("mfu", "goodput", "a guess")
    assert c.rho == pytest.approx(2 * math.sin(math.pi * 0.4 / 6))  # the spearman, as a normal-score rho
    bare = load_spec(_file(tmp_path, HEAD))
    assert bare.sensitivity == SensitivityOptions() and bare.plan == PlanOptions() and bare.correlations == ()


def test_resolved_form_keeps_the_blocks_as_written(tmp_path):
    spec = load_spec(_file(tmp_path, GOOD))
    d = resolved_dict(spec)
    assert d["sensitivity"] == {"sweep": {"mfu": [0.30, 0.45]}, "points": 16}
    assert d["correlations"] == [{"between": ["mfu", "goodput"], "spearman": 0.4, "source": "a guess"}]
    assert d["plan"] == {"deadline_days": 90, "budget_hours": "2M"}
    again = load_spec(json.loads(json.dumps(d)), path="resolved")
    assert again.digest() == spec.digest()
    assert (again.sensitivity, again.plan, again.correlations) == (spec.sensitivity, spec.plan, spec.correlations)
    assert "sensitivity" not in resolved_dict(load_spec(_file(tmp_path, HEAD)))


def test_command_line_overrides_keep_the_file_and_its_spelling(tmp_path):
    spec = load_spec(_file(tmp_path, GOOD))
    assert sensitivity_options(spec) is spec.sensitivity and plan_options(spec) is spec.plan
    o = sensitivity_options(spec, points=5, output="wall_days")
    np.testing.assert_allclose(dict(o.sweeps)["mfu"], np.linspace(0.30, 0.45, 5))  # the file's sweep, 5 points
    assert o.output == "wall_days" and o.written == spec.sensitivity.written
    p = plan_options(spec, prob="0.5", gpus=2048)
    assert (p.deadline_days, p.budget_hours, p.prob, p.gpus) == (90, 2e6, 0.5, 2048)
    assert Spec(**{**spec.__dict__, "plan": p}).digest() == spec.digest()  # the file's words, not the flags


@pytest.mark.parametrize("call, flag, file_block, file_field", [
    (lambda s: plan_options(s, prob=1.5), "--prob", "plan:\n  prob: 1.5\n", "plan.prob"),
    (lambda s: plan_options(s, deadline_days="lots"), "--deadline-days", "plan:\n  deadline_days: lots\n",
     "plan.deadline_days"),
    (lambda s: plan_options(s, gpus=2.5), "--gpus", "plan:\n  gpus: 2.5\n", "plan.gpus"),
    (lambda s: sensitivity_options(s, output="cost"), "--output", "sensitivity:\n  output: cost\n",
     "sensitivity.output"),
    (lambda s: sensitivity_options(s, points=300), "--points", "sensitivity:\n  points: 300\n",
     "sensitivity.points"),
    (lambda s: sensitivity_options(s, sobol_samples=10), "--sobol-samples", "sensitivity:\n  sobol_samples: 10\n",
     "sensitivity.sobol_samples"),
    (lambda s: sensitivity_options(s, sweeps=["mfu=0.5:0.3"]), "--sweep",
     "sensitivity:\n  sweep: {mfu: [0.5, 0.3]}\n", "sensitivity.sweep.mfu"),
])
def test_command_line_errors_are_the_files(tmp_path, call, flag, file_block, file_field):
    """A bad value on the command line gets the message the same value gets in the file, naming the flag."""
    p = _file(tmp_path, HEAD)
    with pytest.raises(SpecError) as cli:
        call(load_spec(p))
    assert (cli.value.path, cli.value.line, cli.value.field) == (str(p), None, flag)
    with pytest.raises(SpecError) as in_file:
        load_spec(_file(tmp_path, HEAD + file_block))
    assert in_file.value.field == file_field and in_file.value.line is not None
    assert cli.value.message == in_file.value.message
    assert str(cli.value) == f"{p}: {flag}: {cli.value.message}"


def test_command_line_errors_in_the_cli(tmp_path, capsys):
    p = _file(tmp_path, HEAD + "samples: 4096\n")
    for argv, fragment in ((["plan", str(p), "--prob", "1.5"], f"{p}: --prob: expected a probability"),
                           (["sensitivity", str(p), "--sweep", "nope=1,2"], f"{p}: --sweep: cannot sweep"),
                           (["sensitivity", str(p), "--output", "cost"], f"{p}: --output: 'cost' is not an output")):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert out == "" and len(lines) == 1 and fragment in lines[0], lines


@pytest.mark.parametrize("text, needle", [
    ("sensitivty: {}\n", "did you mean 'sensitivity'"),
    ("sensitivity: {swep: {}}\n", "did you mean 'sweep'"),
    ("plan: {probb: 0.9}\n", "did you mean 'prob'"),
    ("correlations: [{between: [mfu, goodput], rh: 0.3}]\n", "did you mean 'rho'"),
    ("observe: {gpu_hours: {value: 1e6, sigmaa: 0.1}}\n", "did you mean 'sigma'"),
])
def test_one_unknown_key_check_says_did_you_mean(tmp_path, text, needle):
    with pytest.raises(SpecError) as e:
        load_spec(_file(tmp_path, HEAD + text))
    assert needle in e.value.message and e.value.message.startswith("unknown key"), str(e.value)


@pytest.mark.parametrize("prior, needle", [
    ({"calibrated": True, "sorce": "x"}, "unknown key 'sorce' beside calibrated:; did you mean 'source'?"),
    ({"calibrated": {"orgg": "Meta"}}, "unknown key 'orgg' in calibrated:; did you mean 'org'?"),
])
def test_recipes_say_did_you_mean(prior, needle):
    d = {"name": "r", "hardware": {"accelerator": "h100-sxm"}, "priors": {"params": 70e9, "tokens": 1e12, "mfu": prior}}
    with pytest.raises(SpecError) as e:
        load_spec(d)
    assert needle in e.value.message and e.value.field == "priors.mfu"


def test_fields_names_the_place():
    from ruamel.yaml import YAML

    node = YAML(typ="rt", pure=True).load("a: 1\nb:\n  c: x\n")
    where = Fields("f.yaml")
    assert str(where.error("top")) == "f.yaml: top"
    here = where.at(node["b"], "c", "b.c")
    assert (here.error("bad").line, here.error("bad").field) == (3, "b.c")
    assert here.error("bad", node, "a").line == 1 and here.error("bad", node, "a").field == "b.c"
    assert where.number(node, "a", "a", positive=True, integer=True) == 1.0
    with pytest.raises(SpecError, match=r"f\.yaml:3: b\.c: expected a number \(like"):
        where.number(node["b"], "c", "b.c")
    assert where.text(node["b"], "c", "b.c") == "x" and where.text(node, "zzz") is None
    with pytest.raises(SpecError, match=r"f\.yaml:1: a: expected text, got int 1"):
        where.text(node, "a", "a")
    with pytest.raises(SpecError, match=r"f\.yaml:1: a: expected a mapping, got int 1"):
        where.mapping(node, "a", "a")
    with pytest.raises(SpecError, match=r"f\.yaml:2: top\.b: unknown key 'b'; did you mean 'bb'\? \(expected one of: "
                                        r"a, bb\)"):
        where.keys(node, ("a", "bb"), "top")


def test_schema_blocks_come_from_the_loader_tables():
    s = json_schema()
    props = s["properties"]
    assert list(props) == list(TOP_KEYS)
    assert list(props["hardware"]["properties"]) == list(HARDWARE_KEYS)
    assert list(props["architecture"]["properties"]) == list(ARCH_KEYS)
    assert list(props["observe"]["properties"]["gpu_hours"]["properties"]) == list(OBS_KEYS)
    assert list(props["sensitivity"]["properties"]) == list(SENSITIVITY_KEYS)
    assert list(props["plan"]["properties"]) == list(PLAN_KEYS)
    assert list(props["pilot"]["items"]["properties"]) == list(PILOT_KEYS)
    assert list(props["correlations"]["items"]["properties"]) == list(ENTRY_KEYS)
    for block in ("sensitivity", "plan"):
        assert props[block]["additionalProperties"] is False
    assert props["correlations"]["items"]["additionalProperties"] is False
