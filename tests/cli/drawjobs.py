"""Figures for the drawing-process tests (tests/cli/test_drawserve.py): plain functions that the drawing
process imports by name, as it imports plots/ modules, without matplotlib's cost per figure."""

from __future__ import annotations

import os
import time
from pathlib import Path


def stamp(path, index: int, pause: float = 0.0) -> str:
    """Write "<index> <pid>" at ``path``: which job it is and which process drew it."""
    time.sleep(pause)
    Path(path).write_text(f"{index} {os.getpid()}")
    return str(path)


def die_once(path, marker: str) -> str:
    """End the process that draws it the first time (``marker`` then exists); write "ok" the next."""
    if not os.path.exists(marker):
        Path(marker).write_text("")
        os._exit(3)
    Path(path).write_text(f"ok {os.getpid()}")
    return str(path)


def fail(path) -> str:
    raise ValueError("no such figure")
