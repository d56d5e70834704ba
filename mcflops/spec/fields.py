"""Where a value sits in a prior file, so that every message names the file, the line, the field and
what was expected (DESIGN.md, example 3). Plain Python: no JAX here.

One :class:`Fields` per file; :meth:`Fields.at` narrows it to a node, a key and a field, which its
messages then name unless told otherwise::

    where = Fields("llama.yaml")
    node = where.mapping(data, "hardware", "hardware")            # expected a mapping, got a list
    where.keys(node, ("accelerator", "precision", "count"), "hardware")   # unknown key, did you mean
    count = where.number(node, "count", "hardware.count", positive=True, integer=True)
    here = where.at(priors, "mfu", "priors.mfu")
    raise here.error("expected low < high")                        # llama.yaml:12: priors.mfu: ...
"""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.errors import SpecError, closest, kind
from mcflops.numbers import parse_number

__all__ = ["Fields", "line_of"]


def line_of(node: Any, key: Any = None) -> int | None:
    """The 1-based line of ``node[key]`` (or of ``node``) in a ruamel-loaded file, else None."""
    lc = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        if key is None:
            return lc.line + 1
        return (lc.item(key) if isinstance(key, int) else lc.key(key))[0] + 1
    except (KeyError, IndexError, TypeError, AttributeError):
        return lc.line + 1 if getattr(lc, "line", None) is not None else None


class Fields:
    """A prior file's path and, once narrowed with :meth:`at`, the place a message names by default.

    In every method ``node``/``key`` say where the value is (its line) and ``field`` what it is called
    (``priors.mfu``); left out, they are the place given to :meth:`at` (a file-wide ``Fields`` names
    no line and no field).
    """

    def __init__(self, path: str | None, node: Any = None, key: Any = None, field: str | None = None):
        self.path = path
        self.node, self.key, self.field = node, key, field

    def at(self, node: Any, key: Any = None, field: str | None = None) -> Fields:
        """The same file, at ``node[key]``, called ``field`` (default: this one's field)."""
        return Fields(self.path, node, key, self.field if field is None else field)

    def line(self, node: Any, key: Any = None) -> int | None:
        return line_of(node, key)

    def error(self, message: str, node: Any = None, key: Any = None, field: str | None = None) -> SpecError:
        """The one-line error (raise it): file, line of ``node[key]``, field, message."""
        if node is None:
            node, key = self.node, self.key
        return SpecError(message, path=self.path, line=line_of(node, key) if node is not None else None,
                         field=self.field if field is None else field)

    def mapping(self, parent: Mapping, key: Any, field: str | None = None, expected: str = "a mapping", *,
                got: bool = True) -> Mapping:
        """``parent[key]``, which must be a mapping: else 'expected <expected>, got <what it is>'."""
        node = parent[key]
        if not isinstance(node, Mapping):
            raise self.error(f"expected {expected}" + (f", got {kind(node)}" if got else ""), parent, key, field)
        return node

    def keys(self, node: Mapping, allowed, field: str | None = None, *, what: str = "key", where: str = "",
             listing: str | None = None, per_key: bool = True) -> None:
        """Refuse a key of ``node`` not in ``allowed``: "unknown key 'x'; did you mean 'y'? (expected one
        of: ...)". ``what`` names the kind of key, ``where`` follows the key (' beside calibrated:'),
        ``listing`` replaces the parenthesis; ``per_key`` names the field ``<field>.<key>``, else ``field``."""
        for k in node:
            if k not in allowed:
                base = self.field if field is None else field
                name = (f"{base}.{k}" if base else str(k)) if per_key else base
                listing_ = listing if listing is not None else f"expected one of: {', '.join(map(str, allowed))}"
                raise self.error(f"unknown {what} '{k}'{where}{closest(k, allowed)} ({listing_})", node, k,
                                 name or None)

    def number(self, node: Mapping, key: Any, field: str | None = None, *, positive: bool = False,
               integer: bool = False, minimum: float | None = None, expected: str | None = None) -> float:
        """``node[key]`` as a number (``405.9e9``, ``15.6T``, ``1_000_000``), checked as asked."""
        raw = node[key]
        x = parse_number(raw)
        if x is None:
            if expected is None:
                expected = ("a whole number" if integer else "a number") + " (like 405.9e9, 15.6T, 1_000_000)"
            raise self.error(f"expected {expected}, got {kind(raw)}", node, key, field)
        if integer and x != int(x):
            raise self.error(f"expected a whole number, got {raw}", node, key, field)
        if positive and x <= 0:
            raise self.error(f"expected a number > 0, got {raw}", node, key, field)
        if minimum is not None and x < minimum:
            raise self.error(f"expected a number >= {minimum:g}, got {raw}", node, key, field)
        return x

    def text(self, node: Mapping, key: Any, field: str | None = None, expected: str = "text", *,
             got: bool = True) -> str | None:
        """``node[key]`` as text; None when absent or empty (null)."""
        value = node.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(f"expected {expected}" + (f", got {kind(value)}" if got else ""), node, key, field)
        return str(value)  # ruamel's folded/literal strings are str subclasses
