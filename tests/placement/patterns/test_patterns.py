"""The ``patterns`` strategy: node-pattern column generation, its master LP and its plans."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, choose_strategy, solve
from capplan.placement.core.bound import upper_bound
from capplan.placement.patterns.master import solve_master
from capplan.placement.patterns.pricing import Pricer, grids
from capplan.placement.patterns.shapes import covered, node_types, shapes
from tests.strategies_gen import scenario_data


def _problem(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> Problem:
    return problem_from_data({"cluster": {"name": "t", "levels": ["node"], "nodes": nodes}, "workloads": workloads})


def _master(p: Problem) -> Any:
    todo = [(w, r) for w in p.workloads if covered(w) for r in range(w.replicas)]
    types = node_types(p, [])
    shp = shapes(p, todo, types)
    step, unit = grids(types, shp)
    return solve_master(types, shp, Pricer(types, shp, step, unit), deadline=float("inf"),
                        end=time.perf_counter() + 5), shp


def _cpu_pairing() -> Problem:
    """Two 2-GPU nodes of 16 cores; two 1-GPU pods of 12 cores and two of 4 cores."""
    nodes = [{"name": f"n{i}", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 16, "memory_gib": 64} for i in range(2)]
    return _problem(nodes, [{"name": "big", "replicas": 2, "gpus": 1, "cpu": 12, "memory_gib": 8},
                            {"name": "small", "replicas": 2, "gpus": 1, "cpu": 4, "memory_gib": 8}])


def test_master_pairs_cpu_heavy_with_cpu_light_pods() -> None:
    """Known optimum 4 GPUs: each node takes one 12-core and one 4-core pod (two 12-core pods never fit)."""
    res, shp = _master(_cpu_pairing())
    assert res.lp_value == 4.0 and res.mip_value == 4.0
    for pat, _ in res.use:
        assert sorted(shp[s].cpu for s, _ in pat.items) == [4000, 12000]
    assert sum(n for _, n in res.use) == 2


def test_master_packs_shares_into_one_gpu() -> None:
    """One GPU and shares 0.6, 0.6, 0.4: the optimum (LP and MIP) is one full GPU, 0.6 + 0.4."""
    p = _problem([{"name": "n", "gpu": "A100-SXM4-80GB", "gpus": 1, "cpu": 16, "memory_gib": 64}],
                 [{"name": "a", "kind": "shared", "replicas": 2, "gpu_fraction": 0.6, "cpu": 1},
                  {"name": "b", "kind": "shared", "replicas": 1, "gpu_fraction": 0.4, "cpu": 1}])
    res, _ = _master(p)
    assert abs(res.lp_value - 1.0) < 1e-9 and abs(res.mip_value - 1.0) < 1e-9


def test_plan_reaches_the_optimum_and_passes_the_validator() -> None:
    """On the pairing instance the plan places all four pods; the validator agrees and the bound holds."""
    p = _cpu_pairing()
    plan = solve(p, "patterns", PlanOptions(time_limit=10))
    assert check_plan(p, plan) == []
    assert plan.objective == (4.0,) and plan.bound[0] >= plan.objective[0]
    assert plan.strategy == "patterns"


def test_uncovered_workloads_are_placed_first_and_isolation_falls_back() -> None:
    """A gang and a MIG workload go through the heuristic first; tenant isolation uses the heuristic."""
    nodes = [{"name": f"n{i}", "gpu": "A100-SXM4-80GB", "gpus": 4, "cpu": 64, "memory_gib": 256} for i in range(4)]
    ws = [{"name": "gang", "kind": "training", "replicas": 2, "gpus": 4, "cpu": 8},
          {"name": "mig", "replicas": 3, "mig": "1g.10gb", "cpu": 1},
          {"name": "sh", "kind": "shared", "replicas": 5, "gpu_fraction": 0.5, "cpu": 2},
          {"name": "cpu", "replicas": 2, "cpu": 4}]
    p = _problem(nodes, ws)
    plan = solve(p, "patterns", PlanOptions(time_limit=10))
    assert check_plan(p, plan) == [] and not plan.unplaced
    iso = _problem(nodes, [*ws, {"name": "iso", "gpus": 1, "cpu": 1, "tenant": "x", "isolation": "node"}])
    plan = solve(iso, "patterns", PlanOptions(time_limit=10))
    assert check_plan(iso, plan) == [] and plan.metrics["patterns_fallback"] == "heuristic"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_random_scenarios_give_valid_plans_within_the_bound(data: dict[str, Any]) -> None:
    """Every plan on a random scenario passes the validator and its objective never exceeds the LP bound."""
    from capplan.model.catalog import load_catalog

    p = problem_from_data(data, load_catalog())
    plan = solve(p, "patterns", PlanOptions(time_limit=5))
    assert check_plan(p, plan) == []
    bound = upper_bound(p)
    top = p.priorities[0] if p.priorities else None
    if top is not None and bound.converged:
        assert round(plan.objective[0] * 7000) <= bound.per_priority[top]


def test_auto_picks_patterns_for_many_interchangeable_nodes() -> None:
    """A fleet of 1,200 identical nodes and 6,000 shared pods is planned by ``patterns``; small ones by cpsat."""
    nodes = [{"name_prefix": "g", "count": 1200, "gpu": "A100-SXM4-80GB", "gpus": 8, "cpu": 96, "memory_gib": 512}]
    p = _problem(nodes, [{"name": "s", "kind": "shared", "replicas": 6000, "gpu_fraction": 0.5, "cpu": 2}])
    assert choose_strategy(p) == "patterns"
    assert choose_strategy(_cpu_pairing()) == "cpsat"
    assert np.isfinite(len(p.cluster.nodes))
