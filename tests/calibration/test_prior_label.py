"""The calibrated prior says what it is (MFU x goodput, effective utilization), its median and 90% interval and
how many runs it is calibrated on, and what of the run the data have not seen."""

import pytest

from mcflops.priors import calibrated
from mcflops.spec import load_spec


def _mfu(acc="h100-sxm", calibrated=True):
    return load_spec({"name": "c", "hardware": {"accelerator": acc, "precision": "bf16", "count": 1024},
                      "priors": {"params": 70e9, "tokens": 2e12, "mfu": {"calibrated": calibrated}}}).priors["mfu"]


def test_short_description_is_the_tables_median_and_interval():
    from tests.oracles import scipy_dist

    d = _mfu(calibrated={"org": "Meta"})
    p5, p50, p95 = scipy_dist(d).ppf([0.05, 0.5, 0.95])
    n = calibrated.load_fit()["n_runs"]
    assert calibrated.describe(d) == (f"{calibrated.LABEL}: median {p50:.3f}, 90% [{p5:.3f}, {p95:.3f}], "
                                      f"calibrated on {n} published runs")
    assert "mixture" not in calibrated.describe(d)
    assert calibrated.describe(load_spec({"name": "c", "priors": {"params": 1e9, "tokens": 1e11, "mfu": 0.4},
                                          "hardware": {"accelerator": "a100"}}).priors["mfu"]) is None


@pytest.mark.parametrize("acc, calibrated, note", [
    ("b200", {"org": "Meta"}, "no published run on b200 (blackwell): its predecessor's effect (hopper) with the "
                              "spread of families added"),
    ("mi300x", True, "no published run on mi300x (cdna3): the population spread of families applies"),
    # the shipped model (chosen by the grouped validation) has no organisation effect, and says so
    ("h100-sxm", {"org": "Nobody"}, "the fit has no organisation effect (the grouped validation chose none): "
                                    "Nobody does not move the prior"),
])
def test_what_the_data_have_not_seen_is_said(acc, calibrated, note):
    assert note in _mfu(acc, calibrated).source


def test_an_org_does_not_move_a_prior_without_an_organisation_effect():
    from mcflops.priors.quantiles import ppf

    u = [0.05, 0.5, 0.95]
    assert list(ppf(_mfu(calibrated={"org": "Meta"}), u)) == list(ppf(_mfu(calibrated={"org": "Nobody"}), u))
    assert "population spread of organisations" not in _mfu(calibrated=True).source


def test_a_known_org_and_family_have_no_note():
    assert "no published run" not in _mfu(calibrated={"org": "Meta"}).source
