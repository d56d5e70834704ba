"""Reproducible: the same file and seed give the same summary.json (timings, paths and the device's name
aside), in this process, in a fresh one with two devices, and from the resolved prior file the run
wrote; every output records what made it (version, seed, samples, device, spec hash).

float32 is the engine's one dtype, so there is no float32/float64 comparison here (test_engine.py
checks the float32 sums against float64 references).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcflops import __version__
from mcflops.cli import main
from mcflops.spec import load_spec

HERE = Path(__file__).parent
OK = HERE / "bad" / "ok" / "small.yaml"
VOLATILE = ("timings", "out", "device")  # wall-clock times, the output path, the device's name
TIMES = ("timings", "seconds")  # wall-clock times wherever they are (sensitivity.sobol_info.seconds)


def _run(argv, capsys) -> int:
    rc = main([str(a) for a in argv])
    capsys.readouterr()
    return rc


def _no_times(x):
    if isinstance(x, dict):
        return {k: _no_times(v) for k, v in x.items() if k not in TIMES}
    if isinstance(x, list):
        return [_no_times(v) for v in x]
    return x


def _stable(summary: dict) -> dict:
    return _no_times({k: v for k, v in summary.items() if k not in VOLATILE})


def _bytes_without_volatile(path: Path) -> bytes:
    """summary.json as written, with the volatile keys removed and nothing else touched."""
    d = json.loads(path.read_bytes())
    return json.dumps(_stable(d), indent=2).encode()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The file, then the resolved prior file the first run wrote (same seed, every default filled in)."""
    base = tmp_path_factory.mktemp("repro")
    first, again = base / "run", base / "again"
    assert main(["run", str(OK), "--out", str(first), "--quiet", "--json"]) == 0
    assert main(["run", str(first / "spec.resolved.yaml"), "--out", str(again), "--quiet", "--json"]) == 0
    return first, again


def test_same_file_and_seed_give_identical_summary(two_runs):
    """Run twice (the second time from spec.resolved.yaml, which must repeat the run exactly)."""
    a, b = two_runs
    assert _bytes_without_volatile(a / "summary.json") == _bytes_without_volatile(b / "summary.json")
    assert (a / "spec.resolved.yaml").read_bytes() == (b / "spec.resolved.yaml").read_bytes()
    sa = json.loads((a / "summary.json").read_text())
    assert set(sa) >= {"prior", "posterior", "chain", "observed"}  # the comparison covers the numbers


def test_another_seed_gives_other_draws(two_runs, capsys):
    assert main(["sample", str(OK), "--seed", "8", "--json"]) == 0  # the prior predictive only
    b = json.loads(capsys.readouterr().out)
    a = json.loads((two_runs[0] / "summary.json").read_text())
    assert a["seed"] == 7 and b["seed"] == 8
    assert a["prior"]["gpu_hours"]["p50"] != b["prior"]["gpu_hours"]["p50"]
    assert a["spec_hash"] != b["spec_hash"]  # the seed is part of what made the run


def test_every_output_records_what_made_it(two_runs):
    out = two_runs[0]
    s = json.loads((out / "summary.json").read_text())
    spec = load_spec(OK)
    assert s["version"] == __version__
    assert s["seed"] == spec.seed == 7 and s["samples"] == spec.samples == 5000
    assert s["device"].startswith("cpu")
    assert s["spec_hash"] == spec.digest() and len(s["spec_hash"]) == 16
    for name in ("spec.resolved.yaml", "report.md", "report.html"):
        if name.startswith("report") and not (out / name).exists():
            continue  # the report is optional (issue 5); when it is there it must say what made it
        text = (out / name).read_text(encoding="utf-8")
        for field in (__version__, s["spec_hash"], s["device"]):
            assert field in text, (name, field)


def test_spec_hash_ignores_comments_and_layout(tmp_path):
    text = OK.read_text()
    moved = tmp_path / "moved.yaml"
    moved.write_text("# a new comment\n" + text.replace("{value: 60K,", "{ value: 60000 ,"))
    assert load_spec(moved).digest() == load_spec(OK).digest()
    changed = tmp_path / "changed.yaml"
    changed.write_text(text.replace("mfu: {beta: [0.3, 0.5]", "mfu: {beta: [0.3, 0.51]"))
    assert load_spec(changed).digest() != load_spec(OK).digest()


def test_fresh_process_with_two_devices_gives_identical_summary(two_runs, tmp_path):
    """A new interpreter (another hash seed), two XLA host devices sharing the blocks: same summary."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "12345",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "PYTHONPATH": str(HERE.parent)}
    out = tmp_path / "sub"
    p = subprocess.run([sys.executable, "-m", "mcflops.cli", "run", str(OK), "--out", str(out), "--quiet"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "x2" in json.loads((out / "summary.json").read_text())["device"]
    assert _bytes_without_volatile(out / "summary.json") == _bytes_without_volatile(two_runs[0] / "summary.json")
