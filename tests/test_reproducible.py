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

from mcflops import __version__
from mcflops.cli.main import main
from mcflops.spec import load_spec
from tests.simd import with_host_devices

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


def _two_device_run(out: Path) -> subprocess.Popen:
    """`mcflops run` in a new interpreter (another hash seed) with two XLA host devices sharing the blocks."""
    env = {**with_host_devices(2), "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "12345", "PYTHONPATH": str(HERE.parent)}
    return subprocess.Popen([sys.executable, "-m", "mcflops.cli", "run", str(OK), "--out", str(out), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def test_same_file_and_seed_give_the_same_summary_everywhere(tmp_path, capsys):
    """One test, so that the runs happen once (xdist would repeat a shared fixture on each worker):
    the file in this process, its resolved prior file in this process, the file in a fresh process
    on two devices (started first, it runs beside the others)."""
    first, again, two = tmp_path / "run", tmp_path / "again", tmp_path / "two-devices"
    proc = _two_device_run(two)
    try:
        assert _run(["run", OK, "--out", first, "--quiet", "--json"], capsys) == 0
        assert _run(["run", first / "spec.resolved.yaml", "--out", again, "--quiet", "--json"], capsys) == 0
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err

    reference = _bytes_without_volatile(first / "summary.json")
    assert set(json.loads(reference)) >= {"prior", "posterior", "chain", "observed"}  # the numbers are compared
    # the resolved prior file (every default filled in) repeats the run exactly
    assert _bytes_without_volatile(again / "summary.json") == reference
    assert (again / "spec.resolved.yaml").read_bytes() == (first / "spec.resolved.yaml").read_bytes()
    # a fresh interpreter, the blocks shared by two devices: the same numbers
    assert "x2" in json.loads((two / "summary.json").read_text())["device"]
    assert _bytes_without_volatile(two / "summary.json") == reference

    # every output records what made it
    s = json.loads((first / "summary.json").read_text())
    spec = load_spec(OK)
    assert s["version"] == __version__
    assert s["seed"] == spec.seed == 7 and s["samples"] == spec.samples == 5000
    assert s["device"].startswith("cpu")
    assert s["spec_hash"] == spec.digest() and len(s["spec_hash"]) == 16
    for name in ("spec.resolved.yaml", "report.md", "report.html"):
        if name.startswith("report") and not (first / name).exists():
            continue  # the report is optional (issue 5); when it is there it must say what made it
        text = (first / name).read_text(encoding="utf-8")
        for field in (__version__, s["spec_hash"], s["device"]):
            assert field in text, (name, field)

    # another seed: other draws, another hash (the seed is part of what made a run)
    assert main(["sample", str(OK), "--seed", "8", "--json"]) == 0  # the prior predictive only
    b = json.loads(capsys.readouterr().out)
    assert b["seed"] == 8 and b["prior"]["gpu_hours"]["p50"] != s["prior"]["gpu_hours"]["p50"]
    assert b["spec_hash"] != s["spec_hash"]


def test_spec_hash_ignores_comments_and_layout(tmp_path):
    text = OK.read_text()
    moved = tmp_path / "moved.yaml"
    moved.write_text("# a new comment\n" + text.replace("{value: 60K,", "{ value: 60000 ,"))
    assert load_spec(moved).digest() == load_spec(OK).digest()
    changed = tmp_path / "changed.yaml"
    changed.write_text(text.replace("mfu: {beta: [0.3, 0.5]", "mfu: {beta: [0.3, 0.51]"))
    assert load_spec(changed).digest() != load_spec(OK).digest()
