"""The command line: argv -> the layers -> print and write (the only layer that writes files).

main.py parses and dispatches to one module per command: run.py (run, sample), validate.py (validate,
schema), report.py, sensitivity.py, plan.py, compare.py, calibrate.py, watch.py (re-runs on each save).
Each computes through the layers below and prints; write.py writes every file, figures.py says which
figures each output gets. Shared: args.py (the parser), session.py (JAX set-up, the printing process),
progress.py, tables.py.
"""

from mcflops.cli.args import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from mcflops.cli.main import main

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "main"]
