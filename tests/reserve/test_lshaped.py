"""The decomposition's search: chance choice, gang repair, valid bounds, exact optimum on small cases."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from capplan.reserve.benders import Decomposition
from capplan.reserve.check import check_plan
from capplan.reserve.lshaped import choose_missed
from capplan.reserve.model import parse_planning
from capplan.reserve.planner import solve
from capplan.reserve.problem import build_problem
from tests.reserve.conftest import SETTINGS
from tests.reserve.test_benders import _two_scenarios
from tests.reserve.test_property import problems

DECOMP = replace(SETTINGS, method="decomposition")
EXT = replace(SETTINGS, method="extensive")


def test_choose_missed_takes_largest_savings_within_budget() -> None:
    """Equal probabilities: the scenarios with the largest savings, as many as the budget allows."""
    prob = np.full(10, 0.1)
    saving = np.array([5.0, 0.0, 9.0, 1.0, 7.0, 3.0, -1.0, 2.0, 8.0, 4.0])
    z = choose_missed(prob, saving, 0.3)
    assert sorted(np.flatnonzero(z).tolist()) == [2, 4, 8]
    assert choose_missed(prob, -np.ones(10), 0.5).sum() == 0


def test_floor_gangs_fit_the_capacity() -> None:
    """Repaired gang blocks are whole and fit the capacity the plan's purchases give."""
    pr = build_problem(parse_planning(_two_scenarios()))
    dec = Decomposition(pr)
    x = np.zeros(dec.n_master)
    x[dec.gang_int] = 7.3  # far more than the fleet can hold
    y = dec.floor_gangs(x)
    assert np.all(y[dec.gang_int] == np.floor(y[dec.gang_int]))
    for idx, val, rhs, gidx, gsize in dec._fit:
        assert float(val @ y[idx] + gsize @ y[gidx]) <= rhs + 1e-9


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_bound_never_exceeds_the_optimum(data: dict[str, Any]) -> None:
    """The reported bound is below the extensive form's optimum, and the plan is as cheap."""
    pr = build_problem(parse_planning(data))
    a = solve(pr, EXT)
    b = solve(pr, DECOMP)
    assert check_plan(pr, b) == []
    if b.solver["method"] == "decomposition" and b.solver["bound"] is not None:
        assert b.solver["bound"] <= a.solver["objective"] + 1e-6 * max(1.0, abs(a.solver["objective"]))
    assert b.costs["total"] == pytest.approx(a.costs["total"], rel=1e-5, abs=1e-4)


def test_benchmark_instance_meets_guaranteed_tiers_with_a_gap() -> None:
    """Ten benchmark scenarios: a checked plan meeting every guaranteed tier, bound below cost."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from reserve_bench import instance  # type: ignore[import-not-found]

    pr = build_problem(parse_planning(instance(10, periods=8)))
    plan = solve(pr, replace(DECOMP, time_limit=30, gap=0.01, threads=1))
    assert check_plan(pr, plan) == [] and plan.status == "ok"
    assert plan.solver["bound"] <= plan.solver["objective"] + 1e-6
    assert plan.solver["gap"] <= 0.01 + 1e-9 or plan.solver["status"] == "feasible"
