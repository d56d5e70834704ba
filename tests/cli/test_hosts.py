"""The command line on several hosts: only process 0 writes and prints; summary.json names the versions
that made it (checked against the packages' own ``__version__`` and pyproject.toml)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import jaxlib
import numpy as np
import pytest

from mcflops import api, cli
from mcflops._version import versions

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parent
OK = HERE / "bad" / "ok" / "small.yaml"

def _as_process(monkeypatch, module, name: str, index: int, count: int = 2) -> None:
    """After ``module.name`` has computed (the engine sees one process), this process is ``index`` of
    ``count``: what `jax.process_index/process_count` say on host ``index`` of a multi-host run."""
    real = getattr(module, name)

    def computed(*a, **kw):
        out = real(*a, **kw)
        monkeypatch.setattr(jax, "process_index", lambda *_: index)
        monkeypatch.setattr(jax, "process_count", lambda *_: count)
        return out

    monkeypatch.setattr(module, name, computed)


def _calibrate_canned(monkeypatch, tmp_path):
    from mcflops.calibration.results import Calibration
    from mcflops.cli import calibrate as calibrate_command

    data = {"seed": 0, "runs": 0, "fit_id": "x", "config": {}, "fit_seconds": 1.0, "divergences": 0,
            "max_r_hat": 1.0, "min_ess": 500.0, "posterior": {}, "population": []}
    monkeypatch.setattr(calibrate_command, "compute", lambda args: Calibration(data, {"schema": "calibration_fit_v1"}))
    monkeypatch.setattr(calibrate_command, "fit_path", lambda: tmp_path / "fit.json")
    return calibrate_command


@pytest.mark.parametrize("command", ["run", "sample", "plan", "calibrate"])
def test_other_hosts_write_and_print_nothing(command, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # `sample` and a default --out would land here
    if command == "calibrate":
        _as_process(monkeypatch, _calibrate_canned(monkeypatch, tmp_path), "compute", index=1)
        argv = ["calibrate", "--write", "--out", out, "--no-loo"]
    elif command == "plan":
        from mcflops.cli import plan as plan_command

        _as_process(monkeypatch, plan_command, "compute", index=1)
        argv = ["plan", OK, "--deadline-days", "60", "--out", out]
    else:
        _as_process(monkeypatch, api, "run", index=1)
        argv = [command, OK, "--quiet"] + (["--out", out] if command == "run" else [])
    assert cli.main([str(a) for a in argv]) == 0
    cap = capsys.readouterr()
    assert (cap.out, cap.err) == ("", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, no file, no temporary debris
    assert jax.process_index() == 1 and jax.process_count() == 2  # the patch was in force when it returned


def test_process_zero_writes_and_prints_and_records_versions(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    _as_process(monkeypatch, api, "run", index=0)
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert jax.process_count() == 2
    saved = json.loads((out / "summary.json").read_text())
    assert printed["prior"] == saved["prior"] and printed["out"] == str(out)
    assert saved["versions"] == _expected_versions() and saved["version"] == saved["versions"]["mcflops"]
    # the report renders the new key, at run time and again from the folder
    for md in ((out / "report.md").read_text(), None):
        if md is None:
            (out / "report.md").unlink()
            assert cli.main(["report", str(out)]) == 0
            md = (out / "report.md").read_text()
        assert f"jax version | {jax.__version__}" in md and f"numpy version | {np.__version__}" in md


def _expected_versions() -> dict[str, str]:
    """Independent sources: the modules' own __version__, the interpreter, the project's pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return {"mcflops": project, "python": sys.version.split()[0], "jax": jax.__version__,
            "jaxlib": jaxlib.__version__, "numpy": np.__version__}


def test_versions_match_the_packages_and_import_nothing():
    assert versions() == _expected_versions()
    assert list(versions()) == ["mcflops", "python", "jax", "jaxlib", "numpy"]
    code = ("import sys, mcflops; before = set(sys.modules); v = mcflops._version.versions(); "
            "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
            "('jax', 'jaxlib', 'numpy', 'scipy'))))")
    r = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                       env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stdout + r.stderr


def test_a_missing_package_is_null_not_an_error(monkeypatch):
    real = importlib.metadata.version

    def version(name):
        if name == "jaxlib":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    v = versions()
    assert v["jaxlib"] is None and v["jax"] == jax.__version__
    assert json.loads(json.dumps(v)) == v
