"""benchmarks/shapes.py: every generator builds a valid problem of its shape, and greedy plans it validly."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from tests.conftest import script_module

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "shapes.py"
TINY = 256  # GPUs: 32 nodes of 8


@pytest.fixture(scope="module")
def shapes() -> ModuleType:
    return script_module(SCRIPT, "shapes_bench")


def _features(p: Problem) -> dict[str, Any]:
    top = max(p.priorities)
    models_per_rack: dict[str, set[str]] = {}
    for n in p.cluster.nodes:
        if n.gpu_model and "rack" in p.cluster.levels:
            models_per_rack.setdefault(p.cluster.domain_of(n, "rack"), set()).add(n.gpu_model)
    return {
        "top isolation": {w.isolation for w in p.workloads if w.priority == top},
        "mixed racks": any(len(m) > 1 for m in models_per_rack.values()),
        "required": {w.topology.required for w in p.workloads if w.is_gang},
        "priorities": len(p.priorities),
        "tenants": len({w.tenant for w in p.workloads}),
        "shares with memory": sum(1 for w in p.workloads if w.gpu_fraction and w.gpu_memory_gib),
        "power": sum(1 for d in p.cluster.domains if d.power_w is not None),
        "cpu nodes": sum(1 for n in p.cluster.nodes if not n.gpus),
        "cpu pods": sum(1 for w in p.workloads if w.gpus is None and w.mig is None and w.gpu_fraction is None),
        "models": len({n.gpu_model for n in p.cluster.nodes if n.gpu_model}),
        "layouts": sum(1 for n in p.cluster.nodes for m in n.gpu_modes if m.layout),
        "auto guaranteed": any(w.mig == "auto" and w.sla == "guaranteed" for w in p.workloads),
        "running": len(p.running),
        "movable": {(w.preemptible, w.migratable) for w in p.workloads},
    }


@pytest.mark.parametrize("shape", ["a", "b", "c", "d", "e", "f"])
def test_generator_builds_its_shape_and_greedy_plans_it(shapes: ModuleType, shape: str) -> None:
    """At 256 GPUs: a valid Problem with the shape's features, the same for the same seed, and a valid greedy plan."""
    data = shapes.SHAPES[shape](TINY, 0)
    assert data == shapes.SHAPES[shape](TINY, 0) and data != shapes.SHAPES[shape](TINY, 1)
    p = problem_from_data(data)
    assert p.cluster.gpus_total == TINY
    f = _features(p)
    if shape == "a":
        assert {"tenant", "node"} <= f["top isolation"] and f["tenants"] >= 20
    elif shape == "b":
        assert f["mixed racks"] and f["required"] == {"rack", "block"}
        assert sum(w.replicas * (w.gpus or 0) for w in p.workloads) >= 1.3 * TINY  # over-subscribed
    elif shape == "c":
        assert f["priorities"] == 8 and f["tenants"] >= 50 and f["shares with memory"] == len(p.workloads)
    elif shape == "d":
        assert f["power"] and f["cpu nodes"] and f["cpu pods"]
    elif shape == "e":
        assert f["models"] >= 5 and f["layouts"] and f["auto guaranteed"]
    else:
        assert f["running"] and (True, False) in f["movable"] and (False, True) in f["movable"]
    moves = shape in shapes.FLAGS
    plan = solve(p, "greedy", PlanOptions(time_limit=30, allow_preemption=moves, allow_migration=moves))
    assert check_plan(p, plan) == []
    assert plan.assignments  # something is placed on every shape


def test_lex_key_and_compare_by_hand(shapes: ModuleType) -> None:
    """Guaranteed replicas first, then value and replicas per priority; no plan loses to any plan."""
    data = {"workloads": [{"name": "g", "priority": 10, "sla": "guaranteed"}, {"name": "b", "priority": 0}]}
    plan = {"priorities": [10, 0], "objective": [1.0, 0.5],
            "assignments": [{"workload": "g"}, {"workload": "b"}, {"workload": "b"}]}
    assert shapes.lex_key(data, plan) == [1.0, 1.0, 1.0, 0.5, 2.0]
    assert shapes.compare([1.0, 2.0, 1.0], [1.0, 1.0, 9.0]) == "better"
    assert shapes.compare([0.0, 9.0], [1.0, 0.0]) == "worse"
    assert shapes.compare([1.0, 2.0], [1.0, 2.0 + 1e-9]) == "equal"
    assert shapes.compare(None, [0.0]) == "worse" and shapes.compare([0.0], None) == "better"
    assert shapes.compare(None, None) == "no plans"


def test_gaps_from_the_plan_or_computed(shapes: ModuleType) -> None:
    """A plan's own ``gaps`` are used when present; otherwise (bound - objective) / bound, 0 for a zero bound."""
    assert shapes.gaps_of({"objective": [3.0, 0.0], "bound": [4.0, 0.0]}) == [0.25, 0.0]
    assert shapes.gaps_of({"objective": [3.0], "bound": [4.0], "gaps": [0.5]}) == [0.5]
