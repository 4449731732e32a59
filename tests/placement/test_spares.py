"""Hot-spare nodes in ``plan``: held after their gang's priority, of its model, inside its required domain, empty.

Every strategy runs through the shared step (placement/core/spares.py); the independent validator checks
the spares' domain, model and emptiness and the goodput rows' numbers.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.goodput import Interruptible, auto_spares, evaluate
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import STRATEGIES, PlanOptions, solve
from tests.strategies_gen import scenario_data

NAMES = sorted(STRATEGIES)
OPTS = PlanOptions(time_limit=10, seed=0, workers=1)
INTERRUPTIONS = {"gpu_failure_rate": 2e-5, "node_repair": "72h", "restart": "15m", "restart_without_spare": "4h"}


def _rack(name: str, prefix: str, count: int, gpu: str = "H100-SXM5-80GB") -> dict[str, Any]:
    return {"name": name, "nodes": [{"name_prefix": prefix, "count": count, "gpu": gpu, "gpus": 8, "cpu": 128,
                                     "memory_gib": 1024}]}


def _problem(racks: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> Problem:
    return problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": racks}, "workloads": workloads,
                              "interruptions": INTERRUPTIONS})


TRAIN = {"name": "train", "kind": "training", "replicas": 4, "gpus": 8, "cpu": 16, "memory_gib": 64, "priority": 5,
         "topology": {"required": "rack"}, "checkpoint": "6m", "spares": 2}


def _spares_case() -> Problem:
    """Rack r1 holds 3 nodes, r2 six: the 4-node gang fits only in r2, its 2 spares are r2's last two nodes,
    and 40 one-GPU batch replicas (priority 1) would fill them without the spares."""
    batch = {"name": "batch", "replicas": 40, "gpus": 1, "cpu": 1, "memory_gib": 4, "priority": 1}
    return _problem([_rack("r1", "a", 3), _rack("r2", "b", 6)], [TRAIN, batch])


@pytest.mark.parametrize("name", NAMES)
def test_spares_in_the_gangs_rack_and_empty(name: str) -> None:
    """Every strategy: the gang in r2, two spare nodes in r2 that hold nothing; batch gets the rest (24 GPUs)."""
    p = _spares_case()
    plan = solve(p, name, OPTS)
    assert check_plan(p, plan) == []
    gang = {a.node for a in plan.assignments if a.workload == "train"}
    assert len(gang) == 4 and all(n.startswith("b") for n in gang)
    (row,) = plan.goodput
    assert row.workload == "train" and row.spares == 2 and len(row.spare_nodes) == 2
    assert set(row.spare_nodes) <= {"b1", "b2", "b3", "b4", "b5", "b6"} - gang
    assert not {a.node for a in plan.assignments} & set(row.spare_nodes)
    assert plan.objective == (32.0, 24.0)
    g = Interruptible(gpus=32, nodes=4, rate_per_gpu_hour=2e-5, checkpoint=360, node_repair=72 * 3600, restart=900,
                      restart_without_spare=4 * 3600)
    assert row.goodput == pytest.approx(evaluate(g, 2).goodput, abs=1e-9)
    assert row.goodput_per_provisioned_gpu == pytest.approx(row.goodput * 4 / 6, abs=1e-9)
    assert plan.metrics["gpus_total"] == 72


def test_higher_priority_takes_the_rack_so_no_spare_fits() -> None:
    """r2 has five H100 nodes, r1 A100 ones: a priority-9 H100 job takes one r2 node, the gang the other four;
    no spare fits (the A100s are another model) and the plan says it held none of the one asked for."""
    hog = {"name": "hog", "replicas": 1, "gpus": 8, "cpu": 8, "memory_gib": 8, "priority": 9,
           "gpu_models": ["H100-SXM5-80GB"]}
    p = _problem([_rack("r1", "a", 3, "A100-SXM4-80GB"), _rack("r2", "b", 5)], [hog, {**TRAIN, "spares": 1}])
    for name in NAMES:
        plan = solve(p, name, OPTS)
        assert check_plan(p, plan) == []
        assert plan.objective == (8.0, 32.0)
        (row,) = plan.goodput
        assert row.spares == 0 and row.spare_nodes == ()
        assert plan.metrics["spares_wanted"] == {"train": 1}


def test_auto_spares_in_a_plan() -> None:
    """``spares: auto`` holds the count the model picks for the gang's placed size (8 nodes, 4 h repair: no spare
    at 2e-5 per GPU-hour, where u·n/(n+s) is 0.9791 with none and 0.8744 with one; one spare at 1e-3, where
    it is 0.6898 with none, 0.7384 with one and 0.6969 with two)."""
    for rate in (2e-5, 1e-3):
        inter = {**INTERRUPTIONS, "gpu_failure_rate": rate, "node_repair": "4h"}
        p = problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": [_rack("r1", "a", 12)]},
                               "workloads": [{**TRAIN, "replicas": 8, "spares": "auto"}], "interruptions": inter})
        plan = solve(p, "greedy", OPTS)
        g = Interruptible(gpus=64, nodes=8, rate_per_gpu_hour=rate, checkpoint=360, node_repair=4 * 3600,
                          restart=900, restart_without_spare=4 * 3600)
        assert plan.goodput[0].spares == auto_spares(g) == (0 if rate == 2e-5 else 1)


def _valid() -> tuple[Problem, Plan]:
    p = _spares_case()
    return p, solve(p, "greedy", OPTS)


def _with_spares(plan: Plan, nodes: tuple[str, ...]) -> Plan:
    row = plan.goodput[0].model_copy(update={"spare_nodes": nodes, "spares": len(nodes)})
    return plan.model_copy(update={"goodput": (row,)})


def test_validator_rejects_a_spare_outside_its_domain() -> None:
    p, plan = _valid()
    bad = _with_spares(plan, (plan.goodput[0].spare_nodes[0], "a1"))
    assert any("a1" in v and "outside" in v for v in check_plan(p, bad))


def test_validator_rejects_a_spare_holding_work() -> None:
    p, plan = _valid()
    gang_node = next(a.node for a in plan.assignments if a.workload == "train")
    bad = _with_spares(plan, (plan.goodput[0].spare_nodes[0], gang_node))
    assert any("holds work" in v for v in check_plan(p, bad))


def test_validator_rejects_a_spare_of_another_model_and_wrong_numbers() -> None:
    """One rack of six H100 and two A100 nodes: the H100 gang's spares are H100s; an A100 spare is refused."""
    rack = {"name": "r1", "nodes": [
        {"name_prefix": "h", "count": 6, "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 128, "memory_gib": 1024},
        {"name_prefix": "x", "count": 2, "gpu": "A100-SXM4-80GB", "gpus": 8, "cpu": 128, "memory_gib": 1024}]}
    p = _problem([rack], [{**TRAIN, "gpu_models": ["H100-SXM5-80GB"]}])
    plan = solve(p, "greedy", OPTS)
    assert check_plan(p, plan) == [] and all(n.startswith("h") for n in plan.goodput[0].spare_nodes)
    wrong = check_plan(p, _with_spares(plan, (plan.goodput[0].spare_nodes[0], "x1")))
    assert len(wrong) == 1 and "x1" in wrong[0] and "model" in wrong[0]
    row = plan.goodput[0].model_copy(update={"goodput": 0.5})
    assert any("goodput 0.5 differs" in v for v in check_plan(p, plan.model_copy(update={"goodput": (row,)})))
    assert any("no row" in v for v in check_plan(p, plan.model_copy(update={"goodput": ()})))


def test_plan_json_round_trip_and_old_plans_unchanged() -> None:
    _, plan = _valid()
    text = plan.to_json()
    assert '"goodput": [' in text and Plan.from_json(text) == plan
    plain = problem_from_data({"cluster": {"levels": ["node"], "nodes": [
        {"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 8, "memory_gib": 64}]},
        "workloads": [{"name": "w", "gpus": 1}]})
    assert "goodput" not in solve(plain, "greedy", OPTS).to_json()


@st.composite
def _with_spares_data(draw: st.DrawFn) -> dict[str, Any]:
    """A random scenario (tests/strategies_gen.py) whose whole-GPU gangs checkpoint and ask for spares; each rack
    gains copies of its first node, so spares often fit."""
    data = draw(scenario_data())
    for r, rack in enumerate(data["cluster"]["racks"]):
        first = rack["nodes"][0]
        rack["nodes"] += [{**first, "name": f"{first['name']}-copy{k}"} for k in range(draw(st.integers(1, 3)))]
        rack["nodes"] = [{**n, "name": f"{n['name']}-r{r}"} if "copy" in n["name"] else n for n in rack["nodes"]]
    for w in data["workloads"]:
        if "gpus" in w and draw(st.integers(0, 2)):
            w.update(kind="training", checkpoint="6m", spares=draw(st.sampled_from([0, 1, 2, "auto"])))
    data["interruptions"] = {"gpu_failure_rate": draw(st.sampled_from([2e-5, 1e-3])), "node_repair": "4h"}
    return data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_with_spares_data())
def test_random_spares_are_valid_and_displace_no_higher_priority(data: dict[str, Any]) -> None:
    """Plans with spares pass the validator (spares empty, of the model, in the domain), and every priority at or
    above the highest one holding spares places exactly what the plan without spares places there."""
    p = problem_from_data(data)
    plan = solve(p, "greedy", OPTS)
    assert check_plan(p, plan) == []
    top = max((w.priority for w in p.workloads if w.checkpoint is not None and w.spares != 0), default=None)
    if top is None:
        return
    plain = p.replace(workloads=tuple(w.model_copy(update={"spares": 0}) for w in p.workloads))
    base = solve(plain, "greedy", OPTS)
    for q, got, want in zip(p.priorities, plan.objective, base.objective, strict=True):
        if q >= top:
            assert got == want


@pytest.mark.parametrize("name", NAMES)
def test_spares_with_preemption_keep_evicted_replicas_out(name: str) -> None:
    """A priority-9 A100 job evicts the two preemptible batch replicas running on rack r2's A100s; the H100 gang
    (priority 5) takes two r1 nodes and its spare a third. The evicted replicas are not started again on r1's
    last node in the same plan (the stage after the spares sees them as unplaced): they stay evicted."""
    racks = [_rack("r1", "a", 4), _rack("r2", "b", 2, "A100-SXM4-80GB")]
    hog = {"name": "hog", "replicas": 2, "gpus": 8, "cpu": 8, "memory_gib": 8, "priority": 9,
           "gpu_models": ["A100-SXM4-80GB"]}
    batch = {"name": "batch", "replicas": 2, "gpus": 8, "cpu": 8, "memory_gib": 8, "priority": 1, "preemptible": True}
    p = _problem(racks, [hog, {**TRAIN, "replicas": 2, "spares": 1}, batch])
    running = tuple(Assignment(workload="batch", replica=r, node=f"b{r + 1}", gpus=tuple(range(8))) for r in range(2))
    p = p.replace(running=running)
    plan = solve(p, name, PlanOptions(time_limit=10, seed=0, workers=1, allow_preemption=True))
    assert check_plan(p, plan) == [], name
    evicted = {(e.workload, e.replica) for e in plan.evictions}
    assert not evicted & {a.key for a in plan.assignments}
    if name == "cpsat":
        assert evicted == {("batch", 0), ("batch", 1)} and plan.objective[0] == 16.0
        (row,) = plan.goodput
        assert row.spares == 1 and row.spare_nodes[0].startswith("a")
        assert "spares_warning" not in plan.metrics


def test_spares_anywhere_without_a_required_level() -> None:
    """Without topology.required a spare may sit in any rack: the gang fills r1's three nodes, its spares are in r2."""
    gang = {k: v for k, v in TRAIN.items() if k != "topology"} | {"replicas": 3}
    p = _problem([_rack("r1", "a", 3), _rack("r2", "b", 2)], [gang])
    plan = solve(p, "greedy", OPTS)
    assert check_plan(p, plan) == []
    (row,) = plan.goodput
    gang_nodes = {a.node for a in plan.assignments}
    assert row.spares == 2 and not gang_nodes & set(row.spare_nodes) and len(gang_nodes) == 3
