"""One writer per output folder: a lock file beside the folder (``.NAME.lock``) held with flock while a
process writes it, and the leftovers of writers that died (their temporary folders) removed by the
next one to hold the lock.

flock's lock belongs to the open file: it goes when the process exits or is killed, so a lock file
left behind by a dead process is never a reason to refuse. The file is removed on release; a process
that locked a file someone has just removed sees that the path no longer names it and tries again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mcflops.errors import SpecError
from mcflops.output import files

_HELD: dict[Path, list] = {}  # folder -> [fd, depth]: locks this process holds (re-entrant)


class FolderBusy(SpecError):
    """Another process is writing this folder (not bad input: the same command can be run again later)."""

    def format(self) -> str:
        return f"another run is writing {self.path}"


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.lock"


def acquire(out: Path, where: str | None = None) -> None:
    """Hold ``out``'s lock (re-entrant within this process); FolderBusy when another process holds it.
    ``where`` is how the message names the folder (default: the path as given)."""
    import fcntl

    out = Path(os.path.abspath(out))
    if out in _HELD:
        _HELD[out][1] += 1
        return
    path = lock_path(out)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, files.new_file_mode())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise FolderBusy("busy", path=where or str(out)) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed it as we opened it: lock the new one
    _HELD[out] = [fd, 1]
    clean_stale(out)


def release(out: Path) -> None:
    """Let go of ``out``'s lock (the last of this process's holds removes the lock file)."""
    out = Path(os.path.abspath(out))
    held = _HELD.get(out)
    if held is None:
        return
    held[1] -= 1
    if held[1] > 0:
        return
    del _HELD[out]
    try:
        lock_path(out).unlink(missing_ok=True)  # while still holding it: a waiter re-checks the path
    except OSError:
        pass  # a read-only parent: the file stays, and is no reason to refuse
    os.close(held[0])


def release_all() -> None:
    for out in list(_HELD):
        _HELD[out][1] = 1
        release(out)


class holding:
    """``with holding(out):`` the folder's lock for the block."""

    def __init__(self, out: Path, where: str | None = None):
        self.out, self.where = out, where

    def __enter__(self):
        acquire(self.out, self.where)
        return self

    def __exit__(self, *exc):
        release(self.out)
        return False


def clean_stale(out: Path) -> None:
    """Remove the temporary folders of ``out`` that dead processes left (killed mid-write: SIGKILL, a
    power cut), under the lock, so that no live writer's folder is touched. A previous report set aside
    by an interrupted two-rename swap is put back first when the folder itself is missing."""
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return
    for p in sorted(entries):
        pid = files.owner(p, out.name)
        if pid is None or files.alive(pid) and pid != os.getpid() or p.is_symlink() or not p.is_dir():
            continue
        try:
            kept = p / out.name
            if p.name.startswith(f".{out.name}.old-") and kept.is_dir() and not out.exists():
                os.replace(kept, out)
            shutil.rmtree(p)
        except OSError:
            pass  # not ours to remove (another user's, a read-only folder): left as it is
    clean_stale_files(out)


def clean_stale_files(folder: Path) -> None:
    """Remove the temporary files that writers killed mid-write left inside ``folder`` (the --out folder of
    sensitivity, plan, compare and calibrate, whose files are replaced one by one; a run folder whose report
    was being re-rendered), under its lock."""
    if folder.is_symlink() or not folder.is_dir():
        return
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for p in entries:
        if files.stale(p) and not p.is_symlink() and p.is_file():
            try:
                p.unlink()
            except OSError:
                pass  # not ours to remove: left as it is
