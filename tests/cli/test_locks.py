"""One writer per output folder: a second `mcflops run` to a folder another process is writing is refused
in one line that does not blame its input; a lock or temporary folders left by a dead process are no
reason to refuse and are cleaned up; the swap is one atomic exchange, so a reader never finds the
folder missing; several processes racing for one folder leave one report and no debris."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from mcflops import cli
from mcflops.output import files, lock

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent)}
HOLD = ("import sys, time; from pathlib import Path; from mcflops.output import lock; "
        "lock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(120)")


def _holder(out: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert p.stdout.readline().strip() == "held"
    return p


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_folder_another_process_writes_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "report"
    holder = _holder(out)
    try:
        rc = cli.main(["run", str(OK), "--out", str(out), "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2
        assert err == f"mcflops: another run is writing {out}\n"  # the folder, not the input, is named
        assert sorted(p.name for p in tmp_path.iterdir()) == [".report.lock"]  # the holder's, untouched
    finally:
        holder.kill()
        holder.communicate()
    # the holder died with its lock file in place: that is no reason to refuse
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # lock file gone with the run


def test_temporary_folders_of_dead_processes_are_removed(tmp_path, capsys):
    out = tmp_path / "report"
    dead, live = _dead_pid(), os.getppid()
    for name in (f".report.tmp-{dead}-abc", f".report.old-{dead}-def", f".report.tmp-{live}-ghi"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text("{}\n")
    (tmp_path / f".other.tmp-{dead}-jkl").mkdir()  # another folder's: not this run's to judge
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x\n")
    (tmp_path / f".report.tmp-{dead}-lnk").symlink_to(victim)  # a planted link is never followed
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f".report.tmp-{live}-ghi", f".other.tmp-{dead}-jkl", f".report.tmp-{dead}-lnk", "report", "victim"])
    assert (victim / "keep").read_text() == "x\n"


def test_a_report_set_aside_by_a_killed_swap_is_put_back(tmp_path):
    """Killed between the two renames of the fallback swap: the folder is missing and the previous report
    sits in `.report.old-PID-*`; the next writer to take the lock puts it back before anything else."""
    out = tmp_path / "report"
    holder = tmp_path / f".report.old-{_dead_pid()}-x"
    (holder / "report").mkdir(parents=True)
    (holder / "report" / "summary.json").write_text("{}\n")
    with lock.holding(out):
        assert (out / "summary.json").read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_the_swap_never_leaves_the_folder_missing(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "n").write_text("0")
    assert files.exchange is not None
    missing, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            if not out.is_dir():
                missing.append(1)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 300):
            tmp = files.make_temp_folder(out)
            (tmp / "n").write_text(str(i))
            files.swap(tmp, out)
    finally:
        stop.set()
        t.join()
    if sys.platform.startswith("linux"):  # renameat2(RENAME_EXCHANGE); elsewhere two renames
        assert missing == []
    assert (out / "n").read_text() == "299"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_racing_writers_leave_one_report_and_no_debris(tmp_path):
    out = tmp_path / "report"
    procs = [subprocess.Popen([sys.executable, "-m", "mcflops.cli", "run", str(OK), "--out", str(out), "--quiet",
                               "--seed", str(s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=ENV, cwd=tmp_path) for s in range(4)]
    results = [(p.returncode, err) for p in procs for _, err in [p.communicate(timeout=300)]]
    for rc, err in results:
        assert rc == 0 and err == "" or rc == 2 and err == f"mcflops: another run is writing {out}\n", (rc, err)
    assert any(rc == 0 for rc, _ in results)
    assert json.loads((out / "summary.json").read_text())["name"] == "small"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # no .old-, .tmp- or lock left


def test_report_takes_the_folder_lock(tmp_path, capsys):
    """`mcflops report DIR` while another process writes DIR is refused, and leaves DIR's files as they were
    (issue 33: run as `run --out DIR` swapped the folder, it wrote the previous run's report into the new
    one); once the writer is gone it re-renders, and says which files it replaced."""
    out = tmp_path / "report"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet"]) == 0
    (out / "report.md").write_text("stale\n")
    holder = _holder(out)
    try:
        assert cli.main(["report", str(out)]) == 2
        assert capsys.readouterr().err == f"mcflops: another run is writing {out}\n"
        assert (out / "report.md").read_text() == "stale\n"
    finally:
        holder.kill()
        holder.communicate()
    files.WRITTEN.clear()
    assert cli.main(["report", str(out)]) == 0
    assert (out / "report.md").read_text() != "stale\n"
    assert files.WRITTEN == [str(out / "report.md"), str(out / "report.html")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # its lock file gone with it


def test_analysis_outputs_are_locked_tracked_and_name_their_target(tmp_path, monkeypatch):
    """`plan/compare/sensitivity/calibrate --out` write under the folder's lock too, record each file they
    replace (an interrupt then says which), and a failed write (a full disk) names the file it was writing,
    not its hidden staging copy."""
    import errno

    import pytest

    from mcflops.errors import SpecError
    from mcflops.output import folder

    out = tmp_path / "plan"
    holder = _holder(out)
    try:
        with pytest.raises(lock.FolderBusy):
            folder.write_outputs(out, "plan.json", {"a": 1}, {})
    finally:
        holder.kill()
        holder.communicate()
    files.WRITTEN.clear()
    folder.write_outputs(out, "plan.json", {"a": 1}, {}, pages=lambda d: {"report.md": "# r\n"})
    assert files.WRITTEN == [str(out / "plan.json"), str(out / "report.md")]
    assert json.loads((out / "plan.json").read_text()) == {"a": 1}

    def full(path, text):  # what replace_text raises on a full disk: the staging file's name
        raise OSError(errno.ENOSPC, "No space left on device", str(path.parent / f".{path.name}.tmp-x1"))

    monkeypatch.setattr(files, "replace_text", full)
    with pytest.raises(SpecError) as e:
        folder.write_outputs(out, "plan.json", {"a": 2}, {})
    assert str(e.value) == f"{out / 'plan.json'}: --out: cannot write: No space left on device"
    assert json.loads((out / "plan.json").read_text()) == {"a": 1}  # the previous file whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan"]  # no lock file left
