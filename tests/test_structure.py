"""The package's structure holds what DESIGN.md promises: no import cycle between modules, no private name
imported across packages, no private JAX module, modules of a readable size, and comments that give reasons
(no issue numbers, which say nothing to a reader of the code)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mcflops"
MAX_LINES = 400  # DESIGN.md: "a module that grows past ~400 lines is two"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(path: Path) -> list[tuple[str, str, int]]:
    """(module, name, line) of every `from mcflops... import name` in a file (absolute imports only)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mcflops"):
            out += [(node.module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append(("<relative>", "", node.lineno))
    return out


def _package(module: str) -> str:
    """The layer a module belongs to: mcflops.engine.kernel -> mcflops.engine; top-level modules are their own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_no_import_cycle_between_modules():
    import grimp

    graph = grimp.build_graph("mcflops")
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    # Tarjan's strongly connected components: any component of two or more modules is a cycle.
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in modules:
        if m not in index:
            visit(m)
    assert not cycles, cycles


def test_package_faces_are_not_bypassed_for_private_names():
    """A `_name` is never imported from another package (optax's `_src` rule; DESIGN.md example 14)."""
    bad = []
    for module, path in _modules().items():
        for source, name, line in _imports(path):
            if source == "<relative>":
                bad.append(f"{path.relative_to(ROOT)}:{line}: relative import (the package uses absolute ones)")
            elif name.startswith("_") and _package(source) != _package(module) and name != "__version__":
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name} from {source}")
    assert not bad, "\n".join(bad)


def test_no_private_jax_modules():
    bad = [f"{p.relative_to(ROOT)}:{i}" for p in _modules().values()
           for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bjax\._src\b", line)]
    assert not bad, bad


@pytest.mark.parametrize("module", sorted(_modules()))
def test_module_size(module):
    lines = len(_modules()[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines"


def test_comments_give_reasons_not_issue_numbers():
    pattern = re.compile(r"\bissues? \d+\b", re.I)
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _modules().values()
           for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not bad, "\n".join(bad)
