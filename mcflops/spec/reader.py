"""Reading prior files: safe YAML with line numbers (what :class:`mcflops.spec.fields.Fields` names).
Plain Python: no JAX here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from mcflops.errors import SpecError, kind


def read_yaml(p: Path) -> Mapping:
    """Parse a YAML file safely, keeping line numbers (ruamel round-trip; no object construction).

    The file is composed into nodes first and every node is checked: a tag outside YAML's plain data
    types (``!!python/object``, ``!custom``) is refused, not constructed; so are self-referencing
    aliases and alias bombs. Duplicate keys are errors, not last-wins.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    ctx = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("no such file", path=ctx) from None
    except IsADirectoryError:
        raise SpecError("is a directory, expected a prior file (.yaml)", path=ctx) from None
    except UnicodeDecodeError:
        raise SpecError("not a text file (expected UTF-8 YAML)", path=ctx) from None
    except OSError as e:
        raise SpecError(f"cannot read: {e.strerror}", path=ctx) from None
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
        raise SpecError("YAML nests too deeply", path=ctx) from None
    except SpecError:
        raise
    except (ValueError, TypeError) as e:  # a scalar ruamel cannot construct (its own message, one line)
        raise SpecError(f"unreadable YAML value: {e}", path=ctx) from None
    if data is None:
        raise SpecError("empty file: expected a mapping with name, hardware and priors", path=ctx)
    if not isinstance(data, Mapping):
        raise SpecError(f"expected a mapping at the top level, got {kind(data)}", path=ctx,
                        line=root.start_mark.line + 1)
    return data


# Plain data only: YAML 1.2 core types (+ timestamps, which ruamel resolves). Anything else is refused.
_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq",
                                                   "timestamp")}
_MAX_NODES = 100_000  # nodes visited with aliases expanded (a "billion laughs" file stops here)


def _check_nodes(root: Any, path: str) -> None:
    """Refuse non-data tags, self-referencing aliases and alias bombs, naming the line."""
    stack = [(root, (), root.start_mark.line + 1)]
    seen = 0
    while stack:
        node, ancestors, where = stack.pop()  # where: the line that refers to this node (its key's, for values)
        seen += 1
        line = node.start_mark.line + 1
        if seen > _MAX_NODES:
            raise SpecError(f"too many YAML nodes (over {_MAX_NODES:,} with aliases expanded)", path=path,
                            line=line)
        tag = str(getattr(node.tag, "value", node.tag))
        if tag not in _PLAIN_TAGS:
            shown = "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag
            raise SpecError(f"YAML tag '{shown}' is not allowed: prior files are plain data (numbers, text, "
                            "lists, mappings); nothing in them is constructed or run", path=path, line=line)
        if not isinstance(node.value, list):
            if tag.endswith((":int", ":float")) and len(str(node.value)) > 100:
                raise SpecError(f"a number {len(str(node.value))} characters long; write it with an exponent "
                                "(405.9e9) or a suffix (15.6T)", path=path, line=line)
            continue
        if any(node is a for a in ancestors):
            raise SpecError("a YAML alias refers to a mapping or list that contains it", path=path, line=where)
        inner = ancestors + (node,)
        for item in reversed(node.value):
            pair = item if isinstance(item, tuple) else (item,)
            for child in pair:
                stack.append((child, inner, pair[0].start_mark.line + 1))
