"""Plan-based benchmark metrics (MIG slice utilisation, gangs, gang spread) on hand-made plans."""

from __future__ import annotations

from typing import Any

from capplan.bench.metrics import gang_metrics, mig_utilisation, plan_metrics
from capplan.io.scenario import problem_from_data
from capplan.model.plan import Assignment, MigSlot, Unplaced
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement.core.summary import make_plan

H100 = "H100-SXM5-80GB"


def _node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"name": name, "cpu": 64, "memory_gib": 512, "gpu": H100, "gpus": gpus}


def _problem(workloads: list[dict[str, Any]]) -> Problem:
    """Two blocks x two racks x two 8-GPU H100 nodes (b{b}r{r}n{k})."""
    blocks = [{"name": f"block-{b}", "racks": [{"name": f"rack-{b}{r}",
                                                "nodes": [_node(f"b{b}r{r}n{k}") for k in range(2)]}
                                               for r in range(2)]} for b in range(2)]
    return problem_from_data({"cluster": {"name": "t", "levels": ["block", "rack", "node"], "blocks": blocks},
                              "workloads": workloads})


def test_mig_one_gpu_by_hand() -> None:
    """One H100 with 3g.40gb@0 + 2g.20gb@4: compute 5/7 = 71.43%, memory 6/8 = 75%."""
    prob = _problem([{"name": "a", "mig": "3g.40gb", "cpu": 1, "memory_gib": 1},
                     {"name": "b", "mig": "2g.20gb", "cpu": 1, "memory_gib": 1}])
    plan = make_plan(prob, "hand", [
        Assignment(workload="a", replica=0, node="b0r0n0", gpus=(0,), mig=MigSlot(profile="3g.40gb", start=0)),
        Assignment(workload="b", replica=0, node="b0r0n0", gpus=(0,), mig=MigSlot(profile="2g.20gb", start=4))], [])
    assert check_plan(prob, plan) == []
    assert mig_utilisation(prob, plan) == (71.43, 75.0)


def test_mig_two_gpus_and_whole_gpus_ignored() -> None:
    """GPUs without MIG instances do not count: 7g.80gb + 1g.10gb on two GPUs is 8/14 compute, 9/16 memory."""
    prob = _problem([{"name": "big", "mig": "7g.80gb", "cpu": 1, "memory_gib": 1},
                     {"name": "small", "mig": "1g.10gb", "cpu": 1, "memory_gib": 1},
                     {"name": "whole", "gpus": 4, "cpu": 1, "memory_gib": 1}])
    plan = make_plan(prob, "hand", [
        Assignment(workload="big", replica=0, node="b0r0n0", gpus=(0,), mig=MigSlot(profile="7g.80gb", start=0)),
        Assignment(workload="small", replica=0, node="b1r1n1", gpus=(3,), mig=MigSlot(profile="1g.10gb", start=6)),
        Assignment(workload="whole", replica=0, node="b0r0n0", gpus=(4, 5, 6, 7))], [])
    assert check_plan(prob, plan) == []
    assert mig_utilisation(prob, plan) == (round(100 * 8 / 14, 2), round(100 * 9 / 16, 2))


def test_no_mig_and_no_gangs_are_not_applicable() -> None:
    """A plan without MIG instances or training workloads reports None / zero gangs."""
    prob = _problem([{"name": "w", "gpus": 1, "cpu": 1, "memory_gib": 1}])
    plan = make_plan(prob, "hand", [Assignment(workload="w", replica=0, node="b0r0n0", gpus=(0,))], [])
    assert plan_metrics(prob, plan) == {"mig_compute_pct": None, "mig_memory_pct": None, "gangs_total": 0,
                                        "gangs_placed": 0, "gang_spread_mean": None}


def test_gangs_placed_and_spread_by_hand() -> None:
    """Gang g1 (preferred rack) spans 2 racks; g2 (no topology) spans 1 block; g3 unplaced: 2/3, mean 1.5."""
    train = {"kind": "training", "gpus": 8, "cpu": 1, "memory_gib": 1}
    prob = _problem([dict(train, name="g1", replicas=2, topology={"preferred": "rack"}),
                     dict(train, name="g2", replicas=2),
                     dict(train, name="g3", replicas=8, topology={"required": "block"}),
                     {"name": "inf", "gpus": 1, "cpu": 1, "memory_gib": 1}])
    eight = tuple(range(8))
    plan = make_plan(prob, "hand", [
        Assignment(workload="g1", replica=0, node="b0r0n0", gpus=eight),
        Assignment(workload="g1", replica=1, node="b0r1n0", gpus=eight),
        Assignment(workload="g2", replica=0, node="b1r0n0", gpus=eight),
        Assignment(workload="g2", replica=1, node="b1r1n1", gpus=eight)],
        [Unplaced(workload="g3", replicas=tuple(range(8)), reason="no room"),
         Unplaced(workload="inf", replicas=(0,), reason="no room")])
    assert check_plan(prob, plan) == []
    assert gang_metrics(prob, plan) == (3, 2, 1.5)


def test_gang_spread_required_level() -> None:
    """A gang with only ``required: block`` is measured at block level (1 domain)."""
    prob = _problem([{"name": "g", "kind": "training", "replicas": 2, "gpus": 8, "cpu": 1, "memory_gib": 1,
                      "topology": {"required": "block"}}])
    eight = tuple(range(8))
    plan = make_plan(prob, "hand", [Assignment(workload="g", replica=0, node="b1r0n0", gpus=eight),
                                    Assignment(workload="g", replica=1, node="b1r1n0", gpus=eight)], [])
    assert check_plan(prob, plan) == []
    assert gang_metrics(prob, plan) == (1, 1, 1.0)
