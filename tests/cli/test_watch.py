"""`mcflops watch`: driven in-process through its ``after`` hook (called after each run with the result,
or with the SpecError of a bad edit): the test saves the file from the hook, so each step waits for the
loop to see the save rather than for a clock."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcflops.cli import main, watch
from mcflops.cli.args import build_parser
from mcflops.errors import SpecError

HERE = Path(__file__).resolve().parents[1]
OK = (HERE / "bad" / "ok" / "small.yaml").read_text()


def _save(path: Path, text: str) -> None:
    """Write and move the modification time on by a second: a save the poll cannot miss."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_rerun_on_save_survives_a_bad_edit(tmp_path, capsys):
    prior, out = tmp_path / "small.yaml", tmp_path / "out"
    _save(prior, OK)
    args = build_parser().parse_args(["watch", str(prior), "--out", str(out), "--poll", "0.01"])
    seen: list = []

    def after(outcome) -> bool:
        seen.append(outcome)
        if len(seen) == 1:  # the first run: its folder is written; now a bad edit
            assert json.loads((out / "summary.json").read_text())["prior"]["mfu"]["p50"] < 0.45
            assert (out / "report.html").is_file()
            _save(prior, OK.replace("mfu: {beta: [0.3, 0.5]", "mfu: {beta: [0.3, 1.5]"))
        elif len(seen) == 2:  # refused: the folder is left as it was; now a good edit
            # the published hours move with the faster MFU: importance sampling stays adequate, so the re-run does
            # not fall back to NUTS (only the prior is checked here; tests/inference/test_update.py checks that)
            _save(prior, OK.replace("mfu: {beta: [0.3, 0.5]", "mfu: {beta: [0.5, 0.6]").replace("value: 60K",
                                                                                              "value: 40K"))
        return len(seen) < 3

    assert watch.command(args, after=after) == 0
    first, bad, fixed = seen
    assert isinstance(bad, SpecError) and "mfu" in str(bad)
    # the re-run computed the edited prior: MFU's median moved into the new interval
    assert first.prior["mfu"]["p50"] < 0.45 < 0.5 < fixed.prior["mfu"]["p50"] < 0.6
    assert json.loads((out / "summary.json").read_text())["prior"]["mfu"]["p50"] > 0.5
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("mcflops: ")]
    assert len(lines) == 1 and "small.yaml" in lines[0] and "mfu" in lines[0]
    assert "Traceback" not in err


def test_named_files_are_watched(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text("{}")
    prior = tmp_path / "p.yaml"
    prior.write_text("name: p\narchitecture: {hf_config: config.json}\ndescription: not/a/file.yaml\n")
    assert watch.named_files(prior) == [prior, tmp_path / "config.json"]
    before = watch.stamp(watch.named_files(prior))
    _save(cfg, '{"hidden_size": 8}')
    assert watch.stamp(watch.named_files(prior)) != before


def test_loop_waits_for_a_change(tmp_path):
    prior = tmp_path / "p.yaml"
    _save(prior, "a: 1\n")
    polls: list = []

    def sleep(_s):  # the fourth look finds a save
        polls.append(1)
        if len(polls) == 4:
            _save(prior, "a: 2\n")

    runs = watch.loop(prior, lambda: None, poll_s=0.0, after=lambda _o: len(polls) < 4, sleep=sleep)
    assert runs == 2 and len(polls) == 4


def test_ctrl_c_exits_130_without_traceback(tmp_path, monkeypatch, capsys):
    prior = tmp_path / "small.yaml"
    _save(prior, OK)
    loop = watch.loop

    def interrupted(path, once, **kw):
        def stop(_outcome):
            raise KeyboardInterrupt
        return loop(path, once, poll_s=0.01, after=stop)

    monkeypatch.setattr(watch, "loop", interrupted)
    assert main(["watch", str(prior), "--no-report"]) == 130
    captured = capsys.readouterr()
    assert "interrupted" in captured.err and "Traceback" not in captured.err
    assert "Prior predictive" in captured.out
