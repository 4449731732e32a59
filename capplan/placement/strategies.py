"""The strategy table: every built-in placement strategy by name, and the choice ``auto`` makes.

This is the one module that imports every strategy. :mod:`capplan.placement.planner` loads it lazily,
so ``import capplan`` does not load OR-Tools.
"""

from __future__ import annotations

import functools

from capplan.model.problem import Problem
from capplan.placement.core.options import Strategy
from capplan.placement.cpsat.solve import plan_cpsat
from capplan.placement.decompose import plan_decompose
from capplan.placement.greedy import plan_greedy
from capplan.placement.heuristics.run import plan_heuristic
from capplan.placement.lns import plan_lns
from capplan.placement.patterns import plan_patterns, suits

STRATEGIES: dict[str, Strategy] = {
    "greedy": plan_greedy,
    "cpsat": plan_cpsat,
    "heuristic": plan_heuristic,
    "lns": plan_lns,
    # a composite strategy gets its part solver passed in (a partial pickles for process pools and Ray)
    "decompose": functools.partial(plan_decompose, part=plan_heuristic),
    "patterns": plan_patterns,
}


def register(name: str, fn: Strategy) -> None:
    """Register a strategy under ``name`` (replacing any previous one)."""
    STRATEGIES[name] = fn


def choose_strategy(p: Problem) -> str:
    """The strategy ``auto`` picks for ``p``: the exact model when it exists and the problem is small."""
    replicas = sum(w.replicas for w in p.workloads)
    if "cpsat" in STRATEGIES and replicas <= 5000 and len(p.cluster.nodes) <= 1000:
        return "cpsat"
    if "patterns" in STRATEGIES and suits(p):
        return "patterns"  # many interchangeable nodes: node-pattern column generation
    if "lns" in STRATEGIES and replicas <= 20000 and len(p.cluster.nodes) <= 2000:
        return "lns"
    if "heuristic" in STRATEGIES:
        return "heuristic"  # very large: vectorised heuristic plus the LP bound (see docs/fleet-scale.md)
    return "greedy"
