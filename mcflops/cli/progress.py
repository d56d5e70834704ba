"""What a user sees while a command computes: a progress bar over the engine's blocks, or a status line
for the calibration fit; on stderr, only on a terminal, and never with --quiet or --json."""

from __future__ import annotations

import sys

from mcflops.cli.signals import check_interrupt


class progress:
    """A rich progress bar on stderr for runs with several blocks (silent otherwise); the context gives
    the ``progress(done, total)`` callback the engine calls between blocks, which also stops the run
    there when a signal arrived (cli.signals)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet or not sys.stderr.isatty()
        self.bar = None
        self.task = None

    def __enter__(self):
        if self.quiet:
            return lambda done, total: check_interrupt()
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("sampling"), BarColumn(), MofNCompleteColumn(), TextColumn("blocks"),
                            TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self.bar.start()

        def update(done: int, total: int) -> None:
            check_interrupt()
            if self.task is None:
                self.task = self.bar.add_task("sampling", total=total)
            self.bar.update(self.task, completed=done)

        return update

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


class status:
    """A spinner with ``text`` on stderr while the block runs (no blocks to count: a NUTS fit)."""

    def __init__(self, quiet: bool, text: str):
        self.quiet, self.text, self.s = quiet, text, None

    def __enter__(self):
        if not self.quiet and sys.stderr.isatty():
            from rich.console import Console

            self.s = Console(stderr=True).status(self.text)
            self.s.start()

    def __exit__(self, *exc):
        if self.s is not None:
            self.s.stop()
        return False
