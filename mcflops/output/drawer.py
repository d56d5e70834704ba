"""A second process that draws a run folder's figures beside this one.

`mcflops run` starts it first (``start``): while this process imports JAX and samples, it imports
matplotlib and the plots/ modules (which import no JAX); then the two share the figures (``draw``): it
takes them from the front of the list, one at a time, this process from the back, between writing its
other files. Each figure is an output.figures.Draw (a plots/ function and its plain data), pickled down a
pipe; the PNG bytes are the same whichever process draws them. Should the process fail to start, die, or
a figure fail in it, that figure is drawn here: the folder's content does not depend on it.

The protocol on its standard streams: a job is a 4-byte big-endian length, then the pickle of
(path, spec hash, Draw); the reply is one line, ``ok`` or ``error <what>``. End of input ends it.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

Job = tuple[str, Callable[[Path], object], "str | None"]  # file name, Draw, the spec hash its PNG records
WAIT_S = 600.0  # a figure not drawn there by then is drawn here


class Drawer:
    """The drawing process (``start``): ``draw`` shares figures with it; ``close`` ends it."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, path: Path, spec_hash: str | None, fig) -> bool:
        """Hand one figure over; False (and the process ended) when it cannot take it."""
        try:
            blob = pickle.dumps((str(path), spec_hash, fig), protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.write(struct.pack(">I", len(blob)) + blob)
            self.proc.stdin.flush()
            return True
        except (OSError, pickle.PicklingError, AttributeError, TypeError):
            self.close(kill=True)
            return False

    def ready(self, timeout: float | None) -> bool:
        """Whether its reply to the figure handed over has come (waits up to ``timeout`` s; None: until it has)."""
        return bool(select.select([self.proc.stdout], [], [], timeout)[0])

    def reply(self) -> bool:
        """Its reply to the figure handed over: True when drawn, False (and the process ended) otherwise."""
        line = self.proc.stdout.readline()
        if line.strip() == b"ok":
            return True
        self.close(kill=True)
        return False

    def draw(self, folder: Path, figures: Iterable[Job], before: Iterable[Callable[[], object]] = (),
             check: Callable[[], None] = lambda: None) -> None:
        """Draw ``figures`` into ``folder``, shared with the process; ``before`` (this process's other
        writers) run here once it has its first figure. ``check`` is called between the steps done here
        (it raises to stop: the process is then ended, so that it writes nothing after)."""
        from mcflops.output.figures import Draw, draw

        jobs = list(figures)
        pending: Job | None = None
        done = False
        try:
            while jobs or pending:
                if pending is None and self.alive():
                    i = next((k for k, (_, f, _h) in enumerate(jobs) if isinstance(f, Draw)), None)
                    if i is not None and self.send(Path(folder) / jobs[i][0], jobs[i][2], jobs[i][1]):
                        pending = jobs.pop(i)
                for write in before:
                    check()
                    write()
                before = ()
                if pending is not None and (self.ready(0) or not jobs):
                    if not (jobs or self.ready(WAIT_S)) or not self.reply():
                        self.close(kill=True)
                        jobs.append(pending)  # not drawn there: drawn here
                    pending = None
                    continue
                if jobs:
                    check()
                    name, fig, spec_hash = jobs.pop()
                    draw(folder, {name: fig}, spec_hash)
            done = True
        finally:
            if not done:
                self.close(kill=True)

    def close(self, kill: bool = False) -> None:
        """End the process and wait for it: at once with ``kill`` (it may be drawing), else by closing its
        input, which it reads to the end and leaves (without the interpreter's teardown: at once)."""
        if kill:
            self.proc.kill()
        try:
            self.proc.stdin.close()
        except OSError:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def start() -> Drawer | None:
    """Start the drawing process; None when it would not help or cannot be: every core busy
    (``spare_core``: a second process then only adds the CPU time of its start), no matplotlib, or no
    process to be had. ``MCFLOPS_DRAW_PROCESS=1`` starts it whatever the load, ``0`` never."""
    import importlib.util

    want = os.environ.get("MCFLOPS_DRAW_PROCESS", "").strip()
    if want == "0" or importlib.util.find_spec("matplotlib") is None:
        return None
    if want != "1" and not spare_core():
        return None
    root = str(Path(__file__).resolve().parent.parent.parent)  # the folder holding this mcflops package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "mcflops.output.drawer"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=True)
    except OSError:
        return None
    return Drawer(proc)


def spare_core() -> bool:
    """Whether the cores this process may use were not all busy over the last minute (os.getloadavg below
    their count; True where the load cannot be read). The average lags and counts the previous command
    itself, so "below the count" rather than "a whole core idle": measured on two cores, the second
    process pays for itself unless both are busy (benchmarks/RESULTS.md)."""
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return os.getloadavg()[0] < cores
    except OSError:
        return True


def serve(inp, out) -> None:
    """The drawing process: import what figures need, then draw each job read from ``inp`` until its end.
    Ctrl-C is left to the other process, which ends this one."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import matplotlib.figure  # noqa: F401 - imported now, while the other process samples
    from matplotlib.backends import backend_agg  # noqa: F401
    from PIL import PngImagePlugin  # noqa: F401

    import mcflops.plots.posterior  # noqa: F401
    import mcflops.plots.report  # noqa: F401
    import mcflops.plots.sensitivity  # noqa: F401
    from mcflops.output.figures import draw

    while True:
        head = inp.read(4)
        if len(head) < 4:
            return
        (n,) = struct.unpack(">I", head)
        blob = inp.read(n)
        if len(blob) < n:
            return
        try:
            path, spec_hash, fig = pickle.loads(blob)
            draw(Path(path).parent, {Path(path).name: fig}, spec_hash)
            reply = b"ok\n"
        except Exception as e:  # noqa: BLE001 - reported: the other process draws this figure itself
            reply = ("error " + f"{type(e).__name__}: {e}".replace("\n", " ")).encode() + b"\n"
        out.write(reply)
        out.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
    os._exit(0)  # every reply is flushed; freeing matplotlib's objects would only delay the other process
