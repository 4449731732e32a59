"""``schedule(..., policy="kueue")``: Kueue's admission on hand-worked queues (each docstring derives the answer)."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule import schedule

H100 = "H100-SXM5-80GB"


def kueue_problem(racks: dict[str, int], queues: list[dict[str, Any]], workloads: list[dict[str, Any]],
                  running: list[dict[str, Any]] | None = None) -> Problem:
    return problem_from_data({
        "schedule": {"horizon": "24h", "step": "1m"},
        "cluster": {"levels": ["rack", "node"], "racks": [
            {"name": r, "nodes": [{"name_prefix": f"{r}n", "count": n, "gpu": H100, "gpus": 8, "cpu": 64,
                                   "memory_gib": 512}]} for r, n in racks.items()]},
        "workloads": workloads, "running": running or [],
        "quotas": {"flavors": [{"name": "h100", "topology": "default"}], "queues": queues}})


def queue(name: str, gpus: int, strategy: str = "BestEffortFIFO") -> dict[str, Any]:
    return {"name": name, "strategy": strategy,
            "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": gpus}]}


def full(node: str, workload: str, ends_in: str, gpus: int = 8) -> dict[str, Any]:
    return {"workload": workload, "replica": 0, "node": node, "gpus": list(range(gpus)), "ends_in": ends_in}


def starts(s: Schedule) -> dict[str, int | None]:
    return {r.name: r.start_s for r in s.workloads}


def reason(s: Schedule, name: str) -> str:
    return next(r.reason or "" for r in s.workloads if r.name == name)


def head_case(strategy: str) -> Problem:
    """One 8-GPU node, queue q (quota 8). R (4 GPUs) runs until 1h. Pending, oldest first: H (8 GPUs, 1h),
    S (4 GPUs, 1h). At 0 only 4 GPUs are free: H does not fit, S would."""
    return kueue_problem({"r1": 1}, [queue("q", 8, strategy)], [
        {"name": "R", "gpus": 4, "duration": "2h", "queue": "q"},
        {"name": "H", "gpus": 8, "duration": "1h", "queue": "q", "created": "-30m"},
        {"name": "S", "gpus": 4, "duration": "1h", "queue": "q", "created": "-10m"}],
        running=[full("r1n1", "R", "1h", 4)])


def test_strict_fifo_head_blocks() -> None:
    """StrictFIFO: S waits behind the head H. R ends at 1h, H runs 1h..2h, S runs 2h..3h."""
    p = head_case("StrictFIFO")
    s = schedule(p, policy="kueue")
    assert starts(s) == {"R": 0, "H": 3600, "S": 7200}
    assert reason(s, "S").startswith("queue: behind H in StrictFIFO ClusterQueue q")
    assert check_schedule(p, s) == [] and s.strategy == "kueue"


def test_best_effort_fifo_lets_a_small_workload_pass() -> None:
    """BestEffortFIFO: S fits the 4 free GPUs and runs 0..1h; R and S end at 1h, then H runs 1h..2h."""
    p = head_case("BestEffortFIFO")
    s = schedule(p, policy="kueue")
    assert starts(s) == {"R": 0, "H": 3600, "S": 0}
    assert reason(s, "H") == "quota: q has 4 of 8 GPUs (h100) in use, needs 8 GPUs (admitted at 1h)"


def test_quota_exhausted_until_a_running_workload_ends() -> None:
    """Two 8-GPU nodes, quota 8. R (8 GPUs) runs until 2h; P (8 GPUs) waits although a node is empty: the
    queue has 8 of 8 GPUs in use until R ends at 2h."""
    p = kueue_problem({"r1": 2}, [queue("q", 8)], [
        {"name": "R", "gpus": 8, "duration": "3h", "queue": "q"},
        {"name": "P", "gpus": 8, "duration": "1h", "queue": "q"}], running=[full("r1n1", "R", "2h")])
    s = schedule(p, policy="kueue")
    assert starts(s)["P"] == 7200
    assert reason(s, "P") == "quota: q has 8 of 8 GPUs (h100) in use, needs 8 GPUs (admitted at 2h)"
    assert check_schedule(p, s) == []


def test_gang_waits_for_a_rack() -> None:
    """Racks r1 and r2 of two 8-GPU nodes. r1n1 is busy until 1h, r2n1 until 3h. Gang G (2 x 8 GPUs, required
    rack) has two free nodes at 0 but in different racks; at 1h rack r1 is free: G runs 1h..3h."""
    p = kueue_problem({"r1": 2, "r2": 2}, [queue("q", 64)], [
        {"name": "B1", "gpus": 8, "duration": "4h"}, {"name": "B3", "gpus": 8, "duration": "4h"},
        {"name": "G", "kind": "training", "replicas": 2, "gpus": 8, "duration": "2h", "topology": {"required": "rack"},
         "queue": "q"}],
        running=[full("r1n1", "B1", "1h"), full("r2n1", "B3", "3h")])
    s = schedule(p, policy="kueue")
    assert starts(s)["G"] == 3600
    assert {a.node for a in s.assignments if a.workload == "G"} == {"r1n1", "r1n2"}
    assert reason(s, "G").startswith("topology: needs 2 x")
    assert check_schedule(p, s) == []


def test_priority_before_creation_time() -> None:
    """One node, queue StrictFIFO. Low (8 GPUs, created first) and High (8 GPUs, priority 10, created later):
    High runs 0..1h, Low 1h..2h."""
    p = kueue_problem({"r1": 1}, [queue("q", 8, "StrictFIFO")], [
        {"name": "Low", "gpus": 8, "duration": "1h", "queue": "q", "created": "-2h"},
        {"name": "High", "gpus": 8, "duration": "1h", "queue": "q", "priority": 10, "created": "-1m"}])
    assert starts(schedule(p, policy="kueue")) == {"Low": 3600, "High": 0}


def test_past_the_horizon_is_unscheduled_with_its_start() -> None:
    """A 30h job admitted at 0 ends after the 24h horizon: unscheduled, its Kueue start kept in the metrics."""
    p = kueue_problem({"r1": 1}, [queue("q", 8)], [{"name": "L", "gpus": 8, "duration": "30h", "queue": "q"}])
    s = schedule(p, policy="kueue")
    assert [u.workload for u in s.unscheduled] == ["L"] and s.metrics["kueue_starts"] == {"L": 0}


def test_unknown_policy() -> None:
    with pytest.raises(InputError, match="unknown policy"):
        schedule(head_case("StrictFIFO"), policy="fifo")


def test_a_simulation_is_feasible_never_optimal() -> None:
    """One 8-GPU node, W (8 GPUs, 1h) admitted at 0: all work runs and nothing waits, which a search would
    report as ``optimal`` (its a-priori best). Kueue's simulation searched nothing: ``feasible``; the bound
    (8 GPU-hours, all the work) is kept and labelled as the a-priori one; the summary prints no gap."""
    from capplan.cli.schedule import summary
    from capplan.placement.schedule.kueue import BOUND_LABEL

    p = kueue_problem({"r1": 1}, [queue("q", 8)], [{"name": "W", "gpus": 8, "duration": "1h", "queue": "q"}])
    s = schedule(p, policy="kueue")
    assert (s.status, s.objective, s.bound, s.metrics["bound"]) == ("feasible", (8.0,), (8.0,), BOUND_LABEL)
    assert check_schedule(p, s) == []
    head, prio = summary(s).splitlines()[:2]
    assert "not optimised" in head and "status feasible" in head and "gap" not in head
    assert prio == "  priority      0: 8 GPU-hours of work done (no schedule does more than 8)"
    assert "gap 0.00%" in summary(schedule(p))  # the optimal policy keeps its gap


def test_below_the_bound_is_no_gap_in_the_summary() -> None:
    """One 8-GPU node, horizon 24h, A and B (8 GPUs, 20h each): A runs 0..20h (160 GPU-hours), B would run
    20h..40h, past the horizon. The a-priori bound is the node's 8 x 24 = 192 GPU-hours, so the format's
    ``gap`` field is 32 / 192 (kept, a number, for compatibility); the summary, once "gap 16.67%", says the
    simulation was not optimised and gives the bound as what no schedule exceeds."""
    from capplan.cli.schedule import summary

    p = kueue_problem({"r1": 1}, [queue("q", 8)], [{"name": "A", "gpus": 8, "duration": "20h", "queue": "q"},
                                                   {"name": "B", "gpus": 8, "duration": "20h", "queue": "q"}])
    s = schedule(p, policy="kueue")
    assert (s.status, s.objective, s.bound, s.gap) == ("feasible", (160.0,), (192.0,), 0.166667)
    head, prio = summary(s).splitlines()[:2]
    assert "gap" not in head
    assert prio == "  priority      0: 160 GPU-hours of work done (no schedule does more than 192)"
