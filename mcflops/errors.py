"""The project's own error: one line for the user, naming the file, the line and the field."""

from __future__ import annotations


class SpecError(ValueError):
    """Bad input. ``str(err)`` is the one line the CLI prints (``file:line: field: message``)."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.message = message
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self.format())

    def format(self) -> str:
        """``file:line: field: message``; without a file, ``field: message`` (a command-line flag names
        itself: ``--samples: expected ...``), and ``<spec>: message`` when nothing names the place."""
        line = f":{self.line}" if self.line is not None else ""
        parts = [self.path + line] if self.path else [f"<spec>{line}"] if line else []
        if self.field:
            parts.append(self.field)
        return one_line(": ".join(parts or ["<spec>"]) + f": {self.message}")


_MAX_LINE = 600  # a message quoting a huge value (a pasted table, a 400-digit number) is cut here


def one_line(text: str) -> str:
    """The text as one printable line: control characters (newlines, tabs, ANSI escapes) are escaped
    and an over-long message is shortened, so that a value quoted from a prior file cannot break
    the one-line contract or drive the terminal."""
    out = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return out if len(out) <= _MAX_LINE else out[: _MAX_LINE - 5] + "[...]"


def closest(word: object, options) -> str:
    """'; did you mean X?' when a known option is close to ``word``, else ''."""
    import difflib

    hit = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f"; did you mean '{hit[0]}'?" if hit else ""


def kind(value: object) -> str:
    """How a YAML value reads in a message: 'the text \\'abc\\'', 'a list', 'nothing'."""
    from collections.abc import Mapping

    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, str):
        return f"the text '{_short(value)}'"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {_short(repr(value))}"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 5] + "[...]"
