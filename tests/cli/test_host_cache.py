"""The host results the command line keeps (mcflops.diskcache): a second `mcflops validate` of a file imports no
scipy.special and builds the same Spec; `sample` reads back the same tables (the same summary); bad entries
are ignored; MCFLOPS_NO_CACHE and unwritable folders leave runs as they were. Fresh interpreters: this
test process has imported scipy already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from mcflops import diskcache
from mcflops.priors import quantiles
from mcflops.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent.parent
PRIOR = "priors/llama405b.yaml"

PROBE = """
import json, sys
from mcflops.cli import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "scipy": "scipy.special" in sys.modules}))
"""


def _validate(cache, **env) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "MCFLOPS_NO_CACHE"}  # the store under test is on
    r = subprocess.run([sys.executable, "-c", PROBE, "validate", PRIOR], capture_output=True, text=True, cwd=ROOT,
                       env={**base, "PYTHONPATH": str(ROOT), "MCFLOPS_JAX_CACHE": str(cache), **env},
                       check=False, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_validate_imports_no_scipy_and_bad_entries_are_ignored(tmp_path):
    cache = tmp_path / "cache"
    assert _validate(cache) == {"rc": 0, "scipy": True}  # the first computes (and keeps) the fits and tails
    entries = sorted((cache / "host").glob("*.pkl"))
    assert entries
    assert _validate(cache) == {"rc": 0, "scipy": False}
    for e in entries:  # flipped bytes: checksums fail, every entry is computed again and replaced
        data = e.read_bytes()
        e.write_bytes(data[:-8] + bytes(b ^ 0x55 for b in data[-8:]))
    assert _validate(cache) == {"rc": 0, "scipy": True}
    assert _validate(cache) == {"rc": 0, "scipy": False}


def test_off_and_unwritable(tmp_path):
    off = tmp_path / "off"
    assert _validate(off, MCFLOPS_NO_CACHE="1") == {"rc": 0, "scipy": True}
    assert not off.exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert _validate(blocker / "cache") == {"rc": 0, "scipy": True}  # nothing kept, nothing failed


def test_kept_values_are_the_computed_ones(tmp_path):
    """In this process: the Spec and the tables built through the store equal those computed without it."""
    from mcflops.model.samplers import log_quantile_table

    spec0 = load_spec(ROOT / PRIOR)
    tables0 = {n: log_quantile_table(d) for n, d in spec0.priors.items() if d.family not in ("point",)}
    diskcache.use(tmp_path)
    try:
        for fn in (quantiles.tails, quantiles.median, quantiles.central, log_quantile_table):
            fn.cache_clear()  # the in-memory memo: every value below comes from the disk store
        load_spec(ROOT / PRIOR)  # fills it
        for fn in (quantiles.tails, quantiles.median, quantiles.central, log_quantile_table):
            fn.cache_clear()
        spec1 = load_spec(ROOT / PRIOR)
        assert spec1.priors == spec0.priors
        for n, t in tables0.items():
            log_quantile_table(spec1.priors[n])  # written
            log_quantile_table.cache_clear()
            t1 = log_quantile_table(spec1.priors[n])  # read back
            assert t1.tobytes() == t.tobytes() and not t1.flags.writeable
        assert sorted((tmp_path / "host").glob("*.pkl"))
    finally:
        diskcache.stop()
        for fn in (quantiles.tails, quantiles.median, quantiles.central, log_quantile_table):
            fn.cache_clear()
    assert np.all(np.isfinite(next(iter(tables0.values()))))


def test_prune_keeps_the_newest(tmp_path):
    for i in range(10):
        p = tmp_path / f"{i}.pkl"
        p.write_bytes(b"x")
        os.utime(p, (1000 + i, 1000 + i))
    (tmp_path / "other.bin").write_bytes(b"y")
    diskcache.prune(tmp_path, 8, ".pkl")  # over the cap: down to 3/4 of it, the oldest first
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{i}.pkl" for i in range(4, 10)] + ["other.bin"])
    diskcache.prune(tmp_path, 8, ".pkl")  # under the cap: nothing
    assert len(list(tmp_path.iterdir())) == 7


def test_entries_others_can_write_are_not_loaded(tmp_path):
    """An entry in a folder another user could write (a shared cache folder) is never unpickled."""
    import pytest

    if not hasattr(os, "getuid"):
        pytest.skip("no POSIX owners here")
    calls = []

    def compute():
        calls.append(1)
        return 42.0

    diskcache.use(tmp_path)
    try:
        assert diskcache.kept("t", "k", compute) == 42.0  # computed, then stored
        host = tmp_path / "host"
        assert host.stat().st_mode & 0o077 == 0  # the folder is created private
        entry = next(host.glob("*.pkl"))
        assert diskcache.trusted(entry)
        host.chmod(0o777)  # now anyone could have planted it
        assert not diskcache.trusted(entry)
        assert diskcache.kept("t", "k", compute) == 42.0 and len(calls) == 2  # recomputed, not loaded
    finally:
        diskcache.stop()
