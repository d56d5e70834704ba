"""A hand-set MFU prior read against the published runs, and a calibrated prior that forecasts a chip with no
published run (issue 31, item 4). The implied utilizations are computed here from published_runs.yaml with
the formula its header states (u = 6 N D / (P H 3600)), not through the package's code."""

from __future__ import annotations

import importlib.resources

import pytest
from ruamel.yaml import YAML

from mcflops.priors import calibrated
from mcflops.spec import load_spec

PRIORS = {"params": 70e9, "tokens": 15e12}


def _spec(mfu, goodput=None, acc="h100-sxm", precision="bf16"):
    priors = {**PRIORS, "mfu": mfu, **({"goodput": goodput} if goodput is not None else {})}
    return load_spec({"name": "new-run", "hardware": {"accelerator": acc, "count": 4096, "precision": precision},
                      "priors": priors})


def _warnings(spec):
    return [n for n in spec.notes if n.startswith("WARNING: priors.mfu")]


def _implied_hopper_dense_near_70b():
    text = importlib.resources.files("mcflops").joinpath("data", "published_runs.yaml").read_text("utf-8")
    data = YAML(typ="safe", pure=True).load(text)
    peak = data["peak_flops_dense_bf16"]
    return {r["id"]: 6 * r["params_active"] * r["tokens"] / (peak[r["accelerator"]] * r["hours"] * 3600)
            for r in data["runs"] if r.get("generation") == "h100" and not r["moe"]
            and 70e9 / 3 <= r["params_active"] <= 70e9 * 3}


def test_a_guess_above_every_comparable_run_is_a_warning_naming_them():
    spec = _spec({"beta": [0.45, 0.60]}, {"beta": [0.90, 0.97]})
    (line,) = _warnings(spec)
    near = _implied_hopper_dense_near_70b()
    assert len(near) >= 2 and "above the 90% band" in line and "optimistic" in line
    for run_id, u in near.items():  # every comparable run, at the precision the line prints
        assert f"{run_id} {u:.3f}" in line
    p5, p50, p95 = calibrated.calibrated_prior(calibrated.load_fit(), 70e9, "h100-sxm", False, None,
                                            [0.05, 0.5, 0.95])[0]
    assert f"90% [{p5:.3f}, {p95:.3f}]" in line and f"median {p50:.3f}" in line


def test_a_guess_below_the_band_says_pessimistic():
    (line,) = _warnings(_spec({"beta": [0.04, 0.08]}))
    assert "below the 90% band" in line and "pessimistic" in line and "(no downtime)" in line


@pytest.mark.parametrize("mfu, precision", [({"beta": [0.2, 0.35]}, "bf16"),  # inside the band: nothing to say
                                            ({"beta": [0.45, 0.60]}, "fp8")])  # other units than the band's
def test_no_warning_inside_the_band_or_in_other_units(mfu, precision):
    assert _warnings(_spec(mfu, precision=precision)) == []


def test_no_shipped_prior_file_is_warned():
    """The files in priors/ state published runs' own MFU: inside the band (and the golden summaries keep
    their notes)."""
    from pathlib import Path

    for f in sorted(Path(__file__).parents[2].joinpath("priors").glob("*.yaml")):
        assert not [n for n in load_spec(f).notes if "band of published runs" in n], f.name


def test_a_chip_with_no_published_run_is_a_warning_and_not_ranked_above_its_predecessor():
    """B200 has no published run: the calibrated prior takes Hopper's measured effect with the families'
    spread added, so its median is Hopper's (not the population's, which read 0.289 against 0.243) and its
    interval is wider; the terminal gets a WARNING, not only a source string."""
    b200, h100 = _spec({"calibrated": True}, acc="b200"), _spec({"calibrated": True})
    (line,) = _warnings(b200)
    assert "no published run on b200" in line and "pilot" in line
    assert _warnings(h100) == []
    q = [0.05, 0.5, 0.95]
    fit = calibrated.load_fit()
    b = calibrated.calibrated_prior(fit, 70e9, "b200", False, None, q)[0]
    h = calibrated.calibrated_prior(fit, 70e9, "h100-sxm", False, None, q)[0]
    assert b[1] == pytest.approx(h[1], rel=0.03)  # a wider logit spread moves the median a little, not a rank
    assert b[2] / b[0] > h[2] / h[0]
