"""The cutting-stock bound: never below the optimum or any plan; exact knapsack pricing."""

from __future__ import annotations

from itertools import product
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.problem import Problem
from capplan.placement import PlanOptions, solve
from capplan.placement.core.bound import lexicographic_bound, upper_bound
from capplan.placement.core.patternlp import knapsack
from capplan.placement.core.summary import placed_units
from tests.strategies_gen import scenario_data


def _problem(data: dict[str, Any]) -> Problem:
    return problem_from_data(data, load_catalog())


def _shares(fracs: list[float], gpus: int) -> Problem:
    return _problem({"cluster": {"nodes": [{"name": "n", "gpu": "A100-SXM4-80GB", "gpus": gpus, "cpu": 64,
                                            "memory_gib": 512}]},
                     "workloads": [{"name": f"w{i}", "kind": "shared", "gpu_fraction": f, "cpu": 1}
                                   for i, f in enumerate(fracs)]})


def _exhaustive_shares(fracs: list[float], gpus: int) -> int:
    """Best placed milli over all assignments of shares to GPUs (or nowhere)."""
    best = 0
    milli = [round(f * 1000) for f in fracs]
    for choice in product(range(gpus + 1), repeat=len(milli)):
        load = [0] * gpus
        for m, c in zip(milli, choice, strict=True):
            if c < gpus:
                load[c] += m
        if all(x <= 1000 for x in load):
            best = max(best, sum(m for m, c in zip(milli, choice, strict=True) if c < gpus))
    return best * 7


def test_bound_is_tight_and_valid_on_shares() -> None:
    """On shares that cannot pair up, the bound sits between the exhaustive optimum and the trivial bound."""
    fracs = [0.6, 0.6, 0.6, 0.3, 0.3]
    opt = _exhaustive_shares(fracs, 2)
    b = upper_bound(_shares(fracs, 2)).per_priority[0]
    assert opt <= b <= 2 * 7000
    assert b == 12600  # two GPUs of 0.6 + 0.3 each: no packing and no LP does better


def test_bound_at_least_cpsat_optimum() -> None:
    """On a small mixed instance the bound is at least CP-SAT's proven optimum."""
    data = {"cluster": {"nodes": [{"name": f"n{i}", "gpu": "H100-SXM5-80GB", "gpus": 2, "cpu": 16,
                                   "memory_gib": 128} for i in range(2)]},
            "workloads": [{"name": "big", "gpus": 2, "cpu": 12},
                          {"name": "mig", "mig": "3g.40gb", "replicas": 3, "cpu": 2},
                          {"name": "share", "kind": "shared", "gpu_fraction": 0.7, "replicas": 2, "cpu": 2}]}
    p = _problem(data)
    plan = solve(p, "cpsat", PlanOptions(time_limit=20))
    b = upper_bound(p).per_priority
    for q, obj in zip(p.priorities, [placed_units(p, plan.assignments)[q] for q in p.priorities], strict=True):
        assert b[q] >= obj


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_bound_never_below_any_plan(data: dict[str, Any]) -> None:
    """Per priority, the bound is at least what greedy or the heuristic places."""
    p = _problem(data)
    b = upper_bound(p).per_priority
    for strategy in ("greedy", "heuristic"):
        got = placed_units(p, solve(p, strategy, PlanOptions(time_limit=5)).assignments)
        assert all(b.get(q, 0) >= got[q] for q in p.priorities)


def test_knapsack_is_exact() -> None:
    """The knapsack matches brute force on small item sets."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        sizes = rng.integers(1, 8, size=3) * 7
        values = rng.random(3)
        best, pattern = knapsack(sizes, values, 70)
        brute = max(sum(c * v for c, v in zip(cs, values, strict=True))
                    for cs in product(range(11), repeat=3) if sum(c * s for c, s in zip(cs, sizes, strict=True)) <= 70)
        assert abs(best - brute) < 1e-9
        assert sum(sizes[j] * c for j, c in pattern.items()) <= 70
        assert abs(sum(values[j] * c for j, c in pattern.items()) - best) < 1e-9


def _lex_ge(a: list[int], b: list[int]) -> bool:
    """a >= b in the priority order (highest first)."""
    for x, y in zip(a, b, strict=True):
        if x != y:
            return x > y
    return True


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_lexicographic_bound_never_below_any_plan(data: dict[str, Any]) -> None:
    """Tightened with the heuristic's objective, the bound is lexicographically >= every other plan's objective."""
    p = _problem(data)
    got = placed_units(p, solve(p, "heuristic", PlanOptions(time_limit=5)).assignments)
    lex = lexicographic_bound(p, {q: got[q] for q in p.priorities}).per_priority
    base = upper_bound(p).per_priority
    assert all(lex[q] <= base[q] for q in p.priorities)
    for strategy in ("greedy", "heuristic"):
        other = placed_units(p, solve(p, strategy, PlanOptions(time_limit=5, seed=3)).assignments)
        assert _lex_ge([lex[q] for q in p.priorities], [other[q] for q in p.priorities])


def test_lexicographic_bound_at_least_cpsat_optimum_and_tighter() -> None:
    """A saturating high priority lowers the low priority's bound, still >= CP-SAT's lexicographic optimum."""
    data = {"cluster": {"nodes": [{"name": f"n{i}", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 32,
                                   "memory_gib": 128} for i in range(2)]},
            "workloads": [{"name": "hi", "gpus": 1, "replicas": 3, "cpu": 2, "priority": 10},
                          {"name": "mig", "mig": "3g.40gb", "replicas": 4, "cpu": 1, "priority": 0},
                          {"name": "sh", "kind": "shared", "gpu_fraction": 0.6, "replicas": 2, "cpu": 1,
                           "priority": 0}]}
    p = _problem(data)
    opt = placed_units(p, solve(p, "cpsat", PlanOptions(time_limit=20)).assignments)
    heur = placed_units(p, solve(p, "heuristic").assignments)
    lex = lexicographic_bound(p, {q: heur[q] for q in p.priorities}).per_priority
    assert _lex_ge([lex[q] for q in p.priorities], [opt[q] for q in p.priorities])
    assert lex[10] == 3 * 7000
    # Alone, priority 0 could use all 4 GPUs; after 3 whole GPUs only one is left (6/7 of it for two 3g).
    assert upper_bound(p).per_priority[0] > lex[0] >= opt[0]
    assert lex[0] <= 7000


def test_lexicographic_bound_with_floors_that_need_mixed_mig_patterns() -> None:
    """The high priority fills every GPU with 3g + 2g + 2g (7 of 7 slices): no single-profile GPU
    pattern meets that floor, so the first LP of the tightening is infeasible without its slack.
    The bound must still tighten the low priority to what is left (nothing), not "all its demand"."""
    data = {"cluster": {"nodes": [{"name": f"n{i}", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 64,
                                   "memory_gib": 512} for i in range(2)]},
            "workloads": [{"name": "m3", "mig": "3g.40gb", "replicas": 4, "cpu": 1, "priority": 10},
                          {"name": "m2", "mig": "2g.20gb", "replicas": 8, "cpu": 1, "priority": 10},
                          {"name": "lo", "gpus": 1, "replicas": 4, "cpu": 1, "priority": 0}]}
    p = _problem(data)
    full = 4 * 7000  # 4 GPUs, each 3g + 2g + 2g: every compute slice
    res = lexicographic_bound(p, {10: full, 0: 0})
    assert res.converged  # the tightening LP itself ran to its optimum (it used to give up: infeasible)
    lex = res.per_priority
    assert lex[10] == full
    assert upper_bound(p).per_priority[0] == 4 * 7000  # alone, the low priority could take every GPU
    assert lex[0] == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_lexicographic_bound_within_capacity_left_by_met_priorities(data: dict[str, Any]) -> None:
    """Below priorities that meet their bounds, no priority's bound exceeds the GPUs they leave free
    (the simple capacity bound), and the bound stays >= the plan it was tightened with."""
    p = _problem(data)
    got = placed_units(p, solve(p, "greedy", PlanOptions(time_limit=5)).assignments)
    lex = lexicographic_bound(p, {q: got[q] for q in p.priorities}).per_priority
    cap = p.cluster.gpus_total * 7000
    above = 0
    for q in p.priorities:
        assert got[q] <= lex[q] <= cap - above or lex[q] == got[q]
        if got[q] < lex[q]:
            break
        above += got[q]
