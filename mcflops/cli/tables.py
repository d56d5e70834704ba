"""Terminal pieces the commands' printouts share: a rich table, and a number the user gave, shown
without padding zeros."""

from __future__ import annotations

import re

from mcflops.numbers import format_number as fmt


def unpadded(x: float) -> str:
    """A number the user gave, without padding zeros: 90 -> '90', 1e7 -> '10M', 0.30 -> '0.3'."""
    return re.sub(r"\.?0+(?=[KMBT]?$)", "", fmt(x)) if "." in fmt(x) else fmt(x)


def table(title: str, cols: list[str]):
    """A rich table with a bold header, the first column left-aligned and the others right-aligned."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold")
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right")
    return t
