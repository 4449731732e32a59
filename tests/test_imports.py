"""Imports that cannot race: the module graph that runs at import time has no cycle.

Python imports each module under its own lock. When module A imports B at its top while B (through a
package ``__init__`` that re-exports its submodules, or directly) imports A, two threads importing A
and B at once wait for each other: one gets ``_DeadlockError`` or a half-initialised module
(``ImportError: cannot import name 'place'``), as the first ``solve()`` calls of a thread pool did.
Importing a module also imports every package above it, so those edges count too. Imports inside
functions and under ``if TYPE_CHECKING:`` do not run at import time and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "capplan"


def _name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _runtime_imports(path: Path) -> set[str]:
    """capplan modules that ``path`` imports when it is imported (with the packages above them)."""
    mod = _name(path)
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for n in body:
            if isinstance(n, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(n.test):
                    visit(n.body)
                visit(n.orelse)
            elif isinstance(n, ast.Try):
                visit(n.body)
                visit(n.orelse)
                visit(n.finalbody)
                for h in n.handlers:
                    visit(h.body)
            elif isinstance(n, ast.Import):
                found.update(a.name for a in n.names)
            elif isinstance(n, ast.ImportFrom):
                base = ".".join(pkg[: len(pkg) - n.level + 1]) if n.level else ""
                name = ".".join(x for x in (base, n.module or "") if x)
                found.add(name)
                found.update(f"{name}.{a.name}" for a in n.names if f"{name}.{a.name}" in MODULES)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    out = set()
    for name in found:
        parts = name.split(".")
        out.update(q for q in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if q in MODULES and q != mod)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as a path, or ``[]``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(v: str) -> list[str]:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return [*stack[stack.index(w):], w]
            if w not in state and (found := dfs(w)):
                return found
        stack.pop()
        state[v] = 2
        return []

    for v in sorted(graph):
        if v not in state and (found := dfs(v)):
            return found
    return []


def test_no_import_cycle_at_import_time() -> None:
    graph = {m: _runtime_imports(p) for m, p in MODULES.items()}
    cycle = _cycle(graph)
    assert not cycle, "import cycle (threads importing these at once can deadlock): " + " -> ".join(cycle)


def test_the_checker_sees_a_package_that_reexports_its_submodules() -> None:
    """The check itself: a package importing a child that imports the package is a cycle."""
    assert _cycle({"p": {"p.a"}, "p.a": {"p"}}) == ["p", "p.a", "p"]
    assert _cycle({"p": set(), "p.a": {"p"}, "p.b": {"p", "p.a"}}) == []
