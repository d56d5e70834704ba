"""A prior file's description in the report: text that starts like a Markdown list item stays text,
bidirectional controls (U+202E and the rest of UAX #9's) are shown by code point instead of reordering
what follows, and a 20,000-letter word gets a break opportunity (<wbr>) every 100 letters instead of widening the page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcflops import cli

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
WORD = "W" * 20_000


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("t") / "report"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    s = json.loads((out / "summary.json").read_text())
    s["description"] = f"- not a list \u202eevil\u202c \u2066x\u2069 {WORD}"
    (out / "summary.json").write_text(json.dumps(s))
    assert cli.main(["report", str(out)]) == 0
    return (out / "report.md").read_text(encoding="utf-8"), (out / "report.html").read_text(encoding="utf-8")


def test_a_description_like_a_list_item_is_text(rendered):
    from markdown_it import MarkdownIt

    md, page = rendered
    html = MarkdownIt("commonmark").render(md.split("\n\n", 2)[1])  # the paragraph under the title
    assert "<ul>" not in html and html.startswith("<p>- not a list"), html[:80]
    assert '<p class="description">- not a list' in page


def test_bidi_controls_are_shown_not_obeyed(rendered):
    for text in rendered:
        assert not any(c in text for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert "[U+202E]evil[U+202C]" in rendered[1] and "\\[U+202E\\]evil\\[U+202C\\]" in rendered[0]


def test_a_long_word_wraps(rendered):
    page = rendered[1]
    desc = page[page.index('<p class="description">'):]
    desc = desc[:desc.index("</p>")]
    pieces = desc.split(" ")[-1].split("<wbr>")
    assert "".join(pieces) == WORD and max(map(len, pieces)) <= 100  # a break opportunity every 100 letters
    assert WORD in rendered[0]  # Markdown keeps the word as written
