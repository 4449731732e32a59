"""Greedy planner behaviour: priority order, gangs in one domain, best fit, MIG starts, reasons."""

from __future__ import annotations

import numpy as np

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.placement import PlanOptions, solve
from capplan.placement.greedy import plan_greedy
from tests.conftest import scenario

H100 = {"gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 224, "memory_gib": 2048}


def test_gang_lands_in_one_rack(small_h100_pod: Problem) -> None:
    """A 2x8 gang that needs one rack fills both nodes of a single rack."""
    plan = solve(small_h100_pod, "greedy")
    racks = {a.node[:2] for a in plan.assignments}
    assert len(plan.assignments) == 2 and len(racks) == 1
    assert plan.status == "optimal"


def test_gang_blocked_by_fragmentation_has_reason() -> None:
    """With one GPU running in r1n1 and r2n1, a rack-bound 2x8 gang is unplaced with a topology reason."""
    racks = [{"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": 2, **H100}]} for r in (1, 2)]
    running = [{"workload": "small", "replica": i, "node": n, "gpus": [0]} for i, n in enumerate(["r1n1", "r2n1"])]
    p = scenario([], [{"name": "small", "replicas": 2, "gpus": 1},
                      {"name": "gang", "kind": "training", "replicas": 2, "gpus": 8, "topology": {"required": "rack"}}],
                 racks=racks, running=running)
    plan = solve(p, "greedy")
    (gang,) = plan.unplaced
    assert gang.workload == "gang" and gang.replicas == (0, 1)
    assert "needs 2 x 8 GPUs in one rack" in gang.reason and "room for 1" in gang.reason


def test_priority_order_wins() -> None:
    """When only one of two 8-GPU jobs fits, the higher priority one is placed."""
    p = scenario([{"name": "n1", **H100}], [{"name": "low", "gpus": 8, "priority": 1},
                                           {"name": "high", "gpus": 8, "priority": 9}])
    plan = solve(p, "greedy")
    assert [a.workload for a in plan.assignments] == ["high"]
    assert plan.objective == (8.0, 0.0)
    assert "low" in plan.unplaced[0].workload


def test_best_fit_packs_partially_used_node() -> None:
    """A 4-GPU job goes to the node that already has 4 GPUs busy, keeping a node whole."""
    p = scenario([{"name": "n1", **H100}, {"name": "n2", **H100}],
                 [{"name": "a", "gpus": 4, "priority": 5}, {"name": "b", "gpus": 4}])
    plan = solve(p, "greedy")
    assert {a.node for a in plan.assignments} == {plan.assignments[0].node}


def test_mig_start_keeps_most_placements() -> None:
    """The first 3g.40gb slice starts at 4, leaving start 0 free for a 4g.40gb or 3g.40gb."""
    p = scenario([{"name": "n1", **H100, "gpus": 1}], [{"name": "s", "mig": "3g.40gb"}])
    plan = solve(p, "greedy")
    assert plan.assignments[0].mig is not None and plan.assignments[0].mig.start == 4


def test_preset_layout_used(fragmented_mig_node: Problem) -> None:
    """A GPU preset with one free 3g slot at start 4 hosts one replica there; the others use GPU 1."""
    plan = solve(fragmented_mig_node, "greedy")
    on0 = [a for a in plan.assignments if a.gpus == (0,)]
    assert len(on0) == 1 and on0[0].mig is not None and on0[0].mig.start == 4
    assert len(plan.assignments) == 3


def test_mig_auto_picks_smallest_fitting_profile() -> None:
    """mig: auto with 15 GiB picks 1g.20gb on an H100 (1g.10gb is too small)."""
    p = scenario([{"name": "n1", **H100}], [{"name": "s", "mig": "auto", "gpu_memory_gib": 15}])
    plan = solve(p, "greedy")
    assert plan.assignments[0].mig is not None and plan.assignments[0].mig.profile == "1g.20gb"


def test_power_budget_limits_gpus() -> None:
    """A 3 kW rack budget admits four 700 W H100s, not eight."""
    racks = [{"name": "r1", "power_kw": 3, "nodes": [{"name": "n1", **H100}]}]
    p = scenario([], [{"name": "w", "replicas": 8, "gpus": 1}], racks=racks)
    plan = solve(p, "greedy")
    assert len(plan.assignments) == 4
    assert "power" in plan.unplaced[0].reason


def test_guaranteed_unplaced_is_infeasible() -> None:
    """A guaranteed workload that cannot fit makes the status infeasible with a reason."""
    p = scenario([{"name": "n1", **H100}], [{"name": "big", "gpus": 16, "sla": "guaranteed"}])
    plan = solve(p, "greedy")
    assert plan.status == "infeasible"
    assert "largest node has 8 GPUs" in plan.unplaced[0].reason


def test_isolation_reason() -> None:
    """An isolated tenant that only fits next to another tenant is told so."""
    p = scenario([{"name": "n1", **H100, "gpus": 1}],
                 [{"name": "a", "mig": "1g.10gb", "tenant": "x", "priority": 5},
                  {"name": "b", "mig": "1g.10gb", "tenant": "y", "isolation": "tenant"}])
    plan = solve(p, "greedy")
    assert plan.unplaced[0].workload == "b" and "isolation" in plan.unplaced[0].reason


def test_cpu_only_pods_fill_cpu() -> None:
    """CPU-only pods are placed where they fit and count as placed replicas."""
    p = scenario([{"name": "c1", "cpu": 16, "memory_gib": 64}], [{"name": "etl", "replicas": 5, "cpu": 4}])
    plan = plan_greedy(p, PlanOptions())
    assert len(plan.assignments) == 4 and plan.metrics["replicas_placed"] == 4
    assert "CPU" in plan.unplaced[0].reason


def _power_blocks(rack_kw: list[list[float]], block_kw: list[float | None]) -> Problem:
    """Blocks of racks of two 8xH100 nodes (700 W per GPU) with the given rack and block budgets (kW), and
    three rack-bound 2x8 gangs at priority 10 and two 8-GPU services below."""
    blocks = []
    for b, (racks, bkw) in enumerate(zip(rack_kw, block_kw, strict=True)):
        items = [{"name": f"b{b}r{r}", "power_kw": kw,
                  "nodes": [{"name_prefix": f"b{b}r{r}n", "count": 2, **H100}]} for r, kw in enumerate(racks)]
        blocks.append({"name": f"b{b}", "racks": items, **({"power_kw": bkw} if bkw is not None else {})})
    work = [{"name": f"gang{k}", "kind": "training", "replicas": 2, "gpus": 8, "cpu": 64, "memory_gib": 512,
             "topology": {"required": "rack"}, "priority": 10} for k in range(3)]
    work.append({"name": "svc", "replicas": 2, "gpus": 8, "cpu": 16, "memory_gib": 64})
    return problem_from_data({"cluster": {"name": "p", "levels": ["block", "rack", "node"], "blocks": blocks},
                              "workloads": work})


def test_gangs_go_where_power_feeds_them() -> None:
    """Racks that feed one node (5.6 kW = 8 GPUs) cannot hold a 2x8 gang; the racks that feed two do, one gang
    each; the third gang is unplaced (power), and the services take the one node each small rack feeds."""
    p = _power_blocks([[5.6, 11.2], [5.6, 11.2]], [None, None])
    plan = solve(p, "greedy")  # solve checks the plan with the independent validator
    gang_racks = {w: {a.node[:4] for a in plan.assignments if a.workload == w} for w in ("gang0", "gang1")}
    assert gang_racks == {"gang0": {"b0r1"}, "gang1": {"b1r1"}}
    assert [u.workload for u in plan.unplaced] == ["gang2"]
    assert sorted(a.node[:4] for a in plan.assignments if a.workload == "svc") == ["b0r0", "b1r0"]
    assert plan.objective == (32.0, 16.0)


def test_block_budget_caps_the_racks_under_it() -> None:
    """Block b0's 11.2 kW feeds 16 GPUs over its two 11.2 kW racks: one gang there, the next in b1r0 (b1r1
    feeds one node); the third gang fits nowhere, and one service takes the node b1r1 feeds."""
    p = _power_blocks([[11.2, 11.2], [11.2, 5.6]], [11.2, None])
    plan = solve(p, "greedy")
    gang_racks = {w: {a.node[:4] for a in plan.assignments if a.workload == w} for w in ("gang0", "gang1")}
    assert gang_racks == {"gang0": {"b0r0"}, "gang1": {"b1r0"}}
    assert [(u.workload, u.replicas) for u in plan.unplaced] == [("gang2", (0, 1)), ("svc", (1,))]
    assert [a.node[:4] for a in plan.assignments if a.workload == "svc"] == ["b1r1"]
    assert plan.objective == (32.0, 8.0)


def test_domain_room_counts_power() -> None:
    """Per rack, the replicas of an 8-GPU workload that CPU, memory, GPUs and every power budget over the rack
    allow: b0r0 by its own 5.6 kW (one), b0r1 by GPUs (two), b1's racks by the block's 16.8 kW (three in all,
    so at most two in either rack, which has two nodes)."""
    from capplan.placement.core.power import domain_room
    from capplan.placement.core.reasons import room_estimate
    from capplan.placement.core.state import ClusterState

    p = _power_blocks([[5.6, 22.4], [22.4, 22.4]], [None, 16.8])
    st = ClusterState(p)
    w = p.workload("gang0")
    idx = st.eligible(w)[0]
    ids, names = st.domain_ids("rack")
    room = domain_room(st, w, idx, room_estimate(st, w, idx), ids, len(names))
    assert dict(zip(names, room.tolist(), strict=True)) == {"b0r0": 1, "b0r1": 2, "b1r0": 2, "b1r1": 2}
    cpu_only = p.workload("svc").model_copy(update={"gpus": None})
    assert domain_room(st, cpu_only, idx, np.full(idx.size, 3), ids, len(names)).tolist() == [6, 6, 6, 6]
