"""The command line: argv -> the layers -> print and write (the only layer that writes files)."""

from mcflops.cli.args import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from mcflops.cli.main import main

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "main"]
