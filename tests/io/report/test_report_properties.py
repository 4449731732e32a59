"""Invariants of the report on random scenarios, checked against the planner's own fit test."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from capplan.io.report import build_report
from capplan.io.report.occupancy import gpu_views
from capplan.io.scenario import problem_from_data
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.core.state import ClusterState, Placement
from tests.strategies_gen import scenario_data


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return min(a[1], b[1]) - max(a[0], b[0]) > 1e-9 and min(a[3], b[3]) - max(a[2], b[2]) > 1e-9


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_every_gpu_is_split_exactly_and_stranded_means_unusable(data: dict[str, Any]) -> None:
    """Allocated + idle + stranded = 1 GPU, parts never overlap, and no replica the planner could add is stranded."""
    p = problem_from_data(data)
    plan = solve(p, "greedy", PlanOptions(time_limit=5))
    assert check_plan(p, plan) == []
    views = gpu_views(p, plan.assignments)
    st = ClusterState.with_assignments(p, list(plan.assignments))
    for i, row in enumerate(views):
        for v in row:
            assert v.alloc + v.idle_share + v.stranded_share == pytest.approx(1.0, abs=1e-5)
            used = [r for _, r in v.used]
            free = v.idle + v.stranded
            assert all(0 <= r[0] < r[1] <= 1 and 0 <= r[2] < r[3] <= 1 for r in used + free)
            assert not any(_overlap(a, b) for a in used for b in free)
        for w in p.workloads:
            d = p.can_host(w, p.cluster.nodes[i])
            if d is None or d.kind == "none":
                continue
            r = st.fit(w, d, i)
            if not isinstance(r, Placement):
                continue
            for g in r.gpus:
                v = row[g]
                if r.slot is not None:
                    model = p.gpu_model(p.cluster.nodes[i])
                    assert model is not None and d.profile is not None
                    ms = model.memory_slices
                    rect = (r.slot.start / ms, (r.slot.start + d.profile.memory_slices) / ms, 0.0, 1.0)
                    assert not any(_overlap(rect, s) for s in v.stranded), (w.name, i, g)
                else:
                    assert not v.stranded, (w.name, i, g)
    report = build_report(p, plan)
    prices = {m["name"]: m["price"] or 0.0 for m in report["models"]}
    full = sum(prices[n.gpu_model] * n.gpus for n in p.cluster.nodes if n.gpus and n.gpu_model)
    assert report["cost"]["per_hour"]["total"] == pytest.approx(full, abs=0.05)
