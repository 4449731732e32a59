"""Greedy's gang packing: best fit over every model's domains, the repair that moves planned gangs, and the
per-priority choice that keeps the plan never worse than the greedy order alone."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions
from capplan.placement.core.state import ClusterState
from capplan.placement.core.subproblem import lex_key
from capplan.placement.greedy import plan_greedy
from capplan.placement.placer import GreedyPlacer, place_workload

H100, A100, H200 = "H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM-141GB"
SHORT = {H100: "h100", A100: "a100", H200: "h200"}


def _node_group(rack: str, model: str, count: int) -> dict[str, Any]:
    return {"name_prefix": f"{rack}{SHORT[model]}-", "count": count, "gpu": model, "gpus": 8, "cpu": 192,
            "memory_gib": 2048}


def _gang(name: str, replicas: int, level: str, priority: int, models: list[str] | None = None) -> dict[str, Any]:
    w: dict[str, Any] = {"name": name, "kind": "training", "replicas": replicas, "gpus": 8, "cpu": 96,
                         "memory_gib": 1024, "priority": priority, "topology": {"required": level}}
    if models:
        w["gpu_models"] = models
    return w


def _problem(blocks: list[list[dict[str, int]]], workloads: list[dict[str, Any]],
             running: list[dict[str, Any]] | None = None) -> Problem:
    """Blocks of racks, each rack a {model: nodes} count; whole-node gangs."""
    data = {"cluster": {"name": "g", "levels": ["block", "rack", "node"], "blocks": [
        {"name": f"b{b}", "racks": [{"name": f"b{b}r{r}", "nodes": [_node_group(f"b{b}r{r}", m, c)
                                                                   for m, c in sorted(rack.items()) if c]}
                                    for r, rack in enumerate(racks)]}
        for b, racks in enumerate(blocks)]}, "workloads": workloads, "running": running or []}
    return problem_from_data(data)


def _models_of(p: Problem, plan: Any, name: str) -> set[str | None]:
    return {p.cluster.nodes[p.cluster.node_index[a.node]].gpu_model for a in plan.assignments if a.workload == name}


def test_repair_moves_a_planned_gang_to_open_its_model() -> None:
    """One block: 4 H100 and 2 A100 nodes. The priority-100 gang of 2 (any model) goes to the A100s (the model
    with the fewest free GPUs); the priority-50 gang of 2 that may run on A100 only finds no room. The repair
    moves the first gang to the H100s and places the second on the A100s; without it, the second is unplaced."""
    p = _problem([[{H100: 2, A100: 1}, {H100: 2, A100: 1}]],
                 [_gang("first", 2, "block", 100), _gang("second", 2, "block", 50, [A100])])
    plain = plan_greedy(p, PlanOptions(), other_ways=False)
    assert _models_of(p, plain, "first") == {A100}
    assert [u.workload for u in plain.unplaced] == ["second"]
    plan = plan_greedy(p, PlanOptions())
    assert check_plan(p, plan) == []
    assert plan.unplaced == ()
    assert _models_of(p, plan, "first") == {H100} and _models_of(p, plan, "second") == {A100}
    assert plan.metrics["gangs_repaired"] == 1 and plan.metrics["gangs_moved"] == 1
    assert plan.objective == (16.0, 16.0)


def test_repair_never_moves_running_replicas() -> None:
    """The same fleet with the first gang running on the A100s: nothing may move it, the second stays out."""
    running = [{"workload": "first", "replica": r, "node": n, "gpus": list(range(8))}
               for r, n in enumerate(["b0r0a100-1", "b0r1a100-1"])]
    p = _problem([[{H100: 2, A100: 1}, {H100: 2, A100: 1}]],
                 [_gang("first", 2, "block", 100), _gang("second", 2, "block", 50, [A100])], running)
    plan = plan_greedy(p, PlanOptions())
    assert check_plan(p, plan) == []
    assert [u.workload for u in plan.unplaced] == ["second"]
    assert _models_of(p, plan, "first") == {A100}
    assert "gangs_repaired" not in plan.metrics


def test_best_fit_leaves_the_rack_a_later_gang_needs() -> None:
    """Rack r0: 3 H100; rack r1: 2 A100; rack r2: 4 A100. A 2-node gang on any model: by the fewest free GPUs of a
    model it goes to the H100s (3 nodes against 6 A100), leaving 1 H100 node; best fit over every model's racks
    takes rack r1's 2 A100 whole, so a 3-node H100 gang still fits in r0."""
    p = _problem([[{H100: 3}, {A100: 2}, {A100: 4}]], [_gang("two", 2, "rack", 50), _gang("three", 3, "rack", 10,
                                                                                           [H100])])
    w = p.workload("two")
    plain = GreedyPlacer(p, ClusterState(p))
    got = place_workload(plain, w, 2, [])
    assert {plain.st.nodes[pl.node].gpu_model for pl in got} == {H100}
    fit = GreedyPlacer(p, ClusterState(p))
    got = place_workload(fit, w, 2, [], best_fit=True)
    assert {fit.st.nodes[pl.node].name for pl in got} == {"b0r1a100-1", "b0r1a100-2"}
    three = place_workload(fit, p.workload("three"), 3, [])
    assert len(three) == 3 and {fit.st.nodes[pl.node].name[:4] for pl in three} == {"b0r0"}
    assert int(np.sum(fit.st.free_whole)) == 8 * 4  # rack r2's four A100 nodes are left whole


def test_whole_priority_choice_keeps_the_greedy_order_when_repairs_lose() -> None:
    """One block of 4 A100 and 6 H100 nodes. The priority-100 gang of 4 (any model) takes the A100s; at priority
    50 the 4-node gang on A100 only is left out, and the two 3-node gangs fill the H100s (6 nodes). Repairing the
    first (moving the top gang to the H100s) would leave room for neither 3-node gang (4 nodes at priority 50),
    so the priority is kept as the greedy order placed it."""
    p = _problem([[{A100: 2, H100: 3}, {A100: 2, H100: 3}]],
                 [_gang("top", 4, "block", 100), _gang("x", 4, "block", 50, [A100]),
                  _gang("y", 3, "block", 50), _gang("z", 3, "block", 50)])
    plain = plan_greedy(p, PlanOptions(), other_ways=False)
    plan = plan_greedy(p, PlanOptions())
    assert check_plan(p, plan) == []
    assert plan.objective == plain.objective == (32.0, 48.0)
    assert [u.workload for u in plan.unplaced] == ["x"]
    assert _models_of(p, plan, "top") == {A100}
    assert "gangs_repaired" not in plan.metrics


@st.composite
def gang_fleets(draw: st.DrawFn) -> dict[str, Any]:
    """Blocks of racks mixing up to three GPU models; whole-node gangs bound to a rack or block, some on two
    models, over three priorities, and one-GPU fill work."""
    models = [H100, A100, H200]
    blocks = []
    for _ in range(draw(st.integers(1, 2))):
        racks = []
        for _ in range(draw(st.integers(1, 3))):
            rack = {m: draw(st.integers(0, 3)) for m in models}
            if not any(rack.values()):
                rack[H100] = 1
            racks.append(rack)
        blocks.append(racks)
    workloads: list[dict[str, Any]] = []
    for k in range(draw(st.integers(1, 9))):
        level = draw(st.sampled_from(["rack", "block"]))
        size = draw(st.integers(1, 4 if level == "rack" else 8))
        pick = draw(st.sampled_from([None, [H100], [A100, H200], [H100, A100]]))
        workloads.append(_gang(f"g{k}", size, level, draw(st.sampled_from([100, 50, 10])), pick))
    if draw(st.booleans()):
        workloads.append({"name": "fill", "gpus": 1, "replicas": draw(st.integers(1, 16)), "cpu": 4,
                          "memory_gib": 64, "priority": 1})
    return {"blocks": blocks, "workloads": workloads}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gang_fleets())
def test_gang_fleets_valid_and_never_worse_than_the_greedy_order(fleet: dict[str, Any]) -> None:
    """On random small gang fleets greedy's plan passes the independent validator, accounts for every replica,
    and is never lexicographically worse than the greedy order alone (so never fewer GPUs at the top priority)."""
    p = _problem(fleet["blocks"], fleet["workloads"])
    plan = plan_greedy(p, PlanOptions())
    plain = plan_greedy(p, PlanOptions(), other_ways=False)
    assert check_plan(p, plan) == []
    placed = {a.key for a in plan.assignments}
    assert len(placed) == len(plan.assignments)
    assert len(placed) + sum(len(u.replicas) for u in plan.unplaced) == sum(w.replicas for w in p.workloads)
    assert lex_key(p, plan.assignments) >= lex_key(p, plain.assignments)
    assert plan.objective[0] >= plain.objective[0]
