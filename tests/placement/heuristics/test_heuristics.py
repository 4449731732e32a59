"""The vectorised heuristics: valid plans on random scenarios, gangs, MIG starts, determinism."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings

from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.core.state import ClusterState
from capplan.placement.heuristics import BestFit, Fgd, ShapeMix, place
from capplan.placement.heuristics.choose import choose
from tests.strategies_gen import scenario_data

EXAMPLES = Path(__file__).parents[3] / "models" / "examples"


def _problem(data: dict[str, Any]) -> Problem:
    return problem_from_data(data, load_catalog())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_heuristic_plans_pass_the_validator(data: dict[str, Any]) -> None:
    """Every heuristic plan on a random scenario passes the independent validator."""
    p = _problem(data)
    for score in ("fgd", "bestfit"):
        plan = solve(p, "heuristic", PlanOptions(time_limit=5))
        assert check_plan(p, plan) == []
        # the heuristic's plan, unless greedy's was lexicographically better (every strategy starts from it) or
        # it left a guaranteed replica out that the guaranteed check then placed
        assert (plan.strategy == "heuristic" or plan.metrics.get("auto", {}).get("kept") == "greedy"
                or "placed" in plan.metrics.get("guaranteed_check", "")), plan.metrics
        _ = score


def test_gang_placed_inside_one_rack_or_not_at_all() -> None:
    """A gang with a required rack goes into one rack; one too big for any rack is left out whole."""
    nodes = [{"name": f"n{r}{i}", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}
             for r in range(2) for i in range(2)]
    data = {"cluster": {"levels": ["rack", "node"],
                        "racks": [{"name": "r0", "nodes": nodes[:2]}, {"name": "r1", "nodes": nodes[2:]}]},
            "workloads": [{"name": "fits", "kind": "training", "replicas": 2, "gpus": 8, "cpu": 8,
                           "topology": {"required": "rack"}},
                          {"name": "too-big", "kind": "training", "replicas": 3, "gpus": 8, "cpu": 8,
                           "topology": {"required": "rack"}}]}
    p = _problem(data)
    plan = solve(p, "heuristic")
    racks = {a.node[:2] for a in plan.assignments if a.workload == "fits"}
    assert len(racks) == 1 and sum(a.workload == "fits" for a in plan.assignments) == 2
    assert not any(a.workload == "too-big" for a in plan.assignments)
    assert any(u.workload == "too-big" and "rack" in u.reason for u in plan.unplaced)


def test_mig_start_keeps_most_placements() -> None:
    """A 1g slice on an empty A100 starts where the most valid placements remain (not at 0..3 of a 4g)."""
    data = {"cluster": {"nodes": [{"name": "a", "gpu": "A100-SXM4-80GB", "gpus": 1, "cpu": 8, "memory_gib": 64}]},
            "workloads": [{"name": "s", "mig": "1g.10gb", "cpu": 1}]}
    p = _problem(data)
    st = ClusterState(p)
    c = choose(st, p.workloads[0], BestFit())
    assert c is not None and c.slot is not None
    # Starting at 6 (the end) leaves 4g@0 and 3g@4 possible; 0 would block the 4g and 7g.
    assert c.slot.start == 6


def test_fgd_prefers_node_that_keeps_whole_gpus() -> None:
    """FGD puts a small share on a partly used GPU rather than opening a fresh one needed by whole-GPU pods."""
    data = {"cluster": {"nodes": [{"name": f"n{i}", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 32,
                                   "memory_gib": 256} for i in range(2)]},
            "workloads": [{"name": "half", "kind": "shared", "gpu_fraction": 0.5, "cpu": 1},
                          {"name": "quarter", "kind": "shared", "gpu_fraction": 0.25, "cpu": 1},
                          {"name": "whole", "gpus": 1, "replicas": 6, "cpu": 1}]}
    p = _problem(data)
    st = ClusterState(p)
    fgd = Fgd(ShapeMix.of(p, st))
    first = choose(st, p.workloads[0], fgd)
    assert first is not None
    st.apply(p.workloads[0], st.demands(p.workloads[0])[0][int(st.model_id[first.node])]  # type: ignore[arg-type]
             , first)
    second = choose(st, p.workloads[1], fgd)
    assert second is not None and (second.node, second.gpus) == (first.node, first.gpus)


def test_same_seed_same_plan_and_running_kept() -> None:
    """The heuristic is deterministic for a seed and leaves running replicas where they are."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    a = solve(p, "heuristic", seed=3)
    b = solve(p, "heuristic", seed=3)
    assert a.assignments == b.assignments


def test_rollback_restores_state() -> None:
    """Rolling back a journalled placement restores every array."""
    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    st = ClusterState(p)
    before = (st.cpu.copy(), st.used.copy(), st.power_free.copy(), st.free_whole.copy())
    mark = st.checkpoint()
    assignments, _, _ = place(p, "bestfit", st=st)
    st.rollback(mark)
    assert all(np.array_equal(x, y) for x, y in zip(before, (st.cpu, st.used, st.power_free, st.free_whole),
                                                        strict=True))
    assert assignments


def test_past_deadline_switches_to_best_fit_and_stays_valid() -> None:
    """A deadline already passed makes every workload use best fit; the plan equals best fit's and is valid."""
    import time

    p = load_scenario(EXAMPLES / "mixed-fleet.yaml")
    late, _, placer = place(p, "fgd", deadline=time.perf_counter() - 1.0)
    assert placer.switched_at == 0
    assert isinstance(placer.scorer, BestFit)
    plain, _, _ = place(p, "bestfit")
    assert sorted(late, key=repr) == sorted(plain, key=repr)
    on_time, _, placer2 = place(p, "fgd", deadline=time.perf_counter() + 3600.0)
    assert placer2.switched_at is None and isinstance(placer2.scorer, Fgd)
    from capplan.placement.heuristics.run import LATE, plan_heuristic

    plan = plan_heuristic(p, PlanOptions(time_limit=1e-9))  # the strategy itself (solve gives it at least 50 ms)
    assert check_plan(p, plan) == [] and plan.metrics.get("bestfit_from_workload") == 0
    # Past its hard stop the pass tries nothing more: every replica is unplaced, saying why.
    assert not plan.assignments and plan.unplaced and all(u.reason == LATE for u in plan.unplaced)
    more = solve(p, "heuristic", PlanOptions(time_limit=5.0))
    assert check_plan(p, more) == [] and more.assignments
    _ = on_time
