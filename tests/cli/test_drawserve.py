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


def _draw_all(tmp_path: Path, figs: list[Draw], workers: int) -> tuple[list[str], int, Path]:
    """Run the drawing process on ``figs`` (job i writes kept/i.txt, a folder that outlives the staging one);
    its reply lines, its pid and the kept folder. It must remove its staging folder at the end of its input."""
    keep, staging = tmp_path / "kept", tmp_path / "staging"
    keep.mkdir()
    staging.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "mcflops.output.drawserve", str(staging), str(workers)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    blobs = [pickle.dumps((str(keep / f"{i}.txt"), None, f)) for i, f in enumerate(figs)]
    out, _ = proc.communicate(b"".join(struct.pack(">I", len(b)) + b for b in blobs), timeout=120)
    assert proc.returncode == 0 and not staging.exists()
    return out.decode().splitlines(), proc.pid, keep


def test_two_workers_answer_in_order_and_both_draw(tmp_path):
    lines, pid, keep = _draw_all(tmp_path, [Draw("tests.cli.drawjobs", "stamp", (i, 0.05)) for i in range(8)], 2)
    assert lines == ["ok"] * 8
    drawn = [(keep / f"{i}.txt").read_text().split() for i in range(8)]
    assert [int(i) for i, _ in drawn] == list(range(8))
    pids = {int(p) for _, p in drawn}
    assert len(pids) == 2 and pid in pids  # the process drew some, its helper (another pid) the others
    assert int(drawn[0][1]) != pid  # the first job goes to the helper


def test_one_worker_draws_everything_itself(tmp_path):
    lines, pid, keep = _draw_all(tmp_path, [Draw("tests.cli.drawjobs", "stamp", (i,)) for i in range(3)], 1)
    assert lines == ["ok"] * 3
    assert {int((keep / f"{i}.txt").read_text().split()[1]) for i in range(3)} == {pid}


def test_a_helper_that_dies_leaves_its_figure_to_the_process(tmp_path):
    marker = str(tmp_path / "died")
    figs = [Draw("tests.cli.drawjobs", "die_once", (marker,))] + [
        Draw("tests.cli.drawjobs", "stamp", (i,)) for i in range(1, 4)]
    lines, pid, keep = _draw_all(tmp_path, figs, 2)
    assert lines == ["ok"] * 4
    assert os.path.exists(marker)  # the helper took job 0 and died of it
    assert (keep / "0.txt").read_text() == f"ok {pid}"  # then drawn by the process itself
    assert all((keep / f"{i}.txt").exists() for i in range(1, 4))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_figure_is_reported_in_its_place(tmp_path, workers):
    figs = [Draw("tests.cli.drawjobs", "stamp", (0,)), Draw("tests.cli.drawjobs", "fail", ()),
            Draw("tests.cli.drawjobs", "stamp", (2,))]
    lines, _, _ = _draw_all(tmp_path, figs, workers)
    assert lines == ["ok", "error ValueError: no such figure", "ok"]


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
