"""The one neighbourhood-search loop: it keeps only lexicographic improvements and maps replicas back."""

from __future__ import annotations

import time

from capplan.io.scenario import problem_from_data
from capplan.model.plan import Assignment
from capplan.model.problem import Problem
from capplan.model.validate import check_assignments
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.search import Pick, SubResult, missing_replicas, search
from capplan.placement.core.subproblem import lex_key
from capplan.placement.greedy import plan_greedy


def _problem() -> Problem:
    def node(n: str) -> dict[str, object]:
        return {"name": n, "cpu": 16, "memory_gib": 64, "gpu": "H100-SXM5-80GB", "gpus": 2}

    return problem_from_data({
        "cluster": {"name": "c", "levels": ["rack", "node"],
                    "racks": [{"name": "r0", "nodes": [node("a"), node("b")]}]},
        "workloads": [{"name": "w", "replicas": 4, "gpus": 1, "cpu": 1, "priority": 10},
                      {"name": "low", "replicas": 2, "gpus": 1, "cpu": 1, "priority": 1}]})


class _Each:
    """Every node once, offering all unplaced replicas."""

    def __init__(self, p: Problem) -> None:
        self.p, self.todo = p, [n.name for n in p.cluster.nodes]

    def next(self, current: list[Assignment]) -> Pick | None:
        return Pick({self.todo.pop()}, missing_replicas(self.p, current)) if self.todo else None

    def improved(self, pick: Pick, current: list[Assignment]) -> None:
        pass


def _greedy_sub(sub: Problem, left: float) -> SubResult:
    return SubResult(plan_greedy(sub, PlanOptions(time_limit=left)).assignments)


def test_search_fills_from_empty_and_maps_back() -> None:
    """From an empty plan, each node's sub-solve adds replicas under their original keys; the result is valid."""
    p = _problem()
    got, stats = search(p, [], _Each(p), _greedy_sub, time.perf_counter() + 10)
    assert check_assignments(p, got) == []
    assert len(got) == 4 and {a.workload for a in got} == {"w"}
    assert stats.solved == 2 and stats.improved == 2
    assert lex_key(p, got) > lex_key(p, [])


def test_search_rejects_a_worse_neighbourhood() -> None:
    """A sub-solver that empties its neighbourhood never makes the plan worse."""
    p = _problem()
    start = list(plan_greedy(p, PlanOptions()).assignments)
    got, stats = search(p, start, _Each(p), lambda sub, left: SubResult(()), time.perf_counter() + 10)
    assert got == start and stats.improved == 0 and stats.solved == 2


def test_search_stops_when_told() -> None:
    """``stop`` is asked after each improvement."""
    p = _problem()
    got, stats = search(p, [], _Each(p), _greedy_sub, time.perf_counter() + 10, stop=lambda cur: True)
    assert stats.improved == 1 and len(got) == 2
