"""The report reads as a review: the answer first, each note once, a derived prior by its quantiles and its
recipe (never its mixture), numbers in a reader's units, every diagnostic in words.

The oracles: the committed reports under reports/ (test_report.py checks they are what this code renders),
their summary.json notes, and the quantile table that spec.resolved.yaml records beside a recipe (written by
mcflops.spec.resolved from the prior's own table, not by the report).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcflops import report
from mcflops.report.blocks import fmt
from mcflops.report.markup import md_escape

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = [ROOT / "reports" / n for n in ("llama405b", "llama405b-layout")]


def _notes(summary: dict) -> list[str]:
    """Every note summary.json holds for the report to state (the posterior's findings are stated in the
    posterior section's own words, not as notes)."""
    findings = set((summary.get("posterior") or {}).get("findings") or ())
    notes = [n for n in summary.get("notes") or () if n not in findings]
    notes += (summary.get("layout") or {}).get("notes") or []
    notes += (summary.get("sensitivity") or {}).get("notes") or []
    notes += (summary.get("plan") or {}).get("notes") or []
    return list(dict.fromkeys(notes))


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_each_note_appears_exactly_once(folder):
    if not folder.is_dir():
        pytest.skip(f"{folder} is not committed")
    md = (folder / "report.md").read_text()
    notes = _notes(json.loads((folder / "summary.json").read_text()))
    assert len(notes) >= 3  # the test has notes to count
    for note in notes:
        assert md.count(md_escape(note)) == 1, note


def test_a_layout_prior_is_its_quantiles_and_recipe_not_its_mixture():
    folder = ROOT / "reports" / "llama405b-layout"
    if not folder.is_dir():
        pytest.skip("reports/llama405b-layout is not committed")
    md = (folder / "report.md").read_text()
    assert "mixture(" not in md and "uniform(low=" not in md
    row = next(line for line in md.splitlines() if line.startswith("| `mfu` |"))
    assert "derived from the parallel layout (tp 8, pp 16, vpp 4, global batch 2,048)" in row
    # the quantile table spec.resolved.yaml records beside the recipe (p5, p50, p95), to the 3 digits shown
    text = (folder / "spec.resolved.yaml").read_text()
    table = dict(re.findall(r"p(\d+(?:\.\d+)?) ([0-9.]+)", text.split("mfu below is a recipe", 1)[1].split("mfu:")[0]))
    p5, p50, p95 = (100 * float(table[k]) for k in ("5", "50", "95"))
    assert f"median {p50:.1f}%, 90% {p5:.1f}–{p95:.1f}%" in row, row
    assert len(row) < 1200  # a table row, not a 1,000-pixel list (the whole mixture was 2,000+ characters)


def test_diagnostics_are_in_words():
    md = (ROOT / "reports" / "llama405b" / "report.md").read_text()
    row = next(line for line in md.splitlines() if "Pareto k-hat" in line)
    assert "importance-sampling reliability" in row and "reliable up to 0.70" in row
    k = json.loads((ROOT / "reports" / "llama405b" / "summary.json").read_text())["posterior"]["pareto_k"]
    assert f"reliable (k-hat {k:.2f})" in row  # the committed run's k-hat is under the threshold
    assert "±p50" not in md


@pytest.mark.parametrize("watts, shown", [(700, "700 W"), (1000, "1 kW"), (1200, "1.2 kW"), (999.6, "1 kW"),
                                          (450, "450 W"), (1500, "1.5 kW")])
def test_power_in_watts_and_kilowatts(watts, shown):
    assert fmt("power", watts) == shown


def test_a_fixed_input_reads_in_its_unit(tmp_path):
    from mcflops.report.priors import words
    from mcflops.priors.dist import Dist

    point = lambda v: Dist(family="point", params={"value": v})  # noqa: E731
    assert words("power", point(1000.0)) == "1 kW"
    assert words("peak_flops", point(2.25e15)) == "2,250 TFLOP/s"
    assert words("peak_flops", point(989.4e12)) == "989.4 TFLOP/s"
    assert words("params", point(70.55e9)) == "70.55B"
    assert "K" not in words("power", point(1000.0))


def test_report_order_is_answer_plan_drivers_assumptions(tmp_path):
    """With a plan: block the plan comes right after the headline, before what drives it and the assumptions."""
    s = {"name": "p", "plan": {"prob": 0.9, "deadline": {"days": 60, "gpus": 100}, "samples": 10, "seed": 0}}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    md = report.render(tmp_path)["report.md"]
    titles = re.findall(r"^## (.+)$", md, flags=re.M)
    assert [t.split(". ", 1)[1] for t in titles][:3] == ["Headline", "Planning: the file's plan: block",
                                                          "What drives it"]
    assert titles.index("5. Assumptions") > titles.index("3. What drives it")


@pytest.mark.parametrize("width, explained", [(120, True), (50, False)])
def test_the_terminal_explains_its_mcse_column_while_it_shows_it(width, explained):
    """`mcflops run`'s statistics table: the ±p50 column is explained under the table, and only while shown."""
    import io

    from rich.console import Console

    from mcflops.cli import tables

    stats = {"gpu_hours": {"mean": 3.33e7, "sd": 4.2e6, "p5": 2.71e7, "p25": 3.03e7, "p50": 3.29e7, "p75": 3.58e7,
                           "p95": 4.08e7, "mcse_p50": 1.6e4}}
    buf = io.StringIO()
    Console(file=buf, width=width).print(tables.stats_table("Prior predictive", stats, ["gpu_hours"]))
    text = " ".join(buf.getvalue().split())
    shown = tables.MCSE in text.split(" (")[0].split("gpu_hours")[0]  # the header, before the first row
    assert shown == explained
    assert (f"{tables.MCSE}: the Monte Carlo standard error of the median" in text) == explained


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_committed_share_table_is_one_row_per_uncertain_input(folder):
    """What drives it: one table, a row for each input the output depends on (summary.json's sensitivity
    inputs), each share its Shapley effect to the 1% shown, the shares adding up to at most 100% (+ rounding)."""
    from mcflops.report.blocks import label

    if not folder.is_dir():
        pytest.skip(f"{folder} is not committed")
    s = json.loads((folder / "summary.json").read_text())
    md = (folder / "report.md").read_text()
    drivers = md.split("## 3. What drives it", 1)[1].split("\n## ", 1)[0].split("### Sweeps")[0]
    tables = [b for b in drivers.split("\n\n") if b.startswith("| ")]
    assert len(tables) == 1  # one table (then the sweeps'); the Sobol and Shapley tables are the appendix's
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in tables[0].splitlines()[2:]]
    names = s["sensitivity"]["inputs"]
    assert sorted(r[0] for r in rows) == sorted(md_escape(label(n)) for n in names)
    shares = {r[0]: float(r[-1].rstrip("%")) for r in rows}
    for n in names:
        assert abs(shares[md_escape(label(n))] - 100 * s["sensitivity"]["shapley"][n]["effect"]) <= 0.5 + 1e-9, n
    assert 0 <= sum(shares.values()) <= 100 + 0.5 * len(shares)
    assert "Sobol" not in drivers.split("*Each uncertain input")[0] and "Shapley effect (" not in drivers
