"""The device plugin's MIG strategy as a planning constraint: single nodes are all-one-profile or MIG-off."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Problem
from capplan.model.validate import check_assignments, check_plan
from capplan.placement import PlanOptions, solve

FULL = [{"profile": "1g.5gb", "start": s} for s in range(7)]


def _problem(mixed_reqs: int, single_reqs: int, whole: int = 0, single_gpus: int = 2) -> Problem:
    """One single-strategy A100 node preset to 1g.5gb x7 per GPU, one free mixed node, one MIG-off single node."""
    nodes: list[dict[str, Any]] = [
        {"name": "single-mig", "gpu": "A100-SXM4-40GB", "gpus": single_gpus, "cpu": 64, "memory_gib": 256,
         "mig_strategy": "single", "gpu_modes": [{"gpus": list(range(single_gpus)), "mode": "mig", "layout": FULL}]},
        {"name": "mixed", "gpu": "A100-SXM4-40GB", "gpus": 1, "cpu": 64, "memory_gib": 256},
        {"name": "single-off", "gpu": "A100-SXM4-40GB", "gpus": 2, "cpu": 64, "memory_gib": 256,
         "mig_strategy": "single"},
    ]
    workloads: list[dict[str, Any]] = []
    if mixed_reqs:
        workloads.append({"name": "asks-mig-resource", "mig": "1g.5gb", "replicas": mixed_reqs, "cpu": 1})
    if single_reqs:
        workloads.append({"name": "asks-gpu-on-single", "mig": "1g.5gb", "mig_strategy": "single",
                          "replicas": single_reqs, "cpu": 1})
    if whole:
        workloads.append({"name": "whole", "gpus": 1, "replicas": whole, "cpu": 1})
    return problem_from_data({"cluster": {"name": "c", "nodes": nodes}, "workloads": workloads})


def _check_strategy_rule(p: Problem, assignments: tuple[Assignment, ...]) -> None:
    for a in assignments:
        w = p.workload(a.workload)
        if a.mig is not None:
            assert (a.node == "single-mig") == (w.mig_strategy == "single"), a
        if a.node == "single-off":
            assert a.mig is None, a


def test_can_host_follows_strategy() -> None:
    """A mixed MIG request never lands on a single node; a single one only on a single node of its profile."""
    p = _problem(1, 1)
    nodes = {n.name: n for n in p.cluster.nodes}
    mixed, single = p.workload("asks-mig-resource"), p.workload("asks-gpu-on-single")
    assert p.can_host(mixed, nodes["mixed"]) is not None
    assert p.can_host(mixed, nodes["single-mig"]) is None and p.can_host(mixed, nodes["single-off"]) is None
    assert p.can_host(single, nodes["single-mig"]) is not None
    assert p.can_host(single, nodes["mixed"]) is None and p.can_host(single, nodes["single-off"]) is None


def test_validator_flags_each_rule() -> None:
    """Wrong-strategy MIG use, two profiles and a half-MIG single node are each reported."""
    p = _problem(1, 1, single_gpus=2)
    bad = (Assignment(workload="asks-mig-resource", replica=0, node="single-mig", gpus=(0,),
                      mig=MigSlot(profile="1g.5gb", start=0)),)
    assert any("cannot use the MIG devices" in v for v in check_assignments(p, bad))
    half = problem_from_data({
        "cluster": {"nodes": [{"name": "s", "gpu": "A100-SXM4-40GB", "gpus": 2, "cpu": 8, "memory_gib": 64,
                               "mig_strategy": "single"}]},
        "workloads": [{"name": "m", "mig": "1g.5gb", "mig_strategy": "single", "cpu": 1},
                      {"name": "g", "gpus": 1, "cpu": 1},
                      {"name": "m2", "mig": "2g.10gb", "mig_strategy": "single", "cpu": 1}]})
    a_m = Assignment(workload="m", replica=0, node="s", gpus=(0,), mig=MigSlot(profile="1g.5gb", start=0))
    a_g = Assignment(workload="g", replica=0, node="s", gpus=(1,))
    a_m2 = Assignment(workload="m2", replica=0, node="s", gpus=(1,), mig=MigSlot(profile="2g.10gb", start=0))
    assert any("not MIG-enabled while others are" in v for v in check_assignments(half, (a_m, a_g)))
    assert any("profiles" in v for v in check_assignments(half, (a_m, a_m2)))


def test_single_presets_must_be_one_profile_on_every_gpu() -> None:
    """A single-strategy node with MIG on only some GPUs (or two profiles) is rejected when the problem is built."""
    with pytest.raises(InputError, match="single"):
        problem_from_data({"cluster": {"nodes": [
            {"name": "s", "gpu": "A100-SXM4-40GB", "gpus": 2, "cpu": 8, "memory_gib": 64, "mig_strategy": "single",
             "gpu_modes": [{"gpus": [0], "mode": "mig", "layout": FULL}]}]}})


@pytest.mark.parametrize("strategy", ["greedy", "cpsat", "heuristic", "lns", "decompose", "patterns"])
def test_every_strategy_honours_the_strategy(strategy: str) -> None:
    """Each planner keeps mixed requests off single nodes and single requests on them, validly."""
    p = _problem(mixed_reqs=9, single_reqs=5, whole=2)
    plan = solve(p, strategy, PlanOptions(time_limit=5, seed=1, workers=1))
    assert check_plan(p, plan) == []
    _check_strategy_rule(p, plan.assignments)
    placed = {w: sum(1 for a in plan.assignments if a.workload == w) for w in p.workload_index}
    assert placed["asks-gpu-on-single"] == 5  # only the single node's 1g.5gb devices can take them
    if strategy == "cpsat":  # the optimum: 7 x 1g.5gb on the mixed GPU, whole GPUs on the MIG-off single node
        assert placed["asks-mig-resource"] == 7 and placed["whole"] == 2


@pytest.mark.parametrize("strategy", ["greedy", "heuristic"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed=st.integers(0, 10), single=st.integers(0, 16), whole=st.integers(0, 3), gpus=st.integers(1, 2))
def test_fast_plans_pass_the_validator(strategy: str, mixed: int, single: int, whole: int, gpus: int) -> None:
    """Random demand on the three kinds of node: every greedy/heuristic plan validates and respects the strategies."""
    if not (mixed or single or whole):
        return
    p = _problem(mixed, single, whole, single_gpus=gpus)
    plan = solve(p, strategy, PlanOptions(time_limit=5, seed=1, workers=1))
    assert check_plan(p, plan) == []
    _check_strategy_rule(p, plan.assignments)
