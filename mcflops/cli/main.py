"""mcflops command line: parse the arguments, hand them to the command's module, and turn the two
ways a command can stop early into one line and an exit code: bad input (SpecError, exit 2) and
Ctrl-C (exit 130, saying what was written)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from mcflops.cli import write
from mcflops.cli.args import EXIT_BAD_INPUT, EXIT_INTERRUPTED, build_parser
from mcflops.cli.progress import interrupts
from mcflops.errors import SpecError

# command -> the module of mcflops.cli that runs it (its ``command(args)``), imported when used:
# `mcflops report` and `mcflops validate` never import JAX
COMMANDS = {"run": "run", "sample": "run", "validate": "validate", "schema": "validate", "report": "report",
            "sensitivity": "sensitivity", "plan": "plan", "compare": "compare", "calibrate": "calibrate", "arch": "arch",
            "watch": "watch"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    write.WRITTEN.clear()  # this call's writes only (main may be called again in one process)
    if args.version:
        from mcflops._version import version

        print(f"mcflops {version()}")
        return 0
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        with interrupts():
            return importlib.import_module(f"mcflops.cli.{COMMANDS[args.command]}").command(args)
    except SpecError as e:
        print(f"mcflops: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        done = f"after writing {write.WRITTEN[-1]}" if write.WRITTEN else "; nothing was written"
        print(f"mcflops: interrupted{' ' if write.WRITTEN else ''}{done}", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
