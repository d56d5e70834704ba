"""`mcflops schema` accepts exactly what the loader accepts, checked with jsonschema (Draft 2020-12), an
implementation we did not write: every shipped prior file, every good fixture and their resolved forms
validate; every bad fixture the schema can express is refused by both the schema and the loader."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from mcflops.errors import SpecError
from mcflops.spec import load_spec, resolved_dict
from mcflops.spec.reader import read_yaml
from mcflops.spec.resolved import plain
from mcflops.spec.schema import json_schema

ROOT = Path(__file__).resolve().parents[2]
BAD = ROOT / "tests" / "bad"
PRIORS = sorted((ROOT / "priors").glob("*.yaml"))
GOOD = sorted(p for p in (ROOT / "tests").rglob("*.yaml") if p.parent != BAD)

# Bad files whose fault is beyond what JSON Schema can state; the loader alone refuses them.
NOT_EXPRESSIBLE = {
    "beta_impossible_sd": "a beta's sd against its mean (sd^2 < mean (1 - mean)): arithmetic on two values",
    "beta_no_spread": "a 90% interval narrower than one part in a million: needs the beta's quantile function",
    "beta_tail_underflow": "the prior's 1e-15 tails underflow: needs the beta's quantile function",
    "layout_dp_mismatch": "tp x pp x cp x dp against hardware.count: arithmetic across blocks",
    "layout_heads": "the architecture's heads against tp: a preset's values and arithmetic",
    "layout_memory": "memory per accelerator: the layout's memory model against the catalogue",
    "layout_no_architecture": "a layout needs an architecture block: a dependency between blocks",
    "interval_p5_above_p95": "p5 < p95: a comparison between two items of a list",
    "lognormal_absurd_spread": "the 1e-15 tails beyond 1e100: needs the quantile function",
    "mixture_weights_count": "one weight per component: two lists' lengths compared",
    "mixture_weights_sum": "weights summing to 1: arithmetic over a list",
    "normal_no_spread": "an sd against its mean (no spread): arithmetic on two values",
    "observe_between_outside_prior": "an observed interval against its prior's support: two blocks compared",
    "observe_sd_underflow": "a normal noise's sd against its value (relative error): arithmetic on two values",
    "observe_between_reversed": "low < high: a comparison between two items",
    "output_overflow": "the outputs' range: a sum over every prior's tails",
    "params_far_from_architecture": "the parameter count of the architecture against params: arithmetic",
    "pilot_above_peak": "a measured throughput against the accelerator's peak: a catalogue lookup and arithmetic",
    "pilot_layout_cannot_run": "the pilot's layout on its count (tp x pp x cp divides it): arithmetic across blocks",
    "pilot_model_other_kind": "a preset's contents (whether it has experts) against the file's: a catalogue lookup",
    "precision_part_lacks": "the precisions one accelerator has: a catalogue lookup per accelerator",
    "triangular_unordered": "low <= mode <= high: comparisons between items",
    "truncation_empty": "the mass a truncation keeps: the normal CDF at the bounds",
}


@pytest.fixture(scope="module")
def validator():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)  # the schema itself is valid Draft 2020-12
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, data) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(data)]


def test_the_corpora_are_there():
    assert len(PRIORS) >= 10 and any(p.name == "llama405b-failures.yaml" for p in PRIORS)
    names = {p.name for p in GOOD}
    assert {"small.yaml", "calibrated.yaml", "every_family.yaml"} <= names


@pytest.mark.parametrize("path", PRIORS + GOOD, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_the_loader_accepts_validates(path, validator):
    spec = load_spec(path)  # a good file: it loads
    assert _errors(validator, plain(read_yaml(path))) == []
    assert _errors(validator, resolved_dict(spec)) == []  # and so does what `mcflops run` writes back


@pytest.mark.parametrize("path", sorted(BAD.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_bad_file_the_schema_can_express_is_refused(path, validator):
    try:
        data = read_yaml(path)
    except SpecError:
        return  # refused as YAML (syntax, tags, aliases, duplicate keys): no document reaches a schema
    errors = _errors(validator, plain(data))
    try:
        load_spec(path)
    except SpecError:
        pass
    else:  # refused only once sampled (an observation no draw explains): a valid file, so the schema accepts it
        assert "stage:" in path.read_text().split("\n", 3)[2] and errors == [], (path.name, errors)
        return
    if path.stem in NOT_EXPRESSIBLE:
        assert errors == [], f"{path.stem} is listed as beyond the schema, but the schema refuses it: {errors}"
    else:
        assert errors, f"the schema accepts {path.name}, which the loader refuses"


def test_the_list_of_inexpressible_files_names_real_files():
    assert all((BAD / f"{name}.yaml").exists() for name in NOT_EXPRESSIBLE)


@pytest.mark.parametrize("spelling", ["h100", "H100", "h100-sxm", " H100_SXM ", "h100 sxm5", "tpu-v4"])
def test_accelerator_ids_and_aliases_as_the_catalogue_matches_them(spelling, validator):
    data = {"name": "x", "hardware": {"accelerator": spelling}, "priors": {"params": 1e9, "tokens": 1e12, "mfu": 0.4}}
    load_spec(data)
    assert _errors(validator, data) == []


@pytest.mark.parametrize("spelling", ["h100--sxm", "h10", "h100-sxmm"])
def test_unknown_accelerators_are_refused_by_both(spelling, validator):
    data = {"name": "x", "hardware": {"accelerator": spelling}, "priors": {"params": 1e9, "tokens": 1e12, "mfu": 0.4}}
    with pytest.raises(SpecError):
        load_spec(data)
    assert _errors(validator, data)
