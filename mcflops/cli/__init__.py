"""The command line: argv -> the layers -> print and write (through mcflops.output, the only writer).

main.py parses and dispatches to one module per command: run.py (run, sample), validate.py (validate,
schema), report.py, sensitivity.py, plan.py, compare.py, calibrate.py, watch.py (re-runs on each save). Each computes through the layers
below, prints, and writes through mcflops.output. Shared: args.py (the parser), session.py (JAX set-up,
the printing process, the output folder's lock), signals.py (SIGINT and SIGTERM), progress.py, tables.py.
"""

from mcflops.cli import signals

signals.early()  # the program's Ctrl-C while the modules below load (imports only signal) is noted, not a traceback

from mcflops.cli.args import EXIT_BAD_INPUT, EXIT_INTERRUPTED  # noqa: E402
from mcflops.cli.main import entry, main  # noqa: E402

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "entry", "main"]
