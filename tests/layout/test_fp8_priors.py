"""FP8 on a layout prior: the fit's entries by precision (mcflops.layout.fit.accelerator_priors), and the caveat an
FP8 file gets while the shipped fit exports no FP8 GEMM efficiency."""

from __future__ import annotations

from mcflops.layout import load_fit
from mcflops.layout.fit import accelerator_priors
from mcflops.spec import load_spec

FIT = {"default": {}, "accelerator": {"h100-sxm": {"gemm": "bf16"}, "h100-sxm/fp8": {"gemm": "fp8"},
                                      "a100": {"gemm": "a100"}}}


def test_the_precision_entry_first_then_the_accelerators_then_none():
    assert accelerator_priors(FIT, "h100-sxm", "fp8") == {"gemm": "fp8"}
    assert accelerator_priors(FIT, "h100-sxm", "bf16") == {"gemm": "bf16"}
    assert accelerator_priors(FIT, "h100-sxm") == {"gemm": "bf16"}
    assert accelerator_priors(FIT, "a100", "fp8") == {"gemm": "a100"}  # no FP8 entry: the accelerator's
    assert accelerator_priors(FIT, "tpu-v4", "bf16") == {}


def _doc(precision, efficiency=None):
    mfu = {"layout": {"tp": 8, "pp": 4, "global_batch": 512, "micro_batch": 1, "recompute": "selective"},
           "source": "test"}
    if efficiency:
        mfu["efficiency"] = efficiency
    return {"name": "fp8", "seed": 0, "samples": 1000, "flops": "architecture",
            "hardware": {"accelerator": "h100-sxm", "precision": precision, "count": 512},
            "architecture": {"preset": "llama3.1-70b"},
            "priors": {"tokens": {"point": 1e12, "source": "t"}, "mfu": mfu}}


def test_an_fp8_file_is_told_when_the_fit_has_no_fp8_gemm_efficiency():
    def caveat(doc):
        return [n for n in load_spec(doc).count_dependent["mfu"].notes() if "FP8 GEMM efficiency" in n]

    shipped_has_fp8 = "h100-sxm/fp8" in load_fit().get("accelerator", {})
    assert bool(caveat(_doc("fp8"))) is not shipped_has_fp8  # said exactly when the fit lacks the entry
    assert caveat(_doc("bf16")) == []
    assert caveat(_doc("fp8", {"gemm": {"beta": {"mean": 0.35, "sd": 0.05}}})) == []  # stated: nothing to say
