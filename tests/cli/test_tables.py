"""Terminal tables never cut a number: at a narrow terminal whole columns are left out (and named), and
what is printed is every digit of the value. Each printed number is parsed back and compared with
summary.json's value to the precision it was printed at (3 significant digits: relative error at most
0.5e-2; the Monte Carlo error's 2 digits: 0.5e-1)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from mcflops import cli
from mcflops.cli import tables

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
NUMBER = re.compile(r"^-?\d+(\.\d+)?(e-?\d+)?[KMBT]?$")


def parse(text: str) -> float:
    assert NUMBER.match(text), text
    suffix = text[-1] if text[-1] in "KMBT" else ""
    return float(text[: len(text) - len(suffix)]) * SCALE[suffix]


def close(printed: str, value: float, digits: int) -> bool:
    x = parse(printed)
    return abs(x - value) <= 0.5 * 10 ** (1 - digits) * abs(value) * (1 + 1e-9) + 1e-300


def blocks(out: str, title: str) -> tuple[list[str], list[list[str]], str]:
    """(header, rows of cells, the note under the table) of the statistics table titled ``title``."""
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if re.match(re.escape(title) + r"(\s*$| \()", line))  # not the headline
    j = next(k for k in range(i, len(lines)) if lines[k].strip().startswith("quantity"))
    header = lines[j].split()
    rows = []
    k = j + 2  # past the rule
    while lines[k].strip():
        tokens = lines[k].split()
        rows.append([tokens[0], *tokens[len(tokens) - (len(header) - 1):]])
        k += 1
    note = []
    for line in lines[k + 1:]:
        if not line.strip():
            break
        note.append(line.strip())
    return header, rows, " ".join(note)


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """`mcflops run` printed at 80 and 60 columns (a pipe told its width by COLUMNS, as a terminal is)."""
    tmp = tmp_path_factory.mktemp("tables")
    out = {}
    mp = pytest.MonkeyPatch()
    try:
        for width in (80, 60):
            mp.setenv("COLUMNS", str(width))
            buf = io.StringIO()
            mp.setattr("sys.stdout", buf)
            assert cli.main(["run", str(OK), "--out", str(tmp / f"r{width}"), "--quiet"]) == 0
            out[width] = (buf.getvalue(), json.loads((tmp / f"r{width}" / "summary.json").read_text()))
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("title,key", [("Prior predictive", "prior"), ("Posterior", "posterior")])
def test_every_printed_number_is_whole(printed, width, title, key):
    out, summary = printed[width]
    assert "…" not in out and "..." not in out
    assert max(len(line) for line in out.splitlines()) <= width
    header, rows, after = blocks(out, title)
    assert header[0] == "quantity" and {"p5", "p50", "p95"} <= set(header), header
    gone = [c for c in (*tables.STATS, tables.MCSE) if c not in header]
    assert gone, f"at {width} columns the full table does not fit: some column must be left out"
    assert set(gone) <= set(tables.STATS_DROP)
    assert after.startswith(f"({', '.join(c for c in tables.STATS_DROP if c in gone)} left out at this width;")
    stats = summary[key]
    assert {r[0] for r in rows} == {n for n in stats if isinstance(stats[n], dict) and "p50" in stats[n]} & \
        {r[0] for r in rows} and len(rows) >= 5
    for name, *cells in rows:
        for col, cell in zip(header[1:], cells):
            if col == tables.MCSE:
                assert close(cell, stats[name]["mcse_p50"], 2), (name, col, cell)
            else:
                assert close(cell, stats[name][col], 3), (name, col, cell, stats[name][col])


def test_wide_terminal_keeps_every_column(tmp_path):
    from rich.console import Console

    stats = {"gpu_hours": {"mean": 3.33e7, "sd": 4.2e6, "p5": 2.71e7, "p25": 3.03e7, "p50": 3.29e7, "p75": 3.58e7,
                           "p95": 4.08e7, "mcse_p50": 1.6e4}}
    buf = io.StringIO()
    Console(file=buf, width=120).print(tables.stats_table("Prior predictive", stats, ["gpu_hours"]))
    text = buf.getvalue()
    assert "left out" not in text
    assert text.split()[2:11] == ["quantity", *tables.STATS, tables.MCSE]


@pytest.mark.parametrize("width", [24, 30, 40])
def test_tables_too_narrow_for_any_column_wrap_and_keep_every_digit(width):
    """Below what even the kept columns need, cells fold onto further lines: the digits are all there."""
    from rich.console import Console

    values = ["3.87e25", "405.85B", "0.000123", "16,384", "123456789"]
    t = tables.table("t", ["name", "a", "b", "c", "d", "e"])
    t.add_row("row", *values)
    buf = io.StringIO()
    Console(file=buf, width=width).print(tables.Fitted(t, drop=()))
    text = buf.getvalue()
    assert "…" not in text
    digits = sorted(ch for ch in text if ch.isdigit())
    assert digits == sorted(ch for ch in "".join(values) if ch.isdigit())


# ---- the terminal's headline ----------------------------------------------------------------------------


def _headline(out: str) -> list[str]:
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(("Posterior, given", "Prior predictive:", "Prior predictive,")))
    block = [lines[i]]
    for line in lines[i + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    return block


@pytest.mark.parametrize("width", [80, 60])
def test_terminal_headline_is_the_posterior(printed, width):
    out, summary = printed[width]
    block = _headline(out)
    assert block[0] == "Posterior, given the published figure: median (90%)"
    assert out.index("Posterior, given") < out.index("Prior predictive")  # before the tables
    row = next(line for line in block if line.split()[0] == "gpu_hours").split()
    post, prior = summary["posterior"]["gpu_hours"], summary["prior"]["gpu_hours"]
    assert close(row[1], post["p50"], 3) and close(row[2].strip("("), post["p5"], 3) and close(row[4].strip(")"), post["p95"], 3)
    assert row[5] == "prior" and close(row[6], prior["p50"], 3)


def test_terminal_headline_of_a_new_run_and_of_a_failed_posterior():
    prior = {n: {"p5": 1.0e6, "p50": 2.0e6, "p95": 3.0e6} for n in ("gpu_hours", "wall_days")}
    new = tables.headline_lines({"prior": prior})
    assert new[0] == "[bold]Prior predictive[/bold], nothing observed: median (90%)"
    assert [line.split()[:2] for line in new[1:]] == [["gpu_hours", "2.00M"], ["wall_days", "2.00M"]]
    failed = {"prior": prior, "observed": {"gpu_hours": {"value": 2.5e6}},
              "posterior": {"gpu_hours": {"p5": 2.4e6, "p50": 2.5e6, "p95": 2.6e6}, "checks": {"passed": False}}}
    lines = tables.headline_lines(failed)
    assert lines[0] == "[bold]Prior predictive[/bold]: median (90%)" and "2.50M" not in " ".join(lines)
