"""The package layout's rules (docs/contributing.md), checked with ``ast`` over ``capplan/``."""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "capplan"
FOLDERS = ("model", "lp", "placement", "io", "reserve", "bench", "testing", "cli")
# Which folders each folder may import (besides itself); everything else is a violation.
ALLOWED = {
    "model": set(),
    "lp": set(),  # the array LP and the one HiGHS adapter: the bottom layer beside model/
    "placement": {"model", "lp"},
    "io": {"model", "lp", "placement"},
    "reserve": {"model", "lp", "io"},  # the reservation engine solves LPs through lp/, never the placement engine
    "bench": {"model", "lp", "placement", "io"},
    "testing": {"model", "lp", "placement", "io"},  # the public conformance battery and the browser driver
    "cli": {"model", "lp", "placement", "io", "reserve", "bench"},
}
# A third-party solver library may be imported only by these modules.
SOLVERS = {
    "ortools": re.compile(r"^capplan\.placement\.(cpsat|schedule\.timemodel)\."),
    "pulp": re.compile(r"^capplan\.reserve\.milp$"),
    "highspy": re.compile(r"^capplan\.lp\.highs$"),
}
# Distribution name -> import name, where they differ.
IMPORT_NAME = {"pyyaml": "yaml"}


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import statement of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    for n in tree.body:  # imports under `if TYPE_CHECKING:` do not run
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            top |= {id(x) for x in ast.walk(n)}
    mod = _module(path)
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(pkg[: len(pkg) - node.level + 1]) if node.level else ""
            name = ".".join(x for x in (base, node.module or "") if x)
            out.append((name, id(node) in top))
            out += [(f"{name}.{a.name}", id(node) in top) for a in node.names]
    return out


MODULES = {_module(p): p for p in sorted(PKG.rglob("*.py"))}


def _folder(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else None


def _capplan_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in MODULES.items():
        for name, _ in _imports(path):
            if name.startswith("capplan.") and name in MODULES:
                edges[mod].add(name)
    return edges


def test_folders_only_look_down() -> None:
    """model <- placement <- io <- reserve, bench <- cli: no import points up or sideways."""
    bad = []
    for mod, targets in _capplan_edges().items():
        src = _folder(mod)
        for t in targets:
            dst = _folder(t)
            if src and dst and dst != src and dst not in ALLOWED[src]:
                bad.append(f"{mod} imports {t}")
    assert not bad, "\n".join(bad)


def test_no_import_loop_between_folders() -> None:
    """The folder graph is acyclic (loops inside a folder are the folder's business)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, targets in _capplan_edges().items():
        for t in targets:
            a, b = _folder(mod), _folder(t)
            if a and b and a != b:
                graph[a].add(b)
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in graph[n]:
            assert state.get(m) != 1, f"import loop: {' -> '.join([*path, m])}"
            if m not in state:
                visit(m, [*path, m])
        state[n] = 2

    for f in FOLDERS:
        if f not in state:
            visit(f, [f])


def test_placement_core_imports_only_model() -> None:
    """placement/core is the shared toolkit: it imports the contract (and the LP layer) and nothing above it."""
    bad = [f"{m} imports {t}" for m, ts in _capplan_edges().items() if m.startswith("capplan.placement.core")
           for t in ts if t.startswith("capplan.")
           and not t.startswith(("capplan.model", "capplan.lp", "capplan.placement.core"))]
    assert not bad, "\n".join(bad)


def test_time_model_is_inside_the_time_engine() -> None:
    """The time engine is one folder: nothing outside placement/schedule/ imports its CP-SAT model."""
    bad = [f"{m} imports {t}" for m, ts in _capplan_edges().items()
           if not m.startswith("capplan.placement.schedule")
           for t in ts if t.startswith("capplan.placement.schedule.timemodel")]
    assert not bad, "\n".join(bad)


def test_nothing_in_placement_imports_the_dispatcher() -> None:
    """Only the strategy table knows every strategy; strategies receive the ones they run."""
    bad = [m for m, ts in _capplan_edges().items() if m.startswith("capplan.placement.")
           and m not in ("capplan.placement", "capplan.placement.planner")
           and ({"capplan.placement.planner", "capplan.placement"} & ts)]
    assert not bad, bad


def test_product_never_imports_bench_or_cli() -> None:
    """The harness and the command line sit on top: nothing below imports them."""
    bad = [f"{m} imports {t}" for m, ts in _capplan_edges().items() for t in ts
           if _folder(t) in ("bench", "testing", "cli") and _folder(m) not in ("bench", "testing", "cli")
           and m not in ("capplan.__main__",)]
    assert not bad, "\n".join(bad)


def test_no_module_loaded_by_name() -> None:
    """importlib only for lazy public re-exports in an ``__init__.py`` (PEP 562)."""
    bad = []
    for mod, path in MODULES.items():
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("import_module", "__import__"):
                bad.append(f"{mod}:{node.lineno}")
    assert not bad, bad


def test_only_cli_parses_arguments_and_prints() -> None:
    """argparse, logging.basicConfig and print() live in capplan/cli only."""
    bad = []
    for mod, path in MODULES.items():
        if _folder(mod) == "cli" or mod == "capplan.__main__":
            continue
        if any(n == "argparse" for n, _ in _imports(path)):
            bad.append(f"{mod} imports argparse")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = ast.unparse(node.func)
                if fn in ("print", "logging.basicConfig", "sys.exit"):
                    bad.append(f"{mod}:{node.lineno} calls {fn}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("lib", ["ortools", "pulp", "highspy"])
def test_solver_library_behind_its_adapter(lib: str) -> None:
    """ortools only in placement/cpsat and the time model, pulp only in reserve/milp.py, highspy only in lp/highs.py."""
    users = sorted(m for m, p in MODULES.items() if any(n.split(".")[0] == lib for n, _ in _imports(p)))
    assert users, f"{lib} is declared but imported nowhere"
    assert all(SOLVERS[lib].match(m) for m in users), users


def test_one_cp_sat_solver_factory() -> None:
    """``CpSolver`` is built in one place (placement/cpsat/solver.py, once), so the SIGINT, time and worker
    rules hold for every CP-SAT solve; ``catch_sigint_signal`` is set nowhere else."""
    built, sigint = [], []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "CpSolver":
                built.append(mod)
            if isinstance(node, ast.Attribute) and node.attr == "catch_sigint_signal":
                sigint.append(mod)
    assert built == ["capplan.placement.cpsat.solver"], built
    assert sigint == ["capplan.placement.cpsat.solver"], sigint


def test_every_declared_dependency_is_imported() -> None:
    """A dependency in pyproject.toml that nothing imports is dead weight (and a supply-chain risk)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in deps}
    imported = {n.split(".")[0] for p in MODULES.values() for n, _ in _imports(p)}
    missing = sorted(n for n in names if IMPORT_NAME.get(n, n) not in imported)
    assert not missing, f"declared but never imported: {missing}"


def test_import_capplan_stays_light() -> None:
    """``import capplan`` loads neither OR-Tools nor the reservation solvers (PEP 562 lazy exports)."""
    import subprocess
    import sys

    code = ("import sys, capplan; heavy = [m for m in ('ortools', 'pulp', 'highspy', 'matplotlib') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == ""


def test_no_private_name_borrowed_across_modules() -> None:
    """A helper another module needs gets a public name in the module that owns it (issue 24 item 7): no
    ``from capplan.x import _helper`` outside ``x`` itself (aliasing a module as ``_x`` is fine)."""
    borrowed = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("capplan") and not node.level:
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    private = a.name.startswith("_") and not a.name.startswith("__")
                    if private and target not in MODULES and node.module != mod:
                        borrowed.append(f"{mod}: from {node.module} import {a.name}")
    assert borrowed == [], "\n".join(borrowed)
