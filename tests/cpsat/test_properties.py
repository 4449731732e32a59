"""Property tests: every CP-SAT plan is valid and never worse than greedy."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.planner import PlanOptions, solve
from capplan.validate import check_plan

from .test_exhaustive import key, random_tiny


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1000, 100_000), st.booleans(), st.booleans())
def test_plan_valid_and_never_worse_than_greedy(seed: int, preempt: bool, migrate: bool) -> None:
    """For random tiny instances the CP-SAT plan passes the validator and is at least greedy's objective."""
    p = random_tiny(seed)
    opts = PlanOptions(time_limit=10, workers=1, allow_preemption=preempt, allow_migration=migrate)
    plan = solve(p, "cpsat", opts)
    assert check_plan(p, plan) == []
    assert key(p, plan.assignments) >= key(p, solve(p, "greedy", opts).assignments)
    assert "fallback" not in plan.metrics["cpsat"]
