"""The L-shaped decomposition agrees with the extensive form and passes the independent checker."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from capplan.reserve.benders import Decomposition, scenario_groups
from capplan.reserve.check import check_plan
from capplan.reserve.lshaped import solve_decomposition
from capplan.reserve.model import parse_planning
from capplan.reserve.planner import choose_method, solve
from capplan.reserve.problem import build_problem
from tests.reserve.conftest import SETTINGS, planning
from tests.reserve.test_property import problems

DECOMP = replace(SETTINGS, method="decomposition")
EXT = replace(SETTINGS, method="extensive")


def _two_scenarios() -> dict[str, Any]:
    return planning(
        periods=3,
        tiers=[
            {"name": "prod", "kind": "guaranteed", "service_level": 0.5, "penalty_per_gpu_hour": 30},
            {
                "name": "batch",
                "kind": "flexible",
                "penalty_per_gpu_hour": 9,
                "max_deferral_periods": 1,
                "deferral_penalty_per_gpu_hour": 1,
            },
        ],
        classes=[
            {
                "name": "train",
                "tier": "prod",
                "models": {"H100-SXM5": 1.0, "H200": 1.4},
                "gang_size": 4,
                "topology": "site",
            },
            {"name": "eval", "tier": "batch", "models": {"H100-SXM5": 1.0}},
        ],
        fleet=[{"site": "site-1", "model": "H100-SXM5", "count": 4}],
        options={
            "purchases": [
                {"model": "H200", "lead_time": 1, "unit_cost": 200, "lot_size": 4, "depreciation_periods": 3}
            ],
            "on_demand": [{"model": "H100-SXM5", "price_per_gpu_hour": 20, "max_gpus": 6}],
            "spot": [{"model": "H100-SXM5", "price_per_gpu_hour": 5, "interruption_rate": 0.2}],
        },
        scenarios=[
            {"name": "low", "probability": 0.5, "demand": {"train": [4, 8, 8], "eval": [2, 6, 0]}},
            {"name": "high", "probability": 0.5, "demand": {"train": [6, 14, 16], "eval": [4, 8, 2]}},
        ],
    )


def test_decomposition_matches_extensive_objective() -> None:
    """Gangs, lots, a chance tier, deferral and spot: both methods reach the same optimal cost."""
    pr = build_problem(parse_planning(_two_scenarios()))
    a, b = solve(pr, EXT), solve(pr, DECOMP)
    assert b.solver["method"] == "decomposition" and b.solver["status"] == "optimal"
    assert check_plan(pr, b) == []
    assert b.costs["total"] == pytest.approx(a.costs["total"], rel=1e-6, abs=1e-6)
    assert b.solver["gap"] <= DECOMP.gap + 1e-9


def test_bound_is_a_lower_bound_when_one_group() -> None:
    """With one scenario group (pure Jensen bound + cuts) the bound never exceeds the plan's cost."""
    pr = build_problem(parse_planning(_two_scenarios()))
    raw = solve_decomposition(pr, DECOMP, groups=1)
    assert raw.bound is not None and raw.bound <= raw.objective + 1e-6
    exact = solve(pr, EXT).solver["objective"]
    assert raw.bound <= exact + 1e-6 <= raw.objective + 2e-6


def test_scenario_groups_partition() -> None:
    """Groups partition the scenarios, ordered by total demand."""
    pr = build_problem(parse_planning(_two_scenarios()))
    assert scenario_groups(pr, 8) == [[0], [1]]
    assert scenario_groups(pr, 1) == [[0, 1]]


def test_unmet_guaranteed_falls_back_to_ranked_solve() -> None:
    """A lead time that leaves periods short: the decomposition hands over to the ranked re-solve."""
    d = planning(
        options={"purchases": [{"model": "H100-SXM5", "lead_time": 2, "unit_cost": 10}]},
        scenarios=[
            {"name": "a", "probability": 0.5, "demand": {"train": 8}},
            {"name": "b", "probability": 0.5, "demand": {"train": 4}},
        ],
    )
    pr = build_problem(parse_planning(d))
    plan = solve(pr, DECOMP)
    assert plan.status == "guaranteed_unmet" and [u.period for u in plan.unmet] == ["2027-01", "2027-02"]
    assert check_plan(pr, plan) == []


def test_auto_method_by_size_and_time() -> None:
    """auto keeps small problems on the extensive form; a large scenario set tries the extensive form first
    when its build fits the time (then the decomposition), else goes straight to the decomposition."""
    small = build_problem(parse_planning(_two_scenarios()))
    assert choose_method(small, SETTINGS) == "extensive"
    big = replace(small, demand=np.zeros((400, 2, 3)), scenario_names=tuple(f"s{i}" for i in range(400)))
    assert choose_method(big, replace(SETTINGS, time_limit=60)) == "both"
    assert choose_method(big, replace(SETTINGS, time_limit=2)) == "decomposition"
    huge = replace(small, demand=np.zeros((4000, 2, 12)), scenario_names=tuple(f"s{i}" for i in range(4000)))
    assert choose_method(huge, replace(SETTINGS, time_limit=60)) == "decomposition"


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_random_problems_agree(data: dict[str, Any]) -> None:
    """On random small problems the decomposition's plan is valid and as cheap as the extensive one."""
    pr = build_problem(parse_planning(data))
    a = solve(pr, EXT)
    b = solve(pr, DECOMP)
    assert check_plan(pr, b) == []
    assert b.status == a.status
    assert b.costs["total"] == pytest.approx(a.costs["total"], rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("w", [0, 1])
def test_recourse_subgradient_is_valid(w: int) -> None:
    """The cut from one scenario underestimates that scenario's cost at another capacity."""
    pr = build_problem(parse_planning(_two_scenarios()))
    dec = Decomposition(pr)
    M, T = len(pr.models), pr.periods
    gangs = np.zeros((len(pr.classes), M, T))
    z = np.zeros(len(pr.tiers))
    cap0, cap1 = np.full((M, T), 4.0), np.full((M, T), 12.0)
    e0 = dec.recourse.evaluate(w, cap0, gangs, z)
    e1 = dec.recourse.evaluate(w, cap1, gangs, z)
    assert e1.cost >= e0.cost + float((e0.d_cap * (cap1 - cap0)).sum()) - 1e-6
    assert e0.cost >= e1.cost + float((e1.d_cap * (cap0 - cap1)).sum()) - 1e-6
