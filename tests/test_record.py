"""A run flows one way (DESIGN.md): the API builds one plain-data record (output.RunRecord) from what it
computed; everything below the API (output, report, inference) receives the record or its parts and never
sees a Result; the report is rendered in process from the record, and `mcflops report DIR` rebuilding it
from the folder's files gives the same report."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import mcflops
from mcflops import output, report
from mcflops.output import RunRecord

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mcflops"
API = PACKAGE / "api"
FACE = PACKAGE / "__init__.py"  # the package's face re-exports the API's names (it sits above the API)
LLAMA = ROOT / "priors" / "llama405b.yaml"


def _below_api() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if API not in p.parents and p != FACE]


def _mentions_result(path: Path) -> list[str]:
    """Where a module imports, names or mentions ``Result``: an import, a name, an attribute, or the word in a
    docstring or comment (duck typing on a Result is documented as such)."""
    text = path.read_text()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name.split(".")[-1] == "Result"]
        elif isinstance(node, ast.Name) and node.id == "Result":
            out.append(f"line {node.lineno}: names Result")
        elif isinstance(node, ast.Attribute) and node.attr == "Result":
            out.append(f"line {node.lineno}: reads .Result")
    out += [f"line {i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if re.search(r"\bResult\b", line)]
    return out


def test_no_module_below_the_api_imports_or_names_result():
    bad = [f"{p.relative_to(ROOT)}: {m}" for p in _below_api() for m in _mentions_result(p)]
    assert not bad, "\n".join(bad)


def test_the_check_finds_a_result(tmp_path):
    """The check above can fail: a module that reads a Result by duck typing and says so is found."""
    mod = tmp_path / "m.py"
    mod.write_text('from mcflops.api import Result\n\ndef f(res):\n    """res: an api.Result"""\n    return res.sums\n')
    assert [m.split(":")[0] for m in _mentions_result(mod)] == ["line 1", "line 1"] + ["line 4"]
    assert _below_api() and all(API not in p.parents for p in _below_api())
    assert (PACKAGE / "output" / "folder.py") in _below_api() and (API / "result.py") not in _below_api()


@pytest.fixture(scope="module")
def res():
    """The flagship file, few draws, no sensitivity analysis (the record's shape does not depend on them)."""
    return mcflops.run(LLAMA, samples=20_000, seed=3)


@pytest.fixture(scope="module")
def prior_only():
    return mcflops.sample(LLAMA, samples=20_000, seed=3)


def test_the_record_is_plain_frozen_data(res):
    rec = res.record
    assert isinstance(rec, RunRecord) and rec is res.record  # built once
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.summary = {}
    # summary.json's content in JSON types: a round trip through JSON changes nothing
    assert json.loads(json.dumps(rec.summary)) == rec.summary
    assert rec.spec is res.spec and rec.notes == tuple(res.notes) and rec.posterior == rec.summary["posterior"]
    d = res.to_dict()
    assert d == rec.summary
    d["prior"]["mfu"]["p50"] = -1.0  # the caller's copy
    assert rec.summary["prior"]["mfu"]["p50"] == res.prior["mfu"]["p50"] > 0


def test_record_groups_hold_the_draws_and_scipys_log_likelihood(res):
    """posterior.nc's groups: the kept draws as (chain, draw), and each draw's log-likelihood of the published
    figure as scipy's lognormal density (sigma the observation's, scale the draw's GPU-hours)."""
    from scipy import stats

    g = res.record.groups
    assert list(g.data) == ["posterior", "prior", "log_likelihood", "observed_data"]
    np.testing.assert_array_equal(g.data["posterior"]["mfu"].ravel(), res.posterior_draws["mfu"])
    np.testing.assert_array_equal(g.data["prior"]["gpu_hours"].ravel(), res.draws["gpu_hours"])
    o = res.spec.observe["gpu_hours"]
    want = stats.lognorm(s=o.scale, scale=res.posterior_draws["gpu_hours"]).logpdf(o.value)
    np.testing.assert_allclose(g.data["log_likelihood"]["gpu_hours"].ravel(), want, rtol=1e-12, atol=1e-12)
    assert g.attrs["spec_hash"] == res.record.summary["spec_hash"] and g.attrs["seed"] == 3


def test_record_plot_data_is_what_plotdata_computes(res):
    """The figures' data is computed once, from the engine's histograms and the kept draws: the headline's
    densities integrate to about 1 over their grid (99.6% of the draws lie on it)."""
    p = res.record.plots
    assert p.inputs is not None and p.ridge is not None and set(p.predictive) == {"gpu_hours"}
    for key in ("prior", "posterior"):
        grid, f = p.headline["grid"], p.headline[key]
        assert math.isclose(float(np.trapezoid(f, grid)), 1.0, abs_tol=0.02), key
    names = [panel["name"] for panel in p.inputs["panels"]]
    assert names == [n for n in res.spec.uncertain if n in res.posterior]


def test_a_prior_only_record(prior_only):
    rec = prior_only.record
    assert rec.posterior is None and rec.posterior_draws is None
    assert list(rec.groups.data) == ["prior", "observed_data"]  # no empty posterior group, no log-likelihood
    assert rec.plots.inputs is None and rec.plots.ridge is None and not rec.plots.predictive
    assert rec.plots.headline is not None and rec.plots.headline["posterior"] is None
    writers, notes = output.run_files(rec)
    assert writers == [] and notes == []  # no posterior.nc, no posterior figures


def test_the_report_is_rendered_in_process_and_rebuilt_from_the_folder(res, tmp_path, monkeypatch):
    """Writing the run folder reads back neither summary.json nor spec.resolved.yaml (the report is rendered
    from the record), and `mcflops report DIR`, which rebuilds what it reads from those files, renders the
    same report byte for byte."""
    import mcflops.reading
    import mcflops.spec

    def refused(*a, **k):
        raise AssertionError("a file just written was read back")

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(mcflops.reading, "read_summary", refused)
        m.setattr(mcflops.spec, "load_spec", refused)
        data = res.write(out)
    assert json.loads((out / "summary.json").read_text()) == data
    written = {name: (out / name).read_text(encoding="utf-8") for name in report.FILES}
    assert "Not computed: spec.resolved.yaml" not in written["report.md"]
    assert report.render(out, label=output.label(out)) == written
    output.rerender_report(out, str(out))
    assert {name: (out / name).read_text(encoding="utf-8") for name in report.FILES} == written
