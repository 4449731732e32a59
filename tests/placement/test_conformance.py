"""Conformance: every registered strategy passes the public battery (:mod:`capplan.testing.conformance`).

Parametrised over :data:`capplan.placement.STRATEGIES` and the schedule strategies, so strategies
registered later are covered automatically; the shipped examples are checked for valid plans too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from capplan.io.scenario import load_scenario
from capplan.model.validate import check_plan
from capplan.placement import STRATEGIES, PlanOptions, solve
from capplan.placement.schedule import SCHEDULE_STRATEGIES
from capplan.testing import Check, schedule_checks, strategy_checks

EXAMPLES = sorted(p for p in (Path(__file__).parents[2] / "models" / "examples").glob("*.yaml")
                  if "reserve" not in p.name)
CHECKS = [c for name in sorted(STRATEGIES) for c in strategy_checks(name)]
SCHEDULE_CHECKS = [c for name in SCHEDULE_STRATEGIES for c in schedule_checks(name)]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_strategy_conformance(check: Check) -> None:
    check()


@pytest.mark.parametrize("check", SCHEDULE_CHECKS, ids=lambda c: c.name)
def test_schedule_strategy_conformance(check: Check) -> None:
    check()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_valid_plan_on_examples(name: str, path: Path) -> None:
    """The strategy returns a plan the independent validator accepts on every example scenario."""
    p = load_scenario(path)
    plan = solve(p, name, PlanOptions(time_limit=10, seed=3, workers=1))
    assert check_plan(p, plan) == []
    assert plan.priorities == p.priorities


def test_a_broken_strategy_fails_the_battery() -> None:
    """The battery can fail: a strategy that places nothing is caught (and the table is restored)."""
    from capplan.model.plan import Plan, Unplaced
    from capplan.model.problem import Problem
    from capplan.placement import register
    from capplan.placement.core.summary import make_plan

    def lazy(problem: Problem, options: PlanOptions) -> Plan:
        return make_plan(problem, "lazy", [], [Unplaced(workload=w.name, replicas=tuple(range(w.replicas)),
                                                        reason="this strategy places nothing")
                                               for w in problem.workloads])

    register("lazy", lazy)
    try:
        failed = []
        for check in strategy_checks("lazy"):
            try:
                check()
            except AssertionError:
                failed.append(check.name)
        assert "lazy:objective" in failed and "lazy:infeasible" in failed
    finally:
        STRATEGIES.pop("lazy", None)
