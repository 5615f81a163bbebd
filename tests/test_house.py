"""Checks of the house any reader can repeat (issue 45): no import circle in beeweave_core,
no reach into a class's private members (``noqa: SLF001``) in its storage.

An import counts wherever it is written: at the top, under ``TYPE_CHECKING`` or inside a
function (a deferred import hides a circle from the interpreter, not from a reader).
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import beeweave_core

ROOT = Path(beeweave_core.__file__).parent

# Circles that are known (none since issue 45 broke the last three); a new one fails the test.
KNOWN: set[frozenset[str]] = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of beeweave_core: its file and whether it is a package."""
    found = {"beeweave_core": (ROOT / "__init__.py", True)}
    for info in pkgutil.walk_packages([str(ROOT)], "beeweave_core."):
        path = ROOT.joinpath(*info.name.split(".")[1:])
        found[info.name] = (path / "__init__.py", True) if info.ispkg else (path.with_suffix(".py"), False)
    return found


def _imported(module: str, package: bool, node: ast.Import | ast.ImportFrom, known: dict) -> list[str]:
    """The beeweave_core modules an import statement of ``module`` imports."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if node.level:
        parts = module.split(".") if package else module.split(".")[:-1]
        base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    # ``from pkg import name`` imports the submodule pkg.name if there is one, else pkg
    return [m for m in (f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
            if m in known]


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {}
    for module, (path, package) in known.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(_imported(module, package, node, known))
        deps.discard(module)
        graph[module] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle_and_resolves_relative_imports() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    graph = import_graph()
    assert "beeweave_core.store.postgres.connection" in graph["beeweave_core.store.postgres.store"]
    assert "beeweave_core.errors" in graph["beeweave_core.store.postgres.connection"]


def test_no_import_circle_in_beeweave_core_but_the_known_ones() -> None:
    found = set(circles(import_graph()))
    assert not [c for c in found if any(m.startswith("beeweave_core.store.postgres") for m in c)], found
    assert found <= KNOWN, sorted(map(sorted, found - KNOWN))
    assert found == KNOWN, f"fixed, remove from KNOWN: {sorted(map(sorted, KNOWN - found))}"


def test_no_private_member_reached_from_outside_in_the_storage() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "store").rglob("*.py"))
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if "SLF001" in line]
    assert offenders == []
