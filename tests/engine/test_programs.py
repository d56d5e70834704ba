"""The program store (engine.program / engine.use_cache): a second process loads the executable instead of
tracing, with bit-identical results; corrupt or stale entries are ignored; a folder that cannot be written
never fails a run. Each phase is a fresh interpreter, as a second `mcflops run` is (JAX's persistent cache
decides once per process whether it is in use)."""

import json
import os
import subprocess
import sys

import pytest

from mcflops import diskcache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from mcflops import engine

TRACES = []


def f(x, *, n):
    TRACES.append(1)  # runs only while JAX traces f
    return jnp.cumsum(jnp.sin(x) * n) / (1.0 + x * x)


folder = engine.use_cache(sys.argv[1])
p = engine.program(f, static_argnames=("n",))
x = jnp.linspace(0.0, 3.0, 4099, dtype=jnp.float32)
y = np.asarray(p(x, n=3))
traced = len(TRACES)
ref = np.asarray(jax.jit(f, static_argnames=("n",))(x, n=3))  # the plain jit, for comparison
print(json.dumps({"traced": traced, "same_bits": y.tobytes() == ref.tobytes(), "folder": str(folder)}))
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("child") / "child.py"  # a file: its bytes key f (``-c`` code has none)
    path.write_text(CHILD)
    return path


def _child(script, folder) -> dict:
    r = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _entries(folder):
    d = folder / "programs"
    return sorted(d.glob("*.bin")) if d.is_dir() else []


def test_second_process_loads_without_tracing_and_bad_entries_are_ignored(tmp_path, script):
    from mcflops.engine import programs

    cache = tmp_path / "cache"
    first = _child(script, cache)
    assert first == {"traced": 1, "same_bits": True, "folder": str(cache)}
    (entry,) = _entries(cache)
    assert _child(script, cache) == {"traced": 0, "same_bits": True, "folder": str(cache)}  # loaded: no tracing
    good = entry.read_bytes()
    key = good[len(programs.MAGIC) + 8:][: int.from_bytes(good[len(programs.MAGIC):][:8], "little")].decode()
    assert programs._path(cache / "programs", key) == entry
    flipped = good[:-100] + bytes(b ^ 0xFF for b in good[-100:])  # the checksum fails
    stale = good.replace(b"__main__.f", b"__main__.g", 1)  # another key in its header
    for bad in (flipped, stale, good[:40], b""):
        entry.write_bytes(bad)
        assert programs._load(cache / "programs", key) is None  # read back before anything is deserialised
    entry.write_bytes(good[: len(good) // 2])  # truncated (a killed writer), in a new process
    again = _child(script, cache)
    assert again["traced"] == 1 and again["same_bits"], again  # ignored: traced and compiled
    # JAX's persistent cache had that executable, and one it deserialised is not saved (its code would be
    # missing); its entry is dropped instead, so the next run compiles afresh and saves a good entry
    assert _child(script, cache)["same_bits"]
    assert _child(script, cache) == {"traced": 0, "same_bits": True, "folder": str(cache)}


def test_unwritable_folders_never_fail(tmp_path, script):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = _child(script, blocker / "cache")  # no folder can be made there: every run compiles
    assert out == {"traced": 1, "same_bits": True, "folder": "None"}
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "programs").write_text("a file where the store's folder goes")  # the store cannot write
    assert _child(script, cache)["traced"] == 1  # compiled, used, not saved
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:  # root writes to read-only folders: nothing to see there
        return
    os.chmod(ro, 0o500)
    try:
        assert _child(script, ro)["same_bits"]
    finally:
        os.chmod(ro, 0o700)


def test_disabled_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MCFLOPS_NO_CACHE", "1")
    assert diskcache.cache_folder() is None
    monkeypatch.setenv("MCFLOPS_NO_CACHE", "0")
    monkeypatch.setenv("MCFLOPS_JAX_CACHE", str(tmp_path / "x"))
    assert diskcache.cache_folder() == str(tmp_path / "x")
    monkeypatch.delenv("MCFLOPS_JAX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.cache_folder() == os.path.join(str(tmp_path / "xdg"), "mcflops", "jax")
    monkeypatch.setenv("XDG_CACHE_HOME", "")  # empty counts as unset (XDG Base Directory spec)
    assert diskcache.cache_folder() == os.path.join(os.path.expanduser("~"), ".cache", "mcflops", "jax")


def test_full_disk_while_saving_is_ignored(tmp_path, monkeypatch):
    import errno
    import tempfile

    import jax
    import jax.numpy as jnp

    from mcflops.engine import programs

    compiled = jax.jit(lambda x: x + 1).lower(jnp.ones(3)).compile()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    programs._save(tmp_path, "key", compiled)  # no exception
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [lambda x: x, object()])
def test_values_without_a_stable_text_are_not_keyed(value):
    from mcflops.engine import programs

    with pytest.raises(programs._Unkeyable):
        programs._stable(value)


def test_package_digest_reads_the_package_and_nothing_else():
    """The keys' digest is of the mcflops package's files (an oracle walk of the package folder): not of the
    folder above it (tests, reports or a virtual environment there would change every key and cost start-up)."""
    import hashlib
    from pathlib import Path

    import mcflops

    root = Path(mcflops.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    assert diskcache.package_digest() == h.hexdigest()
