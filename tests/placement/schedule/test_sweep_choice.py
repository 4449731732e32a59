"""Which first schedule a run builds: the time-order sweep from 2,000 replicas, or when one earliest-start
list-scheduling pass (about 4.1e-6 s x replicas^2) would take more than half of the nominal budget, so that a
pass that cannot be cut short does not break the time limit (schedule_bench `medium`, 1,761 replicas, at
--time-limit 10 took 15.9 s before)."""

from __future__ import annotations

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.placement.schedule.strategies import use_sweep


def _replicas(n: int) -> Problem:
    return problem_from_data({"cluster": {"levels": ["node"], "nodes": [{"name": "n1", "cpu": 64, "memory_gib": 64}]},
                              "workloads": [{"name": "w", "replicas": n, "cpu": 1, "duration": 3600}]})


def test_sweep_from_2000_replicas_at_any_budget() -> None:
    assert use_sweep(_replicas(2000), 1e6) and not use_sweep(_replicas(100), 1.0)


def test_sweep_when_one_list_pass_would_take_half_the_budget() -> None:
    p = _replicas(1761)  # one pass: about 12.7 s
    assert use_sweep(p, 10.0) and use_sweep(p, 25.0)
    assert not use_sweep(p, 30.0) and not use_sweep(p, 60.0)
    assert use_sweep(_replicas(500), 2.0) and not use_sweep(_replicas(490), 2.0)  # 1.03 s vs 0.98 s
