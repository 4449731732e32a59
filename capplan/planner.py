"""One planner interface, many strategies.

:func:`solve` is the entry point: it picks a strategy by name (or by problem size with
``"auto"``), runs it, and passes the result through the independent validator before returning
it. Strategies register themselves in :data:`STRATEGIES`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from capplan.errors import InputError, suggest

if TYPE_CHECKING:
    from capplan.plan import Plan
    from capplan.problem import Problem


@dataclass(frozen=True)
class PlanOptions:
    """Settings shared by all strategies.

    Attributes
    ----------
    time_limit
        Wall-clock limit in seconds for the whole solve.
    seed
        Random seed; the same seed gives the same plan.
    allow_preemption, allow_migration
        Whether running replicas may be evicted (preemptible, for higher priority) or moved
        (migratable). By default nothing running moves.
    workers
        Parallel search workers (CP-SAT) or processes.
    progress
        Optional callback receiving progress dicts (elapsed, objective, bound, gap).
    """

    time_limit: float = 60.0
    seed: int = 0
    allow_preemption: bool = False
    allow_migration: bool = False
    workers: int = 1
    progress: Callable[[dict[str, Any]], None] | None = None


Strategy = Callable[["Problem", PlanOptions], "Plan"]
STRATEGIES: dict[str, Strategy] = {}


def register(name: str, fn: Strategy) -> None:
    """Register a strategy under ``name`` (replacing any previous one)."""
    STRATEGIES[name] = fn


def _load_builtin() -> None:
    import capplan.strategies  # noqa: F401  (registers the built-in strategies on import)


def choose_strategy(p: Problem) -> str:
    """The strategy ``auto`` picks for ``p``: the exact model when it exists and the problem is small."""
    _load_builtin()
    replicas = sum(w.replicas for w in p.workloads)
    if "cpsat" in STRATEGIES and replicas <= 5000 and len(p.cluster.nodes) <= 1000:
        return "cpsat"
    if "patterns" in STRATEGIES:
        from capplan.patterns.strategy import suits

        if suits(p):
            return "patterns"  # many interchangeable nodes: node-pattern column generation
    if "lns" in STRATEGIES and replicas <= 20000 and len(p.cluster.nodes) <= 2000:
        return "lns"
    if "heuristic" in STRATEGIES:
        return "heuristic"  # very large: vectorised heuristic plus the LP bound (see docs/fleet-scale.md)
    return "greedy"


def solve(p: Problem, strategy: str = "auto", options: PlanOptions | None = None, **kw: Any) -> Plan:
    """Plan ``p`` with ``strategy`` and return a validated :class:`~capplan.plan.Plan`.

    Parameters
    ----------
    p
        The problem.
    strategy
        ``auto`` (by size) or a registered name (``greedy``, ...).
    options
        Solver settings; keyword arguments override its fields.

    Raises
    ------
    InputError
        Unknown strategy name.
    PlanValidationError
        The strategy produced an invalid plan (a bug; never returned).
    """
    from capplan.validate import assert_valid

    _load_builtin()
    opts = replace(options or PlanOptions(), **kw)
    name = choose_strategy(p) if strategy == "auto" else strategy
    if name not in STRATEGIES:
        raise InputError("strategy", f"unknown strategy {name!r}{suggest(name, STRATEGIES)}; "
                                     f"choose from {', '.join(sorted(STRATEGIES))} or auto")
    t0 = time.perf_counter()
    plan = STRATEGIES[name](p, opts)
    if not plan.solve_seconds:
        plan = plan.model_copy(update={"solve_seconds": round(time.perf_counter() - t0, 4)})
    return assert_valid(p, plan)
