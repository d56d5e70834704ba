"""The report: Markdown and one self-contained HTML page, rendered from a run's output folder.

Computation-free: everything comes from ``summary.json``, ``spec.resolved.yaml`` and the figures
(PNG) in the folder, so ``mcflops report DIR`` re-renders without sampling (and without JAX).
Each section renders from whatever is present and says "not computed" for what is not; a new run (one
that observes nothing) has no section on the published figure. Sections are numbered in the order they
appear (:func:`numbered`). This package returns strings; the CLI writes them.

- :mod:`.blocks`: paragraphs, tables, figures; numbers in a reader's units
- :mod:`.planning`: the answers to the file's ``plan:`` block, when it has one
- :mod:`.sections`: the headline, the napkin chain, the assumptions, reproducibility;
  :mod:`.posterior`: what the published figure implies; :mod:`.drivers`: what drives it
- :mod:`.markup`: Markdown and HTML, with all escaping
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcflops import reading
from mcflops.report import drivers
from mcflops.report import layout as layout_section
from mcflops.report import planning
from mcflops.report import posterior
from mcflops.report import sections
from mcflops.report.blocks import HEADLINE_FIGURE, Document, Fig, Section, caption, observes, used_figures
from mcflops.report.markup import md_escape, png_size, to_html, to_markdown

FILES = ("report.md", "report.html")
_PNG = b"\x89PNG\r\n\x1a\n"


# ---- loading the folder -------------------------------------------------------------------------


@dataclass
class Run:
    """What the report reads from an output folder."""

    summary: dict[str, Any]
    spec: Any | None  # mcflops.spec.Spec from spec.resolved.yaml, or None when it is missing or unreadable
    figures: dict[str, bytes]  # PNG file name -> bytes (valid PNGs only)
    label: str  # how the folder is named in the regenerate command


def load(folder: str | Path, label: str | None = None) -> Run:
    """Read summary.json (required), the resolved prior file and the PNGs of ``folder``."""
    from mcflops.errors import SpecError

    folder = Path(folder)
    summary = reading.read_summary(folder)
    spec = None
    resolved = folder / "spec.resolved.yaml"
    if resolved.is_file():
        from mcflops.spec import load_spec

        try:
            spec = load_spec(resolved)
        except SpecError:
            spec = None  # the assumptions section then says so
    figures = {}
    for p in sorted(folder.glob("*.png")):
        data = p.read_bytes()
        if data.startswith(_PNG) and len(data) > 24:
            figures[p.name] = data
    return Run(summary, spec, figures, label if label is not None else str(folder))


def render(folder: str | Path, label: str | None = None) -> dict[str, str]:
    """{"report.md": ..., "report.html": ...} for the run in ``folder`` (nothing is written)."""
    doc = build(load(folder, label))
    return {"report.md": to_markdown(doc), "report.html": to_html(doc)}


# ---- content ------------------------------------------------------------------------------------


def build(run: Run) -> Document:
    s = run.summary
    name = str(s.get("name", "run"))
    meta = (f"mcflops {s.get('version', '?')} · seed {s.get('seed', '?')} · "
            f"{_count(s.get('samples'))} draws · FLOPs convention {s.get('flops_convention', '?')} · "
            f"spec {s.get('spec_hash', '?')}")
    parts = [sections.headline(run), sections.napkin(run)]
    if observes(run):  # a new run has no published figure to speak of
        parts.append(posterior.implied(run))
    plan = planning.planning(run)  # only when the file has a plan: block
    lay = layout_section.layout(run)  # only when the MFU prior comes from a parallel layout
    parts += [*([lay] if lay is not None else []), drivers.drivers(run), *([plan] if plan is not None else []),
              sections.assumptions(run),
              sections.reproducibility(run)]
    rest = [n for n in run.figures if n not in used_figures(run)]
    if rest:
        parts.append(Section("figures", "Other figures", [Fig(n, run.figures[n], caption(n)) for n in rest]))
    return Document(f"{name}: training compute", str(s.get("description") or ""), meta, numbered(parts))


UNNUMBERED = frozenset({"figures"})  # appendix-like sections keep their bare title


def numbered(parts: list[Section]) -> list[Section]:
    """Number the sections 1, 2, 3, ... in the order they appear (a section left out leaves no gap)."""
    i = 0
    for sec in parts:
        if sec.id not in UNNUMBERED:
            i += 1
            sec.title = f"{i}. {sec.title}"
    return parts


def _count(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


__all__ = ["render", "build", "load", "to_markdown", "to_html", "md_escape", "png_size", "Run", "Document",
           "Section", "FILES", "HEADLINE_FIGURE", "numbered", "observes"]
