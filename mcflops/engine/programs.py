"""Compiled programs kept across processes: a second `mcflops run` loads the engine's and the analyses'
executables from disk instead of tracing, lowering and compiling them again (JAX's own persistent cache
skips only the last of the three).

``program(fn, static_argnames=(), token=())`` behaves as ``jax.jit(fn, static_argnames=...)``. Once
``use_cache()`` has named a folder, each call's program is keyed by everything the executable depends on:
JAX's and jaxlib's versions, the backend and its devices, the JAX options that change tracing, the bytes of
every file of the mcflops package (the traced code and its constants), ``fn``'s name, ``token`` (what
``fn`` closes over), the static arguments and the arguments' tree structure and shapes, dtypes and weak
types. The executable is the one ``jax.jit`` would compile for that call, so results are bit-identical
with or without the store. An entry whose header, key or checksum does not match is ignored (and
replaced); failing to read or write the folder (read-only, full) only costs the compile.

Folder: ``cache_folder()``: ``$MCFLOPS_JAX_CACHE``, else ``$XDG_CACHE_HOME/mcflops/jax`` (``~/.cache`` when
unset), JAX's compilation cache there and these programs in its ``programs/``; ``MCFLOPS_NO_CACHE=1``
turns both off. Executables run native code: the folder must be as trusted as the user's own files
(the default is).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import logging
import os
import pickle
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from mcflops.diskcache import cache_folder, package_digest, read_entry, write_entry

MAGIC = b"mcflops-program-v1\n"
KEEP = 256  # programs kept (about 0.7 MB each on a CPU)
_store: dict[str, Path | None] = {"folder": None}


def use_cache(folder: str | os.PathLike | None = None) -> Path | None:
    """JAX's persistent compilation cache and the program store in ``folder`` (default ``cache_folder()``);
    returns the folder, or None (caches off, or no folder can be made: every run compiles)."""
    folder = cache_folder() if folder is None else folder
    if folder is None:
        _store["folder"] = None
        return None
    try:
        os.makedirs(folder, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(folder))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except OSError:
        _store["folder"] = None
        return None
    _store["folder"] = Path(folder) / "programs"
    return Path(folder)


def stop_cache() -> None:
    """Programs compile in this process from now on (JAX's compilation cache is left as it is)."""
    _store["folder"] = None


class _Unkeyable(Exception):
    """A static value without a stable text (a lambda, an object with an address in its repr)."""


def _stable(x: Any) -> str:
    """A text of ``x`` that is the same in every process for equal values, or _Unkeyable."""
    if x is None or isinstance(x, (bool, int, float, str, bytes)):
        return f"{type(x).__name__}:{x!r}"
    if isinstance(x, (tuple, list, frozenset)):
        items = sorted(map(_stable, x)) if isinstance(x, frozenset) else map(_stable, x)
        return f"{type(x).__name__}({','.join(items)})"
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        t = type(x)
        return f"{t.__module__}.{t.__qualname__}(" + ",".join(
            f"{f.name}={_stable(getattr(x, f.name))}" for f in dataclasses.fields(x)) + ")"
    if callable(x) and hasattr(x, "__qualname__") and "<" not in x.__qualname__:
        return f"fn:{x.__module__}.{x.__qualname__}:{_code_digest(x)}"  # a module-level function
    raise _Unkeyable(type(x).__name__)


def _code_digest(fn: Callable) -> str:
    """Where ``fn``'s code is part of the key: mcflops's own in the package digest, another's by the bytes of
    the file that defines it (a script's or a notebook's function edited between runs gets a new key); and
    which function of the file it is (two lambdas share a name, not a first line and bytecode)."""
    code = getattr(fn, "__code__", None)
    where = f"{code.co_firstlineno}:{hashlib.sha256(code.co_code).hexdigest()[:16]}:" if code is not None else ""
    module = getattr(fn, "__module__", None) or ""
    if module == "mcflops" or module.startswith("mcflops."):
        return where + "package"
    try:
        path = inspect.getsourcefile(fn)
        return where + (hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else "")
    except (OSError, TypeError):
        raise _Unkeyable(module) from None


def _environment() -> str:
    import jaxlib

    devs = jax.devices()
    conf = [f"{k}={getattr(jax.config, k, None)!r}" for k in (
        "jax_enable_x64", "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion", "jax_default_matmul_precision",
        "jax_default_prng_impl", "jax_threefry_partitionable")]
    return "\n".join([f"jax {jax.__version__} jaxlib {jaxlib.__version__}",
                      f"backend {devs[0].platform} {devs[0].client.platform_version}",
                      "devices " + ",".join(f"{d.id}:{d.device_kind}" for d in devs),
                      "XLA_FLAGS " + os.environ.get("XLA_FLAGS", ""), *conf, "package " + package_digest()])


def _aval(x: Any) -> str:
    a = jax.typeof(x)
    return f"{a.dtype}{list(a.shape)}{'w' if getattr(a, 'weak_type', False) else ''}"


class Program:
    """``jax.jit(fn, static_argnames=...)``, its executables kept on disk when the store is on."""

    def __init__(self, fn: Callable, static_argnames: Sequence[str] = (), token: Any = ()):
        self._jit = jax.jit(fn, static_argnames=tuple(static_argnames))
        self._static = tuple(static_argnames)
        self._name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__name__)}"
        self._fn = fn
        self._token = token
        self._loaded: dict[str, Any] = {}  # key -> jax.stages.Compiled, this process

    def __call__(self, *args, **kwargs):
        folder = _store["folder"]
        if folder is None or jax.process_count() > 1:
            return self._jit(*args, **kwargs)
        static = {k: kwargs.pop(k) for k in self._static if k in kwargs}
        try:
            key = self._key(args, kwargs, static)
        except _Unkeyable:
            return self._jit(*args, **kwargs, **static)
        compiled = self._loaded.get(key)
        if compiled is None:
            compiled = _load(folder, key)
            if compiled is None:
                compiled, fresh = _compile(lambda: self._jit.lower(*args, **kwargs, **static).compile())
                if fresh:
                    _save(folder, key, compiled)
            self._loaded[key] = compiled
        return compiled(*args, **kwargs)

    def _cache_size(self) -> int:  # as a jitted function's: programs compiled or loaded in this process
        return self._jit._cache_size() + len(self._loaded)

    def _key(self, args, kwargs, static) -> str:
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        return "\n".join([MAGIC.decode().strip(), self._name, "code " + _code_digest(self._fn),
                          "token " + _stable(self._token),
                          "static " + _stable(tuple(sorted(static.items()))), "tree " + str(tree),
                          "avals " + " ".join(map(_aval, leaves)), _environment()])


def program(fn: Callable | None = None, *, static_argnames: Sequence[str] = (), token: Any = ()):
    """``Program(fn, ...)``; as a decorator, ``@program(static_argnames=(...))``."""
    if fn is None:
        return lambda f: Program(f, static_argnames, token)
    return Program(fn, static_argnames, token)


class _CacheLog(logging.Handler):
    """What JAX's persistent cache logged about this thread's compile: the keys of hits, and misses."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.thread, self.hits, self.missed = threading.get_ident(), [], False

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        msg = str(record.msg)
        if msg.startswith("Persistent compilation cache hit"):
            self.hits.append(str(record.args[-1]))
        elif msg.startswith("PERSISTENT COMPILATION CACHE MISS"):
            self.missed = True


def _compiler_log() -> logging.Logger | None:
    """The logger of JAX's compiler module (it logs the persistent cache's hits and misses)."""
    names = sorted(n for n in logging.Logger.manager.loggerDict if n.startswith("jax.") and n.endswith(".compiler"))
    return logging.getLogger(names[0]) if names else None


_watch = {"lock": threading.Lock(), "count": 0, "level": logging.NOTSET}  # compiles now watched


def _compile(compile: Callable[[], Any]) -> tuple[Any, bool]:
    """(compile(), whether XLA compiled it just now). Only such an executable is saved: one that JAX's
    persistent cache deserialised cannot be serialised again whole (on the CPU its code goes missing), and
    one from JAX's in-memory cache may be such. A hit in JAX's cache is evicted, so that the next process
    compiles it (and saves it here)."""
    log = _compiler_log()
    if log is None:  # nothing to tell a fresh compile by: use it, save nothing
        return compile(), False
    watched = _CacheLog()
    with _watch["lock"]:  # JAX logs hits and misses at DEBUG: that level while any compile is watched
        if _watch["count"] == 0:
            _watch["level"] = log.level
            log.setLevel(logging.DEBUG)
        _watch["count"] += 1
        log.addHandler(watched)
    try:
        compiled = compile()
    finally:
        with _watch["lock"]:
            log.removeHandler(watched)
            _watch["count"] -= 1
            if _watch["count"] == 0:
                log.setLevel(_watch["level"])
    if watched.hits:
        _evict(watched.hits)
    return compiled, watched.missed and not watched.hits


def _evict(keys: list[str]) -> None:
    """Remove JAX's persistent-cache entries of ``keys`` (its files ``KEY-cache`` and ``KEY-atime``)."""
    folder = jax.config.jax_compilation_cache_dir
    for k in keys:
        for suffix in ("-cache", "-atime"):
            try:
                os.unlink(os.path.join(folder, k + suffix))
            except (OSError, TypeError):
                pass


def _path(folder: Path, key: str) -> Path:
    return folder / (hashlib.sha256(key.encode()).hexdigest() + ".bin")


def _load(folder: Path, key: str):
    """The stored executable of ``key``, or None (absent, unreadable, another key, corrupt, not trusted)."""
    from jax.experimental import serialize_executable

    body = read_entry(_path(folder, key), MAGIC, key)
    if body is None:
        return None
    try:
        payload, in_tree, out_tree, ids = pickle.loads(body)
        by_id = {d.id: d for d in jax.devices()}
        return serialize_executable.deserialize_and_load(payload, in_tree, out_tree,
                                                         execution_devices=[by_id[i] for i in ids])
    except Exception:  # noqa: BLE001 - a bad entry costs a compile, never the run
        return None


def _save(folder: Path, key: str, compiled) -> None:
    """Write ``compiled`` under ``key``; any failure (read-only, full disk, an executable that cannot be
    serialised) is ignored."""
    from jax.experimental import serialize_executable

    try:
        payload, in_tree, out_tree = serialize_executable.serialize(compiled)
        ids = [d.id for d in compiled._executable._unloaded_executable.device_list]
        body = pickle.dumps((payload, in_tree, out_tree, ids), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001
        return
    write_entry(_path(folder, key), MAGIC, key, body, KEEP)