"""Tests for the accelerator catalogue (mcflops.hardware)."""

from __future__ import annotations

import importlib
import importlib.resources
import json
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

hw = importlib.import_module("mcflops.hardware")

REQUIRED_IDS = (
    "h100-sxm", "h100-pcie", "h200", "h800", "b200", "a100",
    "v100", "mi300x", "tpu-v3", "tpu-v4", "tpu-v5p",
)

# DESIGN.md "Numbers that must be right" (dense, no sparsity).
DESIGN_FIGURES = [
    ("h100-sxm", "bf16", 989.4e12),
    ("h100-sxm", "fp8", 1978.9e12),
    ("h800", "bf16", 989.4e12),
    ("h800", "fp8", 1978.9e12),
    ("a100", "bf16", 312e12),
    ("v100", "fp16", 125e12),
    ("tpu-v4", "bf16", 275e12),
    ("tpu-v3", "bf16", 123e12),
]


def test_required_ids_present_in_order():
    ids = list(hw.catalogue())
    assert set(REQUIRED_IDS) <= set(ids)
    assert ids == list(hw.catalogue())  # stable order across calls
    assert hw.catalogue() is hw.catalogue()  # loaded once


@pytest.mark.parametrize("acc", list(hw.catalogue().values()), ids=lambda a: a.id)
def test_entry_is_well_formed(acc):
    assert acc.source.strip() and acc.name and acc.vendor
    assert isinstance(acc.memory_gb, float) and acc.memory_gb > 0
    if acc.tdp_w is None:  # only where the vendor publishes no power figure
        assert "not published" in acc.source.lower()
    else:
        assert isinstance(acc.tdp_w, float) and acc.tdp_w > 0
    assert acc.peak_flops, "no precisions"
    for prec, value in acc.peak_flops.items():
        assert prec in hw.PRECISIONS
        assert type(value) is float and value > 0, (prec, value)
        assert acc.peak(prec) == value
    assert acc.precisions == tuple(p for p in hw.PRECISIONS if p in acc.peak_flops)


def test_only_v5p_lacks_tdp():
    assert [a.id for a in hw.catalogue().values() if a.tdp_w is None] == ["tpu-v5p"]


def test_sparse_figures_are_halved_and_said_so():
    for acc in hw.catalogue().values():
        if acc.vendor in ("nvidia", "amd") and "fp16" in acc.peak_flops and acc.id != "v100":
            assert "sparsity" in acc.source.lower(), acc.id


@pytest.mark.parametrize("acc_id,prec,value", DESIGN_FIGURES)
def test_design_figures_exact(acc_id, prec, value):
    assert hw.get(acc_id).peak(prec) == value


def test_other_checked_figures():
    assert hw.get("h100-pcie").peak("bf16") == 756e12
    assert hw.get("h200").peak("bf16") == 989.4e12
    assert hw.get("b200").peak("bf16") == 2.25e15
    assert hw.get("mi300x").peak("bf16") == 1307.4e12
    assert hw.get("tpu-v5p").peak("bf16") == 459e12


@pytest.mark.parametrize("acc_id", ["h100-sxm", "h800", "h200", "b200", "mi300x"])
def test_fp8_is_twice_bf16(acc_id):
    acc = hw.get(acc_id)
    assert acc.peak("fp8") == pytest.approx(2 * acc.peak("bf16"), rel=1e-3)


def test_h100_fp8_exactly_twice_bf16():
    h100 = hw.get("h100-sxm")
    assert h100.peak("fp8") == pytest.approx(2 * h100.peak("bf16"), rel=1e-4)
    assert h100.peak("bf16") == h100.peak("fp16")


def test_v100_has_no_bf16():
    v100 = hw.get("v100")
    assert v100.precisions == ("fp32", "fp16")
    with pytest.raises(hw.HardwareError, match=r"no bf16.*available: fp32, fp16"):
        v100.peak("bf16")


def test_a100_variants_share_peak():
    assert hw.get("A100-40GB") is hw.get("a100-80gb") is hw.get("a100")
    assert "fp8" not in hw.get("a100").peak_flops


@pytest.mark.parametrize(
    "query,expected",
    [("H100", "h100-sxm"), ("h100_SXM", "h100-sxm"), (" TPU-V4 ", "tpu-v4"),
     ("tpuv5p", "tpu-v5p"), ("MI300X", "mi300x"), ("hgx b200", "b200")],
)
def test_lookup_by_alias_and_case(query, expected):
    assert hw.get(query).id == expected


def test_unknown_id_suggests_closest():
    with pytest.raises(hw.HardwareError) as exc:
        hw.get("h100-sx")
    msg = str(exc.value)
    assert msg.startswith("unknown accelerator 'h100-sx'; did you mean 'h100-sxm'?")
    assert "(known: a100, b200, h100-pcie, h100-sxm" in msg
    assert isinstance(exc.value, ValueError)


def test_unknown_id_without_close_match():
    with pytest.raises(hw.HardwareError, match=r"^unknown accelerator 'zzzzzz' \(known: a100"):
        hw.get("zzzzzz")


def test_alias_suggestion_names_the_id():
    with pytest.raises(hw.HardwareError, match=r"did you mean 'tpu-v5p'\?"):
        hw.get("tpuv5")


def test_unknown_precision_lists_precisions():
    with pytest.raises(hw.HardwareError) as exc:
        hw.get("h100-sxm").peak("fp4")
    msg = str(exc.value)
    assert "unknown precision 'fp4'" in msg
    assert "fp32, tf32, bf16, fp16, fp8, int8" in msg


def test_precision_is_case_insensitive():
    assert hw.get("a100").peak("BF16") == 312e12


def test_accelerator_is_frozen_and_hashable():
    acc = hw.get("a100")
    with pytest.raises(AttributeError):
        acc.tdp_w = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        acc.peak_flops["bf16"] = 1.0  # type: ignore[index]
    assert hash(acc) == hash(hw.get("a100"))


def test_matches_published_runs_calibration_oracle():
    """published_runs.yaml (written by others) fixes the peak each calibration run used."""
    text = importlib.resources.files("mcflops").joinpath("data", "published_runs.yaml").read_text()
    peaks = YAML(typ="safe").load(text)["peak_flops_dense_bf16"]
    assert peaks
    for acc_id, value in peaks.items():
        acc = hw.get(acc_id)
        assert acc.id == acc_id
        prec = "bf16" if "bf16" in acc.peak_flops else "fp16"  # V100: fp16 tensor peak
        assert acc.peak(prec) == float(value), (acc_id, prec)


def test_every_run_accelerator_is_catalogued():
    text = importlib.resources.files("mcflops").joinpath("data", "published_runs.yaml").read_text()
    for run in YAML(typ="safe").load(text)["runs"]:
        hw.get(run["accelerator"])


def test_hardware_does_not_import_jax():
    import subprocess
    import sys

    code = "import sys, mcflops.hardware as h; h.catalogue(); print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Interconnect fields: the datasheet figures halved to per direction (H100 SXM "NVLink 900 GB/s",
# A100 600, H800 400) and one NIC per GPU in the reference designs (400 Gb/s = 50 GB/s, HDR 25).
INTERCONNECT = [
    ("h100-sxm", 450.0, 8, 50.0),
    ("h100-pcie", 64.0, 8, None),
    ("h800", 200.0, 8, 50.0),
    ("h200", 450.0, 8, 50.0),
    ("a100", 300.0, 8, 25.0),
    ("b200", 900.0, 8, 50.0),
    ("mi300x", 448.0, 8, 50.0),
]


@pytest.mark.parametrize("acc_id,nvlink,domain,network", INTERCONNECT)
def test_interconnect_figures(acc_id, nvlink, domain, network):
    acc = hw.get(acc_id)
    assert acc.nvlink_gb_s == nvlink
    assert acc.nvlink_domain == domain and isinstance(acc.nvlink_domain, int)
    assert acc.network_gb_s == network
    assert "interconnect" in acc.source.lower()


def test_every_gpu_has_scale_up_fields_and_units_are_sane():
    gpus = [a for a in hw.catalogue().values() if a.vendor in ("nvidia", "amd")]
    assert {a.id for a in gpus} >= {"h100-sxm", "h100-pcie", "h800", "h200", "a100", "b200", "mi300x"}
    for acc in gpus:
        assert acc.nvlink_gb_s is not None and acc.nvlink_domain is not None, acc.id
        # per direction, GB/s: between a PCIe Gen5 link and fifth-generation NVLink
        assert 32.0 <= acc.nvlink_gb_s <= 900.0, acc.id
        if acc.network_gb_s is not None:
            assert acc.nvlink_gb_s > acc.network_gb_s, acc.id
            # a 400 Gb/s NIC is 50 GB/s: the per-GPU scale-out is at most one such NIC here
            assert 0 < acc.network_gb_s <= 50.0, acc.id
        else:
            assert "null" in acc.source.lower() or "no reference" in acc.source.lower(), acc.id
    # the scale-up/scale-out ratio of the reference designs: 9x on H100, 12x on A100
    assert hw.get("h100-sxm").nvlink_gb_s / hw.get("h100-sxm").network_gb_s == 9.0
    assert hw.get("a100").nvlink_gb_s / hw.get("a100").network_gb_s == 12.0


def test_tpus_have_no_unsourced_interconnect():
    for acc in hw.catalogue().values():
        if acc.vendor == "google":
            assert acc.nvlink_gb_s is None and acc.nvlink_domain is None and acc.network_gb_s is None
            assert acc.ici_gb_s is None


def test_interconnect_fields_are_optional_and_validated():
    raw = {"name": "x", "vendor": "nvidia", "peak_flops": {"bf16": 1.0}, "memory_gb": 1.0, "source": "s"}
    acc = hw._parse("x", raw)
    assert (acc.nvlink_gb_s, acc.nvlink_domain, acc.network_gb_s, acc.ici_gb_s) == (None, None, None, None)
    with pytest.raises(hw.HardwareError, match=r"accelerators\.x\.nvlink_domain: expected a positive integer"):
        hw._parse("x", {**raw, "nvlink_domain": 7.5})
    with pytest.raises(hw.HardwareError, match=r"accelerators\.x\.network_gb_s: expected a positive"):
        hw._parse("x", {**raw, "network_gb_s": -1})


@pytest.mark.parametrize("name", ["accelerators.yaml", "layout_runs.yaml", "published_runs.yaml"])
def test_the_c_parser_reads_the_data_files_as_the_pure_one_does(name):
    """The package's data files are loaded with ruamel's "safe" loader, which uses its C parser
    (ruamel.yaml.clib, a dependency) where installed: every value, type and key order must be what the
    pure-Python parser, the reference, reads."""
    text = (Path(hw.__file__).parent / "data" / name).read_text("utf-8")
    fast, pure = YAML(typ="safe"), YAML(typ="safe", pure=True)
    if sys.implementation.name == "cpython":
        assert fast.Parser.__name__ == "CParser"  # the dependency is installed and in use
    a, b = fast.load(text), pure.load(text)
    assert a == b
    assert json.dumps(a, sort_keys=False, default=repr) == json.dumps(b, sort_keys=False, default=repr)
