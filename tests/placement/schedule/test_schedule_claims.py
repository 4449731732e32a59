"""Claims that hold: ``optimal`` is proven at every level (the wait included), and no replica left out fits.

Hand-worked reproducers from ``benchmarks/schedule_fuzz.py`` (seed 326 claimed ``optimal`` with twice the
least wait before the fix) and of the validator's insertion check.
"""

from __future__ import annotations

from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.schedule import Schedule, TimedAssignment, Unscheduled, WorkloadTiming
from capplan.model.validate_insertion import insertions
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule import schedule
from capplan.placement.schedule.result import make_schedule

HOUR = 3600
H100 = "H100-SXM5-80GB"


def _node(gpus: int, cpu: int = 8) -> dict[str, Any]:
    return {"name": "n0", "gpu": H100, "gpus": gpus, "cpu": cpu, "memory_gib": 256}


def _two_jobs() -> dict[str, Any]:
    """One node of 2 GPUs, 3h on a 1h grid. ``big`` (2 GPUs, 2h) and ``small`` (1 GPU, 1h), both released at 0:
    they cannot run together (3 GPUs), all the work (5 GPU-h) runs either way, and so does the demand-weighted
    wait: ``big`` first makes ``small`` wait 2h (1 GPU x 2h), ``small`` first makes ``big`` wait 1h (2 GPUs x 1h),
    2.0 GPU-h each. The last level decides: 7200 s of unweighted wait against 3600 s, so ``small`` first."""
    return {"schedule": {"horizon": "3h", "step": "1h"},
            "cluster": {"name": "t", "levels": ["node"], "nodes": [_node(2)]},
            "workloads": [{"name": "big", "gpus": 2, "cpu": 4, "memory_gib": 1, "duration": "2h"},
                          {"name": "small", "gpus": 1, "cpu": 1, "memory_gib": 1, "duration": "1h"}]}


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat", "auto"])
def test_optimal_only_with_the_least_wait(strategy: str) -> None:
    p = problem_from_data(_two_jobs())
    s = schedule(p, strategy, time_limit=5)
    assert check_schedule(p, s) == []
    assert s.objective == (5.0,) and s.bound == (5.0,)
    assert s.wait_gpu_h == 2.0
    if s.status == "optimal":  # before the fix: list scheduling claimed it at 7200 s (the work bound was met)
        assert s.wait_replica_s == HOUR
    if strategy != "heuristic":
        assert s.status == "optimal" and s.wait_replica_s == HOUR
        assert {a.workload: a.start_s for a in s.assignments} == {"big": HOUR, "small": 0}


def _left_out(status: str, bound: float) -> Schedule:
    """``big`` 0..2h on GPUs 0-1; ``small`` left out although GPU 0 or 1 is free from 2h to 3h."""
    return Schedule(status=status, strategy="hand", objective=(4.0,), bound=(bound,), priorities=(0,),
                    wait_gpu_h=0.0, wait_replica_s=0, horizon_s=3 * HOUR, step_s=HOUR,
                    assignments=(TimedAssignment(workload="big", replica=0, node="n0", gpus=(0, 1), start_s=0,
                                                 end_s=2 * HOUR),),
                    workloads=(WorkloadTiming(name="big", start_s=0, end_s=2 * HOUR, wait_s=0, deadline_met=True),
                               WorkloadTiming(name="small", deadline_met=False, reason="no room")),
                    unscheduled=(Unscheduled(workload="small", replicas=(0,), reason="no room"),))


def test_the_insertion_check_finds_the_free_hour() -> None:
    p = problem_from_data(_two_jobs())
    found = insertions(p, _left_out("feasible", 5.0))
    assert [(f.workload, f.assignment.node, f.start_s, f.end_s) for f in found] == [("small", "n0", 2 * HOUR,
                                                                                       3 * HOUR)]
    assert found[0].assignment.gpus == (0,)


def test_the_validator_refuses_optimal_and_a_bound_below_a_feasible_schedule() -> None:
    p = problem_from_data(_two_jobs())
    assert check_schedule(p, _left_out("feasible", 5.0)) == []  # an honest feasible schedule may leave room
    (v,) = check_schedule(p, _left_out("optimal", 4.0))
    assert v.startswith("status is optimal but small[0] fits on n0 GPUs [0] from 7200 s to 10800 s")
    (v,) = check_schedule(p, _left_out("feasible", 4.0))
    assert v.startswith("bound 4.0 at priority 0 is below a feasible schedule: small[0] fits") and "+1.0 GPU-h" in v


def test_a_replica_that_does_not_fit_is_not_reported() -> None:
    """``small`` needs 5 CPUs beside ``big``'s 4 on an 8-CPU node while big runs, so only after 2h; with a 2h
    run it would end past the 3h horizon: nothing fits."""
    data = _two_jobs()
    data["workloads"][1].update(cpu=5, duration="2h")
    p = problem_from_data(data)
    assert insertions(p, _left_out("feasible", 5.0)) == []


def test_make_schedule_adds_what_fits_and_claims_nothing() -> None:
    """A strategy's schedule with room left (here: nothing scheduled) gets the replicas that fit before any claim;
    the proof it came with is void."""
    p = problem_from_data(_two_jobs())
    s = make_schedule(p, "hand", [], [Unscheduled(workload=w.name, replicas=(0,), reason="none") for w in p.workloads],
                      horizon=3 * HOUR, step=HOUR, bound={0: 5 * HOUR * 100}, proven_optimal=True)
    assert check_schedule(p, s) == []
    assert len(s.assignments) == 2 and not s.unscheduled and s.metrics["inserted"] == 2
    assert s.status == "feasible"
