"""Blocks to Markdown (CommonMark with GFM tables) and to one self-contained HTML page.

Every piece of text is escaped here: Markdown escapes each character CommonMark could read as markup,
HTML escapes with :func:`html.escape`; figures are embedded as base64 data URIs; the page carries its
CSS inline and a Content-Security-Policy that forbids scripts and every fetch.
"""

from __future__ import annotations

import base64
import html
import re
import struct
from typing import Any
from urllib.parse import quote

from mcflops.report.blocks import B, Box, C, Document, Fig, Items, P, Sub, Table

# ---- Markdown -----------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~#!])")


# Unicode's bidirectional controls (UAX #9: embeddings, overrides, isolates, marks): text from a prior file
# shown with them would read in another order than it is written ("Trojan Source"); they are shown by name, as
# are the C0 and C1 controls but tab, newline and carriage return (ESC and BEL would drive a terminal that
# `cat`s report.md: an OSC-8 link, a title change)
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def neutral(text: Any) -> str:
    """``text`` with every bidirectional and control character replaced by its code point written out
    ([U+202E], [U+001B])."""
    return _BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", str(text))


def md_escape(text: Any) -> str:
    """Plain text for Markdown: one line, every character CommonMark could read as markup escaped."""
    return _MD_SPECIAL.sub(r"\\\1", re.sub(r"\s+", " ", neutral(text)))


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
        out += [_md_start(md_escape(doc.description)), ""]  # "- x" is text, not a list
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
    return html.escape(neutral(text), quote=True)


_LONG = re.compile(r"(\S{200,})")  # a word no screen holds (URLs stay whole: they are shorter)


def _e_wrapping(text: Any) -> str:
    """_e for a paragraph: a word of 200 characters or more gets a <wbr> (a line-break opportunity) every
    100, so that it wraps on a phone instead of widening the page."""
    parts = _LONG.split(neutral(text))
    return "".join("<wbr>".join(_e(p[i:i + 100]) for i in range(0, len(p), 100)) if k % 2 else _e(p)
                   for k, p in enumerate(parts))


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
    desc = f'<p class="description">{_e_wrapping(doc.description)}</p>' if doc.description else ""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="generator" content="mcflops">', f"<title>{_e(doc.title)}</title>",
        f"<style>\n{_css()}</style>", "</head>", "<body>", "<main>",
        f"<header><h1>{_e(doc.title)}</h1>{desc}<p class=\"meta\">{_e(doc.meta)}</p></header>",
        f'<nav class="toc" aria-label="Contents"><ul>{toc}</ul></nav>', *body, "</main>", "</body>", "</html>", ""])
