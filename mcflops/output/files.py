"""Atomic writes: a file through an exclusively created temporary file renamed into place, a folder
swapped in whole (one atomic exchange where the platform has one), and the temporary names that let
a later writer tell a dead process's leftovers from a live one's (``owner``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any, Callable

Writer = Callable[[Path], Any]  # writes its file(s) into the folder or at the path it is given

WRITTEN: list[str] = []  # folders swapped into place by this process (for the interrupted message)

# The temporary names carry the writing process's id: `.NAME.tmp-PID-RANDOM` (the new folder) and
# `.NAME.old-PID-RANDOM` (the previous one set aside by the two-rename swap). mkdtemp's random part keeps
# them exclusive; the PID says whose they are, so that leftovers of a dead process can be removed.
TEMP = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[A-Za-z0-9_]+")


def temp_prefix(name: str, kind: str) -> str:
    return f".{name}.{kind}-{os.getpid()}-"


def owner(path: Path, name: str) -> int | None:
    """The PID in a temporary name of folder ``name`` (None when ``path`` is not one)."""
    m = TEMP.fullmatch(path.name)
    return int(m["pid"]) if m and m["name"] == name else None


def stale(path: Path) -> bool:
    """Whether ``path`` is a temporary file or folder (any ``.NAME.tmp-PID-RANDOM``) of a process that no
    longer exists: what a writer killed mid-write (SIGKILL, a power cut) leaves, and nothing else."""
    m = TEMP.fullmatch(path.name)
    return m is not None and int(m["pid"]) != os.getpid() and not alive(int(m["pid"]))


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts as alive: it may be writing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_temp_folder(out: Path, kind: str = "tmp") -> Path:
    """An exclusively created folder beside ``out`` with the umask's mode (mkdtemp's 0700 would outlive
    the swap: a report is shared like any folder)."""
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(out.name, kind), dir=out.parent))
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def replace_file(path: Path, write: Writer) -> None:
    """Write via a temporary file in the same folder, then rename: a file is never half-written.

    The temporary file is created exclusively under a random name (never a name someone could have
    planted a symbolic link at), with the permissions the umask gives a new file."""
    # O_CREAT | O_EXCL; the PID in the name lets the folder's next writer remove it if this process is killed
    fd, name = tempfile.mkstemp(prefix=temp_prefix(path.name, "tmp"), dir=path.parent)
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, new_file_mode())
        finally:
            os.close(fd)
        write(tmp)
        os.replace(tmp, path)
    finally:
        _discard(tmp)


def replace_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) into ``path`` via an exclusively created temporary file written through its own
    descriptor (the path is not opened again), then renamed into place."""
    fd, name = tempfile.mkstemp(prefix=temp_prefix(path.name, "tmp"), dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        _discard(tmp)


def _discard(tmp: Path) -> None:
    """Remove a temporary file if it is still there; a folder that refuses (read-only) is no second error."""
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass


def new_file_mode() -> int:
    return 0o666 & ~umask()


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def label(folder: Path) -> str:
    """How the report names its folder in the regenerate command: relative to the working folder if inside it."""
    p = Path(folder).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _renameat2():
    """libc's renameat2 (glibc >= 2.28), or None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_EXCHANGE = [_renameat2() if hasattr(os, "uname") and os.uname().sysname == "Linux" else None]


def exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one atomic step (Linux's renameat2 RENAME_EXCHANGE); False where the
    platform or the file system cannot (the caller then swaps with two renames)."""
    fn = _EXCHANGE[0]
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):  # no exchange here: two renames
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap(tmp: Path, out: Path) -> None:
    """Put the finished folder ``tmp`` in place of ``out``, signals held off until it is done.

    Where the platform allows, one atomic exchange: a reader always finds ``out``, the old report or the
    new one. Otherwise two renames: the previous report is first moved into a folder created
    exclusively for it (nothing planted beside the report can stand in its way or receive it), and
    put back if the second rename fails; the folder is then briefly missing but never a mixture.
    """
    blocked = (signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
               if hasattr(signal, "pthread_sigmask") else None)
    try:
        if out.exists() and exchange(tmp, out):  # tmp now holds the previous report
            WRITTEN.append(str(out))
            shutil.rmtree(tmp, ignore_errors=True)
            return
        holder = None
        if out.exists():
            holder = make_temp_folder(out, "old")
            os.replace(out, holder / out.name)
        try:
            os.replace(tmp, out)
        except BaseException:
            if holder is not None:
                os.replace(holder / out.name, out)
                holder.rmdir()
            raise
        WRITTEN.append(str(out))
        if holder is not None:
            shutil.rmtree(holder, ignore_errors=True)
    finally:
        if blocked is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def write_yaml(path: Path, data: dict, provenance: dict | None = None) -> None:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")  # keeps the file's key order
    with path.open("w", encoding="utf-8") as f:
        f.write("# resolved prior file: every default filled in; `mcflops run` on it repeats the run exactly\n")
        if provenance:  # what made the run (the same fields as summary.json)
            f.write("# " + ", ".join(f"{k} {provenance.get(k)}" for k in ("version", "seed", "samples", "device",
                                                                         "spec_hash")) + "\n")
        y.dump(data, f)
