"""MIG compute slices bind even where the memory-slice geometry would allow more instances.

A user catalog may describe a GPU whose free memory slices outnumber its compute slices (here 4
memory slices, 2 compute slices, a 1-compute 1-memory profile). Every planner and the scheduler must
stop at 2 instances per GPU; before the one per-GPU fit rule (core/migslots.mig_starts) greedy placed 4 and
the plan was refused by the validator.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import capplan
from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.problem import Problem

CATALOG = """models:
  - name: X2
    vendor: acme
    memory_gib: 40
    tdp_w: 300
    partitioning: mig
    compute_slices: 2
    memory_slices: 4
    profiles: [{name: 1g.10gb, compute_slices: 1, memory_slices: 1, memory_gib: 10, max_count: 4,
                starts: [0, 1, 2, 3]}]
"""


def _problem(tmp_path: Path) -> Problem:
    f = tmp_path / "x2.yaml"
    f.write_text(CATALOG)
    data = {"cluster": {"nodes": [{"name": "a", "gpu": "X2", "gpus": 2, "cpu": 16, "memory_gib": 64}]},
            "workloads": [{"name": "m", "mig": "1g.10gb", "replicas": 6, "cpu": 1}]}
    return problem_from_data(data, load_catalog([f]))


@pytest.mark.parametrize("strategy", sorted(capplan.STRATEGIES))
def test_every_strategy_stops_at_the_compute_slices(tmp_path: Path, strategy: str) -> None:
    """Two instances per GPU (compute-bound), four in all, and the rest unplaced: a valid plan."""
    p = _problem(tmp_path)
    plan = capplan.solve(p, strategy, capplan.PlanOptions(time_limit=10))
    per_gpu: dict[tuple[str, int], int] = {}
    for a in plan.assignments:
        per_gpu[(a.node, a.gpus[0])] = per_gpu.get((a.node, a.gpus[0]), 0) + 1
    assert sorted(per_gpu.values()) == [2, 2]
    assert sum(len(u.replicas) for u in plan.unplaced) == 2


def test_schedule_stops_at_the_compute_slices(tmp_path: Path) -> None:
    """The scheduler's list scheduling keeps the same limit at every instant."""
    p = _problem(tmp_path)
    s = capplan.schedule(p, "heuristic", horizon="1h", step="1m", time_limit=10)
    assert len(s.assignments) == 4
