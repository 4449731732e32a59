"""The strategy table: every built-in placement strategy by name, and the choice ``auto`` makes.

This is the one module that imports every strategy. :mod:`capplan.placement.planner` loads it lazily,
so ``import capplan`` does not load OR-Tools.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.placement.core.options import PlanOptions, Strategy


class _Lazy:
    """A strategy imported on its first call (``patterns`` and ``heuristic`` never load OR-Tools).

    Picklable (module and function names only), so it can be passed to process pools like a function.
    """

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, p: Problem, options: PlanOptions, **kw: Any) -> Plan:
        fn = getattr(importlib.import_module(self.module), self.name)
        plan: Plan = fn(p, options, **kw)
        return plan

    def __repr__(self) -> str:
        return f"{self.module}.{self.name}"


STRATEGIES: dict[str, Strategy] = {
    "greedy": _Lazy("capplan.placement.greedy", "plan_greedy"),
    "cpsat": _Lazy("capplan.placement.cpsat.solve", "plan_cpsat"),
    "heuristic": _Lazy("capplan.placement.heuristics.run", "plan_heuristic"),
    "lns": _Lazy("capplan.placement.lns", "plan_lns"),
    # a composite strategy gets its part solver passed in (a partial pickles for process pools and Ray)
    "decompose": functools.partial(_Lazy("capplan.placement.decompose", "plan_decompose"),
                                   part=_Lazy("capplan.placement.heuristics.run", "plan_heuristic")),
    "patterns": _Lazy("capplan.placement.patterns.strategy", "plan_patterns"),
}


def loaded(fn: Strategy) -> Strategy:
    """``fn`` with its module imported (a table entry is imported on first use)."""
    if isinstance(fn, _Lazy):
        real: Strategy = getattr(importlib.import_module(fn.module), fn.name)
        return real
    if isinstance(fn, functools.partial):
        loaded(fn.func)
    return fn


def register(name: str, fn: Strategy) -> None:
    """Register a strategy under ``name`` (replacing any previous one)."""
    STRATEGIES[name] = fn


def choose_strategy(p: Problem) -> str:
    """The strategy ``auto`` picks for ``p``: the exact model when it exists and the problem is small."""
    replicas = sum(w.replicas for w in p.workloads)
    if "cpsat" in STRATEGIES and replicas <= 5000 and len(p.cluster.nodes) <= 1000:
        return "cpsat"
    from capplan.placement.patterns.strategy import suits

    if "patterns" in STRATEGIES and suits(p):
        return "patterns"  # many interchangeable nodes: node-pattern column generation
    if "lns" in STRATEGIES and replicas <= 20000 and len(p.cluster.nodes) <= 2000:
        return "lns"
    if "heuristic" in STRATEGIES:
        return "heuristic"  # very large: vectorised heuristic plus the LP bound (see docs/fleet-scale.md)
    return "greedy"
