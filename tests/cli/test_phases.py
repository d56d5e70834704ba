"""A phase line on a terminal while a run starts, compiles, samples, analyses and plots; nothing on a pipe,
with --quiet or with --json. Checked on a fake terminal stream, through api.run's phase callback, and as a
user sees it: `mcflops run` with its stderr on a pseudo-terminal (and on a pipe)."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import mcflops
from mcflops.cli.progress import progress

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_phases_on_a_terminal_stream():
    tty = Terminal()
    with progress(False, stream=tty) as bar:
        bar.phase("compiling")
        bar(1, 2)
        bar(2, 2)
        bar.phase("plotting")
    text = ANSI.sub("", tty.getvalue())
    for what in ("compiling", "plotting"):
        assert what in text, text
    assert re.search(r"sampling\D*[0-2]/2 blocks", text), text
    assert text.index("compiling") < text.index("sampling") < text.index("plotting")


def test_nothing_off_a_terminal_or_when_quiet():
    pipe, quiet = io.StringIO(), Terminal()
    for stream, q in ((pipe, False), (quiet, True)):
        with progress(q, stream=stream) as bar:
            bar.phase("compiling")
            bar(1, 1)
            bar.phase("plotting")
    assert pipe.getvalue() == "" and quiet.getvalue() == ""


def test_api_run_names_its_stages_in_order():
    seen: list = []
    mcflops.run(OK, samples=2000, phase=lambda name: seen.append(("phase", name)),
                progress=lambda done, total: seen.append(("block", done, total)))
    phases = [e[1] for e in seen if e[0] == "phase"]
    assert phases == ["compiling", "analysing: the posterior"]
    first_block = next(i for i, e in enumerate(seen) if e[0] == "block")
    assert seen[0] == ("phase", "compiling") and first_block < seen.index(("phase", "analysing: the posterior"))


def _on_pty(tmp_path: Path, *extra: str) -> tuple[int, str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent), "COLUMNS": "100"}
    cmd = [sys.executable, "-m", "mcflops.cli", "run", str(OK), "--out", str(tmp_path / "r"), *extra]
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=env, cwd=tmp_path)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 300
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    return p.wait(timeout=60), ANSI.sub("", seen.decode("utf-8", "replace"))


def test_mcflops_run_shows_its_phases_on_a_terminal(tmp_path):
    rc, err = _on_pty(tmp_path)
    assert rc == 0
    for what in ("starting", "compiling", "sampling", "analysing: the posterior", "plotting"):
        assert what in err, (what, err[-800:])
    order = [err.index(w) for w in ("starting", "compiling", "analysing", "plotting")]
    assert order == sorted(order)


def test_mcflops_run_says_nothing_on_a_pipe(tmp_path, capsys):
    from mcflops import cli

    assert not sys.stderr.isatty()  # pytest's capture: a pipe, as for a user's `2> file`
    assert cli.main(["run", str(OK), "--out", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().err == ""
