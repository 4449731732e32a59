"""Quotas per queue over time in the planners: list scheduling, greedy, and strategies that decline."""

from __future__ import annotations

import pytest

from capplan.model.errors import InputError
from capplan.model.validate import check_plan
from capplan.model.validate_schedule import check_schedule
from capplan.placement.planner import solve
from capplan.placement.schedule import schedule
from tests.model.test_validate_quota import gpus, quota_problem


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat"])
def test_quota_serialises_a_queue(strategy: str) -> None:
    """Four 8-GPU nodes, team-a's quota 8 GPUs: A and B (8 GPUs, 1h each) of team-a run one after the other
    although the nodes have room; C of team-b (its own quota) runs at once."""
    p = quota_problem([gpus("team-a", 8), gpus("team-b", 8)],
                      [{"name": "A", "gpus": 8, "duration": "1h", "queue": "team-a"},
                       {"name": "B", "gpus": 8, "duration": "1h", "queue": "team-a"},
                       {"name": "C", "gpus": 8, "duration": "1h", "queue": "team-b"}])
    s = schedule(p, strategy, horizon="24h", time_limit=10)
    starts = {r.name: r.start_s for r in s.workloads}
    assert sorted([starts["A"], starts["B"]]) == [0, 3600] and starts["C"] == 0
    assert check_schedule(p, s) == [] and s.wait_gpu_h == 8.0
    if strategy == "cpsat":
        assert s.strategy.startswith("cpsat") and "cpsat_declined" not in s.metrics


def test_time_model_keeps_the_quota_where_list_scheduling_is_greedy() -> None:
    """Quota 8, two 8-GPU nodes. Long L (8 GPUs, 3h, priority 0) and two short S1, S2 (8 GPUs, 1h each, same
    priority). Demand-weighted wait is least with the short ones first: S1 0..1h, S2 1..2h, L 2..5h waits
    2h x 8 = 16; S2 1h x 8 = 8; total 24 GPU-hours; the quota keeps them one at a time on either node."""
    p = quota_problem([gpus("q", 8)], [{"name": "L", "gpus": 8, "duration": "3h", "queue": "q"},
                                       {"name": "S1", "gpus": 8, "duration": "1h", "queue": "q"},
                                       {"name": "S2", "gpus": 8, "duration": "1h", "queue": "q"}], nodes=2)
    s = schedule(p, "cpsat", horizon="24h", time_limit=20)
    assert check_schedule(p, s) == [] and s.wait_gpu_h == 24.0
    assert s.status == "optimal" or s.strategy != "cpsat"


def test_quota_never_fits_reason() -> None:
    """A 16-GPU gang in a queue of 8 never runs; the reason names the quota."""
    p = quota_problem([gpus("q", 8)], [{"name": "G", "kind": "training", "gpus": 8, "replicas": 2, "duration": "1h",
                                        "queue": "q"}])
    s = schedule(p, "heuristic", horizon="24h", time_limit=10)
    assert [u.workload for u in s.unscheduled] == ["G"]
    assert s.unscheduled[0].reason.startswith("quota: q has 0 of 8 GPUs (h100) in use, needs 16 GPUs;")


def test_greedy_plan_honours_quota_and_patterns_declines() -> None:
    """Plan at one instant: quota 16 lets two of four 8-GPU replicas run; patterns declines the scenario."""
    p = quota_problem([gpus("q", 16)], [{"name": "A", "gpus": 8, "replicas": 4, "queue": "q"}])
    plan = solve(p, "auto", time_limit=10)
    assert len(plan.assignments) == 2 and check_plan(p, plan) == []
    assert plan.unplaced[0].reason == "quota: q has 16 of 16 GPUs (h100) in use, needs 8 GPUs"
    with pytest.raises(InputError, match="does not model ClusterQueue quotas"):
        solve(p, "patterns", time_limit=10)


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat"])
def test_cohort_borrowing_in_schedule(strategy: str) -> None:
    """a (nominal 8) and idle b (nominal 8) in one cohort: a's two 8-GPU jobs run together by borrowing b's 8."""
    qa = {"name": "a", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8}]}
    qb = {"name": "b", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8}]}
    p = quota_problem([qa, qb], [{"name": "A1", "gpus": 8, "duration": "1h", "queue": "a"},
                                 {"name": "A2", "gpus": 8, "duration": "1h", "queue": "a"},
                                 {"name": "A3", "gpus": 8, "duration": "1h", "queue": "a"}])
    s = schedule(p, strategy, horizon="24h", time_limit=10)
    assert sorted(r.start_s for r in s.workloads) == [0, 0, 3600]
    assert check_schedule(p, s) == []


def test_cpsat_plan_honours_quota_and_cohort() -> None:
    """a (nominal 8, lending_limit 0: keeps all 8) and b (nominal 8, lends all) in one cohort, four 8-GPU nodes.
    The pool is b's 8. a at 16 draws 8 from it, B (8 GPUs of b) draws 8 too: 16 > 8, so at most 16 GPUs run
    (a at 16, or a at 8 and B); 24 never."""
    qa = {"name": "a", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8,
                                                  "lending_limit": 0}]}
    qb = {"name": "b", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8}]}
    p = quota_problem([qa, qb], [{"name": "A", "gpus": 8, "replicas": 3, "queue": "a"},
                                 {"name": "B", "gpus": 8, "queue": "b"}])
    plan = solve(p, "cpsat", time_limit=10)
    assert check_plan(p, plan) == [] and "fallback_from" not in plan.metrics
    assert sum(8 for _ in plan.assignments) == 16 and plan.status == "optimal"
