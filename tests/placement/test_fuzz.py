"""Fuzzing properties: every strategy returns a valid plan, and an ``optimal`` claim is a true optimum.

The first property draws rich scenarios (all demand kinds, isolation, power, gangs, topology), adds a
running state taken from an earlier plan and allows preemption and migration at random; the second
compares every plan claiming ``optimal`` with an exhaustive search on tiny instances. A third test runs
a few instances of the fuzz campaign (``benchmarks/fuzz.py``) end to end.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.model.units import UNITS_PER_GPU
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.greedy import plan_greedy
from tests.conftest import script_module
from tests.placement.cpsat.test_exhaustive import exhaustive_best, key, random_tiny
from tests.strategies_gen import scenario_data

STRATEGY_NAMES = ("greedy", "cpsat", "heuristic", "lns", "decompose", "patterns", "auto")
FEW = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def with_running(draw: st.DrawFn, p: Problem) -> Problem:
    """``p`` with part of its greedy plan running (whole gangs), and its workloads drawn preemptible / migratable."""
    first = plan_greedy(p, PlanOptions())
    keep = {w.name for w in p.workloads if draw(st.booleans())}
    running = tuple(a for a in first.assignments if a.workload in keep)
    works = tuple(w.model_copy(update={"preemptible": draw(st.booleans()), "migratable": draw(st.booleans())})
                  for w in p.workloads)
    return p.replace(workloads=works, running=running)


@st.composite
def rich_case(draw: st.DrawFn) -> tuple[Problem, PlanOptions]:
    """A rich random scenario, maybe with a running state, and options allowing moves at random."""
    p = problem_from_data(draw(scenario_data()))
    if draw(st.booleans()):
        p = draw(with_running(p))
    opts = PlanOptions(time_limit=1.0, seed=draw(st.integers(0, 99)), workers=1,
                       allow_preemption=draw(st.booleans()), allow_migration=draw(st.booleans()))
    return p, opts


@FEW
@given(rich_case())
def test_every_strategy_returns_a_valid_plan(case: tuple[Problem, PlanOptions]) -> None:
    """No strategy raises or falls back on random scenarios with running state; each plan passes the validator."""
    p, opts = case
    for name in STRATEGY_NAMES:
        plan = solve(p, name, opts)
        assert check_plan(p, plan) == [], name
        assert "fallback_from" not in plan.metrics, (name, plan.metrics.get("warning"))


@st.composite
def tiny_case(draw: st.DrawFn) -> Problem:
    """A tiny instance (2-3 small nodes, at most 5 replicas), maybe with part of a plan running."""
    p = random_tiny(draw(st.integers(0, 10**6)))
    return draw(with_running(p)) if draw(st.booleans()) else p


@FEW
@given(tiny_case())
def test_optimal_claims_match_the_exhaustive_optimum(p: Problem) -> None:
    """A plan claiming ``optimal`` reaches the exhaustive optimum; every bound covers it at each priority."""
    n = 1 + 2 * len(p.priorities)  # guaranteed, then (value, replicas) per priority: what `optimal` claims
    best = exhaustive_best(p)[:n]
    best_gpus = [u / UNITS_PER_GPU for u in best[1::2]]
    for name in STRATEGY_NAMES:
        plan = solve(p, name, PlanOptions(time_limit=1.0, seed=0, workers=1))
        got = key(p, plan.assignments)[:n]
        assert got <= best, (name, got, best)
        if plan.status == "optimal":
            assert got == best, (name, got, best)
        assert all(b >= o - 1e-6 for b, o in zip(plan.bound, best_gpus, strict=True)), (name, plan.bound, best_gpus)


SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz.py"


@pytest.fixture(scope="module")
def fuzz() -> ModuleType:
    """The campaign script imported as a module."""
    return script_module(SCRIPT, "fuzz_campaign")


@pytest.mark.parametrize("seed", [4, 11, 18])
def test_fuzz_campaign_instances_are_clean(fuzz: Any, seed: int) -> None:
    """Campaign instances with running state, preemption and migration: no error, invalid plan or false claim."""
    recs = fuzz.run_instance(seed)
    assert [r["strategy"] for r in recs] == list(fuzz.STRATEGIES)
    for r in recs:
        assert not r.get("error") and not r["invalid"] and not r["fallback"], r
        assert not r["false_proof"] and not r["false_bound"] and not r["false_infeasible"], r
    assert any(r["running"] for r in recs) == bool(fuzz.generate(seed)["scenario"].get("running"))


def test_cross_check_flags_a_false_infeasible(fuzz: Any) -> None:
    """``infeasible`` is a finding when another valid plan places every guaranteed replica, and only then."""
    def rec(strategy: str, status: str, guaranteed_placed: int, **extra: Any) -> dict[str, Any]:
        return {"strategy": strategy, "status": status, "key": [guaranteed_placed, 4.0, 4], "objective": [4.0],
                "bound": [8.0], "totals": [6], "invalid": [], **extra}

    decompose, cpsat = rec("decompose", "infeasible", 1), rec("cpsat", "feasible", 2)
    assert fuzz.cross_check(decompose, [decompose, cpsat], 2)[2] == ["cpsat"]
    short = rec("cpsat", "infeasible", 1)  # no plan meets the guarantee: both may say infeasible
    assert fuzz.cross_check(decompose, [decompose, short], 2)[2] == []
    broken = rec("cpsat", "feasible", 2, invalid=["replica placed twice"])  # an invalid plan refutes nothing
    assert fuzz.cross_check(decompose, [decompose, broken], 2)[2] == []


def test_generator_covers_the_shapes_features(fuzz: Any) -> None:
    """Over 200 seeds the generator draws preset MIG layouts, isolation at the top priority, required topology,
    guaranteed work, five or more priorities, over-subscription and running state; every instance builds."""
    seen: dict[str, int] = dict.fromkeys(["layout", "top isolated", "required", "guaranteed", "priorities>=5",
                                          "running", "oversubscribed"], 0)
    for seed in range(200):
        data = fuzz.generate(seed)["scenario"]
        p = problem_from_data(data)
        nodes = [n for n in p.cluster.nodes]
        seen["layout"] += any(m.layout for n in nodes for m in n.gpu_modes)
        top = max(p.priorities)
        seen["top isolated"] += any(w.isolation != "none" and w.priority == top for w in p.workloads)
        seen["required"] += any(w.topology.required for w in p.workloads)
        seen["guaranteed"] += any(w.sla == "guaranteed" for w in p.workloads)
        seen["priorities>=5"] += len(p.priorities) >= 5
        seen["running"] += bool(p.running)
        demand = sum(w.replicas * (w.gpus or 0) for w in p.workloads)
        seen["oversubscribed"] += demand > p.cluster.gpus_total > 0
    assert all(v >= 5 for v in seen.values()), seen


def test_a_failing_strategy_falls_back_to_the_greedy_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A strategy that raises, or returns a plan the validator rejects, costs the user nothing but a warning."""
    from capplan.placement import STRATEGIES

    p = random_tiny(5)

    def raises(problem: Problem, options: PlanOptions) -> Any:
        raise RuntimeError("boom")

    def drops_everything(problem: Problem, options: PlanOptions) -> Any:
        plan = plan_greedy(problem, options)
        return plan.model_copy(update={"assignments": (), "unplaced": ()})  # replicas neither placed nor listed

    greedy = solve(p, "greedy")
    for name, fn in (("raises", raises), ("invalid", drops_everything)):
        monkeypatch.setitem(STRATEGIES, name, fn)
        plan = solve(p, name, PlanOptions(time_limit=1.0))
        assert check_plan(p, plan) == []
        assert plan.metrics["fallback_from"] == name and name in plan.metrics["warning"]
        assert plan.assignments == greedy.assignments
