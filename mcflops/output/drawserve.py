"""The drawing process's side of output.drawer: ``python -m mcflops.output.drawserve STAGING [WORKERS]``.

It reads jobs from its standard input (a 4-byte big-endian length, then the pickle of (path, spec hash,
output.figures.Draw)), draws each, and answers one line per job, in the jobs' order: ``ok`` or
``error <what>``. End of input ends it; it then removes the staging folder STAGING (its first argument).
Its input is read in a thread, so that handing it a figure never waits for the one it draws.

With WORKERS 2 (POSIX with ``os.fork``) it imports matplotlib and the plots/ modules once, then forks a
helper that shares them, so that two figures are drawn at a time without a second import (the import
costs about as much as four figures). The helper takes one job at a time from this process and answers
it here; replies still go out in the jobs' order, and a job the helper could not draw (it died) is drawn
here. Until the fork no other thread may run (a fork copies only the thread that calls it), so while the
modules are imported, in a thread that has ended before the fork, this process's main thread keeps
reading its input.
"""

from __future__ import annotations

import os
import pickle
import queue
import select
import shutil
import signal
import struct
import sys
import threading
from pathlib import Path
from typing import Iterator


def _frames(fd: int, buf: bytes = b"", ended: bool = False) -> Iterator[bytes]:
    """The jobs (length-prefixed blobs) on ``fd``, after those in ``buf`` (bytes already read from it;
    ``ended``: its end was read too)."""
    while True:
        while len(buf) >= 4:
            (n,) = struct.unpack(">I", buf[:4])
            if len(buf) < 4 + n:
                break
            yield buf[4:4 + n]
            buf = buf[4 + n:]
        if ended:
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buf += chunk


def _imports() -> None:
    """What figures need, imported while the other process loads the file, imports JAX and samples."""
    import matplotlib.figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401
    from PIL import PngImagePlugin  # noqa: F401

    import mcflops.output.figures  # noqa: F401
    import mcflops.plots.posterior  # noqa: F401
    import mcflops.plots.report  # noqa: F401
    import mcflops.plots.sensitivity  # noqa: F401


def _draw(blob: bytes) -> bytes:
    """Draw one job; its reply line."""
    from mcflops.output.figures import draw

    try:
        path, spec_hash, fig = pickle.loads(blob)
        draw(Path(path).parent, {Path(path).name: fig}, spec_hash)
        return b"ok\n"
    except Exception as e:  # noqa: BLE001 - reported: the other process draws this figure itself
        return ("error " + f"{type(e).__name__}: {e}".replace("\n", " ")).encode() + b"\n"


def _reader(fd: int, events: queue.SimpleQueue, buf: bytes = b"", ended: bool = False) -> None:
    try:
        for blob in _frames(fd, buf, ended):
            events.put(("job", blob))
    except OSError:
        pass
    finally:
        events.put(("end", None))


def _import_reading(fd: int) -> tuple[bytes, bool]:
    """Import what figures need in a thread while reading ``fd`` here; the bytes read and whether its end
    was reached. Returns once the thread has ended."""
    t = threading.Thread(target=_imports, daemon=True)
    t.start()
    buf, ended = b"", False
    while t.is_alive():
        if not ended and select.select([fd], [], [], 0.02)[0]:
            chunk = os.read(fd, 1 << 16)
            buf, ended = buf + chunk, not chunk
        else:
            t.join(0.02)
    t.join()
    return buf, ended


class _Helper:
    """The forked helper: ``give`` hands it a job, its replies come to ``events`` as ("helper", line), its end
    as ("helper-end", None)."""

    def __init__(self, pid: int, jobs_w: int, replies_r: int, events: queue.SimpleQueue):
        self.pid, self.jobs_w = pid, jobs_w
        self.job: tuple[int, bytes] | None = None  # the job it draws (its index and blob), to draw here should it die
        self.alive = True
        threading.Thread(target=self._replies, args=(replies_r, events), daemon=True).start()

    @staticmethod
    def _replies(fd: int, events: queue.SimpleQueue) -> None:
        buf = b""
        try:
            while chunk := os.read(fd, 1 << 12):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    events.put(("helper", line + b"\n"))
        except OSError:
            pass
        finally:
            events.put(("helper-end", None))

    def give(self, job: tuple[int, bytes]) -> bool:
        blob = job[1]
        try:
            os.write(self.jobs_w, struct.pack(">I", len(blob)))
            view = memoryview(blob)
            while view:
                view = view[os.write(self.jobs_w, view):]
        except OSError:
            return False
        self.job = job
        return True

    def end(self) -> None:
        """Close its input (it then leaves) and wait for it."""
        try:
            os.close(self.jobs_w)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _fork_helper(events: queue.SimpleQueue) -> _Helper | None:
    """Fork the helper (nothing but this thread is running); None when it cannot be."""
    try:
        jobs_r, jobs_w = os.pipe()
        replies_r, replies_w = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the helper: its only streams are its two pipes
        try:
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)  # the other process must see this one's streams end when it ends
            os.dup2(null, 1)
            os.close(jobs_w)
            os.close(replies_r)
            for blob in _frames(jobs_r):
                os.write(replies_w, _draw(blob))
        finally:
            os._exit(0)
    os.close(jobs_r)
    os.close(replies_w)
    return _Helper(pid, jobs_w, replies_r, events)


def serve(inp, out, workers: int = 1) -> None:
    """Draw each job read from ``inp`` (a binary stream) until its end, answering on ``out``; with
    ``workers`` 2, with a forked helper (module docstring). Ctrl-C is left to the other process, which
    ends this one."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    events: queue.SimpleQueue = queue.SimpleQueue()
    fd = inp.fileno()
    helper = None
    if workers > 1 and hasattr(os, "fork"):
        buf, ended = _import_reading(fd)
        helper = _fork_helper(events)
        threading.Thread(target=_reader, args=(fd, events, buf, ended), daemon=True).start()
    else:
        threading.Thread(target=_reader, args=(fd, events), daemon=True).start()
        _imports()
    todo: list[tuple[int, bytes]] = []  # jobs read and not yet drawn, in order
    replies: dict[int, bytes] = {}
    read = sent = 0
    ended = False

    def take(kind, item) -> None:
        nonlocal read, ended
        if kind == "job":
            todo.append((read, item))
            read += 1
        elif kind == "end":
            ended = True
        elif kind == "helper":
            replies[helper.job[0]] = item
            helper.job = None
        else:  # the helper has gone: what it had is drawn here
            helper.alive = False
            if helper.job is not None:
                todo.insert(0, helper.job)
                helper.job = None

    while True:
        while True:  # take in what has come, without waiting
            try:
                take(*events.get_nowait())
            except queue.Empty:
                break
        if helper is not None and helper.alive and helper.job is None and todo:
            job = todo.pop(0)
            if not helper.give(job):
                todo.insert(0, job)
                helper.alive = False
        if todo:
            job, blob = todo.pop(0)
            replies[job] = _draw(blob)
        while sent in replies:
            out.write(replies.pop(sent))
            sent += 1
        out.flush()
        if todo:
            continue
        if ended and (helper is None or helper.job is None):
            break
        take(*events.get())
    if helper is not None:
        helper.end()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    if len(sys.argv) > 1:  # its input ended: the other process has moved what it wanted, or is gone
        shutil.rmtree(sys.argv[1], ignore_errors=True)
    os._exit(0)  # every reply is flushed; freeing matplotlib's objects would only delay the other process
