"""The strategy table: every built-in placement strategy by name, and the choice ``auto`` makes.

This is the one module that imports every strategy. :mod:`capplan.placement.planner` loads it lazily,
so ``import capplan`` does not load OR-Tools.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.placement.core.options import PlanOptions, Strategy

Loader = Callable[[], Callable[..., Plan]]


# Each loader imports its strategy when first called (``patterns`` and ``heuristic`` never load OR-Tools).
def _greedy() -> Callable[..., Plan]:
    from capplan.placement.greedy import plan_greedy

    return plan_greedy


def _cpsat() -> Callable[..., Plan]:
    from capplan.placement.cpsat.solve import plan_cpsat

    return plan_cpsat


def _heuristic() -> Callable[..., Plan]:
    from capplan.placement.heuristics.run import plan_heuristic

    return plan_heuristic


def _lns() -> Callable[..., Plan]:
    from capplan.placement.lns import plan_lns

    return plan_lns


def _decompose() -> Callable[..., Plan]:
    from capplan.placement.decompose import plan_decompose

    return plan_decompose


def _patterns() -> Callable[..., Plan]:
    from capplan.placement.patterns.strategy import plan_patterns

    return plan_patterns


class _Lazy:
    """A strategy imported on its first call; picklable (it holds a module-level loader), so it can
    be passed to process pools like a function."""

    def __init__(self, load: Loader) -> None:
        self.load = load

    def __call__(self, p: Problem, options: PlanOptions, **kw: Any) -> Plan:
        return self.load()(p, options, **kw)

    def __repr__(self) -> str:
        return f"lazy {self.load.__name__.lstrip('_')}"


STRATEGIES: dict[str, Strategy] = {
    "greedy": _Lazy(_greedy),
    "cpsat": _Lazy(_cpsat),
    "heuristic": _Lazy(_heuristic),
    "lns": _Lazy(_lns),
    # a composite strategy gets its part solver passed in (a partial pickles for process pools and Ray)
    "decompose": functools.partial(_Lazy(_decompose), part=_Lazy(_heuristic)),
    "patterns": _Lazy(_patterns),
}


def loaded(fn: Strategy) -> Strategy:
    """``fn`` with its modules imported (a table entry is imported on first use)."""
    if isinstance(fn, _Lazy):
        real: Strategy = fn.load()
        return real
    if isinstance(fn, functools.partial):
        loaded(fn.func)
        for v in fn.keywords.values():
            if isinstance(v, _Lazy):
                v.load()
    return fn


def register(name: str, fn: Strategy) -> None:
    """Register a strategy under ``name`` (replacing any previous one)."""
    STRATEGIES[name] = fn


#: ``auto`` runs ``lns`` up to these sizes. LNS starts from the better of the heuristic's plan and greedy's,
#: so it is at least the heuristic wherever the heuristic finishes in LNS's start share; above 20,000
#: replicas on 10k-GPU fleets the heuristic alone was cut by the limit (shape e) or lexicographically worse
#: than greedy (shape c) where LNS improved greedy's plan (docs/benchmarks-fleet-scale.md, "Third session").
LNS_REPLICAS = 50000
LNS_NODES = 2000


def choose_strategy(p: Problem) -> str:
    """The strategy ``auto`` picks for ``p``: the exact model when it exists and the problem is small."""
    replicas = sum(w.replicas for w in p.workloads)
    if "cpsat" in STRATEGIES and replicas <= 5000 and len(p.cluster.nodes) <= 1000:
        return "cpsat"
    from capplan.placement.patterns.strategy import suits

    if "patterns" in STRATEGIES and suits(p):
        return "patterns"  # many interchangeable nodes: node-pattern column generation
    if "lns" in STRATEGIES and replicas <= LNS_REPLICAS and len(p.cluster.nodes) <= LNS_NODES:
        return "lns"
    if "heuristic" in STRATEGIES:
        return "heuristic"  # very large: vectorised heuristic plus the LP bound (see docs/fleet-scale.md)
    return "greedy"

#: Every strategy but greedy starts from the greedy plan (with the whole budget; greedy stops when done) and
#: returns its own plan only when it is not lexicographically worse: a complete plan early, whatever the
#: strategy, and a time limit that cuts the improvement, never the coverage (``metrics.auto``).
GREEDY_FIRST = frozenset(name for name in STRATEGIES if name != "greedy")
