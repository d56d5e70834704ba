"""``Result.write`` writes the folder `mcflops run` writes (report included), through the same writer:
the same files, summary.json the same bytes but for how long it took and which build made it; and
``mcflops.write`` writes what `plan --out` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mcflops
from mcflops import cli
from tests.test_golden import _strip

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"


def _without_timings(text: str) -> str:
    return json.dumps(_strip(json.loads(text)), indent=2)


def test_result_write_gives_the_cli_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(OK), "--out", "cli", "--quiet", "--context"]) == 0  # the most the CLI computes
    capsys.readouterr()
    res = mcflops.run(OK, sensitivity=True, context=True)  # what `mcflops run` computes
    data = res.write(tmp_path / "api")
    a, b = tmp_path / "cli", tmp_path / "api"
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    assert {"summary.json", "spec.resolved.yaml", "report.md", "report.html", "posterior.nc"} <= set(names)
    sa, sb = (a / "summary.json").read_text(), (b / "summary.json").read_text()
    assert json.loads(sb) == data
    assert _without_timings(sa) == _without_timings(sb)
    for text in (sa, sb):  # byte for byte: both are this dump of the same values, volatile fields aside
        assert text == json.dumps(json.loads(text), indent=2) + "\n"
    assert (a / "spec.resolved.yaml").read_bytes() == (b / "spec.resolved.yaml").read_bytes()
    for page in ("report.md", "report.html"):
        assert "regenerate" in (b / page).read_text() or (b / page).stat().st_size > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api", "cli"]  # no lock file, no temporary folder


def test_result_write_refuses_a_folder_that_is_not_a_report(tmp_path):
    d = tmp_path / "D"
    d.mkdir()
    (d / "thesis.tex").write_text("x\n")
    res = mcflops.sample(OK, samples=2000)
    with pytest.raises(mcflops.SpecError, match="not an mcflops report"):
        res.write(d)
    assert sorted(p.name for p in d.iterdir()) == ["thesis.tex"]


def test_write_plan_gives_the_cli_files(tmp_path, capsys):
    assert cli.main(["plan", str(OK), "--deadline-days", "60", "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    capsys.readouterr()
    data = mcflops.plan(OK, deadline_days=60)
    mcflops.write("plan", data, tmp_path / "api")
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == sorted(p.name for p in (tmp_path / "api").iterdir())
    assert json.loads((tmp_path / "api" / "plan.json").read_text()) == json.loads(
        (tmp_path / "cli" / "plan.json").read_text())
    with pytest.raises(ValueError, match="kind"):
        mcflops.write("tornado", data, tmp_path / "x")
