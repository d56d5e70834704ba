"""The project's own errors, each one line for the user in the caller's words: :class:`SpecError` names a prior
file's line and field, :class:`ReadError` another file mcflops reads, :class:`UsageError` an argument of a call
(the API's keyword, or the command line's flag)."""

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


class ReadError(SpecError):
    """A file mcflops reads that is not a prior file (a Hugging Face config.json, a run folder's summary.json)
    is not what it should be: the same one line as :class:`SpecError` (``file: field: message``), naming that
    file. A subclass, so that every handler of bad input (the command line's exit 2, ``mcflops watch``) takes it
    unchanged, while ``except ReadError`` can tell it from a prior file's mistake."""


class UsageError(ValueError):
    """A wrong argument of a call, named in the caller's words. ``str(err)`` names the API's argument
    (``mcflops.run(method=): expected ...``, or ``method=: ...`` when raised below the API, which fills in its
    function); the command line prints :meth:`as_flag` (``--method: expected ...``).

    ``arg``: the Python argument; ``flag``: its command-line flag (default ``--`` + ``arg`` with dashes);
    ``item``: the part of the argument at fault (``['mfu']``, in the API's words only); ``path``: the prior file
    the argument was checked against, when there is one."""

    def __init__(self, message: str, *, arg: str, fn: str | None = None, flag: str | None = None,
                 item: str = "", path: str | None = None):
        self.message = message
        self.arg = arg
        self.fn = fn
        self.flag = flag or "--" + arg.replace("_", "-")
        self.item = item
        self.path = path
        super().__init__(self.format())

    def called(self, fn: str) -> UsageError:
        """The same error in the words of the API function ``fn`` (``mcflops.fn(arg=)``)."""
        return UsageError(self.message, arg=self.arg, fn=fn, flag=self.flag, item=self.item, path=self.path)

    def format(self, name: str | None = None) -> str:
        """``[file: ]name: message``, ``name`` by default the API's (``mcflops.run(method=)``)."""
        if name is None:
            name = (f"mcflops.{self.fn}({self.arg}=)" if self.fn else f"{self.arg}=") + self.item
        return one_line(": ".join([*([self.path] if self.path else []), name, self.message]))

    def as_flag(self) -> str:
        """The one line the command line prints: the flag in place of the Python argument."""
        return self.format(self.flag)


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
