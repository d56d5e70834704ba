"""The drawing process (output.drawer) draws a run folder's figures as this process would: the same files,
the same PNG bytes, whichever process drew which; and should it die, every figure is still drawn here."""

from __future__ import annotations

from pathlib import Path

import pytest

import mcflops
from mcflops import output

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"


@pytest.fixture(scope="module")
def res():
    return mcflops.run(OK, sensitivity=True)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix == ".png"}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_shared_figures_are_the_same_bytes(res, tmp_path, monkeypatch, workers):
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "1")  # whatever the machine's load
    monkeypatch.setenv("MCFLOPS_DRAW_WORKERS", workers)  # one figure at a time there, or two (a forked helper)
    output.write_run(tmp_path / "here", res, field="out")
    drawer = output.start_drawer()
    assert drawer is not None and drawer.alive()
    sent = []
    send = drawer.send
    monkeypatch.setattr(drawer, "send", lambda *a: sent.append(a[0].name) or send(*a))
    try:
        output.write_run(tmp_path / "shared", res, field="out", drawer=drawer)
    finally:
        drawer.close()
    here, shared = _files(tmp_path / "here"), _files(tmp_path / "shared")
    assert len(here) >= 5 and sent  # the other process drew some of them
    assert set(sent) < set(shared)  # and this one the others
    assert here == shared
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == sorted(p.name for p in (tmp_path / "shared").iterdir())


def test_a_dead_drawer_leaves_the_figures_here(res, tmp_path, monkeypatch):
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "1")
    output.write_run(tmp_path / "here", res, field="out")
    drawer = output.start_drawer()
    drawer.proc.kill()
    drawer.proc.wait()
    try:
        output.write_run(tmp_path / "dead", res, field="out", drawer=drawer)
    finally:
        drawer.close()
    assert _files(tmp_path / "here") == _files(tmp_path / "dead")


def test_no_drawer_when_turned_off(monkeypatch):
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "0")
    assert output.start_drawer() is None


def test_without_h5netcdf_the_folder_says_so(res, tmp_path, monkeypatch):
    """netcdf.available finds h5netcdf and h5py without importing them; where either is missing, the folder
    goes without posterior.nc and summary.json's notes say why."""
    import json
    import sys

    assert res.posterior
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "0")
    for name in ("h5netcdf", "h5py"):
        with monkeypatch.context() as m:
            m.setitem(sys.modules, name, None)  # as if not installed
            output.write_run(tmp_path / name, res, field="out")
        notes = json.loads((tmp_path / name / "summary.json").read_text())["notes"]
        assert output.NETCDF_MISSING in notes and not (tmp_path / name / "posterior.nc").exists()
    output.write_run(tmp_path / "both", res, field="out")
    assert (tmp_path / "both" / "posterior.nc").exists()


def test_started_on_two_cores_whatever_the_load_never_on_one(monkeypatch):
    import os

    from mcflops.output import drawer as drawer_mod

    monkeypatch.delenv("MCFLOPS_DRAW_PROCESS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0), raising=False)  # a busy machine
    monkeypatch.setattr(drawer_mod, "cores", lambda: 1)
    assert output.start_drawer() is None
    monkeypatch.setattr(drawer_mod, "cores", lambda: 2)
    d = output.start_drawer()
    try:
        assert d is not None and d.alive()
    finally:
        d.close()
