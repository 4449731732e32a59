"""Property tests: every CP-SAT plan is valid, never worse than greedy, and never needs the fallback."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve

from .test_exhaustive import key, random_tiny


def with_running(seed: int) -> Problem:
    """A tiny instance where part of the greedy plan is already running, with random move/evict flags."""
    rnd = random.Random(seed)
    p = random_tiny(seed)
    g = solve(p, "greedy", PlanOptions(time_limit=5))
    gangs = {w.name for w in p.workloads if w.is_gang}
    run = [a for a in g.assignments if rnd.random() < 0.6]
    run = [
        a for a in run if a.workload not in gangs or all(b in run for b in g.assignments if b.workload == a.workload)
    ]
    ws = tuple(
        w.model_copy(
            update={
                "preemptible": rnd.random() < 0.6,
                "migratable": rnd.random() < 0.5,
                "priority": rnd.choice([1, 2, 3]),
            }
        )
        for w in p.workloads
    )
    return p.replace(workloads=ws, running=tuple(run))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1000, 100_000), st.booleans(), st.booleans(), st.booleans())
def test_plan_valid_and_never_worse_than_greedy(seed: int, running: bool, preempt: bool, migrate: bool) -> None:
    """Random tiny instances (optionally with running state): valid plan, at least greedy's objective."""
    p = with_running(seed) if running else random_tiny(seed)
    opts = PlanOptions(time_limit=10, workers=1, allow_preemption=preempt, allow_migration=migrate)
    plan = solve(p, "cpsat", opts)
    assert check_plan(p, plan) == []
    assert key(p, plan.assignments) >= key(p, solve(p, "greedy", opts).assignments)
    assert "fallback" not in plan.metrics["cpsat"]
