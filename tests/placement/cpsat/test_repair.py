"""Region repair: small problems keep the plan's meaning, and repair only ever improves a valid plan."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Problem
from capplan.model.validate import check_assignments
from capplan.placement import PlanOptions, solve
from capplan.placement.core.subproblem import lex_key, neighbourhood
from capplan.placement.cpsat.repair import _neighbourhoods, offer_for, regions, repair
from capplan.placement.cpsat.solve import plan_cpsat
from capplan.placement.greedy import plan_greedy
from tests.strategies_gen import scenario_data

from .conftest import node, scenario

OPTS = PlanOptions(time_limit=10, seed=0, workers=1)


def _solve_sub(sub: Problem, opts: PlanOptions) -> list[Assignment]:
    return list(plan_cpsat(sub, opts, repair_racks=False).assignments)


def test_subproblem_keeps_assignments_and_power_outside_the_region() -> None:
    """A node pair across two racks: its assignments are valid in the small problem, map back to
    the originals, and each rack's budget is reduced by what its other node draws."""
    p = scenario(
        [node("a1", gpus=4), node("b1", gpus=4), node("a2", gpus=4), node("b2", gpus=4)],
        [{"name": "w", "gpus": 1, "replicas": 8, "cpu": 1}, {"name": "big", "gpus": 4, "replicas": 3, "cpu": 1}],
        racks=2,
        power_kw=2.1,  # three busy H100s (700 W) per rack
    )
    plan = plan_greedy(p, OPTS)
    assignments = list(plan.assignments)
    idx = p.cluster.node_index
    region = [idx["a1"], idx["b1"]]  # a1 in r1, b1 in r2 (round-robin)
    pick = offer_for(p, assignments, region)
    sub, back = neighbourhood(p, assignments, pick.nodes, pick.offer)
    fwd = {v: k for k, v in back.items()}
    now = [a.model_copy(update={"replica": fwd[a.key][1]}) for a in assignments if a.node in pick.nodes]
    assert {n.name for n in sub.cluster.nodes} == {"a1", "b1"}
    assert check_assignments(sub, now) == []
    originals = sorted((a for a in assignments if a.node in {"a1", "b1"}), key=lambda a: a.key)
    mapped = sorted((a.model_copy(update={"replica": back[a.key][1]}) for a in now), key=lambda a: a.key)
    assert mapped == originals
    busy = {(a.node, g) for a in assignments for g in a.gpus}
    for d in sub.cluster.domains:
        outside = sum(1 for n, _ in busy if n not in {"a1", "b1"} and p.cluster.nodes[idx[n]].path[0] == d.name)
        assert d.power_w == 2100 - 700 * outside


def test_repair_fills_an_empty_plan_rack_by_rack() -> None:
    """From an empty plan, repair places what the exact planner places on the whole problem."""
    p = scenario(
        [node(f"n{i}", gpus=2) for i in range(4)],
        [
            {"name": "chat", "mig": "3g.40gb", "replicas": 6, "priority": 10, "cpu": 1},
            {"name": "embed", "mig": "1g.10gb", "replicas": 9, "priority": 10, "cpu": 1},
            {"name": "job", "gpus": 2, "replicas": 2, "priority": 100, "cpu": 1},
        ],
        racks=2,
    )
    assert len(regions(p)) == 2
    got, stats = repair(p, [], OPTS, time.perf_counter() + 30, _solve_sub)
    assert check_assignments(p, got) == []
    assert stats["regions_improved"]
    best = solve(p, "cpsat", OPTS)
    assert best.status == "optimal"
    assert lex_key(p, got) == lex_key(p, list(best.assignments))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_repair_never_makes_a_plan_worse_or_invalid(data: dict[str, Any]) -> None:
    """Starting from the greedy plan, repair returns valid assignments at least as good (lexicographically)."""
    p = problem_from_data(data, load_catalog())
    start = list(plan_greedy(p, OPTS).assignments)
    got, _ = repair(p, start, PlanOptions(time_limit=5, seed=0, workers=1), time.perf_counter() + 3, _solve_sub)
    assert check_assignments(p, got) == []
    assert lex_key(p, got) >= lex_key(p, start)
    keys = [a.key for a in got]
    assert len(keys) == len(set(keys))


def test_the_first_region_regroups_full_memory_mig_gpus_with_small_instances_from_two_other_nodes() -> None:
    """Two nodes whose GPUs hold two 3g.40gb each (a compute slice idle), two nodes full of 1g.10gb:
    the first neighbourhood is those four nodes, and re-solving it frees a GPU for left-out whole-GPU work
    (3g.40gb + 1g.10gb x 4 on two GPUs: 8 instances of 1g.10gb and a whole GPU are worth more than 14)."""
    p = scenario(
        [node("s1", gpus=2), node("s2", gpus=1), node("d1", gpus=1), node("d2", gpus=1)],
        [
            {"name": "chat", "mig": "3g.40gb", "replicas": 6, "priority": 100, "cpu": 1},
            {"name": "embed", "mig": "1g.10gb", "replicas": 14, "priority": 10, "cpu": 1},
            {"name": "job", "gpus": 1, "replicas": 2, "priority": 10, "cpu": 1},
        ],
        racks=2,
    )
    ass = [Assignment(workload="chat", replica=k, node=n, gpus=(g,), mig=MigSlot(profile="3g.40gb", start=4 * (k % 2)))
           for k, (n, g) in enumerate([("s1", 0), ("s1", 0), ("s1", 1), ("s1", 1), ("s2", 0), ("s2", 0)])]
    ass += [Assignment(workload="embed", replica=k, node="d1" if k < 7 else "d2", gpus=(0,),
                       mig=MigSlot(profile="1g.10gb", start=k % 7)) for k in range(14)]
    assert check_assignments(p, ass) == []
    hoods = _neighbourhoods(p, ass, regions(p))
    idx = p.cluster.node_index
    assert hoods[0] == sorted(idx[n] for n in ("s1", "s2", "d1", "d2"))
    pick = offer_for(p, ass, hoods[0])
    sub, back = neighbourhood(p, ass, pick.nodes, pick.offer)
    got = _solve_sub(sub, OPTS)
    placed = Counter(back[a.key][0] for a in got)
    assert placed == {"chat": 6, "embed": 8, "job": 1}
