"""`mcflops watch` stops on the first SIGINT (exit 130) and on SIGTERM (exit 143), sent for real to a child
process: while it waits for a save, while it samples and while it writes the run folder; the folder a
signal lands before is left as it was (the previous run's, byte-identical), one line on stderr, no traceback.

Each child runs `mcflops watch` with a hook that touches a marker file when it reaches the point where the
signal is to land: the poll after the first run's folder is written (idle), the first engine block
(sampling), or a writer inside the temporary folder (writing)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.cli.test_interrupt import OK, previous_report, tree
from tests.cli.test_signals import CHILD as SIGNALS_CHILD, signal_child

# tests/cli/test_signals.py's child (its sampling and writing hooks), with one more point: idle, the first poll
# after the first run's folder is written
IDLE = r"""
from mcflops import output
from mcflops.cli import watch
if point == "idle":
    write_run, stamp, written = output.write_run, watch.stamp, []
    def wrote(*a, **k):
        write_run(*a, **k)
        written.append(1)
    def looked(files):
        if written:
            marker.touch()
        return stamp(files)
    output.write_run, watch.stamp = wrote, looked
"""
CHILD = SIGNALS_CHILD.replace('sys.argv[0] = "mcflops"', IDLE + 'sys.argv[0] = "mcflops"')
assert IDLE in CHILD


def _watch(tmp_path: Path, point: str, sig: int, samples: str) -> tuple[int, str, dict, Path]:
    spec = tmp_path / "long.yaml"
    spec.write_text(OK.read_text().replace("samples: 5000", f"samples: {samples}"))
    out = previous_report(tmp_path)
    before = tree(out)
    # one signal is enough: a second is never sent
    rc, err = signal_child(CHILD, ["watch", str(spec), "--out", str(out), "--poll", "0.05"], tmp_path, point, [sig])
    return rc, err, before, out


@pytest.mark.parametrize("point, sig, code", [
    ("idle", signal.SIGINT, 130), ("idle", signal.SIGTERM, 143),
    ("sampling", signal.SIGINT, 130), ("writing", signal.SIGTERM, 143),
], ids=["sigint-idle", "sigterm-idle", "sigint-sampling", "sigterm-writing"])
def test_one_signal_stops_watch(point, sig, code, tmp_path):
    rc, err, before, out = _watch(tmp_path, point, sig, "1e10" if point == "sampling" else "5000")
    assert rc == code, err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("mcflops: " + ("interrupted" if sig == signal.SIGINT else "terminated")), err
    if point == "idle":  # the first run's folder, whole: its summary replaced the previous one
        assert (out / "report.html").is_file() and tree(out)["summary.json"] != before["summary.json"]
    else:  # stopped before its swap: the previous run folder byte-identical, nothing beside it
        assert tree(out) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["long.yaml", "report"]
