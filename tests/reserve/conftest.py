"""Shared builders for reservation-planner tests: tiny planning files with round numbers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capplan.reserve.check import check_plan
from capplan.reserve.model import parse_planning
from capplan.reserve.planner import solve
from capplan.reserve.problem import Problem, build_problem
from capplan.reserve.result import Plan
from capplan.reserve.solver import SolverSettings

SETTINGS = SolverSettings(time_limit=20, threads=1, gap=1e-9)


def planning(periods: int = 4, **over: Any) -> dict[str, Any]:
    """A one-site, one-class planning file with 1 hour per period and no costs; override fields."""
    d: dict[str, Any] = {
        "name": "test",
        "horizon": {"start": "2027-01", "periods": periods, "hours_per_period": 1},
        "sites": [{"name": "site-1"}],
        "tiers": [{"name": "prod", "kind": "guaranteed"}],
        "classes": [{"name": "train", "tier": "prod", "models": {"H100-SXM5": 1.0}}],
        "options": {},
        "scenarios": [{"name": "base", "probability": 1.0, "demand": {"train": 0}}],
    }
    d.update(copy.deepcopy(over))
    return d


def solved(data: dict[str, Any]) -> tuple[Problem, Plan]:
    """Build, solve and independently check a planning dict."""
    pr = build_problem(parse_planning(data))
    plan = solve(pr, SETTINGS)
    assert check_plan(pr, plan) == []
    return pr, plan


@pytest.fixture
def one_site_h100() -> dict[str, Any]:
    """Planning dict: one site, guaranteed H100 class, 4 monthly periods of 1 hour."""
    return planning()
