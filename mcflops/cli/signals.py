"""Ctrl-C (SIGINT) and SIGTERM for the length of a command: the handler only sets a flag, and the command
stops at its next stage (between the engine's blocks, between the files of a run folder, before the
swap, at its end) with `Interrupted`; main turns that into exit 130 or 143 and one line.

A flag, not Python's KeyboardInterrupt raised wherever the main thread happens to be: one that lands in a
garbage-collection callback of JAX's is printed as "Exception ignored" and lost (the run would go on and
replace the report), and one that lands inside a cleanup leaves debris. A second signal while the first is
pending raises at once (a stage with no check in it, a NUTS fit, can then still be stopped); where that
raise lands in a callback that cannot pass it on (a gc callback, a ``__del__``), Python hands it to
``sys.unraisablehook``, and the hook armed here sends it again a moment later, to land in ordinary code.
"""

from __future__ import annotations

import signal
import sys

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal's number, as a shell reports it
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

_RECEIVED: list[int] = []  # the signals received during this command, in order
_EARLY: list[int] = []  # the signals received while the program loaded, before its command started


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop by ``signum`` (a KeyboardInterrupt, so that every cleanup that
    handles Ctrl-C handles it)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


class interrupts:
    """Arm the flag handler for SIGINT and SIGTERM while the block runs, and put the previous handlers
    back after it. A signal ignored when the command starts (nohup, `&`) stays ignored; outside the main
    thread (an embedding application) Python's own handling stays."""

    def __enter__(self):
        _RECEIVED[:] = _EARLY  # a signal that came while the program was still loading (``early``)
        _EARLY.clear()
        self.previous: dict[int, object] = {}
        for sig in EXIT_CODES:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue
            try:
                self.previous[sig] = signal.signal(sig, _handler)
            except ValueError:  # not the main thread
                break
        if self.previous:
            _HOOK[:] = [sys.unraisablehook]
            sys.unraisablehook = _unraisable
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        if self.previous:
            sys.unraisablehook = _HOOK.pop()
        while _RESEND:  # a re-delivery still pending must not land after the command
            _RESEND.pop().cancel()
        _RECEIVED.clear()
        return False


def _handler(signum, frame):
    first = not _RECEIVED
    _RECEIVED.append(signum)
    if not first:  # asked twice: stop now, wherever it is
        raise Interrupted(_RECEIVED[0])


RESEND_S = 0.05  # long enough for a gc pass's callbacks to have returned
_RESEND: list = []  # re-deliveries not yet made (threading.Timer)
_HOOK: list = []  # the unraisable hook the command found (restored after it)


def _unraisable(unraisable) -> None:
    """``sys.unraisablehook`` while a command runs: an Interrupted that a callback swallowed is not printed
    ("Exception ignored in ...") but sent again RESEND_S later, when the main thread is most likely back in
    ordinary code, where it propagates (if it lands in a callback again, this repeats); anything else goes to
    the hook that was there before."""
    if isinstance(unraisable.exc_value, Interrupted) and signal.getsignal(unraisable.exc_value.signum) is _handler:
        import _thread
        import threading  # here: `early` runs before anything else of the program, and imports only signal

        timer = threading.Timer(RESEND_S, _thread.interrupt_main, (unraisable.exc_value.signum,))
        timer.daemon = True
        _RESEND.append(timer)
        timer.start()
        return
    (_HOOK[0] if _HOOK else sys.__unraisablehook__)(unraisable)


def early() -> None:
    """When this process is the program (``mcflops ...`` or ``python -m mcflops.cli ...``, not a library or a
    test importing the package): from now on SIGINT and SIGTERM are only noted, so a Ctrl-C while the program
    still imports its modules (a fifth of a second) is not a traceback from inside an import; the command's
    ``interrupts`` takes the noted signal over and stops at its first check. The interpreter's own start,
    before the first line of mcflops runs, stays Python's."""
    if not _program():
        return
    for sig in EXIT_CODES:
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue
        try:
            signal.signal(sig, _note)
        except ValueError:  # not the main thread
            return


def _note(signum, frame):
    _EARLY.append(signum)


def _program() -> bool:
    """Whether the interpreter was started as mcflops' command line: its script is the console script
    named ``mcflops`` or it runs ``-m mcflops.cli`` (``sys.orig_argv``: the command line as typed)."""
    import os

    argv = list(getattr(sys, "orig_argv", ()))[1:]
    while argv and argv[0].startswith("-") and argv[0] not in ("-m", "-c"):
        # interpreter options; those with a separate value (-X importtime, -W error) skip it too
        argv = argv[2:] if argv[0] in ("-X", "-W") else argv[1:]
    if argv[:2] == ["-m", "mcflops.cli"]:
        return True
    return bool(argv) and os.path.basename(argv[0]) in ("mcflops", "mcflops.exe")


def check_interrupt() -> None:
    """Raise Interrupted if a signal arrived during this command (called between stages)."""
    if _RECEIVED:
        raise Interrupted(_RECEIVED[0])


def received() -> int | None:
    """The first signal received during this command, or None."""
    return _RECEIVED[0] if _RECEIVED else None


def exit_code(signum: int) -> int:
    return EXIT_CODES.get(signum, 128 + int(signum))


def word(signum: int) -> str:
    return WORDS.get(signum, "interrupted")
