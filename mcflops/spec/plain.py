"""A notebook's dict checked as plain data before anything walks it: the YAML reader's guards, for a mapping
that never was a file. A prior file is a tree of mappings, lists, numbers, text, booleans and nothing; a dict
built in Python can be something else: one that contains itself (every walk below would loop or grow without
bound: one such dict was measured growing to 23.8 GB), a lattice of shared lists whose unrolled tree is exponential, objects that are not
values. Each is one line naming the field."""

from __future__ import annotations

from numbers import Real
from typing import Any, Mapping

from mcflops.errors import SpecError

MAX_DEPTH = 64  # the deepest prior file nests about 6 levels; 64 leaves room and stops a chain of wrappers
MAX_NODES = 200_000  # about 100x the largest prior file's values; a shared lattice unrolled is refused here


def check_plain(data: Any, path: str = "<dict>") -> None:
    """Refuse what a prior file cannot hold: a container inside itself, deeper than MAX_DEPTH, more than
    MAX_NODES values unrolled, a value that is not a mapping, list, number (NumPy's included), text,
    boolean or None. Iterative (no recursion limit to hit), and each container is entered once per path."""
    stack: list[tuple[Any, str, frozenset[int], int]] = [(data, "", frozenset(), 0)]
    seen = 0
    while stack:
        x, where, above, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise SpecError(f"more than {MAX_NODES:,} values (lists or mappings shared many times over?); "
                            "a prior file holds a few hundred", path=path, field=where or None)
        if x is None or isinstance(x, (str, bool, Real)) or hasattr(x, "__array__"):
            continue  # a value; NumPy scalars and arrays are values too (load_spec reads one-element ones)
        if not isinstance(x, (Mapping, list, tuple)):
            raise SpecError(f"expected a mapping, a list, a number, text, true/false or nothing, got "
                            f"{type(x).__name__}", path=path, field=where or None)
        if id(x) in above:
            raise SpecError("this value contains itself (a cycle); a prior file is a tree", path=path,
                            field=where or None)
        if depth >= MAX_DEPTH:
            raise SpecError(f"nested more than {MAX_DEPTH} levels deep", path=path, field=where or None)
        inner = above | {id(x)}
        if isinstance(x, Mapping):
            stack += [(v, f"{where}.{k}" if where else str(k), inner, depth + 1) for k, v in x.items()]
        else:
            stack += [(v, f"{where}[{i}]", inner, depth + 1) for i, v in enumerate(x)]
