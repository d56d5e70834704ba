"""Reading prior files: safe YAML with line numbers (what :class:`mcflops.spec.fields.Fields` names).
Plain Python: no JAX here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from mcflops import reading
from mcflops.errors import SpecError, kind


def read_yaml(p: Path) -> Mapping:
    """Parse a YAML file safely, keeping line numbers (ruamel round-trip; no object construction).

    The file is composed into nodes first and every node is checked: a tag outside YAML's plain data
    types (``!!python/object``, ``!custom``) is refused, not constructed; so are self-referencing
    aliases and alias bombs. Duplicate keys are errors, not last-wins.

    A text parsed before (the same bytes, by the same package and ruamel) is read back from the host
    results (mcflops.diskcache, when the CLI has named its folder): ruamel's parser is most of a load. Only a
    text that parses is kept, so a bad edit is parsed, and named with its line, as ever.
    """
    import hashlib

    from ruamel.yaml import __version__ as ruamel_version

    from mcflops import diskcache

    ctx = str(p)
    text = read_text(p, ctx)
    key = f"ruamel {ruamel_version} text {hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()}"
    return diskcache.kept("spec.reader.parse", key, lambda: parse_yaml(text, ctx))


def parse_yaml(text: str, ctx: str) -> Mapping:
    """``read_yaml`` of a file's ``text`` (errors name ``ctx``)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    nesting(text, ctx)
    try:
        root = YAML(typ="rt", pure=True).compose(text)
        if root is not None:
            _check_nodes(root, ctx)
        data = YAML(typ="rt", pure=True).load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        what = (e.problem or e.context or "invalid YAML").strip()
        if type(e).__name__ == "DuplicateKeyError":  # ruamel.yaml.constructor.DuplicateKeyError
            m = re.search(r'duplicate key "([^"]*)"', what)
            raise SpecError(f"duplicate key \"{m.group(1) if m else '?'}\" (keys must be unique; a second value "
                            "would silently replace the first)", path=ctx, line=line) from None
        if e.context and e.context_mark is not None and e.problem_mark is not None \
                and e.context_mark.line != e.problem_mark.line:
            what += f" ({e.context.strip()} that starts on line {e.context_mark.line + 1})"
        raise SpecError(f"YAML syntax error: {what}", path=ctx, line=line) from None
    except YAMLError as e:  # pragma: no cover - ruamel raises marked errors for syntax
        raise SpecError(f"YAML error: {str(e).splitlines()[0]}", path=ctx) from None
    except RecursionError:
        raise SpecError(f"YAML nests too deeply (deeper than {MAX_DEPTH} levels)", path=ctx) from None
    except SpecError:
        raise
    except (ValueError, TypeError) as e:  # a scalar ruamel cannot construct (its own message, one line)
        raise SpecError(f"unreadable YAML value: {e}", path=ctx) from None
    _untag(data)
    if data is None:
        raise SpecError("empty file: expected a mapping with name, hardware and priors", path=ctx)
    if not isinstance(data, Mapping):
        raise SpecError(f"expected a mapping at the top level, got {kind(data)}", path=ctx,
                        line=root.start_mark.line + 1)
    return data


MAX_BYTES = 1 << 20  # a prior file is a page of YAML; this cap is read before anything is parsed
MAX_TEXT = 10_000  # characters in one text field (a description, a source): a report's paragraph, not a book
MAX_DEPTH = 100  # levels of [ and { in a file (the parser recurses once per level)


def read_text(p: Path, ctx: str) -> str:
    """A prior file's text (:func:`mcflops.reading.read_text`: at most MAX_BYTES read, UTF-8 or UTF-16 with its
    byte-order mark, a bad byte named with its line)."""
    return reading.read_text(p, ctx, kind="a prior file", limit=MAX_BYTES, why="a prior file is a page of YAML")


def nesting(text: str, ctx: str) -> None:
    """Refuse brackets nested deeper than MAX_DEPTH, naming the line where it happens (the parser would
    run out of stack without one)."""
    depth, line = 0, 1
    for c in text:
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(f"YAML nests too deeply (more than {MAX_DEPTH} levels of [ and {{)", path=ctx,
                                line=line)
        elif c in "]}":
            depth = max(depth - 1, 0)
        elif c == "\n":
            line += 1


def check_text(value: str, path: str, line: int | None = None, field: str | None = None) -> None:
    """Text a report can print: no lone surrogate (``"\\ud800"``: it cannot be written as UTF-8) and at most
    MAX_TEXT characters."""
    if len(value) > MAX_TEXT:
        raise SpecError(f"text of {len(value):,} characters; at most {MAX_TEXT:,} (a source or a description, "
                        "not a document)", path=path, line=line, field=field)
    bad = next((c for c in value if 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise SpecError(f"text holds a lone surrogate ({ascii(bad)[1:-1]}), which no file can hold; write the "
                        "character itself", path=path, line=line, field=field)


def check_texts(data: Any, path: str) -> None:
    """check_text on every string in plain data (a notebook's dict), naming the field."""
    stack = [(data, "")]
    while stack:
        x, where = stack.pop()
        if isinstance(x, str):
            check_text(x, path, field=where or None)
        elif isinstance(x, Mapping):
            for k, v in x.items():
                if isinstance(k, str):
                    check_text(k, path, field=where or None)
                stack.append((v, f"{where}.{k}" if where else str(k)))
        elif isinstance(x, (list, tuple)):
            stack += [(v, f"{where}[{i}]") for i, v in enumerate(x)]


def _untag(data: Any) -> None:
    """``!!str 8e9`` is loaded as a tagged scalar: its text, so that a message reads "the text '8e9'"."""
    from ruamel.yaml.comments import TaggedScalar

    stack = [data]
    while stack:
        x = stack.pop()
        items = x.items() if isinstance(x, Mapping) else enumerate(x) if isinstance(x, list) else ()
        for k, v in list(items):
            if isinstance(v, TaggedScalar):
                x[k] = str(v.value)
            else:
                stack.append(v)


# Plain data only: YAML 1.2 core types (+ timestamps, which ruamel resolves). Anything else is refused.
_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq",
                                                   "timestamp")}
_MAX_NODES = 100_000  # nodes visited with aliases expanded (a "billion laughs" file stops here)


def _check_nodes(root: Any, path: str) -> None:
    """Refuse non-data tags, self-referencing aliases and alias bombs, naming the line."""
    stack = [(root, (), root.start_mark.line + 1, "")]
    seen = 0
    while stack:
        # where: the line that refers to this node (its key's, for values); field: its dotted path of keys
        node, ancestors, where, field = stack.pop()
        seen += 1
        line = node.start_mark.line + 1
        if seen > _MAX_NODES:
            raise SpecError(f"too many YAML nodes (over {_MAX_NODES:,} with aliases expanded)", path=path,
                            line=line)
        tag = str(getattr(node.tag, "value", node.tag))
        if tag.endswith(":merge"):
            raise SpecError("YAML merge keys (<<) are not supported: write the keys out in full", path=path,
                            line=line)
        if tag not in _PLAIN_TAGS:
            shown = "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag
            raise SpecError(f"YAML tag '{shown}' is not allowed: prior files are plain data (numbers, text, "
                            "lists, mappings); nothing in them is constructed or run", path=path, line=line)
        if not isinstance(node.value, list):
            if isinstance(node.value, str):
                check_text(node.value, path, line, field or None)
            if tag.endswith((":int", ":float")) and len(str(node.value)) > 100:
                raise SpecError(f"a number {len(str(node.value))} characters long; write it with an exponent "
                                "(405.9e9) or a suffix (15.6T)", path=path, line=line)
            continue
        if any(node is a for a in ancestors):
            raise SpecError("a YAML alias refers to a mapping or list that contains it", path=path, line=where)
        inner = ancestors + (node,)
        for i, item in reversed(list(enumerate(node.value))):
            pair = item if isinstance(item, tuple) else (item,)
            key = pair[0].value if isinstance(item, tuple) and isinstance(pair[0].value, str) else None
            inside = (f"{field}.{key}" if field else key) if key is not None else f"{field}[{i}]"
            for j, child in enumerate(pair):
                stack.append((child, inner, pair[0].start_mark.line + 1, field if len(pair) == 2 and j == 0
                              else inside))
