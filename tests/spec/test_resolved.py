"""spec.resolved.yaml keeps a count-dependent prior as its recipe: rerunning from it gives the original's
summary and the original's plan at another count (the goodput re-solved there), not the file count's table."""

from __future__ import annotations

import json

import pytest

import mcflops
from mcflops.cli.main import main
from mcflops.spec import load_spec, resolved_dict

SAMPLES = 20_000


def _raw(count=4096, restart=None):
    return {"name": "rs", "seed": 5, "samples": SAMPLES, "hardware": {"accelerator": "h100-sxm", "count": count},
            "priors": {"params": 405e9, "tokens": {"lognormal": [15e12, 16.8e12]},
                       "mfu": {"beta": {"mean": 0.36, "sd": 0.04}},
                       "goodput": {"failures": {"rate_per_gpu_hour": 1.973e-5, "checkpoint_interval_h": 0.17,
                                                "restart_h": restart or {"lognormal": [0.03, 0.2]}},
                                   "source": "a test"}}}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The original file, and the folder `mcflops run` wrote for it."""
    root = tmp_path_factory.mktemp("resolved")
    src = root / "rs.yaml"
    src.write_text(json.dumps(_raw()))  # JSON is YAML
    assert main(["run", str(src), "--out", str(root / "out"), "--quiet"]) == 0
    return src, root / "out"


def test_the_resolved_file_keeps_the_recipe_and_its_table_as_a_comment(written):
    src, out = written
    text = (out / "spec.resolved.yaml").read_text()
    spec = load_spec(out / "spec.resolved.yaml")
    assert "failures:" in text and "count: 4096" in text and "checkpoint_write_h: 0.0" in text
    assert list(spec.count_dependent) == ["goodput"]  # still re-solvable
    # the comment names the table's median, and it is the run's goodput median
    median = float(text.split("p50 ")[1].split(",")[0])
    assert median == pytest.approx(json.loads((out / "summary.json").read_text())["prior"]["goodput"]["p50"],
                                   rel=2e-3)
    # a fixed point: the resolved file's resolved form is itself, and its priors are the original's
    orig = load_spec(src)
    assert resolved_dict(spec) == resolved_dict(orig)
    assert spec.priors["goodput"] == orig.priors["goodput"]
    assert spec.count_dependent["goodput"] == orig.count_dependent["goodput"]


def test_rerun_from_the_resolved_file_gives_the_same_summary(written, tmp_path):
    src, out = written
    assert main(["run", str(out / "spec.resolved.yaml"), "--out", str(tmp_path / "again"), "--quiet"]) == 0
    a = json.loads((out / "summary.json").read_text())
    b = json.loads((tmp_path / "again" / "summary.json").read_text())
    for name in ("gpu_hours", "goodput", "wall_days"):
        for k in ("p5", "p50", "p95", "mean"):
            assert b["prior"][name][k] == pytest.approx(a["prior"][name][k], rel=1e-6), (name, k)
    assert a["spec_hash"] == b["spec_hash"]


@pytest.mark.parametrize("gpus", [1024, 16384])
def test_plan_at_another_count_is_the_originals(written, gpus):
    src, out = written
    a = mcflops.plan(str(src), gpus=gpus)
    b = mcflops.plan(str(out / "spec.resolved.yaml"), gpus=gpus)
    assert a["count_dependent"] == b["count_dependent"] == ["goodput"]
    assert a["cluster"] == b["cluster"] and a["cluster"]["gpus"] == gpus
    # and it differs from the file count's table: the count dependence is not lost
    fixed = load_spec({**_raw(), "priors": {**_raw()["priors"],
                                            "goodput": load_spec(src).priors["goodput"].to_dict()}})
    assert mcflops.plan(fixed, gpus=gpus)["cluster"] != a["cluster"]
