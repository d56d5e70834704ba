"""What a user sees while a command computes: the phase a run is in and a progress bar over the engine's
blocks, or a status line for the calibration fit; on stderr, only on a terminal, and never with --quiet
or --json."""

from __future__ import annotations

import sys

from mcflops.cli.signals import check_interrupt


class progress:
    """What a run shows on stderr while it computes: a phase line (a spinner, the phase, the time it has
    taken: "compiling", "analysing", "plotting") and, while the engine samples, a bar over its blocks;
    nothing at all off a terminal. The context gives a :class:`Bar`: call it as ``progress(done, total)``
    (the engine does, between blocks; it also stops the run there when a signal arrived, cli.signals),
    and name the next phase with ``bar.phase("compiling")``."""

    def __init__(self, quiet: bool, stream=None):
        self.stream = stream  # stderr unless given (a test's fake terminal)
        self.quiet = quiet or not (sys.stderr if stream is None else stream).isatty()
        self.bar = None

    def __enter__(self) -> Bar:
        self.bar = Bar(None if self.quiet else lambda: _live(self.stream))
        return self.bar

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


def _live(stream=None):
    """The rich display a :class:`Bar` draws into (on stderr unless ``stream`` is given), started."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    from rich.text import Text

    class When(ProgressColumn):
        """A column drawn only for a task with (``counted``) or without a count of blocks."""

        def __init__(self, column, counted: bool):
            super().__init__(column.get_table_column())
            self.column, self.counted = column, counted

        def render(self, task):
            return self.column(task) if (task.total is not None) == self.counted else Text("")

    console = Console(stderr=True) if stream is None else Console(file=stream, force_terminal=True)
    live = Progress(When(SpinnerColumn(), False), TextColumn("{task.description}"), When(BarColumn(), True),
                    When(MofNCompleteColumn(), True), When(TextColumn("blocks"), True),
                    When(TimeRemainingColumn(), True), When(TimeElapsedColumn(), False), console=console,
                    transient=True)
    live.start()
    return live


class Bar:
    """The callback of :class:`progress`: ``bar(done, total)`` between the engine's blocks, ``bar.phase(name)``
    between the stages of a run; each phase is a line of its own that replaces the one before. ``start``
    makes the display on first use (None: show nothing)."""

    def __init__(self, start=None):
        self.start, self.live, self.task, self.counting = start, None, None, False

    def _next(self, name: str, total: int | None) -> None:
        if self.live is None:
            self.live = self.start()
        if self.task is not None:
            self.live.update(self.task, visible=False)
        self.task, self.counting = self.live.add_task(name, total=total), total is not None

    def phase(self, name: str) -> None:
        check_interrupt()
        if self.start is not None:
            self._next(name, None)

    def __call__(self, done: int, total: int) -> None:
        check_interrupt()
        if self.start is None:
            return
        if not self.counting:
            self._next("sampling", total)
        self.live.update(self.task, completed=done, total=total)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


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
