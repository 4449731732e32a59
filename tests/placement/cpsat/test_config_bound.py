"""The per-GPU configuration LP bound: valid for every plan, never looser than the capacity LP."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.placement import PlanOptions, solve
from capplan.placement.core.summary import placed_units
from capplan.placement.cpsat.bound import stage_bounds
from capplan.placement.cpsat.config_bound import config_bound
from capplan.placement.cpsat.index import build_index
from tests.strategies_gen import scenario_data

from .conftest import ONE_WORKER, node, scenario


def _stage_values(p: Problem, plan: Plan) -> list[tuple[int | None, int]]:
    """The plan's stage values in the LP's units: guaranteed replicas, then units * scale + replicas."""
    out: list[tuple[int | None, int]] = []
    if any(w.sla == "guaranteed" for w in p.workloads):
        out.append((None, sum(1 for a in plan.assignments if p.workload(a.workload).sla == "guaranteed")))
    units = placed_units(p, plan.assignments)
    for q in p.priorities:
        scale = sum(w.replicas for w in p.workloads if w.priority == q) + 1
        reps = sum(1 for a in plan.assignments if p.workload(a.workload).priority == q)
        out.append((q, units[q] * scale + reps))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_config_bound_is_valid_and_tighter_than_capacity_lp(data: dict[str, Any]) -> None:
    """For a CP-SAT plan's stage values, the bound of each stage is at least the plan's value and at
    most the capacity LP's bound."""
    p = problem_from_data(data, load_catalog())
    plan = solve(p, "cpsat", PlanOptions(time_limit=5, seed=0, workers=1))
    ix = build_index(p, PlanOptions())
    values = _stage_values(p, plan)
    for k, (target, value) in enumerate(values):
        fixed = values[:k]
        cb = config_bound(ix, fixed, target)
        assert cb is not None
        assert cb >= value - 1e-6 * max(1, value)
        cap = stage_bounds(ix, fixed, target)
        if cap is not None:
            assert cb <= cap + 1e-6 * max(1.0, cap) + 1


def test_tenant_isolation_closes_the_capacity_lp_gap() -> None:
    """An isolated tenant's 1g slices cannot share the GPU that hosts another tenant's 4g.40gb (at
    most one per GPU): the capacity LP places them anyway (compute and memory slices fit), the
    configuration LP does not, and CP-SAT proves the same optimum."""
    p = scenario(
        [node("n1", gpus=1)],
        [
            {"name": "big", "mig": "4g.40gb", "replicas": 1, "tenant": "a", "priority": 100, "cpu": 1},
            {"name": "small", "mig": "1g.10gb", "replicas": 3, "tenant": "b", "isolation": "tenant",
             "priority": 10, "cpu": 1},
        ],
    )
    ix = build_index(p, PlanOptions())
    scale_hi = 2
    fixed: list[tuple[int | None, int]] = [(100, 4000 * scale_hi + 1)]
    capacity = stage_bounds(ix, fixed, 10)
    config = config_bound(ix, fixed, 10)
    assert capacity is not None and capacity >= 3 * 1000 * 4  # all three slices, per the capacity LP
    assert config is not None and config < 1.0
    plan = solve(p, "cpsat", ONE_WORKER)
    assert plan.status == "optimal"
    assert plan.objective[1] == 0.0 and plan.bound[1] == 0.0
    assert abs(plan.objective[0] - 4 / 7) < 1e-6


def test_running_replicas_are_not_handled() -> None:
    """With running replicas the configuration LP declines (None) rather than guess."""
    p = scenario(
        [node("n1", gpus=2)],
        [{"name": "w", "gpus": 1, "replicas": 2, "cpu": 1}],
        running=[{"workload": "w", "replica": 0, "node": "n1", "gpus": [0]}],
    )
    assert config_bound(build_index(p, PlanOptions()), [], 0) is None


def test_cpu_only_nodes_keep_their_cpu_limit() -> None:
    """CPU-only pods on a CPU-only node are bounded by its cores (4 x 16 cores asked, 32 cores: 2 fit)."""
    p = problem_from_data({"cluster": {"levels": ["node"], "nodes": [{"name": "c1", "cpu": 32, "memory_gib": 64}]},
                           "workloads": [{"name": "w", "replicas": 4, "cpu": 16, "sla": "guaranteed"}]})
    ix = build_index(p, PlanOptions())
    config = config_bound(ix, [], None)
    assert config is not None and config < 2.01
