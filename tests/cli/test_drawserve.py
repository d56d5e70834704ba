"""The drawing process with its forked helper (output.drawserve, two figures at a time): replies in the jobs'
order whichever process drew which, the helper's figures drawn there when it dies, a failed figure reported
as such, and killing the process ends its helper too."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcflops import output
from mcflops.output.figures import Draw

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not sys.platform.startswith("linux"),
                                reason="the helper is forked (Linux)")


def _serve(staging: Path, workers: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "mcflops.output.drawserve", str(staging), str(workers)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)


def _job(path: Path, fig: Draw) -> bytes:
    blob = pickle.dumps((str(path), None, fig))
    return struct.pack(">I", len(blob)) + blob


def test_two_workers_answer_in_order_and_both_draw(tmp_path):
    keep = tmp_path / "kept"
    keep.mkdir()
    figs = [Draw("tests.cli.drawjobs", "stamp", (i, 0.05)) for i in range(8)]
    staging = tmp_path / "staging"
    staging.mkdir()
    proc = _serve(staging, 2)
    # each job writes its own file in `keep` (the staging folder goes at the end)
    jobs = b"".join(_job(keep / f"{i}.txt", f) for i, f in enumerate(figs))
    out, _ = proc.communicate(jobs, timeout=120)
    assert proc.returncode == 0 and out.decode().splitlines() == ["ok"] * 8
    drawn = [(keep / f"{i}.txt").read_text().split() for i in range(8)]
    assert [int(i) for i, _ in drawn] == list(range(8))
    pids = {int(p) for _, p in drawn}
    assert len(pids) == 2 and proc.pid in pids  # the process drew some, its helper (another pid) the others
    first = int(drawn[0][1])
    assert first != proc.pid  # the first job goes to the helper


def test_one_worker_draws_everything_itself(tmp_path):
    keep = tmp_path / "kept"
    keep.mkdir()
    staging = tmp_path / "staging"
    staging.mkdir()
    proc = _serve(staging, 1)
    out, _ = proc.communicate(b"".join(_job(keep / f"{i}.txt", Draw("tests.cli.drawjobs", "stamp", (i,)))
                                       for i in range(3)), timeout=120)
    assert out.decode().splitlines() == ["ok"] * 3
    assert {int((keep / f"{i}.txt").read_text().split()[1]) for i in range(3)} == {proc.pid}


def test_a_helper_that_dies_leaves_its_figure_to_the_process(tmp_path):
    keep = tmp_path / "kept"
    keep.mkdir()
    marker = str(tmp_path / "died")
    figs = [Draw("tests.cli.drawjobs", "die_once", (marker,))] + [
        Draw("tests.cli.drawjobs", "stamp", (i,)) for i in range(1, 4)]
    staging = tmp_path / "staging"
    staging.mkdir()
    proc = _serve(staging, 2)
    out, _ = proc.communicate(b"".join(_job(keep / f"{i}.txt", f) for i, f in enumerate(figs)), timeout=120)
    assert proc.returncode == 0 and out.decode().splitlines() == ["ok"] * 4
    assert os.path.exists(marker)  # the helper took job 0 and died of it
    assert (keep / "0.txt").read_text() == f"ok {proc.pid}"  # then drawn by the process itself
    assert all((keep / f"{i}.txt").exists() for i in range(1, 4))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_figure_is_reported_in_its_place(tmp_path, workers):
    keep = tmp_path / "kept"
    keep.mkdir()
    figs = [Draw("tests.cli.drawjobs", "stamp", (0,)), Draw("tests.cli.drawjobs", "fail", ()),
            Draw("tests.cli.drawjobs", "stamp", (2,))]
    staging = tmp_path / "staging"
    staging.mkdir()
    proc = _serve(staging, workers)
    out, _ = proc.communicate(b"".join(_job(keep / f"{i}.txt", f) for i, f in enumerate(figs)), timeout=120)
    lines = out.decode().splitlines()
    assert lines[0] == "ok" and lines[2] == "ok"
    assert lines[1] == "error ValueError: no such figure"


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_killing_the_process_ends_its_helper(monkeypatch):
    monkeypatch.setenv("MCFLOPS_DRAW_PROCESS", "1")
    monkeypatch.setenv("MCFLOPS_DRAW_WORKERS", "2")
    drawer = output.start_drawer()
    assert drawer is not None and drawer.depth == 3  # two drawing, one waiting
    try:
        deadline = time.monotonic() + 60
        while not _children(drawer.proc.pid) and time.monotonic() < deadline:  # forked once matplotlib is in
            time.sleep(0.05)
        helpers = _children(drawer.proc.pid)
        assert len(helpers) == 1
    finally:
        drawer.close(kill=True)
    deadline = time.monotonic() + 10
    while not _gone(helpers[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(helpers[0]) and _gone(drawer.proc.pid)
    assert not drawer.staging.exists()
