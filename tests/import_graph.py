"""The package's import graph, read from the source with `ast` (nothing is imported).

Every ``import`` and ``from ... import`` counts: at module level, inside functions (lazy
imports still run), and under ``if TYPE_CHECKING:`` (marked, since they never run). A name
imported from a package counts as an import of its submodule when one has that name, else
of the package itself.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Source folder -> the import name it is installed as (pyproject's package-dir).
FOLDERS = {
    "aipusim": "aipusim",
    "base": "aipusim.base",
    "arch": "aipusim.arch",
    "isa": "aipusim.isa",
    "compiler": "aipusim.compiler",
    "simulator": "aipusim.simulator",
    "profiler": "aipusim.profiler",
}
#: The packages below the wiring layer (docs/architecture.md §1), by their short name.
PACKAGES = ("base", "arch", "isa", "compiler", "simulator", "profiler")


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line``; ``typing``: only under TYPE_CHECKING."""

    source: str
    target: str
    line: int
    typing: bool


def module_files() -> dict[str, Path]:
    """Module name -> source file, for every module of the distribution."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((package, *parts))] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, typing: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = typing or (isinstance(child, ast.If) and _is_type_checking(child))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, typing) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (child.level - 1)]
                    base = ".".join([*parts, base] if base else parts)
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append((full if full in modules else base, child.lineno, typing))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    edges = []
    for target, line, typing in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            edges.append(Edge(name, target, line, typing))
    return edges


@cache
def graph() -> dict[str, tuple[Edge, ...]]:
    """Module -> its imports of other modules of the distribution."""
    modules = module_files()
    return {name: tuple(_imports(name, path, modules)) for name, path in modules.items()}


def cycles(*, typing: bool) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan); with ``typing``, the
    TYPE_CHECKING imports count too."""
    g = {m: [e.target for e in edges if typing or not e.typing] for m, edges in graph().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in g:
        if v not in index:
            connect(v)
    return sorted(groups)


def layer(module: str) -> str:
    """The package a module belongs to (``compiler``), or ``wiring`` for ``aipusim/``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "wiring"
