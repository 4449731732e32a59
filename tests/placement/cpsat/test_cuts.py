"""Redundant cuts and bounds: power budgets rounded to whole GPUs, cluster-wide MIG rounding, valid LP bounds."""

from __future__ import annotations

import pytest

from capplan.model.problem import Problem
from capplan.placement import solve
from capplan.placement.cpsat.bound import stage_bounds
from capplan.placement.cpsat.index import build_index

from .conftest import ONE_WORKER, node, scenario
from .test_exhaustive import exhaustive_best, random_tiny


def _power_limited() -> Problem:
    """Two 1-GPU H100 nodes in a 1 kW rack (one busy GPU fits: 700 W), two 1-GPU jobs."""
    return scenario(
        [node("n0", gpus=1, cpu=8), node("n1", gpus=1, cpu=8)],
        [{"name": "job", "replicas": 2, "gpus": 1, "cpu": 1, "priority": 5}],
        power_kw=1.0,
    )


def test_lp_bound_rounds_the_power_budget_to_whole_gpus() -> None:
    """1 kW / 700 W allows one busy GPU: the LP bound is one GPU, not 1.43."""
    p = _power_limited()
    lp = stage_bounds(build_index(p, ONE_WORKER), [], 5)
    scale = 3  # replicas + 1
    assert lp is not None and int(lp) // scale == 7000


def test_power_limited_plan_is_proven_optimal() -> None:
    """CP-SAT places one of the two jobs and proves it (bound equals objective)."""
    plan = solve(_power_limited(), "cpsat", ONE_WORKER)
    assert plan.objective == (1.0,) and plan.bound == (1.0,) and plan.status == "optimal"


def _mig_then_whole() -> Problem:
    """Three 3g.40gb instances (two per GPU: they need 2 GPUs, the LP says 1.5) above 1-GPU jobs, 3 busy GPUs."""
    return scenario(
        [node("n0", gpus=4, cpu=32)],
        [
            {"name": "chat", "replicas": 3, "mig": "3g.40gb", "priority": 100, "cpu": 1},
            {"name": "job", "replicas": 4, "gpus": 1, "cpu": 1, "priority": 10},
        ],
        power_kw=2.1,
    )


def test_cluster_wide_mig_rounding_closes_the_lower_stage() -> None:
    """With the higher priority placed in full, its MIG GPUs round up: one whole GPU is left, proven."""
    p = _mig_then_whole()
    plan = solve(p, "cpsat", ONE_WORKER)
    assert plan.objective[1] == 1.0 and plan.bound[1] == 1.0 and plan.status == "optimal"
    stages = [s for s in plan.metrics["cpsat"]["stages"] if s["name"].startswith("priority")]
    assert all(s["units_proven"] for s in stages)


@pytest.mark.parametrize("seed", range(12))
def test_lp_stage_bound_is_at_least_every_plan(seed: int) -> None:
    """The LP bound of the first priority (nothing fixed) is >= the exhaustive best plan's value there."""
    p = random_tiny(seed)
    best = exhaustive_best(p)
    q = p.priorities[0]
    scale = sum(w.replicas for w in p.workloads if w.priority == q) + 1
    lp = stage_bounds(build_index(p, ONE_WORKER), [], q)
    assert lp is not None and lp >= best[1] * scale + best[2]
