"""Terminal pieces the commands' printouts share: rich tables that never cut a number, the summary-statistics
table of `run`, and a number the user gave, shown without padding zeros.

A number is never truncated: when a table is wider than the terminal, :class:`Fitted` leaves out whole
columns (in the order it is given, with a line that says which), and what still does not fit wraps (numeric
cells fold onto a second line, every digit kept) instead of ending in an ellipsis.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Sequence

from mcflops.numbers import format_number


def fmt(x, digits: int = 4) -> str:
    """format_number, or "n/a" where summary.json holds null (a NaN or inf statistic)."""
    return format_number(x, digits) if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


STATS = ("mean", "sd", "p5", "p25", "p50", "p75", "p95")  # the columns of the statistics table
MCSE = "±p50"  # its last column: the Monte Carlo standard error of the median
# what a narrow terminal loses first: the quartiles, then the Monte Carlo error, the mean and the sd; the
# median and the 90% interval stay
STATS_DROP = ("p25", "p75", MCSE, "mean", "sd")
QUARTILES = ("p25", "p75")

_SHORT = {"accelerator-hours": "h", "fraction": "", "USD/accelerator-hour": "$/h", "parameters": "",
          "tokens": "", "FLOP": "", "FLOP/s": "FLOP/s", "USD": "$", "ratio": ""}


def unpadded(x: float) -> str:
    """A number the user gave, without padding zeros: 90 -> '90', 1e7 -> '10M', 0.30 -> '0.3'."""
    return re.sub(r"\.?0+(?=[KMBT]?$)", "", fmt(x)) if "." in fmt(x) else fmt(x)


def table(title: str, cols: list[str]):
    """A rich table with a bold header, the first column left-aligned and the others right-aligned; a cell
    too wide for its column wraps (folds) instead of being cut."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold")
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
    return t


class Fitted:
    """A rich table that fits the console: columns named in ``drop`` are left out, in that order, until the
    table's natural width fits, and a dim line names them. Print it with ``console.print``."""

    def __init__(self, table, drop: Sequence[str] = QUARTILES, where: str = "--json",
                 legend: dict[str, str] | None = None):
        self.table, self.drop, self.where = table, tuple(drop), where
        self.legend = dict(legend or {})  # column -> what it means: a dim line under the table while it is shown

    def __rich_console__(self, console, options):
        from rich.measure import Measurement
        from rich.text import Text

        t, gone = self.table, []
        wide = options.update_width(1 << 16)
        for name in self.drop:
            if Measurement.get(console, wide, t).maximum <= options.max_width:
                break
            if any(str(c.header) == name for c in t.columns):
                t = _without(t, name)
                gone.append(name)
        if Measurement.get(console, wide, t).minimum > options.max_width:
            yield from _stacked(t)  # rich would squeeze a column to nothing: one wrapped line per row instead
        else:
            yield t
        if gone:
            yield Text(f"  ({', '.join(gone)} left out at this width; {self.where} has them)", style="dim")
        for name, text in self.legend.items():
            if name not in gone:
                yield Text(f"  {name}: {text}", style="dim")


def _stacked(t):
    """Each row of rich table ``t`` as one paragraph, ``header=value`` pairs that wrap between pairs (a number
    stays on one line)."""
    from rich.text import Text

    if t.title:
        yield Text.from_markup(str(t.title), style="italic")
    cells = [[Text.from_markup(c) if isinstance(c, str) else Text(str(c)) for c in col._cells] for col in t.columns]
    for i in range(t.row_count):
        line = Text(" ").append(cells[0][i].copy().plain, style="bold")
        for col, column in zip(cells[1:], t.columns[1:]):
            line.append(f" {column.header}=").append(col[i].plain)
        yield line


def _without(t, header: str):
    """A shallow copy of rich table ``t`` without the column headed ``header`` (its cells go with it)."""
    out = copy.copy(t)
    out.columns = [c for c in t.columns if str(c.header) != header]
    return out


def _unit(name: str) -> str:
    from mcflops.spec import INPUTS, OUTPUTS

    unit = OUTPUTS[name][0] if name in OUTPUTS else INPUTS.get(name, ("", "", "", ""))[2]
    return _SHORT.get(unit, unit)


def stats_table(title: str, stats: dict[str, dict[str, Any]], names) -> Fitted:
    """Mean, sd, quantiles and the Monte Carlo error of the median of each quantity in ``names`` (those
    ``stats`` has), fitted to the terminal (see :class:`Fitted`)."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("quantity", overflow="fold")
    for c in STATS:
        t.add_column(c, justify="right", overflow="fold")
    t.add_column(MCSE, justify="right", style="dim", overflow="fold")
    for n in names:
        s = stats.get(n)
        if not isinstance(s, dict) or "p50" not in s:
            continue
        unit = _unit(n)
        t.add_row(n + (f" [dim]{unit}[/dim]" if unit else ""), *(fmt(s[c], 3) for c in STATS),
                  fmt(s.get("mcse_p50", 0.0), 2))
    return Fitted(t, STATS_DROP, "summary.json", legend={MCSE: "the Monte Carlo standard error of the median "
                                                              "(sampling noise, not uncertainty)"})


HEADLINE = ("gpu_hours", "wall_days", "cost")  # what the terminal's headline states (those the run has)


def headline_lines(data: dict[str, Any]) -> list[str]:
    """The answer first, as rich markup, one line per quantity (GPU-hours, days, cost: median and 90%
    interval): the posterior when the run is conditioned on a figure and its posterior passed its checks,
    with the prior predictive beside it; else the prior predictive, said to be the priors alone when nothing
    is observed."""
    prior, post = data.get("prior") or {}, data.get("posterior") or {}
    failed = isinstance(post.get("checks"), dict) and post["checks"].get("passed") is False

    def stated(block, n: str) -> str | None:
        s = block.get(n)
        if isinstance(s, dict) and all(isinstance(s.get(k), (int, float)) for k in ("p5", "p50", "p95")):
            return f"{fmt(s['p50'], 3)} ({fmt(s['p5'], 3)} to {fmt(s['p95'], 3)})"
        return None

    lead = post if stated(post, "gpu_hours") and not failed else prior
    names = [n for n in HEADLINE if stated(lead, n)]
    if not names:
        return []
    if lead is post:
        head = "[bold]Posterior[/bold], given the published figure: median (90%)"
    elif data.get("observed") or post:
        head = "[bold]Prior predictive[/bold]: median (90%)"
    else:
        head = "[bold]Prior predictive[/bold], nothing observed: median (90%)"
    width = max(len(stated(lead, n)) for n in names)
    lines = [head]
    for n in names:
        line = f"  {n:<10} {stated(lead, n):<{width}}"
        if lead is post and stated(prior, n):
            line += f"   [dim]prior {stated(prior, n)}[/dim]"
        lines.append(line)
    return lines
