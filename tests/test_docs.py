"""The README and docs/ say what the code does: the README stays short, every relative link leads to a file
of the repository, the prior files they show load (the README's own run also runs), and every command the
README's table names exists."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ("prior-file.md", "layout.md", "analysis.md", "calibration.md", "api.md", "internals.md")
PAGES = [README] + [ROOT / "docs" / name for name in DOCS]

FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[ \t]*$", flags=re.S | re.M)
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _prose(text: str) -> str:
    """Markdown without its fenced blocks and inline code, where a `[x](y)` is code, not a link."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def _relative(target: str) -> bool:
    return not re.match(r"(https?|mailto):", target) and not target.startswith("#")


def _section(text: str, heading: str) -> str:
    """The text under a `## heading`, up to the next `## `."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert m, f"README.md has no '## {heading}' section"
    return m.group(1)


def _yaml_blocks(text: str) -> list[str]:
    """Every ```yaml block, those indented in a list item too (dedented)."""
    return [textwrap.dedent(b) for b in re.findall(r"^[ \t]*```yaml\n(.*?)^[ \t]*```", text, flags=re.S | re.M)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (`_` and `-` kept), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move reference material to docs/"


def test_docs_exist_and_the_readme_links_each():
    linked = {(README.parent / t.split("#")[0]).resolve() for t in _links(README) if _relative(t)}
    for page in PAGES[1:]:
        assert page.is_file(), f"{page.relative_to(ROOT)} is missing"
        assert page.resolve() in linked, f"README.md does not link {page.relative_to(ROOT)}"


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda p: p.name)
def test_docs_page_opens_with_its_title_and_what_it_covers(page):
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# ") and len(lines[0]) > 2, f"{page.name}: line 1 is not a title"
    assert lines[1] == "" and lines[2] and not lines[2].startswith("#") and lines[3] == "", \
        f"{page.name}: line 3 should be one line saying what the page covers"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_to_files(page):
    links = [t for t in _links(page) if _relative(t)]
    if page == README:
        assert len(links) >= len(DOCS), "README.md should link every docs page"
    for target in links:
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT), f"{page.name}: {target} leaves the repository"
        assert path.exists(), f"{page.name}: {target} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_anchors_into_markdown_name_a_heading(page):
    for target in _links(page):
        if not _relative(target) or "#" not in target:
            continue
        file, anchor = target.split("#", 1)
        path = (page.parent / file).resolve() if file else page
        if path.suffix != ".md":
            continue
        headings = [m.group(1) for m in re.finditer(r"^#+ (.*)$", FENCE.sub("", path.read_text()), flags=re.M)]
        assert anchor in {_slug(h) for h in headings}, f"{page.name}: {target}: no heading with that anchor"


def test_readme_own_run_loads_and_runs(tmp_path):
    import mcflops
    from mcflops.spec import load_spec

    blocks = _yaml_blocks(_section(README.read_text(), "Your own run"))
    assert len(blocks) == 1, "the 'Your own run' section shows one prior file"
    path = tmp_path / "my-run.yaml"
    path.write_text(blocks[0])
    spec = load_spec(path)
    for name in ("tokens", "mfu", "goodput"):
        assert spec.priors[name].family != "point", f"{name} should be uncertain in the example"
        assert spec.priors[name].source, f"the example's {name} prior has no source:"
    d = mcflops.run(path, samples=20_000).to_dict()
    p50 = d["prior"]["gpu_hours"]["p50"]
    assert isinstance(p50, float) and math.isfinite(p50) and p50 > 0
    # the figures the README quotes for it, at the precision it writes them: each is within half a unit of
    # its last digit (5.2M: +-0.05M), far more than their Monte Carlo error at 20,000 draws (the median
    # GPU-hours' 0.2%, the plan's count about 0.5%)
    text = " ".join(_section(README.read_text(), "Your own run").split())
    quoted = {"p50": 5.2e6, "p5": 3.9e6, "p95": 7.5e6, "days": 53, "gpus": 3200}
    assert ("a median of about 5.2M GPU-hours (90%: 3.9M to 7.5M), 53 days" in text
            and "about 3,200 H100s" in text), "the README's quoted figures changed: update this test with them"
    gh = d["prior"]["gpu_hours"]
    for k, unit in (("p50", 0.05e6), ("p5", 0.05e6), ("p95", 0.05e6)):
        assert abs(gh[k] - quoted[k]) <= unit, (k, gh[k])
    assert abs(d["prior"]["wall_days"]["p50"] - quoted["days"]) <= 0.5
    assert abs(d["plan"]["deadline"]["gpus"] - quoted["gpus"]) <= 50  # "about 3,200": two digits


def test_docs_prior_files_load(tmp_path):
    """Every whole prior file shown in docs/ (a top-level name: and priors:) loads. A block that reads another
    file (hf_config:, relative_to:) is skipped: the file it names is not beside the copy."""
    from mcflops.spec import load_spec

    checked = []
    for page in PAGES[1:]:
        for i, block in enumerate(_yaml_blocks(page.read_text())):
            if not (re.search(r"^name:", block, flags=re.M) and re.search(r"^priors:", block, flags=re.M)):
                continue  # a fragment (one block of a file), not a prior file
            if "hf_config:" in block or "relative_to:" in block:
                continue
            path = tmp_path / f"{page.stem}-{i}.yaml"
            path.write_text(block)
            load_spec(path)  # a SpecError names the block's copy and its line
            checked.append(path.name)
    assert checked, "docs/ should show at least one whole prior file (docs/prior-file.md)"


def _table_commands() -> list[str]:
    text = _section(README.read_text(), "What `mcflops run` shows")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return sorted({"run"} | {m for row in rows for m in re.findall(r"`mcflops ([a-z]+)", row)})


COMMANDS = _table_commands()


def test_readme_table_names_the_commands():
    assert {"run", "sample", "sensitivity", "plan", "compare", "report", "calibrate", "validate", "schema",
            "watch"} <= set(COMMANDS), COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_exists(command):
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-m", "mcflops.cli", command, "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"mcflops {command} --help: exit {out.returncode}\n{out.stderr}"
    assert f"usage: mcflops {command}" in out.stdout, out.stdout[:200]
