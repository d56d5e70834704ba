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


def test_an_accelerator_without_an_hbm_bandwidth_leaves_the_memory_bound_term_out_and_says_so(monkeypatch):
    """The catalogue's HBM bandwidth is optional: a dense file on an entry without one loads, its waterfall has no
    memory-bound factor and its notes say why; stating layout.hbm_gb_s brings the term back."""
    import dataclasses

    from mcflops import hardware

    real = hardware.get
    monkeypatch.setattr(hardware, "get", lambda name: dataclasses.replace(real(name), hbm_gb_s=None))

    def load(extra=None):
        doc = _doc("bf16")
        doc["priors"]["mfu"]["layout"].update(extra or {})
        lp = load_spec(doc).count_dependent["mfu"]
        return [n for n in lp.notes() if "HBM bandwidth" in n], lp.factor_draws()

    notes, f = load()
    assert len(notes) == 1 and "layout.hbm_gb_s" in notes[0] and "memory" not in f
    notes, f = load({"hbm_gb_s": 3350})
    assert notes == [] and 0 < f["memory"].min() and f["memory"].max() < 1


def test_a_long_context_file_is_told_the_layout_model_does_not_see_the_sequence():
    """The shipped fit has no attention term: a file whose attention core is a large share of its FLOPs is told
    (a note from 0.2, a WARNING from 0.4 of the FLOPs), a short one is not, and stating efficiency.attention
    removes it (the term is then modelled). The share checked by hand: 6 l d s per token for the causal scores over
    about 6 N + 6 l d s (Llama 3.1 70B: N 70.6B, l 80, d 8192), within 5% (the logits and norms aside)."""
    from mcflops.spec.layoutspec import LONG_CONTEXT_NOTE, LONG_CONTEXT_WARNING

    def notes(seq, efficiency=None):
        doc = _doc("bf16", efficiency)
        doc["architecture"] = {"preset": "llama3.1-70b", "seq_len": seq}
        doc["priors"]["mfu"]["layout"].update(global_batch=64, cp=max(1, seq // 32768), recompute="full")
        lp = load_spec(doc).count_dependent["mfu"]
        share = lp.counts.flops["attention_scores_causal"] / lp.counts.flops_per_token
        return share, [n for n in lp.notes() if "attention core is" in n]

    levels = []
    for seq in (8192, 65536, 262144):
        share, got = notes(seq)
        by_hand = 6 * 80 * 8192 * seq / (6 * 70.6e9 + 6 * 80 * 8192 * seq)
        assert abs(share / by_hand - 1) < 0.05
        if share < LONG_CONTEXT_NOTE:
            assert got == []
        else:
            assert len(got) == 1 and f"{share:.0%}" in got[0]
            assert got[0].startswith("WARNING") is (share >= LONG_CONTEXT_WARNING)
        levels.append(len(got) and (2 if got[0].startswith("WARNING") else 1))
    assert levels == [0, 1, 2]  # 8K: nothing; 64K: a note; 256K: a WARNING
    assert notes(262144, {"attention": {"beta": {"mean": 0.3, "sd": 0.05}}})[1] == []


def test_a_pilot_at_the_files_sequence_drops_the_sequence_caveat():
    """A pilot keeps the file's architecture, its sequence too, so it measures what the model does not see: the
    piloted prior has no sequence caveat, the same file without the pilot has it (a 70B at 65,536 tokens)."""
    import copy
    import pathlib

    from mcflops.spec.layoutspec import SEQUENCE_BLIND
    from mcflops.spec.reader import read_yaml

    doc = copy.deepcopy(read_yaml(pathlib.Path(__file__).parents[2] / "priors/examples/ladder/dense70b-pilot.yaml"))
    doc["architecture"]["seq_len"] = 65536
    doc["priors"]["mfu"]["layout"].update(global_batch=256, cp=8, recompute="full")
    doc["pilot"][0]["tflops_per_gpu"] = 250  # reachable at this layout by the model's draws
    doc.pop("plan", None)

    def blind(d):
        return [n for n in load_spec(d).count_dependent["mfu"].notes() if SEQUENCE_BLIND in n]

    without = {k: v for k, v in doc.items() if k != "pilot"}
    assert len(blind(without)) == 1 and blind(doc) == []
