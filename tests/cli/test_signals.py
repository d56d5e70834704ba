"""SIGINT and SIGTERM, sent to a real `mcflops run` at several points (while it samples, while it writes
the run folder, twice during a stage that has no check): exit 130 or 143, one line on stderr, the
previous report byte-identical and no temporary folder or lock file left. The handler only sets a flag
that the run checks between stages, so no KeyboardInterrupt can be swallowed on the way.

Each child runs `mcflops run` with a hook that touches a marker file when it reaches the point where the
signal is to land (the first engine block, or a writer inside the temporary folder)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_interrupt import OK, previous_report, tree

HERE = Path(__file__).resolve().parents[1]
# The child starts with Python's own SIGINT handler: a runner started in the background (`cmd &` in a
# script, nohup) ignores SIGINT and its children inherit that, and `mcflops run` rightly leaves an ignored
# signal ignored (cli.signals) - the run would then go on to its 1e10th draw.
CHILD = r"""
import os, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
marker, point = Path(os.environ["MARKER"]), os.environ["POINT"]
import mcflops.cli.progress as progress
from mcflops.output import folder

if point == "sampling":
    check = progress.check_interrupt
    def hooked():
        marker.touch()
        check()
    progress.check_interrupt = hooked
elif point in ("writing", "stuck"):
    run_files = folder.run_files
    def stall(tmp):
        marker.touch()
        if point == "writing":
            for _ in range(40):
                time.sleep(0.05)  # a writer with no check in it: the next stage's check stops the run (2 s: ample)
        else:
            time.sleep(600)  # only a second signal ends this
    folder.run_files = lambda res: ([stall, *run_files(res)[0]], [])
sys.argv[0] = "mcflops"
from mcflops.cli import main
sys.exit(main())
"""


def _send(tmp_path: Path, point: str, signals: list[int], samples: str) -> tuple[int, str, dict, Path]:
    spec = tmp_path / "long.yaml"
    spec.write_text(OK.read_text().replace("samples: 5000", f"samples: {samples}"))
    out = previous_report(tmp_path)
    before = tree(tmp_path)
    rc, err = signal_child(CHILD, ["run", str(spec), "--out", str(out), "--quiet"], tmp_path, point, signals)
    return rc, err, before, out


def signal_child(child: str, args: list[str], tmp_path: Path, point: str, signals: list[int]) -> tuple[int, str]:
    """Run ``child`` (a script like :data:`CHILD`) with the CLI ``args`` in ``tmp_path``; when it touches its marker
    at ``point``, send it ``signals`` (0.3 s apart); its exit code and stderr."""
    marker = tmp_path / "reached"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent), "MARKER": str(marker),
           "POINT": point}
    proc = subprocess.Popen([sys.executable, "-c", child, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path, start_new_session=True)  # no terminal's Ctrl-C reaches it
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the child never reached its point"
            time.sleep(0.05)
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.3)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    marker.unlink()
    return proc.returncode, err


@pytest.mark.parametrize("point, sigs, code, line", [
    ("sampling", [signal.SIGTERM], 143, "mcflops: terminated; nothing was written"),
    ("sampling", [signal.SIGINT], 130, "mcflops: interrupted; nothing was written"),
    ("writing", [signal.SIGTERM], 143, "mcflops: terminated; nothing was written"),
    ("stuck", [signal.SIGTERM, signal.SIGTERM], 143, "mcflops: terminated; nothing was written"),
], ids=["sigterm-sampling", "sigint-sampling", "sigterm-writing", "sigterm-twice-stuck"])
def test_a_signal_stops_the_run_and_keeps_the_previous_report(point, sigs, code, line, tmp_path):
    rc, err, before, out = _send(tmp_path, point, sigs, "1e10" if point == "sampling" else "5000")
    assert rc == code, err
    assert err.splitlines() == [line], err
    assert tree(tmp_path) == before  # the previous report byte-identical, nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.yaml", "report"]
