"""A second process that draws a run folder's figures beside this one.

`mcflops run` starts it first (``start``): while this process imports JAX and samples, it imports
matplotlib and the plots/ modules (which import no JAX). Figures are handed to it as soon as their data
exist: the posterior's while this process still computes the sensitivity analysis (``send``, through
output.folder.draw_early), the others when the run folder is written (``draw``), where this process writes
its other files meanwhile and draws from the back of the list only when the other is behind. Each figure
is an output.figures.Draw (a plots/ function and its plain data), pickled down a pipe; the process draws it
into a private staging folder, from which it is moved into the run folder: the PNG bytes are the same
whichever process draws them. Should the process fail to start, die, or a figure fail in it, that figure
is drawn here: the folder's content does not depend on it. Where the cores allow (``workers``), it draws
two figures at a time, through a helper it forks once matplotlib is imported (output.drawserve, which
also holds the protocol).
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

Job = tuple[str, Callable[[Path], object], "str | None"]  # file name, Draw, the spec hash its PNG records
WAIT_S = 600.0  # a figure not drawn there by then is drawn here
# This process draws too when this many figures are not yet drawn there once its own files are written:
# importing matplotlib here costs about as much as drawing four figures, so drawing k of W here ends at
# import + k against W - k there, which is sooner only when W is well above four.
BEHIND = 6


class Drawer:
    """The drawing process (``start``): ``send`` hands it a figure, ``draw`` shares figures with it and puts
    every one in the folder; ``close`` ends it."""

    def __init__(self, proc: subprocess.Popen, staging: Path, workers: int = 1):
        self.proc = proc
        self.depth = workers + 1  # figures handed over, not yet drawn: one per worker, one waiting
        self.staging = staging  # where it draws; this process moves the files into the run folder
        self.pending: list[int] = []  # jobs handed over whose replies are awaited, in order
        self.drawn: set[int] = set()  # jobs drawn there (in ``staging``), not yet moved
        self.failed: list[int] = []  # jobs handed over and not drawn there
        self._sent: dict[int, Job] = {}  # every job handed over, to draw here should it fail there
        self._named: dict[str, int] = {}  # file name -> the last job handed over for it
        self._buf = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def staged(self, job: int) -> Path:
        """Where job ``job`` is drawn: a name of its own, so that a figure handed over again (another
        result's) never meets the earlier one's file."""
        return self.staging / f"{job}-{self._sent[job][0]}"

    def send(self, path: Path, spec_hash: str | None, fig) -> bool:
        """Hand one figure over (drawn there, to be ``path.name`` in the folder); False (and the process
        ended) when it cannot take it."""
        if not self.alive():
            return False
        job = len(self._sent)
        self._sent[job] = (path.name, fig, spec_hash)
        try:
            blob = pickle.dumps((str(self.staged(job)), spec_hash, fig), protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.write(struct.pack(">I", len(blob)) + blob)
            self.proc.stdin.flush()
        except (OSError, pickle.PicklingError, AttributeError, TypeError, ValueError):
            del self._sent[job]
            self._end(kill=True)
            return False
        self.pending.append(job)
        self._named[path.name] = job
        return True

    def poll(self, timeout: float | None = 0.0) -> None:
        """Take in the replies that have come (waiting up to ``timeout`` s for one when none has): each moves
        its figure to ``drawn`` or ``failed``. A process that ended, failed a figure or does not answer in
        time is ended, and every figure it still had goes to ``failed`` (to be drawn here)."""
        if not self.pending:
            return
        fd = self.proc.stdout.fileno()
        try:
            ready = select.select([fd], [], [], timeout)[0]
            chunk = os.read(fd, 1 << 16) if ready else None
        except (OSError, ValueError):
            chunk = b""
        if chunk is None:
            if timeout:  # waited, and no answer
                self._give_up()
            return
        if not chunk:  # the end of its output: it died
            self._give_up()
            return
        self._buf += chunk
        ok = True
        while b"\n" in self._buf and self.pending:
            line, self._buf = self._buf.split(b"\n", 1)
            job = self.pending.pop(0)
            if line.strip() == b"ok":
                self.drawn.add(job)
            else:
                self.failed.append(job)
                ok = False
        if not ok:  # as the figures it still has may fail the same way
            self._give_up()

    def _give_up(self) -> None:
        self._end(kill=True)
        self.failed.extend(self.pending)
        self.pending.clear()

    def hand_over(self, folder: Path, jobs: list[Job]) -> list[Job]:
        """Send the Draw figures of ``jobs`` (to be files of ``folder``), in order, while it has a worker idle
        or none waiting (``depth``); the jobs not sent, in order."""
        from mcflops.output.figures import Draw

        left = list(jobs)
        while left and len(self.pending) < self.depth and self.alive():
            i = next((k for k, (_, f, _h) in enumerate(left) if isinstance(f, Draw)), None)
            if i is None or not self.send(Path(folder) / left[i][0], left[i][2], left[i][1]):
                break
            left.pop(i)
        return left

    def draw(self, folder: Path, figures: Iterable[Job], before: Iterable[Callable[[], object]] = (),
             check: Callable[[], None] = lambda: None) -> None:
        """Put ``figures`` into ``folder``, drawn by the process where it can (those ``send`` handed over
        already, the same Draw objects, included), here otherwise; ``before`` (this process's other writers)
        run here meanwhile. ``check`` is called between the steps done here (it raises to stop: the process
        is then ended, so that it writes nothing after)."""
        from mcflops.output.figures import draw

        folder = Path(folder)
        jobs: list[Job] = []
        mine: dict[str, int] = {}  # file name -> the job handed over for this very figure
        for name, fig, spec_hash in figures:
            job = self._named.get(name)
            if job is not None and self._sent[job][1] is fig and job not in self.failed:
                mine[name] = job
            else:
                jobs.append((name, fig, spec_hash))
        before = list(before)
        done = False
        try:
            while True:
                self.poll(0)
                for job in [j for j in self.failed if j in mine.values()]:
                    self.failed.remove(job)
                    del mine[self._sent[job][0]]
                    jobs.append(self._sent[job])  # not drawn there: drawn here
                first = len(self._sent)
                jobs = self.hand_over(folder, jobs)
                mine.update((self._sent[j][0], j) for j in range(first, len(self._sent)))
                if before:
                    check()
                    before.pop(0)()
                    continue
                waiting = [j for j in self.pending if j in mine.values()]
                if jobs and (not self.alive() or not waiting or self._here(len(jobs))):
                    check()
                    name, fig, spec_hash = jobs.pop()
                    draw(folder, {name: fig}, spec_hash)
                    continue
                if waiting:
                    self.poll(WAIT_S)
                    continue
                if not jobs:
                    break
            check()
            for name, job in mine.items():
                _move(self.staged(job), folder / name)
                self.drawn.discard(job)
            done = True
        finally:
            if not done:
                self._end(kill=True)

    def _here(self, waiting: int) -> bool:
        """Whether this process should draw one of the ``waiting`` figures not yet handed over."""
        if "mcflops.plots.style" in sys.modules:  # matplotlib is here already: drawing costs only the figure
            return True
        return waiting + len(self.pending) >= BEHIND

    def close(self, kill: bool = False) -> None:
        """End the process (``_end``) and remove its staging folder."""
        self._end(kill)
        shutil.rmtree(self.staging, ignore_errors=True)

    def _kill(self) -> None:
        """Kill the process and its helper (its own process group, where there are groups)."""
        if hasattr(os, "killpg"):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
                return
            except OSError:
                pass
        self.proc.kill()

    def _end(self, kill: bool = False) -> None:
        """End the process and wait for it: at once with ``kill`` (it may be drawing), else by closing its
        input, which it reads to the end and leaves (without the interpreter's teardown: at once). What it
        drew stays in the staging folder."""
        if self.proc.returncode is None:
            if kill:
                self._kill()
            try:
                self.proc.stdin.close()
            except OSError:
                self._kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _move(src: Path, dst: Path) -> None:
    """A figure drawn there into the run folder: renamed where both are on one file system, else copied
    (a new file, with the mode the umask gives, as a figure drawn here)."""
    try:
        os.replace(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def start() -> Drawer | None:
    """Start the drawing process; None when it would not help or cannot be: one usable core (a second
    process then only adds the CPU time of its start), no matplotlib, or no process to be had.
    ``MCFLOPS_DRAW_PROCESS=1`` starts it whatever the cores, ``0`` never; how many figures it draws at a
    time: ``workers``. The machine's load does not keep it off: on two cores kept busy by other work it
    still ended runs sooner (benchmarks/RESULTS.md), since this command then gets two shares of the cores."""
    from mcflops.output.figures import can_draw

    want = os.environ.get("MCFLOPS_DRAW_PROCESS", "").strip()
    if want == "0" or not can_draw():
        return None
    if want != "1" and cores() < 2:
        return None
    root = str(Path(__file__).resolve().parent.parent.parent)  # the folder holding this mcflops package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    n = workers()
    try:
        staging = Path(tempfile.mkdtemp(prefix="mcflops-figures-"))
    except OSError:
        return None
    try:
        # its own process group, so that killing it kills its helper too (Drawer._kill)
        proc = subprocess.Popen([sys.executable, "-m", "mcflops.output.drawserve", str(staging), str(n)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                close_fds=True, start_new_session=hasattr(os, "killpg"))
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return None
    return Drawer(proc, staging, n)


def cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def workers() -> int:
    """How many figures the drawing process draws at a time: 2 where it can fork a helper (Linux) and this
    process may use two cores or more, else 1; ``MCFLOPS_DRAW_WORKERS`` (1 or 2) says so instead."""
    want = os.environ.get("MCFLOPS_DRAW_WORKERS", "").strip()
    if want in ("1", "2"):
        return int(want) if hasattr(os, "fork") else 1
    return 2 if sys.platform.startswith("linux") and cores() >= 2 else 1
