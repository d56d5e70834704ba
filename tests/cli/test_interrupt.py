"""Never half-written: a run's files go to a temporary folder that is renamed into place, so Ctrl-C or a
failed write leaves the previous report byte-identical and no debris beside it.

The Ctrl-C test sends a real SIGINT to a real `mcflops run` once its progress bar (on a pseudo-terminal,
as a user sees it) shows that sampling has started.
"""

from __future__ import annotations

import errno
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcflops import cli
from mcflops.output import files
from mcflops.output import folder as write

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
DRAWN = re.compile(r"sampling\D*[1-9]\d*/\d+ blocks")  # the progress bar, once a block is done
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def previous_report(parent: Path) -> Path:
    out = parent / "report"
    out.mkdir()
    (out / "summary.json").write_text('{"name": "previous", "seed": 1, "samples": 1, "spec_hash": "0", '
                                      '"version": "0"}\n')  # mcflops' own keys: a report run may replace
    (out / "report.md").write_text("# the previous report\n")
    (out / "old.png").write_bytes(bytes(range(256)))  # a figure this run will not draw
    return out


def stderr_lines(text: str) -> list[str]:
    """The lines a user is left with: escape sequences removed, progress-bar and phase-line frames (a braille
    spinner, then the phase) dropped."""
    parts = re.split(r"[\r\n]", ANSI.sub("", text))
    return [p.strip() for p in parts if p.strip() and not re.match(r"sampling|[\u2800-\u28ff] ", p.strip())]


# `python -m mcflops.cli ARGS` with Ctrl-C as a terminal delivers it: a CI shell that ignores SIGINT (like nohup)
# passes the ignoring on to its children, and mcflops keeps an ignored Ctrl-C ignored. (A preexec_fn would fork
# a process that has JAX's threads.)
CTRL_C_DEFAULT = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                  "sys.argv[0] = 'mcflops'; runpy.run_module('mcflops.cli', run_name='__main__')")


def test_ctrl_c_mid_sampling_exits_130_and_keeps_the_previous_report(tmp_path):
    spec = tmp_path / "long.yaml"
    spec.write_text(OK.read_text().replace("samples: 5000", "samples: 1e10"))  # hours of sampling
    out = previous_report(tmp_path)
    before = tree(tmp_path)

    master, slave = pty.openpty()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent), "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_DEFAULT, "run", str(spec), "--out", str(out)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env, cwd=tmp_path)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 180
        while not DRAWN.search(ANSI.sub("", seen.decode("utf-8", "replace"))):  # blocks drawn: it is sampling
            assert time.monotonic() < deadline, f"no progress bar: {seen[-500:]!r}"
            assert proc.poll() is None, f"exited early ({proc.returncode}): {seen[-2000:]!r}"
            if select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 65536)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=120)
        rc = proc.returncode
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        os.close(master)
    text = seen.decode("utf-8", "replace")
    assert rc == cli.EXIT_INTERRUPTED == 130, text[-2000:]
    assert "Traceback" not in text
    assert stderr_lines(text) == ["mcflops: interrupted; nothing was written"], text[-2000:]
    assert stdout == b""
    assert tree(tmp_path) == before  # the previous report byte-identical, no temporary folders left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.yaml", "report"]


@pytest.mark.parametrize("failure, code, message", [
    (KeyboardInterrupt(), 130, "mcflops: interrupted; nothing was written"),
    (OSError(errno.ENOSPC, "No space left on device", "summary.json"), 2, "No space left on device"),
], ids=["ctrl-c-while-writing", "disk-full"])
def test_failure_while_writing_keeps_the_previous_report(failure, code, message, tmp_path, monkeypatch, capsys):
    out = previous_report(tmp_path)
    before = tree(tmp_path)

    def hook(folder):  # runs inside the temporary folder, after the first files
        assert (folder / "summary.json").exists() and folder.parent == out.parent
        raise failure

    run_files = write.run_files
    monkeypatch.setattr(write, "run_files", lambda res: ([hook, *run_files(res)[0]], []))  # first: skip the figures
    rc = cli.main(["run", str(OK), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == code
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err, err
    assert tree(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_a_finished_run_replaces_the_whole_folder(tmp_path, capsys):
    out = previous_report(tmp_path)
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    capsys.readouterr()
    files = tree(out)
    assert "old.png" not in files and b"previous" not in files["summary.json"]
    assert {"summary.json", "spec.resolved.yaml"} <= set(files)
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no .report.tmp-* or .report.old-* left


def test_swap_puts_the_previous_report_back_if_the_second_rename_fails(tmp_path, monkeypatch):
    out = previous_report(tmp_path)
    new = tmp_path / ".report.tmp-x"
    new.mkdir()
    (new / "summary.json").write_text("{}\n")
    before = tree(out)
    real = os.replace
    calls = []

    def flaky(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the previous report is out of the way; putting the new one in fails
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    monkeypatch.setattr(files, "exchange", lambda a, b: False)  # the two-rename swap (no atomic exchange)
    with pytest.raises(OSError):
        files.swap(new, out)
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".report.tmp-x", "report"]


def test_a_swallowed_ctrl_c_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """A KeyboardInterrupt that lands where it is caught and dropped (JAX's garbage-collection callbacks print
    "Exception ignored" and go on) is raised again at the next block: the run stops with 130, nothing written."""
    from mcflops import api

    calls = []

    def run(spec, *, progress=None, **kw):
        try:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C ...
        except KeyboardInterrupt:
            pass  # ... swallowed, as by a callback that cannot propagate it
        calls.append("swallowed")
        progress(1, 2)  # the next block
        calls.append("went on")
        raise AssertionError("the run went on after Ctrl-C")

    monkeypatch.setattr(api, "run", run)
    out = tmp_path / "report"
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own (a CI shell may ignore it)
    try:
        assert cli.main(["run", str(OK), "--out", str(out), "--quiet"]) == cli.EXIT_INTERRUPTED
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler is back
    finally:
        signal.signal(signal.SIGINT, before)
    assert calls == ["swallowed"]
    assert not out.exists()
    assert capsys.readouterr().err.strip() == "mcflops: interrupted; nothing was written"


def test_an_ignored_ctrl_c_stays_ignored(monkeypatch):
    """A command started with SIGINT ignored (nohup, a background job) leaves it ignored."""
    from mcflops.cli.signals import interrupts

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
