"""mcflops command line: parse the arguments, hand them to the command's module, and turn the ways a
command can stop early into one line and an exit code: bad input (SpecError, a flag's UsageError, exit 2), another run
writing the same folder (exit 2), and SIGINT or SIGTERM (exit 130 or 143, saying what was written)."""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Sequence

from mcflops import output
from mcflops.cli import signals
from mcflops.cli.args import EXIT_BAD_INPUT, build_parser
from mcflops.cli.session import Session
from mcflops.errors import SpecError, UsageError
from mcflops import diskcache

# command -> the module of mcflops.cli that runs it (its ``command(args)``), imported when used:
# `mcflops report` and `mcflops validate` never import JAX
COMMANDS = {"run": "run", "sample": "run", "validate": "validate", "schema": "validate", "report": "report",
            "sensitivity": "sensitivity", "plan": "plan", "compare": "compare", "calibrate": "calibrate", "arch": "arch",
            "watch": "watch", "ladder": "ladder"}


def main(argv: Sequence[str] | None = None) -> int:
    session = Session()  # this call's claimed folders, let go of when it ends however it ends
    with signals.interrupts():  # armed until main returns: a signal at any point stops it with one line
        try:
            signals.check_interrupt()  # one noted while the program loaded (signals.early): stop before starting
            rc = _main(argv, session)
            signals.check_interrupt()  # arrived after the last stage: still not a clean exit
            return rc
        except SpecError as e:
            print(f"mcflops: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except UsageError as e:  # an argument the commands handed to mcflops.api: named by its flag here
            print(f"mcflops: {e.as_flag()}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except KeyboardInterrupt as e:
            signum = getattr(e, "signum", None) or signals.received() or signal.SIGINT
            done = f" after writing {_listed(output.WRITTEN)}" if output.WRITTEN else "; nothing was written"
            print(f"mcflops: {signals.word(signum)}{done}", file=sys.stderr)
            return signals.exit_code(signum)
        finally:
            session.close()


def _listed(paths: list[str]) -> str:
    """Every file or folder this command replaced, in order: 'a', 'a and b', 'a, b and c'."""
    return paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + f" and {paths[-1]}"


def entry() -> None:
    """The `mcflops` program: ``main()``, then the process ends without tearing the interpreter down.

    Freeing every module and object of JAX, XLA and matplotlib at exit takes longer than many commands
    themselves; the operating system frees the memory anyway. The libraries' own exit handlers still run
    (``leave`` is registered first, so it runs last), and output is flushed. A ``SystemExit`` raised
    inside (argparse's --help, a bad option) or an uncaught error ends the ordinary way."""
    code: list[int | None] = [None]
    atexit.register(leave, code)
    if not sys.warnoptions:  # no -W / PYTHONWARNINGS: the user asked for none
        # NumPy's floating-point warnings (an overflow where a prior spans 27 orders of magnitude) are about
        # numbers the tables already show as n/a: on a user's terminal they are noise, not a message. Tests
        # call main(), so their warnings-as-errors still catch such a warning where it is raised.
        warnings.simplefilter("ignore", RuntimeWarning)
    code[0] = main()
    sys.exit(code[0])


def leave(code: list[int | None]) -> None:
    """At exit, after every other exit handler: flush and end the process with ``code[0]`` (when set),
    skipping the interpreter's finalization; where a flush fails, the ordinary exit reports it."""
    if code[0] is None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code[0])


def _main(argv: Sequence[str] | None, session: Session) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    output.WRITTEN.clear()  # this call's writes only (main may be called again in one process)
    if args.version:
        from mcflops._version import version

        print(f"mcflops {version()}")
        return 0
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    diskcache.use()  # priors' fits, tails and tables from earlier runs (a second validate imports no scipy)
    args.session = session
    return importlib.import_module(f"mcflops.cli.{COMMANDS[args.command]}").command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
