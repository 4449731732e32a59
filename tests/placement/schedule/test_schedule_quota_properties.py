"""Random scenarios with ClusterQueue quotas: every strategy and the Kueue policy keep them (independent validator)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.validate import check_plan
from capplan.model.validate_schedule import check_schedule
from capplan.placement.planner import solve
from capplan.placement.schedule import schedule
from tests.placement.schedule.test_schedule_properties import timed_scenario
from tests.strategies_gen import quota_section


@st.composite
def quota_scenario(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(timed_scenario())
    data["quotas"] = draw(quota_section(data))
    return data


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(quota_scenario())
def test_quotas_hold_in_every_schedule_and_plan(data: dict[str, Any]) -> None:
    try:
        p = problem_from_data(data)
    except InputError:
        return
    for strategy, policy in (("heuristic", "optimal"), ("cpsat", "optimal"), ("auto", "kueue")):
        s = schedule(p, strategy, time_limit=2, policy=policy)
        assert check_schedule(p, s) == [], (strategy, policy)
    for strategy in ("greedy", "cpsat"):
        plan = solve(p, strategy, time_limit=2)
        assert check_plan(p, plan) == [] and "fallback_from" not in plan.metrics, strategy
