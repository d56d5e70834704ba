"""Ctrl-C (SIGINT) and SIGTERM for the length of a command: the handler only sets a flag, and the command
stops at its next stage (between the engine's blocks, between the files of a run folder, before the
swap, at its end) with `Interrupted`; main turns that into exit 130 or 143 and one line.

A flag, not Python's KeyboardInterrupt raised wherever the main thread happens to be: one that lands in a
garbage-collection callback of JAX's is printed as "Exception ignored" and lost (the run would go on and
replace the report), and one that lands inside a cleanup leaves debris. A second signal while the first is
pending raises at once (a stage with no check in it, a NUTS fit, can then still be stopped).
"""

from __future__ import annotations

import signal

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}  # 128 + the signal's number, as a shell reports it
WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

_RECEIVED: list[int] = []  # the signals received during this command, in order


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
        _RECEIVED.clear()
        self.previous: dict[int, object] = {}
        for sig in EXIT_CODES:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue
            try:
                self.previous[sig] = signal.signal(sig, _handler)
            except ValueError:  # not the main thread
                break
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        _RECEIVED.clear()
        return False


def _handler(signum, frame):
    first = not _RECEIVED
    _RECEIVED.append(signum)
    if not first:  # asked twice: stop now, wherever it is
        raise Interrupted(_RECEIVED[0])


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
