"""Planner conformance suite: every registered strategy must pass these checks.

Parametrised over :data:`capplan.placement.planner.STRATEGIES`, so strategies registered later are covered
automatically.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import STRATEGIES, PlanOptions, solve

NAMES = sorted(STRATEGIES)
EXAMPLES = sorted(
    p
    for p in (Path(__file__).parents[2] / "models" / "examples").glob("*.yaml")
    if "reserve" not in p.name
)
OPTS = PlanOptions(time_limit=10, seed=3, workers=1)


def _cluster(nodes: int, gpus: int = 8) -> dict[str, Any]:
    return {
        "levels": ["rack", "node"],
        "racks": [
            {
                "name": f"r{r}",
                "nodes": [
                    {
                        "name_prefix": f"r{r}n",
                        "count": nodes // 2,
                        "gpu": "H100-SXM5-80GB",
                        "gpus": gpus,
                        "cpu": 128,
                        "memory_gib": 1024,
                    }
                ],
            }
            for r in (1, 2)
        ],
    }


def _mixed(nodes: int = 4, scale: int = 1) -> Problem:
    return problem_from_data(
        {
            "cluster": _cluster(nodes),
            "workloads": [
                {
                    "name": "gang",
                    "kind": "training",
                    "replicas": 2,
                    "gpus": 8,
                    "topology": {"required": "rack"},
                    "priority": 10,
                    "cpu": 8,
                },
                {"name": "mig", "replicas": 6 * scale, "mig": "2g.20gb", "priority": 5, "cpu": 1},
                {"name": "share", "replicas": 5 * scale, "gpu_fraction": 0.4, "priority": 5, "cpu": 1},
                {"name": "cpu", "replicas": 3, "cpu": 4, "priority": 1},
            ],
        }
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", NAMES)
def test_valid_plan_on_examples(name: str, path: Path) -> None:
    """The strategy returns a plan the independent validator accepts on every example scenario."""
    p = load_scenario(path)
    plan = solve(p, name, OPTS)
    assert check_plan(p, plan) == []
    assert plan.priorities == p.priorities


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_plan(name: str) -> None:
    """Two runs with the same seed give the same assignments and objective."""
    p = _mixed()
    a, b = solve(p, name, OPTS), solve(p, name, OPTS)
    assert a.assignments == b.assignments
    assert a.objective == b.objective and a.unplaced == b.unplaced


@pytest.mark.parametrize("name", NAMES)
def test_empty_problem(name: str) -> None:
    """No workloads: an empty, optimal plan."""
    p = problem_from_data({"cluster": _cluster(2), "workloads": []})
    plan = solve(p, name, OPTS)
    assert plan.assignments == () and plan.unplaced == ()
    assert plan.status == "optimal"


@pytest.mark.parametrize("name", NAMES)
def test_infeasible_guaranteed_workload(name: str) -> None:
    """A guaranteed gang that cannot fit gives status infeasible and a reason naming the shortfall."""
    p = problem_from_data(
        {
            "cluster": _cluster(2),
            "workloads": [
                {
                    "name": "huge",
                    "kind": "training",
                    "replicas": 3,
                    "gpus": 8,
                    "sla": "guaranteed",
                    "priority": 9,
                },
                {"name": "small", "replicas": 2, "gpus": 1, "priority": 1},
            ],
        }
    )
    plan = solve(p, name, OPTS)
    assert plan.status == "infeasible"
    un = {u.workload: u for u in plan.unplaced}
    assert "huge" in un and un["huge"].reason
    assert len([a for a in plan.assignments if a.workload == "small"]) == 2


@pytest.mark.parametrize("name", NAMES)
def test_time_limit_respected(name: str) -> None:
    """A 2 s limit returns within the limit plus a generous margin (not a speed test)."""
    p = _mixed(nodes=32, scale=20)
    t0 = time.perf_counter()
    plan = solve(p, name, PlanOptions(time_limit=2, seed=0, workers=1))
    assert time.perf_counter() - t0 < 2 + 15
    assert check_plan(p, plan) == []


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip(name: str) -> None:
    """The plan survives to_json/from_json unchanged."""
    p = _mixed()
    plan = solve(p, name, OPTS)
    assert Plan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize("name", NAMES)
def test_objective_counts_values_and_holds_least(name: str) -> None:
    """The objective is the workloads' values (2g.20gb = 2/7, a 0.4 share = 0.4); on one GPU model the
    capacity held equals the value placed, and CPU-only pods count as replicas only."""
    p = _mixed()
    plan = solve(p, name, OPTS)
    per = {w.name: sum(1 for a in plan.assignments if a.workload == w.name) for w in p.workloads}
    assert plan.objective == pytest.approx((8 * per["gang"], 2 / 7 * per["mig"] + 0.4 * per["share"], 0.0))
    assert plan.metrics["value_placed"] == pytest.approx(sum(plan.objective))
    assert plan.metrics["gpus_allocated"] == pytest.approx(plan.metrics["value_placed"])  # same-size slices here
    assert per["gang"] in (0, 2) and per["cpu"] == 3
