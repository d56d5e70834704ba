"""The disk cache: host results kept across processes (and the helpers the program store shares with it): a second `mcflops validate` or `run` of a prior file reads its
priors' interval fits, tail quantiles and quantile tables back instead of importing scipy.special and
computing them again.

``persistent(fn)`` wraps a pure function of a prior (keyed by ``dist_key``) or of plain numbers.
Once ``use()`` has named a folder, a result is stored under a key of everything it depends on: the
function's name, its arguments, NumPy's and scipy's versions, the machine and the SIMD paths NumPy takes on
it, and the bytes of every file of the mcflops package. Values come back bit for bit (pickled floats and float64 arrays). An entry whose
header, key or checksum does not match is ignored and replaced; failing to read or write the folder only
costs the computation. Only results are stored: a call that raises raises again next time.

Folders: ``cache_folder()``: ``$MCFLOPS_JAX_CACHE``, else ``$XDG_CACHE_HOME/mcflops/jax`` (``~/.cache`` when
unset; the name is the JAX cache's, which shares the folder), these results in its ``host/``;
``MCFLOPS_NO_CACHE=1`` turns every cache off. Entries are unpickled: the folder must be as trusted as the
user's own files (the default is).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import platform
import tempfile
from functools import wraps
from pathlib import Path
from typing import Any, Callable

MAGIC = b"mcflops-host-v1\n"
KEEP = 4096  # entries (a quantile table is 33 KB: 130 MB at most)
_state: dict[str, Path | None] = {"folder": None}
_digest: list[str] = []  # the package's, computed once
_versions_text: list[str] = []  # the same for the versions (reading a package's metadata scans sys.path)


def cache_folder() -> str | None:
    """Where the caches live (module docstring), or None when ``MCFLOPS_NO_CACHE`` turns them off."""
    env = os.environ
    if env.get("MCFLOPS_NO_CACHE", "").strip() not in ("", "0"):
        return None
    home = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return env.get("MCFLOPS_JAX_CACHE") or os.path.join(home, "mcflops", "jax")


def package_digest() -> str:
    """sha256 of every file of the mcflops package (names and bytes): any edit makes new keys."""
    if not _digest:
        root = Path(__file__).resolve().parent  # the package: this module sits at its top
        h = hashlib.sha256()
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
        _digest.append(h.hexdigest())
    return _digest[0]


def use(folder: str | os.PathLike | None = None) -> Path | None:
    """Keep results in ``folder``/host (default ``cache_folder()``); returns that folder, or None (off)."""
    folder = cache_folder() if folder is None else folder
    _state["folder"] = None if folder is None else Path(folder) / "host"
    return _state["folder"]


def stop() -> None:
    """Compute every result in this process from now on."""
    _state["folder"] = None


def _versions() -> str:
    if not _versions_text:
        _versions_text.append(_version_text())
    return _versions_text[0]


def _version_text() -> str:
    import numpy

    try:
        from importlib.metadata import version

        scipy = version("scipy")  # without importing it: that is what the cache saves
    except Exception:  # noqa: BLE001 - not installed, or no metadata: then nothing is keyed on it
        scipy = "?"
    return f"numpy {numpy.__version__} scipy {scipy} {platform.machine()} {_simd()} package {package_digest()}"


def _simd() -> str:
    """The instruction sets NumPy dispatches to here: its loops add in another order on AVX2 than on AVX-512
    (and NPY_DISABLE_CPU_FEATURES changes them), so a result computed on one path is not reused on another,
    where it would differ in its last bits from the same computation done here."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # a NumPy that keeps it elsewhere: the machine's name alone, as before
        return ""
    return ",".join(sorted(k for k, on in features.items() if on))


def dist_key(d) -> tuple:
    """A hashable key of what defines a prior's distribution (``Dist.params`` is a dict; the source and the
    line do not count)."""
    return (d.family, tuple(sorted(d.params.items())), d.low, d.high, tuple(dist_key(c) for c in d.components),
            tuple(d.weights))


def _arg(x: Any) -> str:
    if hasattr(x, "family") and hasattr(x, "params"):  # a Dist
        return "dist " + repr(dist_key(x))
    if x is None or isinstance(x, (bool, int, float, str)):
        return repr(x)
    raise TypeError(type(x).__name__)


def persistent(fn: Callable | None = None, *, keyed: int | None = None) -> Callable:
    """``fn`` whose results are kept in the folder ``use()`` named (module docstring). The first ``keyed``
    arguments (default all) make the key: priors and plain numbers; the others may only shape the error a
    failing call raises. Calls with keyword arguments or other values just compute."""
    if fn is None:
        return lambda f: persistent(f, keyed=keyed)
    name = f"{fn.__module__}.{fn.__qualname__}"

    @wraps(fn)
    def wrapper(*args, **kwargs):
        folder = _state["folder"]
        if folder is None or kwargs:
            return fn(*args, **kwargs)
        try:
            key = "\n".join([MAGIC.decode().strip(), name, *map(_arg, args[:keyed]), _versions()])
        except TypeError:
            return fn(*args)
        return _through(folder, key, lambda: fn(*args))

    return wrapper


def kept(name: str, key: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept under ``name`` and ``key`` (a text of everything the value depends on besides the
    versions and the package) in the folder ``use()`` named; computed alone when there is none."""
    folder = _state["folder"]
    if folder is None:
        return compute()
    return _through(folder, "\n".join([MAGIC.decode().strip(), name, key, _versions()]), compute)


def _through(folder: Path, key: str, compute: Callable[[], Any]) -> Any:
    path = folder / (hashlib.sha256(key.encode()).hexdigest() + ".pkl")
    found = _load(path, key)
    if found is not None:
        return found[0]
    value = compute()
    _save(path, key, value)
    return value


def prune(folder: Path, keep: int, suffix: str) -> None:
    """At most ``keep`` entries (``*suffix``) in ``folder``: the least recently written go first (every
    new version or edit of the package makes new keys, and nothing else removes the old ones)."""
    try:
        entries = [(p.stat().st_mtime, p) for p in folder.glob("*" + suffix)]
    except OSError:
        return
    if len(entries) <= keep:
        return
    for _, p in sorted(entries)[: len(entries) - keep * 3 // 4]:
        try:
            p.unlink()
        except OSError:
            pass


def trusted(path: Path) -> bool:
    """Whether an entry may be loaded: it and its folder belong to this user and nobody else can write them.
    Entries are unpickled (and programs loaded as native code), so a folder another user can write to (a
    shared ``MCFLOPS_JAX_CACHE=/tmp/x``) would let them run code as this user: such entries are ignored, as
    ssh ignores a group-writable ``authorized_keys``."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # no POSIX owners (Windows): the user's profile folder is private already
        return True
    try:
        for p in (path, path.parent):
            st = p.stat()
            if st.st_uid != getuid() or st.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def private_folder(folder: Path) -> None:
    """Create ``folder`` (and parents) readable and writable by this user only."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def read_entry(path: Path, magic: bytes, key: str) -> bytes | None:
    """The body stored under ``key`` in ``path`` (framed as :func:`write_entry` writes it), or None: absent,
    unreadable, not :func:`trusted`, another key, or a checksum that fails."""
    try:
        if not trusted(path):
            return None
        data = path.read_bytes()
    except OSError:
        return None
    k = key.encode()
    head = magic + len(k).to_bytes(8, "little") + k
    if not data.startswith(head) or len(data) < len(head) + 32:
        return None
    digest, body = data[len(head):len(head) + 32], data[len(head) + 32:]
    return body if hashlib.sha256(body).digest() == digest else None


def write_entry(path: Path, magic: bytes, key: str, body: bytes, keep: int) -> None:
    """Store ``body`` under ``key`` at ``path`` (magic, the key, a sha256 of the body, the body) in a private
    folder, through a new file renamed into place; then prune the folder to ``keep`` entries of the same
    suffix. Any failure (read-only folder, full disk) is ignored: a store never fails a run."""
    tmp = None
    try:
        k = key.encode()
        private_folder(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(magic + len(k).to_bytes(8, "little") + k + hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
        tmp = None
        prune(path.parent, keep, path.suffix)
    except Exception:  # noqa: BLE001
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _load(path: Path, key: str) -> tuple[Any] | None:
    """(value,) stored under ``key``, or None (absent, unreadable, another key, corrupt, not :func:`trusted`)."""
    body = read_entry(path, MAGIC, key)
    if body is None:
        return None
    try:
        value, frozen = pickle.loads(body)
        if frozen:
            value.flags.writeable = False
        return (value,)
    except Exception:  # noqa: BLE001 - a bad entry costs the computation, never the run
        return None


def _save(path: Path, key: str, value: Any) -> None:
    """Store ``value``; any failure (read-only, full disk, a value that cannot be pickled) is ignored."""
    try:
        frozen = hasattr(value, "flags") and not value.flags.writeable
        body = pickle.dumps((value, frozen), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001
        return
    write_entry(path, MAGIC, key, body, KEEP)
