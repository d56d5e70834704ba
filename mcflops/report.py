"""The report: Markdown and one self-contained HTML page, rendered from a run's output folder.

Computation-free: everything comes from ``summary.json``, ``spec.resolved.yaml`` and the figures
(PNG) in the folder, so ``mcflops report DIR`` re-renders without sampling (and without JAX).
Each section renders from whatever is present and says "not computed" for what is not.

Content is built once as plain blocks (paragraphs, tables, figures); two renderers turn the blocks
into Markdown and HTML. All text from prior files (name, description, source) and from summary.json
is escaped by the renderers: nothing a prior file says becomes markup. This module returns
strings; the CLI writes them.
"""

from __future__ import annotations

import base64
import html
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import report_content as T
from .report_content import HEADLINE_FIGURE, B, Box, C, Document, Fig, Items, P, Section, Sub, Table

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
    from .errors import SpecError

    folder = Path(folder)
    path = folder / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError("no summary.json here: not a run folder (make one with `mcflops run FILE`)",
                        path=str(folder)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SpecError(f"cannot read summary.json: {e}", path=str(path)) from None
    if not isinstance(summary, dict):
        raise SpecError("summary.json is not a JSON object", path=str(path))
    spec = None
    resolved = folder / "spec.resolved.yaml"
    if resolved.is_file():
        from .spec import load_spec

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
    sections = [T.headline(run), T.napkin(run), T.implied(run), T.drivers(run), T.assumptions(run),
                T.reproducibility(run)]
    rest = [n for n in run.figures if n not in T.used_figures(run)]
    if rest:
        sections.append(Section("figures", "Other figures", [Fig(n, run.figures[n], T.caption(n)) for n in rest]))
    return Document(f"{name}: training compute", str(s.get("description") or ""), meta, sections)


def _count(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


# ---- Markdown -----------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~#!])")


def md_escape(text: Any) -> str:
    """Plain text for Markdown: one line, every character CommonMark could read as markup escaped."""
    return _MD_SPECIAL.sub(r"\\\1", re.sub(r"\s+", " ", str(text)))


def _md_start(line: str) -> str:
    """Escape a line start that would open a list, a thematic break or a code block (CommonMark 4.1, 5.2)."""
    line = line.lstrip(" ")
    if re.match(r"^[-+](\s|$)", line) or re.match(r"^(-\s*){3,}$", line):
        return "\\" + line
    return re.sub(r"^(\d{1,9})([.)])(?=\s|$)", r"\1\\\2", line)


def _md_inline(parts: Any, start: bool = True) -> str:
    """Inline parts as one Markdown line; ``start``: the line begins a block (a paragraph, a list item)."""
    if isinstance(parts, str):
        parts = [parts]
    out = []
    for p in parts:
        if isinstance(p, C):
            t = " ".join(str(p).split())
            fence = "`" * (max((len(m) for m in re.findall(r"`+", t)), default=0) + 1)
            out.append(f"{fence} {t} {fence}" if "`" in t else f"`{t}`")
        elif isinstance(p, B):
            out.append(f"**{md_escape(p).strip()}**")
        else:
            out.append(md_escape(p))
    line = "".join(out)
    return _md_start(line) if start else line.strip()


def _md_block(b: Any) -> str:
    if isinstance(b, P):
        text = _md_inline(b.parts)
        if b.cls == "quote":
            return "> " + text
        if b.cls == "missing":
            return f"*{text}*"
        return text
    if isinstance(b, Sub):
        return "### " + md_escape(b.title)
    if isinstance(b, Items):
        return "\n".join(f"{i + 1}. " + _md_inline(it) if b.ordered else "- " + _md_inline(it)
                         for i, it in enumerate(b.items))
    if isinstance(b, Table):
        head = "| " + " | ".join(md_escape(h) for h in b.header) + " |"
        rule = "|" + "|".join("---:" if i in b.num else "---" for i in range(len(b.header))) + "|"
        rows = ["| " + " | ".join(_md_inline(c, start=False) for c in r) + " |" for r in b.rows]
        cap = [f"*{md_escape(b.caption)}*", ""] if b.caption else []
        return "\n".join([*cap, head, rule, *rows])
    if isinstance(b, Fig):
        return f"![{md_escape(b.caption)}]({quote(b.name)})\n\n*{md_escape(b.caption)}*"
    if isinstance(b, Box):
        return "\n\n".join(_md_block(x) for x in b.blocks)
    raise TypeError(f"unknown block {b!r}")


def to_markdown(doc: Document) -> str:
    out = [f"# {md_escape(doc.title)}", ""]
    if doc.description:
        out += [md_escape(doc.description), ""]
    out += [f"*{md_escape(doc.meta)}*", ""]
    for sec in doc.sections:
        out += [f"## {md_escape(sec.title)}", ""]
        for b in sec.blocks:
            out += [_md_block(b), ""]
    out.append("*Figures are the PNG files next to this file; report.html embeds them.*")
    return "\n".join(out) + "\n"


# ---- HTML ---------------------------------------------------------------------------------------

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _html_inline(parts: Any) -> str:
    if isinstance(parts, str):
        parts = [parts]
    out = []
    for p in parts:
        if isinstance(p, C):
            out.append(f"<code>{_e(p)}</code>")
        elif isinstance(p, B):
            out.append(f"<strong>{_e(p)}</strong>")
        else:
            out.append(_e(p))
    return "".join(out)


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk (PNG spec, sec. 11.2.2: it is the first chunk)."""
    return struct.unpack(">II", data[16:24])


def _html_block(b: Any) -> str:
    if isinstance(b, P):
        cls = f' class="{_e(b.cls)}"' if b.cls else ""
        return f"<p{cls}>{_html_inline(b.parts)}</p>"
    if isinstance(b, Sub):
        return f"<h3>{_e(b.title)}</h3>"
    if isinstance(b, Items):
        tag = "ol" if b.ordered else "ul"
        cls = ' class="chain"' if b.ordered else ""
        return f"<{tag}{cls}>" + "".join(f"<li>{_html_inline(i)}</li>" for i in b.items) + f"</{tag}>"
    if isinstance(b, Table):
        def cell(tag: str, i: int, content: str) -> str:
            cls = "num" if i in b.num else "src" if i in b.src and tag == "td" else ""
            attrs = f' class="{cls}"' if cls else ""
            if b.stack and tag == "td" and i < len(b.header) and b.header[i]:
                attrs += f' data-label="{_e(b.header[i])}"'
            return f"<{tag}{attrs}>{content}</{tag}>"

        cap = f'<p class="caption">{_e(b.caption)}</p>' if b.caption else ""
        head = ("<thead><tr>" + "".join(cell("th", i, _e(h)) for i, h in enumerate(b.header)) + "</tr></thead>"
                if any(b.header) else "")
        rows = "".join("<tr>" + "".join(cell("td", i, _html_inline(c)) for i, c in enumerate(r)) + "</tr>"
                       for r in b.rows)
        table = '<table class="stack">' if b.stack else "<table>"
        return f'{cap}<div class="scroll">{table}{head}<tbody>{rows}</tbody></table></div>'
    if isinstance(b, Fig):
        w, h = png_size(b.data)
        src = "data:image/png;base64," + base64.b64encode(b.data).decode("ascii")
        return (f'<figure><img src="{src}" width="{w}" height="{h}" alt="{_e(b.caption)}">'
                f"<figcaption>{_e(b.caption)}</figcaption></figure>")
    if isinstance(b, Box):
        return f'<div class="{_e(b.cls)}">' + "".join(_html_block(x) for x in b.blocks) + "</div>"
    raise TypeError(f"unknown block {b!r}")


def _css() -> str:
    from importlib.resources import files

    return files("mcflops").joinpath("templates", "report.css").read_text(encoding="utf-8")


def to_html(doc: Document) -> str:
    toc = "".join(f'<li><a href="#{_e(s.id)}">{_e(s.title)}</a></li>' for s in doc.sections)
    body = []
    for sec in doc.sections:
        body.append(f'<section id="{_e(sec.id)}"><h2>{_e(sec.title)}</h2>')
        body.extend(_html_block(b) for b in sec.blocks)
        body.append("</section>")
    desc = f'<p class="description">{_e(doc.description)}</p>' if doc.description else ""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="generator" content="mcflops">', f"<title>{_e(doc.title)}</title>",
        f"<style>\n{_css()}</style>", "</head>", "<body>", "<main>",
        f"<header><h1>{_e(doc.title)}</h1>{desc}<p class=\"meta\">{_e(doc.meta)}</p></header>",
        f'<nav class="toc" aria-label="Contents"><ul>{toc}</ul></nav>', *body, "</main>", "</body>", "</html>", ""])


__all__ = ["render", "build", "load", "to_markdown", "to_html", "md_escape", "png_size", "Run", "Document",
           "FILES", "HEADLINE_FIGURE"]
