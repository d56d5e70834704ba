"""The report: Markdown and one self-contained HTML page, rendered from what a run produced (:class:`Run`).

Computation-free: everything comes from summary.json's content, the resolved spec and the figures (PNG).
`mcflops run` hands them over in process (:func:`pages`); ``mcflops report DIR`` reads them back from the
folder (:func:`load`: ``summary.json``, ``spec.resolved.yaml``, the PNGs), so it re-renders without sampling
(and without JAX).
Each section renders from whatever is present and says "not computed" for what is not; a new run (one
that observes nothing) has no section on the published figure. Each note is stated once (:func:`once`).
Sections are numbered in the order they appear (:func:`numbered`). This package returns strings; the CLI
writes them.

- :mod:`.blocks`: paragraphs, tables, figures; numbers in a reader's units
- :mod:`.planning`: the answers to the file's ``plan:`` block, when it has one
- :mod:`.ladder`: "MFU in context", the file's MFU prior beside published runs' (summary.json's ``mfu_context``)
- :mod:`.sections`: the headline, the napkin chain, the assumptions, reproducibility;
  :mod:`.posterior`: what the published figure implies; :mod:`.drivers`: what drives it (one share per input);
  :mod:`.appendix`: every variance table; :mod:`.priors`: a prior in words (a derived one by its quantiles)
- :mod:`.markup`: Markdown and HTML, with all escaping
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcflops import reading
from mcflops.report import appendix
from mcflops.report import drivers
from mcflops.report import ladder as ladder_section
from mcflops.report import layout as layout_section
from mcflops.report import planning
from mcflops.report import posterior
from mcflops.report import sections
from mcflops.report.blocks import HEADLINE_FIGURE, Document, Fig, Items, P, Section, caption, observes, used_figures
from mcflops.report.markup import md_escape, png_size, to_html, to_markdown
from mcflops.spec import Spec

FILES = ("report.md", "report.html")
_PNG = b"\x89PNG\r\n\x1a\n"


# ---- loading the folder -------------------------------------------------------------------------


@dataclass
class Run:
    """What the report reads of a run: summary.json's content, the resolved spec and the figures."""

    summary: dict[str, Any]
    spec: Spec | None  # None when spec.resolved.yaml is missing or unreadable (the assumptions section says so)
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
    return Run(summary, spec, figures_in(folder), label if label is not None else str(folder))


def figures_in(folder: str | Path) -> dict[str, bytes]:
    """The figures of ``folder``: PNG file name -> bytes, in name order (a file that is not a PNG is left out)."""
    figures = {}
    for p in sorted(Path(folder).glob("*.png")):
        data = p.read_bytes()
        if data.startswith(_PNG) and len(data) > 24:
            figures[p.name] = data
    return figures


def pages(run: Run) -> dict[str, str]:
    """{"report.md": ..., "report.html": ...} of ``run`` (nothing is written)."""
    doc = build(run)
    return {"report.md": to_markdown(doc), "report.html": to_html(doc)}


def render(folder: str | Path, label: str | None = None) -> dict[str, str]:
    """{"report.md": ..., "report.html": ...} for the run in ``folder`` (nothing is written)."""
    return pages(load(folder, label))


# ---- content ------------------------------------------------------------------------------------


def build(run: Run) -> Document:
    s = run.summary
    name = str(s.get("name", "run"))
    meta = (f"mcflops {s.get('version', '?')} · seed {s.get('seed', '?')} · "
            f"{_count(s.get('samples'))} draws · FLOPs convention {s.get('flops_convention', '?')} · "
            f"spec {s.get('spec_hash', '?')}")
    # the answer first, then the plan, then what drives it, then the assumptions; the rest of the variance
    # tables at the end (a reviewer's reading order)
    parts = [sections.headline(run), planning.planning(run)]  # planning: only when the file has a plan: block
    if observes(run):  # a new run has no published figure to speak of
        parts.append(posterior.implied(run))
    parts.append(ladder_section.context(run))  # the MFU prior beside published runs' (when the run computed it)
    lay = layout_section.layout(run)  # only when the MFU prior comes from a parallel layout
    parts += [drivers.drivers(run), lay, sections.napkin(run), sections.assumptions(run),
              sections.reproducibility(run), appendix.appendix(run)]
    parts = [p for p in parts if p is not None]
    in_appendix = any(p.id == "appendix" for p in parts)  # the Sobol figure is the appendix's when it has one
    rest = [n for n in run.figures if n not in used_figures(run) or (not in_appendix and "sobol" in n.lower())]
    if rest:
        parts.append(Section("figures", "Other figures", [Fig(n, run.figures[n], caption(n)) for n in rest]))
    return Document(f"{name}: training compute", str(s.get("description") or ""), meta, numbered(once(parts)))


UNNUMBERED = frozenset({"figures", "appendix"})  # appendix-like sections keep their bare title


def once(parts: list[Section]) -> list[Section]:
    """Each note stated once in the document: a note paragraph ("Note: ...") or a note in a list of notes that
    an earlier section already stated is dropped (the first place a note appears is the one it belongs to)."""
    seen: set[str] = set()

    def key(text: str) -> str:
        return " ".join(text.removeprefix("Note: ").split())

    for sec in parts:
        kept = []
        for b in sec.blocks:
            if isinstance(b, P) and b.cls == "note" and len(b.parts) == 1 and isinstance(b.parts[0], str):
                if key(b.parts[0]) in seen:
                    continue
                seen.add(key(b.parts[0]))
            elif isinstance(b, Items) and b.notes:
                items = [i for i in b.items if not (len(i) == 1 and key(str(i[0])) in seen)]
                seen.update(key(str(i[0])) for i in items if len(i) == 1)
                if not items:
                    if kept and isinstance(kept[-1], P):  # the list's lead-in ("... what to check:") goes too
                        kept.pop()
                    continue
                b = Items(items, b.ordered, notes=True)
            kept.append(b)
        sec.blocks = kept
    return parts


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


__all__ = ["render", "build", "load", "figures_in", "pages", "to_markdown", "to_html", "md_escape", "png_size", "Run", "Document",
           "Section", "FILES", "HEADLINE_FIGURE", "numbered", "observes", "once"]
