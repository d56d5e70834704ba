"""`compare` and `sensitivity` print tables that never cut a number: at a narrow terminal whole columns are
left out (and named in a dim line), and every number printed is one the wide terminal prints too, whole."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

import mcflops
from mcflops.cli.compare import show_compare
from mcflops.cli.sensitivity import show_sensitivity

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
WIDE = 250
STRIP = "()[]{},;:│┃║|"
NUMBER = re.compile(r"^[x+-]?\d[\d.,]*(?:e[+-]?\d+)?[KMBT%]?$")


def render(show, data, width: int) -> str:
    from rich.console import Console

    buf = io.StringIO()
    show(Console(file=buf, width=width, color_system=None, highlight=False), data)
    return buf.getvalue()


def numbers(text: str) -> list[str]:
    """The whitespace-separated tokens that read as numbers (0.3, 54.95K, x1.23, 52.9%), brackets stripped."""
    return [t for t in (tok.strip(STRIP) for tok in re.split(r"[\s│┃║=]+", text)) if NUMBER.match(t)]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("narrow")
    b = tmp / "a-much-longer-name-for-the-second-file.yaml"
    b.write_text(OK.read_text().replace("name: small", "name: small-on-a-larger-cluster-with-a-long-name")
                 .replace("mfu: {beta: [0.3, 0.5]", "mfu: {beta: [0.33, 0.52]"))
    cmp = mcflops.compare(str(OK), str(b), samples=4000)
    sens = mcflops.sensitivity(str(OK), samples=4000, sobol_samples=1024, sweeps=["mfu=0.3:0.45"], points=4)
    return {"compare": (show_compare, cmp), "sensitivity": (show_sensitivity, sens)}


@pytest.mark.parametrize("width", [80, 60])
@pytest.mark.parametrize("which", ["compare", "sensitivity"])
def test_no_number_is_cut_at_narrow_widths(results, which, width):
    show, data = results[which]
    narrow, wide = render(show, data, width), render(show, data, WIDE)
    assert "…" not in narrow and "..." not in narrow
    assert max(len(line) for line in narrow.splitlines()) <= width
    whole = set(numbers(wide))
    cut = [t for t in numbers(narrow) if t not in whole]
    assert not cut, cut  # a folded or clipped number would leave a fragment the wide print does not have
    assert "left out" not in wide


def test_compare_keeps_the_median_and_interval_and_names_what_it_drops(results):
    show, d = results["compare"]
    text = render(show, d, 60)
    # B's long name does not fit beside the numbers at 60 columns: each row is one "p5=..." paragraph
    assert "p5=" in text and "p50=" in text and "p95=" in text and "p25=" not in text
    assert "(p25, p75 left out at this width; --json has them)" in " ".join(text.split())
    r = d["ratio"]
    assert {f"{r[k]:.4g}" for k in ("p5", "p50", "p95")} <= set(numbers(text))


def test_sensitivity_drops_the_inputs_ends_first(results):
    show, d = results["sensitivity"]
    text = " ".join(render(show, d, 60).split())
    assert "(input p5, input p95 left out at this width;" in text
    for b in d["tornado"]["inputs"]:  # the swing, the tornado's answer, is kept
        assert f"{100 * b['swing_rel']:.1f}%" in text
    assert "p50 vs first" in " ".join(render(show, d, WIDE).split())


def test_compare_at_60_columns_from_the_command_line(results, tmp_path, monkeypatch, capsys):
    from mcflops import cli

    monkeypatch.setenv("COLUMNS", "60")
    b = tmp_path / "b.yaml"
    b.write_text(OK.read_text().replace("mfu: {beta: [0.3, 0.5]", "mfu: {beta: [0.33, 0.52]"))
    assert cli.main(["compare", str(OK), str(b), "--samples", "4000"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 60
