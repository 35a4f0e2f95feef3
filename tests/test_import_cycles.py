"""No module of metastore/, projections/ or bench/ imports itself back, however indirectly.

Every import statement counts, also those inside functions and under TYPE_CHECKING: an
import deferred into a function hides a cycle from Python at start-up but not from the
next engineer, who then cannot move the function. The graph is read from the source (no
module is imported), so the test names the modules of each cycle it finds.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("metastore", "projections", "bench")


def module_files() -> dict[str, Path]:
    """Every module of the packages, by dotted name (a package by its own name)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> Iterator[str]:
    """The dotted names a module imports (`from a import b` as `a.b`), relative ones resolved."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` imports the module: the package's own
            # __init__ is the parent every submodule loads, not an edge of the graph.
            for alias in node.names:
                yield f"{base}.{alias.name}"


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports (a name resolves to its module)."""
    modules = module_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for imported in imported_names(name, path):
            # `from metastore.api import jobs` names a module; `from metastore.db import x`
            # names something in one: the longest prefix that is a module is what's imported.
            parts = imported.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            target = ".".join(parts)
            if target and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_every_module_and_their_imports() -> None:
    graph = import_graph()
    assert {"metastore.cli", "projections.replay", "metastore.api.jobs"} <= graph.keys()
    # A deferred import (inside a function) is an edge like any other.
    assert "metastore.app" in graph["metastore.cli"]
    assert "metastore.exit" in graph["projections.replay"]
    # The measurement code too (bench/scale.py and bench/scale_report.py were a cycle).
    assert {"bench.scale_results", "bench.harness"} <= graph["bench.scale"]
    assert "bench.scale_results" in graph["bench.scale_report"]


def test_a_cycle_is_found_and_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles_between_modules() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (each group imports itself back): " + "; ".join(
        " <-> ".join(group) for group in found
    )
