"""Taints and tolerations: Kubernetes' matching rules, one eligibility rule for every strategy and the time
engine, the independent validator, running state that breaks the rule, and the unplaced reason."""

from __future__ import annotations

from typing import Any

import pytest

from capplan import schedule
from capplan.io.scenario import dump_scenario, problem_from_data
from capplan.model.plan import Plan
from capplan.model.problem import Problem, Taint, Toleration, untolerated
from capplan.model.validate import check_plan
from capplan.model.validate_rules import check_taints
from capplan.placement import solve
from capplan.placement.core.reality import running_breaks
from capplan.placement.strategies import STRATEGIES

GPU = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


@pytest.mark.parametrize(("tol", "taint", "ok"), [
    # Equal (the default operator) needs the same key and value; an empty effect matches every effect
    ({"key": "nvidia.com/gpu", "value": "present"}, GPU, True),
    ({"key": "nvidia.com/gpu", "value": "absent"}, GPU, False),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, GPU, True),
    ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}, GPU, False),
    # Exists matches every value of the key
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU, True),
    ({"key": "other", "operator": "Exists"}, GPU, False),
    # an empty key with Exists tolerates every taint; with an effect, every taint of that effect
    ({"operator": "Exists"}, GPU, True),
    ({"operator": "Exists", "effect": "NoExecute"}, GPU, False),
    ({"operator": "Exists", "effect": "NoExecute"}, Taint(key="dedicated", value="x", effect="NoExecute"), True),
    # Equal with no value matches a taint without a value only
    ({"key": "dedicated"}, Taint(key="dedicated", effect="NoSchedule"), True),
    ({"key": "dedicated"}, Taint(key="dedicated", value="ml", effect="NoSchedule"), False),
])
def test_toleration_matching_is_kubernetes(tol: dict[str, Any], taint: Taint, ok: bool) -> None:
    """Hand-worked from Kubernetes' ``Toleration.ToleratesTaint``: effect, then key, then the operator."""
    assert Toleration.model_validate(tol).tolerates(taint) is ok
    assert (untolerated([taint], [Toleration.model_validate(tol)]) == []) is ok


def test_prefer_no_schedule_is_ignored_and_bad_tolerations_are_refused() -> None:
    soft = Taint(key="spot", value="true", effect="PreferNoSchedule")
    assert untolerated([soft], []) == []
    assert untolerated([GPU, soft], []) == [GPU]
    with pytest.raises(ValueError, match="without a key must have operator: Exists"):
        Toleration(value="x")
    with pytest.raises(ValueError, match="Exists matches every value"):
        Toleration(key="a", operator="Exists", value="x")


def _problem(running: list[dict[str, Any]] | None = None, **extra: Any) -> Problem:
    """Two tainted H100 nodes (the GPU Operator's taint; gpu-1 also dedicated=research:NoExecute), one
    untainted A100 node; a tolerating job, a job tolerating only the GPU taint, and one tolerating nothing."""
    tol_gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    return problem_from_data({
        "cluster": {"levels": ["node"], "nodes": [
            {"name": "gpu-0", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512,
             "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            {"name": "gpu-1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512,
             "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                        {"key": "dedicated", "value": "research", "effect": "NoExecute"}]},
            {"name": "a100-0", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 64, "memory_gib": 512,
             "taints": [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]}]},
        "workloads": [
            {"name": "all", "kind": "training", "replicas": 2, "gpus": 8, "gpu_models": ["H100-SXM5-80GB"],
             "tolerations": [{"operator": "Exists"}], "priority": 1},
            {"name": "gpu-only", "replicas": 2, "gpus": 4, "gpu_models": ["H100-SXM5-80GB"],
             "tolerations": [tol_gpu]},
            {"name": "none", "replicas": 1, "gpus": 1, "gpu_models": ["H100-SXM5-80GB"]},
            {"name": "anywhere", "replicas": 2, "gpus": 1}],
        **({"running": running} if running else {}), **extra})


def test_round_trip_keeps_taints_and_tolerations() -> None:
    import yaml

    p = _problem()
    again = problem_from_data(yaml.safe_load(dump_scenario(p)))
    assert again.cluster.nodes == p.cluster.nodes and again.workloads == p.workloads
    assert again.cluster.nodes[1].taints[1] == Taint(key="dedicated", value="research", effect="NoExecute")


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_keeps_taints(strategy: str) -> None:
    """Hand-worked: `all` tolerates everything and takes both H100 nodes whole (priority 1), so `gpu-only`
    (gpu-0 only: it does not tolerate dedicated=research:NoExecute) finds no room, and `none` tolerates no
    H100 node at all; `anywhere` lands on the A100 node (PreferNoSchedule is ignored). solve() runs the
    validator, which rejects a replica on a node whose taint it does not tolerate."""
    plan = solve(_problem(), strategy, time_limit=10, seed=0)
    where = {(a.workload, a.replica): a.node for a in plan.assignments}
    assert {where[("all", 0)], where[("all", 1)]} == {"gpu-0", "gpu-1"}
    assert where[("anywhere", 0)] == where[("anywhere", 1)] == "a100-0"
    unplaced = {u.workload: u.reason for u in plan.unplaced}
    assert set(unplaced) == {"gpu-only", "none"}
    assert unplaced["none"].startswith("taint: ") and "nvidia.com/gpu=present:NoSchedule on nodes gpu-0, gpu-1" \
        in unplaced["none"]


def test_gpu_taint_with_matching_toleration_lands() -> None:
    """Without the gang, `gpu-only` lands on gpu-0 only (it does not tolerate gpu-1's NoExecute taint)."""
    p = _problem()
    p = p.replace(workloads=tuple(w for w in p.workloads if w.name != "all"))
    plan = solve(p, "cpsat", time_limit=10)
    assert {a.node for a in plan.assignments if a.workload == "gpu-only"} == {"gpu-0"}


def test_validator_rejects_an_untolerated_taint() -> None:
    p = _problem()
    plan = solve(p, "greedy")
    moved = [a.model_copy(update={"node": "gpu-1"}) if a.workload == "anywhere" and a.replica == 0 else a
             for a in plan.assignments]
    bad = check_taints(p, moved)
    assert bad == ["anywhere[0] on gpu-1: taint nvidia.com/gpu=present:NoSchedule is not tolerated"]
    assert any("not tolerated" in v for v in check_plan(p, Plan.model_validate(
        {**plan.model_dump(), "assignments": [a.model_dump() for a in moved]})))


def test_running_replica_on_untolerated_node_is_running_state() -> None:
    """A replica running where its taint is not tolerated (the taint came later) stays, with a warning, in
    plans and schedules; new replicas of the same workload still never land there."""
    p = _problem(running=[{"workload": "none", "replica": 0, "node": "gpu-0", "gpus": [7]}])
    assert [(b.rule, b.message) for b in running_breaks(p)] == [(
        "taint", "running replica none[0] on gpu-0 does not tolerate taint nvidia.com/gpu=present:NoSchedule; it "
        "stays as it runs (new replicas never land there)")]
    for strategy in sorted(STRATEGIES):
        plan = solve(p, strategy, time_limit=10, seed=0)
        assert any(a.workload == "none" and a.node == "gpu-0" for a in plan.assignments), strategy
        assert any("does not tolerate taint" in m for m in plan.metrics["running_breaks"]), strategy
    p2 = p.replace(workloads=tuple(w.model_copy(update={"duration": 3600}) for w in p.workloads),
                   schedule={"horizon": 7200, "step": 600})
    for strategy in ("heuristic", "cpsat"):
        s = schedule(p2, strategy, time_limit=10)
        assert any(a.workload == "none" and a.node == "gpu-0" for a in s.assignments)
        assert all(a.node == "a100-0" for a in s.assignments if a.workload == "anywhere")
