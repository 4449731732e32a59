"""The cpsat strategy: progress reporting, bounds, fallback to greedy, and the model never naming replicas."""

from __future__ import annotations

import json
from typing import Any

import pytest

import capplan.placement.cpsat.result as cpsat_result
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, choose_strategy, solve
from capplan.placement.cpsat.decode import DecodeError
from capplan.placement.cpsat.index import build_index
from capplan.placement.cpsat.model import PlacementModel

from .conftest import ONE_WORKER, node, scenario


def test_progress_reports_greedy_then_stages(small_h100_pod: Problem) -> None:
    """The progress callback first gets the greedy plan, then CP-SAT stage solutions."""
    seen: list[dict[str, Any]] = []
    plan = solve(small_h100_pod, "cpsat", PlanOptions(time_limit=20, workers=1, progress=seen.append))
    assert seen[0]["stage"] == "greedy"
    assert all({"stage", "elapsed"} <= set(d) for d in seen)
    # user units: GPUs placed at a priority (never the internal units * scale + replicas value)
    gpus = small_h100_pod.cluster.gpus_total
    for d in seen:
        obj = d.get("objective")
        values = obj if isinstance(obj, list) else [] if obj is None else [obj]
        assert all(0 <= v <= gpus for v in values), d
        if isinstance(obj, float | int) and "bound" in d:
            assert obj <= d["bound"] <= gpus, d
    assert check_plan(small_h100_pod, plan) == []


def test_optimal_plan_reports_stage_statistics(small_h100_pod: Problem) -> None:
    """A proven plan has gap 0, bound equal to objective and per-stage statistics in metrics."""
    plan = solve(small_h100_pod, "cpsat", ONE_WORKER)
    assert plan.status == "optimal" and plan.gap == 0 and plan.bound == plan.objective
    stages = plan.metrics["cpsat"]["stages"]
    assert [s["name"] for s in stages][:3] == ["priority 100", "priority 50", "priority 10"]
    assert plan.metrics["cpsat"]["hint_complete"] is True


def test_falls_back_to_greedy_when_decoding_fails(small_h100_pod: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    """If the solution cannot be decoded the greedy plan is returned, marked as a fallback."""

    def broken(*_: Any) -> Any:
        raise DecodeError("simulated")

    monkeypatch.setattr(cpsat_result, "decode", broken)
    plan = solve(small_h100_pod, "cpsat", ONE_WORKER)
    greedy = solve(small_h100_pod, "greedy", ONE_WORKER)
    assert plan.metrics["cpsat"]["fallback"] == "greedy"
    assert plan.assignments == greedy.assignments and plan.strategy == "cpsat"


def test_model_size_does_not_grow_with_replicas(small_h100_pod: Problem) -> None:
    """Identical replicas are counts: ten times the replicas give the same number of variables."""

    def size(factor: int) -> int:
        ws = tuple(
            w.model_copy(update={"replicas": w.replicas * factor}) if not w.is_gang else w
            for w in small_h100_pod.workloads
        )
        pm = PlacementModel(build_index(small_h100_pod.replace(workloads=ws), ONE_WORKER))
        return len(pm.m.proto.variables)

    assert size(10) <= size(1) * 1.5


def test_auto_prefers_cpsat_for_small_problems(small_h100_pod: Problem) -> None:
    """`auto` picks the exact model for a small problem."""
    assert choose_strategy(small_h100_pod) == "cpsat"


def test_a_stage_stopped_at_once_claims_no_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """CP-SAT stopped before any bound reports 0 as its bound: that must not prove the incumbent optimal."""
    from ortools.sat.python import cp_model


    p = scenario([node("n1"), node("n2", gpu="A100-SXM4-80GB")],
                 [{"name": "big", "gpus": 3, "replicas": 5, "priority": 10, "cpu": 1},
                  {"name": "chat", "mig": "3g.40gb", "replicas": 9, "priority": 10, "cpu": 1}])

    class NoTime(cp_model.CpSolver):
        def solve(self, model: Any, cb: Any = None) -> Any:
            if not self.parameters.fix_variables_to_their_hinted_value:  # the hint completion keeps its time
                self.parameters.max_time_in_seconds = 0.0
            return super().solve(model, cb)

    exact = solve(p, "cpsat", ONE_WORKER)
    monkeypatch.setattr(cp_model, "CpSolver", NoTime)
    plan = solve(p, "cpsat", ONE_WORKER)
    stages = plan.metrics["cpsat"]["stages"]
    assert stages[0]["status"] == "unknown" and stages[0]["bound"] == float("inf")
    assert json.loads(plan.model_dump_json())["metrics"]["cpsat"]["stages"][0]["bound"] is None  # strict JSON
    assert plan.status != "optimal"
    assert not any(s["units_proven"] for s in stages if s["status"] != "optimal")
    assert all(b >= o for b, o in zip(plan.bound, plan.objective, strict=True))
    assert all(b >= o - 1e-9 for b, o in zip(plan.bound, exact.objective, strict=True))


def test_a_model_too_large_for_the_limit_is_not_built(small_h100_pod: Problem, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the estimated build time exceeds the budget, the greedy plan (repaired by racks) comes back, valid."""
    import capplan.placement.cpsat.solve as cpsat_solve

    monkeypatch.setattr(cpsat_solve, "_BUILD_SECONDS_PER_PAIR", 1e6)
    monkeypatch.setattr(cpsat_solve, "PlacementModel", None)  # building it would fail loudly
    plan = solve(small_h100_pod, "cpsat", ONE_WORKER)
    greedy = solve(small_h100_pod, "greedy", ONE_WORKER)
    assert "would not be built in time" in plan.metrics["cpsat"]["reason"]
    assert check_plan(small_h100_pod, plan) == [] and plan.strategy == "cpsat"
    assert tuple(plan.objective) >= tuple(greedy.objective)
