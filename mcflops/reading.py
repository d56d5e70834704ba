"""Reading the files a user hands the tool: prior files (and the files watch follows), Hugging Face
config.json files, a run folder's summary.json. One reader, so each gets the same guards: a size cap read before
anything is parsed (`/dev/zero` or a disk image is refused, not read into memory), UTF-8 or UTF-16 with its
byte-order mark, a byte that is neither named with its line, JSON nested too deep or holding a lone surrogate
refused, and one :class:`SpecError` line for each. The YAML node guards (tags, aliases, alias bombs) are
:mod:`mcflops.spec.reader`'s, over this text. Plain Python: no JAX, no NumPy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcflops.errors import ReadError, SpecError

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def read_bytes(path: str | Path, ctx: str, *, kind: str, limit: int, why: str) -> bytes:
    """At most ``limit`` bytes of the file (``kind``: what it should be, "a prior file"; ``why``: why the cap
    is generous, named in the refusal)."""
    try:
        with Path(path).open("rb") as f:
            raw = f.read(limit + 1)
    except FileNotFoundError:
        raise SpecError(f"no such file (expected {kind})", path=ctx) from None
    except IsADirectoryError:
        raise SpecError(f"is a directory, expected {kind}", path=ctx) from None
    except OSError as e:
        raise SpecError(f"cannot read {kind}: {e.strerror or e}", path=ctx) from None
    if len(raw) > limit:
        raise SpecError(f"larger than {_size(limit)}: not {kind} ({why})", path=ctx)
    return raw


def read_text(path: str | Path, ctx: str, *, kind: str, limit: int, why: str, hint: str = "save the file as UTF-8",
              ascii_keys: bool = True) -> str:
    """The file's text (UTF-8, or UTF-16 with its byte-order mark: what some Windows editors save).
    ``ascii_keys``: the format's keys are ASCII words, so "UTF-16" bytes that decode to mostly other characters
    are binary that happens to start like a byte-order mark."""
    raw = read_bytes(path, ctx, kind=kind, limit=limit, why=why)
    encoding = next((enc for bom, enc in _BOMS if raw.startswith(bom)), "utf-8")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1 if encoding == "utf-8" else None
        raise SpecError(f"not a text file: byte 0x{raw[e.start]:02x} is not {encoding.upper()} ({hint})",
                        path=ctx, line=line) from None
    if ascii_keys and encoding == "utf-16" and 2 * sum(c.isascii() for c in text) < len(text):
        raise SpecError(f"not a text file (expected {kind}: UTF-8, or UTF-16 with its byte-order mark)", path=ctx)
    return text


def read_json(path: str | Path, ctx: str, *, kind: str, limit: int, why: str) -> Any:
    """The file's JSON value: text as :func:`read_text`, then parsed; JSON nested deeper than Python's
    recursion allows, or a string holding a lone surrogate (``"\\ud800"``: it cannot be written back as UTF-8,
    so a report quoting it would fail later), is refused here."""
    text = read_text(path, ctx, kind=kind, limit=limit, why=why)
    try:
        value = json.loads(text)
    except RecursionError:
        raise SpecError(f"not {kind}: JSON nested too deeply", path=ctx) from None
    except ValueError as e:
        raise SpecError(f"not JSON ({e})", path=ctx) from None
    bad = _lone_surrogate(value)
    if bad is not None:
        raise SpecError(f"not {kind}: a text holds a lone surrogate ({ascii(bad)[1:-1]}), which is not text",
                        path=ctx)
    return value


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) of a parsed JSON value that UTF-8 cannot encode, else None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return v
    return None


def _size(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


SUMMARY = "summary.json"
SUMMARY_BYTES = 1 << 26  # a run's summary.json is tens of KB; the cap is read before anything is parsed


def read_summary(folder: str | Path, where: str | None = None) -> dict[str, Any]:
    """A run folder's summary.json as a JSON object (``where``: how messages name the folder)."""
    where = str(folder) if where is None else where
    path = Path(folder) / SUMMARY
    if not path.exists() and not path.is_symlink():
        raise ReadError(f"no {SUMMARY} here: not a run folder (make one with `mcflops run FILE`)", path=where)
    data = read_json(path, str(Path(where) / SUMMARY), kind=f"a {SUMMARY} mcflops wrote", limit=SUMMARY_BYTES,
                     why="a summary is tens of KB")
    if not isinstance(data, dict):
        raise ReadError(f"not a {SUMMARY} mcflops wrote: expected a JSON object", path=str(Path(where) / SUMMARY))
    return data
