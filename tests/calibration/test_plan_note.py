"""plan's note on what moves with the accelerator count, for the calibrated prior: it holds MFU and goodput
in one number (effective utilization), so the note says that its goodput is the published runs' and is not
re-solved, where a hand-set MFU beside a hand-set goodput gets the usual two-part note."""

from pathlib import Path

from mcflops.analysis.plan import held
from mcflops.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def test_the_calibrated_prior_says_its_goodput_is_the_published_runs_and_held():
    note = held(load_spec(ROOT / "priors/examples/dense70b-h100.yaml"))
    assert "mfu is the calibrated MFU x goodput (effective utilization)" in note
    assert "its goodput is the published runs'" in note and "goodput: {failures: ...}" in note
    assert "mfu and goodput are held" not in note  # not the hand-set form, which would name a goodput prior


def test_a_hand_set_mfu_keeps_the_two_part_note():
    note = held(load_spec(ROOT / "priors/examples/ladder/dense70b-guess.yaml"))
    assert "calibrated MFU x goodput" not in note and "held at the file's prior" in note
