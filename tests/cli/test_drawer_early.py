"""The posterior's figures handed to the drawing process before the run folder exists (api.run's ``early``,
output.draw_early) end up in the folder with the bytes this process would draw; the tables rendered while the
figures are drawn are the text print_result prints."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import mcflops
from mcflops import output
from mcflops.output import figures

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"


@pytest.fixture(scope="module")
def early_run():
    seen = []
    res = mcflops.run(OK, sensitivity=True, early=seen.append)
    return res, seen


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix == ".png"}


def test_early_is_called_once_with_the_final_arrays(early_run):
    res, seen = early_run
    assert len(seen) == 1
    part = seen[0]
    assert part.sensitivity is None and res.sensitivity  # before the analysis
    assert part.sums is res.sums and part.posterior_draws is res.posterior_draws and part.draws is res.draws
    # the figures' data from the result so far are those of the finished result
    assert pickle.dumps(figures.posterior(part)) == pickle.dumps(figures.posterior(res))


def test_figures_drawn_early_are_the_same_files(early_run, tmp_path, monkeypatch):
    res, seen = early_run
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "1")
    output.write_run(tmp_path / "here", res, field="out")
    drawer = output.start_drawer()
    assert drawer is not None
    try:
        output.draw_early(drawer, seen[0])
        sent = [drawer.staged(j).name.split("-", 1)[1] for j in drawer.pending]
        assert sent and set(sent) <= set(figures.posterior(res))
        output.write_run(tmp_path / "early", res, field="out", drawer=drawer)
        staging = drawer.staging
    finally:
        drawer.close()
    assert not staging.exists()  # the staging folder goes with the process
    assert _pngs(tmp_path / "early") == _pngs(tmp_path / "here") and len(_pngs(tmp_path / "here")) >= 5
    assert sorted(p.name for p in (tmp_path / "early").iterdir()) == sorted(p.name for p in (tmp_path / "here").iterdir())


def test_early_figures_of_another_result_are_not_taken(early_run, tmp_path, monkeypatch):
    """draw_early's figures belong to the result it was given: a different one draws its own."""
    res, seen = early_run
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "1")
    other = mcflops.run(OK, sensitivity=True, seed=8)
    output.write_run(tmp_path / "here", other, field="out")
    drawer = output.start_drawer()
    try:
        output.draw_early(drawer, seen[0])
        output.write_run(tmp_path / "other", other, field="out", drawer=drawer)
    finally:
        drawer.close()
    assert _pngs(tmp_path / "other") == _pngs(tmp_path / "here")


def test_a_drawer_that_dies_after_taking_early_figures(early_run, tmp_path, monkeypatch):
    res, seen = early_run
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "1")
    output.write_run(tmp_path / "here", res, field="out")
    drawer = output.start_drawer()
    try:
        output.draw_early(drawer, seen[0])
        drawer.proc.kill()
        output.write_run(tmp_path / "dead", res, field="out", drawer=drawer)
    finally:
        drawer.close()
    assert _pngs(tmp_path / "dead") == _pngs(tmp_path / "here")


def test_rendered_tables_are_what_print_result_prints(early_run, capsys):
    from mcflops.cli.run import print_result, render_result

    res, _ = early_run
    data = {**res.to_dict(), "out": "somewhere"}
    print_result(res, data)
    direct = capsys.readouterr().out
    print_result(res, data, render_result(res, data))
    assert capsys.readouterr().out == direct
    assert "Posterior" in direct and direct.rstrip().endswith("wrote somewhere/")
