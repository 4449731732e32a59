"""Reasons for work left out name what holds its capacity, and when (issue 27 item 2)."""

from __future__ import annotations

from capplan import problem_from_data, schedule

H = 3600


def test_reason_names_the_work_holding_the_nodes_and_when() -> None:
    """One GPU node (and a CPU node that cannot host GPU work): `big` (priority 10) and `urgent` hold the GPU
    from 0 h to 3 h, so `small` (3 h) would end at 6 h, past the 4 h horizon; its reason names both, most
    GPU-time first, with their times, and not the CPU node's work."""
    p = problem_from_data({
        "schedule": {"horizon": "4h", "step": "1h"},
        "cluster": {"name": "t", "levels": ["node"], "nodes": [
            {"name": "n0", "gpu": "H100-SXM5-80GB", "gpus": 1, "cpu": 8, "memory_gib": 64},
            {"name": "c0", "cpu": 8, "memory_gib": 64}]},
        "workloads": [
            {"name": "big", "gpus": 1, "duration": 2 * H, "priority": 10, "cpu": 1, "memory_gib": 1},
            {"name": "urgent", "gpus": 1, "duration": H, "deadline": H, "priority": 0, "cpu": 1, "memory_gib": 1},
            {"name": "small", "gpus": 1, "duration": 3 * H, "priority": 0, "cpu": 1, "memory_gib": 1},
            {"name": "etl", "duration": 4 * H, "priority": 0, "cpu": 8, "memory_gib": 1}]})
    for strategy in ("heuristic", "cpsat"):
        s = schedule(p, strategy, time_limit=10)
        (u,) = [u for u in s.unscheduled if u.workload == "small"]
        assert u.reason.endswith("after the horizon 4h; from 0h to 3h its nodes are held by big (1h to 3h), "
                                 "urgent (0h to 1h)"), (strategy, u.reason)
