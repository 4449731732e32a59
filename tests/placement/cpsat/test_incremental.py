"""Incremental planning: running replicas stay, preemption only for higher priority, migration moves."""

from __future__ import annotations

from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve

from .conftest import ONE_WORKER, node, scenario

PREEMPT = PlanOptions(time_limit=30, workers=1, allow_preemption=True)
MIGRATE = PlanOptions(time_limit=30, workers=1, allow_migration=True)


def _busy_node(preemptible: bool = True, prio_low: int = 1, prio_high: int = 100) -> Problem:
    """One 8-GPU node fully used by eight 1-GPU replicas; a 4-GPU job waits."""
    return scenario(
        [node("n1")],
        [
            {
                "name": "eval",
                "replicas": 8,
                "gpus": 1,
                "priority": prio_low,
                "preemptible": preemptible,
                "cpu": 1,
            },
            {"name": "urgent", "replicas": 1, "gpus": 4, "priority": prio_high, "cpu": 1},
        ],
        running=[{"workload": "eval", "replica": r, "node": "n1", "gpus": [r]} for r in range(8)],
    )


def test_running_replicas_stay_by_default() -> None:
    """Without options nothing running moves, so the waiting job stays unplaced."""
    p = _busy_node()
    plan = solve(p, "cpsat", ONE_WORKER)
    assert set(p.running) <= set(plan.assignments)
    assert not plan.evictions and [u.workload for u in plan.unplaced] == ["urgent"]


def test_preemption_evicts_lower_priority_for_higher() -> None:
    """With --allow-preemption exactly four preemptible replicas make room; they are listed unplaced too."""
    p = _busy_node()
    plan = solve(p, "cpsat", PREEMPT)
    assert check_plan(p, plan) == []
    assert len(plan.evictions) == 4 and all(e.workload == "eval" for e in plan.evictions)
    assert any(a.workload == "urgent" for a in plan.assignments)
    evicted = {e.replica for e in plan.evictions}
    listed = {r for u in plan.unplaced if u.workload == "eval" for r in u.replicas}
    assert evicted == listed
    assert all("urgent" in e.reason for e in plan.evictions)


def test_never_evicts_for_lower_priority() -> None:
    """A preemptible running replica of higher priority is never evicted for a lower-priority one."""
    p = _busy_node(prio_low=100, prio_high=1)
    plan = solve(p, "cpsat", PREEMPT)
    assert not plan.evictions


def test_non_preemptible_never_evicted() -> None:
    """Preemption leaves non-preemptible running replicas alone."""
    p = _busy_node(preemptible=False)
    plan = solve(p, "cpsat", PREEMPT)
    assert not plan.evictions


def test_migration_makes_room_for_a_gang() -> None:
    """A migratable 1-GPU replica moves off a node so an 8-GPU replica fits; the move is listed."""
    p = scenario(
        [node("n1"), node("n2")],
        [
            {
                "name": "svc",
                "replicas": 2,
                "gpus": 1,
                "priority": 5,
                "migratable": True,
                "migration_cost": 3,
                "cpu": 1,
            },
            {"name": "big", "replicas": 1, "gpus": 8, "priority": 50, "cpu": 1},
        ],
        running=[
            {"workload": "svc", "replica": 0, "node": "n1", "gpus": [0]},
            {"workload": "svc", "replica": 1, "node": "n2", "gpus": [0]},
        ],
    )
    assert not any(a.workload == "big" for a in solve(p, "cpsat", ONE_WORKER).assignments)
    plan = solve(p, "cpsat", MIGRATE)
    assert check_plan(p, plan) == []
    assert any(a.workload == "big" for a in plan.assignments)
    assert len(plan.migrations) == 1 and plan.migrations[0].workload == "svc"
    assert not plan.evictions


def test_new_slices_fill_around_running_mig_instances() -> None:
    """Running MIG instances stay at their starts and new slices use the remaining room of the GPU."""
    p = scenario(
        [node("n1", gpus=1)],
        [
            {"name": "old", "replicas": 1, "mig": "3g.40gb", "priority": 5, "cpu": 1},
            {"name": "new", "replicas": 3, "mig": "1g.10gb", "priority": 5, "cpu": 1},
        ],
        running=[
            {
                "workload": "old",
                "replica": 0,
                "node": "n1",
                "gpus": [0],
                "mig": {"profile": "3g.40gb", "start": 4},
            }
        ],
    )
    plan = solve(p, "cpsat", ONE_WORKER)
    assert p.running[0] in plan.assignments
    assert sum(1 for a in plan.assignments if a.workload == "new") == 3


def test_preempting_shares_on_a_shared_gpu() -> None:
    """Preemptible notebook shares are evicted from a GPU only as far as a higher-priority share needs."""
    p = scenario(
        [node("n1", gpus=1)],
        [
            {"name": "nb", "replicas": 4, "gpu_fraction": 0.25, "priority": 1, "preemptible": True, "cpu": 1},
            {"name": "api", "replicas": 1, "gpu_fraction": 0.5, "priority": 10, "cpu": 1},
        ],
        running=[{"workload": "nb", "replica": r, "node": "n1", "gpus": [0], "fraction": 0.25} for r in range(4)],
    )
    plan = solve(p, "cpsat", PREEMPT)
    assert len(plan.evictions) == 2
    assert any(a.workload == "api" for a in plan.assignments)


def test_freed_shared_gpu_becomes_mig() -> None:
    """Evicting every share on an unfixed GPU frees it for another mode (here MIG slices)."""
    p = scenario(
        [node("n1", gpus=2)],
        [
            {"name": "nb", "kind": "shared", "replicas": 4, "gpu_fraction": 0.5, "priority": 1, "preemptible": True},
            {"name": "api", "replicas": 2, "mig": "3g.40gb", "priority": 100, "cpu": 2},
        ],
        running=[{"workload": "nb", "replica": r, "node": "n1", "gpus": [r // 2], "fraction": 0.5} for r in range(4)],
    )
    plan = solve(p, "cpsat", PREEMPT)
    assert check_plan(p, plan) == []
    assert len(plan.evictions) == 2 and sum(1 for a in plan.assignments if a.workload == "api") == 2
    assert plan.status == "feasible"  # with optional running replicas the bound is the trivial one
