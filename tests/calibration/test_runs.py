"""The published runs (mcflops/data/published_runs.yaml) as data: every row carries its source, how its hours
were obtained and an evidence grade; its implied MFU is the formula of the file's header applied to its own
figures; the fields the grouped validations split on (organisation, accelerator generation, publication
month) are present and consistent with the code's accelerator families."""

import re
from importlib.resources import files

import pytest
from ruamel.yaml import YAML

from mcflops import calibration as cal
from mcflops.priors import calibrated

TEXT = files("mcflops").joinpath("data", "published_runs.yaml").read_text("utf-8")
DATA = YAML(typ="safe", pure=True).load(TEXT)
RUNS = DATA["runs"]
REQUIRED = ("id", "model", "org", "moe", "params_total", "params_active", "tokens", "accelerator", "precision", "hours",
            "hours_kind", "hours_scope", "published", "generation", "grade", "evidence", "source", "implied_mfu")
IDS = [r["id"] for r in RUNS]


def test_enough_distinct_runs_for_grouped_validation():
    """At least 45 runs, unique ids, no organisation holding half of them, and runs on both sides of the
    time split (published before 2023 / from 2023 on) -- else leave-one-org-out and the time split say little."""
    assert len(RUNS) >= 45 and len(set(IDS)) == len(IDS)
    orgs = [r["org"] for r in RUNS]
    assert len(set(orgs)) >= 10 and max(orgs.count(o) for o in set(orgs)) < len(RUNS) / 2
    early = [r for r in RUNS if r["published"] < "2023-01"]
    assert len(early) >= 6 and len(RUNS) - len(early) >= 6


def test_the_loader_reads_every_row():
    assert cal.load_runs().ids == tuple(IDS)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_every_row_states_its_source_kind_and_grade(run):
    missing = [k for k in REQUIRED if run.get(k) in (None, "", {})]
    assert not missing, missing
    assert run["hours_kind"] in DATA["hours_kind"] and run["hours_kind"] in cal.KINDS
    assert run["grade"] in ("VERIFIED", "SECONDARY")
    assert isinstance(run["evidence"], dict) and "hours" in run["evidence"]
    assert re.fullmatch(r"(19|20)\d\d-(0[1-9]|1[0-2])", run["published"]), run["published"]
    assert "2017-06" <= run["published"] <= "2026-12"  # V100 (2017) is the oldest accelerator in the catalogue


def test_nothing_is_entered_from_memory():
    assert "FROM MEMORY" not in TEXT


def test_hours_kind_vocabulary_is_the_loaders():
    assert set(DATA["hours_kind"]) == set(cal.KINDS)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_implied_mfu_is_the_header_formula(run):
    """implied_mfu = 6 * params_active * tokens / (peak * hours * 3600), stated to 4 decimals; it is MFU x
    goodput, so it lies in (0, 1)."""
    peak = DATA["peak_flops_dense_bf16"][run["accelerator"]]
    u = 6 * float(run["params_active"]) * float(run["tokens"]) / (peak * float(run["hours"]) * 3600)
    assert run["implied_mfu"] == pytest.approx(u, abs=5.1e-5)
    assert 0 < u < 1


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_parameters_and_moe_agree(run):
    assert 0 < run["params_active"] <= run["params_total"]
    assert run["moe"] == (run["params_active"] < run["params_total"])


def test_the_peak_table_is_the_catalogue_and_covers_every_row():
    for acc, peak in DATA["peak_flops_dense_bf16"].items():
        assert calibrated.peak16(acc) == pytest.approx(peak)
    assert {r["accelerator"] for r in RUNS} <= set(DATA["peak_flops_dense_bf16"])


def test_generations_are_the_codes_accelerator_families():
    """One generation per compute die: every accelerator of a generation has the same family in
    mcflops.priors.calibrated, and different generations have different families."""
    assert {r["generation"] for r in RUNS} <= set(DATA["generations"])
    fams = {}
    for r in RUNS:
        fams.setdefault(r["generation"], set()).add(calibrated.accelerator_family(r["accelerator"]))
    assert all(len(f) == 1 for f in fams.values()), fams
    assert len({next(iter(f)) for f in fams.values()}) == len(fams)


DERIVATION = re.compile(r"(?:->|=) ([\d,.]+) (?:GPU|H800|chip)-hours")


@pytest.mark.parametrize("run", [r for r in RUNS if DERIVATION.search(r["hours_scope"])], ids=lambda r: r["id"])
def test_stated_arithmetic_gives_the_hours(run):
    """Where hours_scope spells the derivation out ('512 x 7 x 24 = 86,016 GPU-hours'), its result is the hours."""
    for stated in DERIVATION.findall(run["hours_scope"]):
        assert float(stated.replace(",", "")) == pytest.approx(run["hours"], rel=1e-9)


PRODUCT = re.compile(r"([\d,.]+) x ([\d,.]+) x 24 = ([\d,.]+)")


@pytest.mark.parametrize("run", [r for r in RUNS if PRODUCT.search(r["hours_scope"])], ids=lambda r: r["id"])
def test_count_x_days_is_multiplied_out_right(run):
    """Where hours_scope spells out accelerators x days x 24 ('384 x 14 x 24 = 129,024'), the product is the
    stated result: an arithmetic slip in the derivation would otherwise pass the check above unseen."""
    for count, days, stated in PRODUCT.findall(run["hours_scope"]):
        num = [float(x.replace(",", "")) for x in (count, days, stated)]
        assert num[0] * num[1] * 24 == pytest.approx(num[2], rel=1e-12), run["id"]


def test_one_spelling_per_organisation():
    """The organisation split holds out all of an organisation's runs at once, so one organisation spelt two
    ways ('TII' and 'T.I.I.', 'Hugging Face' and 'HuggingFace') would be two groups and leak between folds."""
    key = {}
    for r in RUNS:
        key.setdefault(re.sub(r"[^a-z0-9]", "", r["org"].lower()), set()).add(r["org"])
    assert all(len(v) == 1 for v in key.values()), {k: v for k, v in key.items() if len(v) > 1}


@pytest.mark.parametrize("run_id, field, value", [
    ("llama3.1-405b", "hours", 30.84e6),  # Llama 3.1 model card, Training Time (GPU hours)
    ("deepseek-v3", "hours", 2.664e6),  # DeepSeek-V3 report Table 1: pre-training 2,664K H800 hours
    ("opt-175b", "tokens", 300e9),  # metaseq OPT chronicles final_update.md: 'completed its training run on 300B tokens'
    ("llama4-scout", "hours", 5.0e6),  # Llama 4 model card, Training Time (GPU hours)
    ("deepseek-v2", "hours", 172.8e3 * 8.1),  # DeepSeek-V2 paper Sec. 3.2.3: 172.8K GPU hours per trillion tokens x 8.1T
    ("jetmoe-8b", "hours", 30_000),  # JetMoE paper abstract: '1.25T tokens ... and 30,000 H100 GPU hours'
    ("jetmoe-8b", "params_active", 2.2e9),  # JetMoE paper Table 3: 2.2B activated of 8B
    ("falcon2-11b", "tokens", (4500 + 250 + 250 + 500) * 1e9),  # Falcon2-11B card: the four stages' tokens
    ("llemma-34b", "hours", 47_000),  # EleutherAI Llemma blog: '47,000 A100 hours for the 34B' (50B tokens)
    ("starcoderbase-1b", "hours", 128 * 11 * 24),  # StarCoderBase-1B card: 128 Tesla A100, 11 days
])
def test_pinned_published_figures(run_id, field, value):
    run = RUNS[IDS.index(run_id)]
    assert run[field] == pytest.approx(value, rel=1e-9)


def test_the_throughput_row_is_tokens_over_its_stated_rate():
    """OpenLLaMA's README states a rate ('over 2200 tokens / second / TPU-v4 chip for our 7B model'), not hours:
    the row's chip-hours are 1T tokens over that rate, rounded to 0.1 h as its hours_scope writes them."""
    run = RUNS[IDS.index("openllama-7b")]
    assert "2200 tokens / second / TPU-v4 chip" in run["hours_scope"]
    assert run["hours"] == pytest.approx(float(run["tokens"]) / 2200 / 3600, abs=0.05)
