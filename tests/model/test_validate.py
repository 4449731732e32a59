"""The independent validator rejects a hand-made violation of each rule, and accepts valid plans."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.model.errors import PlanValidationError
from capplan.model.plan import Assignment, Eviction, Migration, MigSlot, Plan, Unplaced
from capplan.model.problem import Problem
from capplan.model.validate import assert_valid, check_plan
from capplan.placement.core.summary import make_plan
from tests.conftest import scenario

H100 = {"gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}


def node(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, **H100, **kw}


def a(w: str, r: int, n: str, gpus: tuple[int, ...] = (), mig: tuple[str, int] | None = None,
      fraction: float | None = None) -> Assignment:
    return Assignment(workload=w, replica=r, node=n, gpus=gpus, fraction=fraction,
                      mig=MigSlot(profile=mig[0], start=mig[1]) if mig else None)


def plan_of(p: Problem, assignments: list[Assignment], unplaced: list[Unplaced] | None = None,
            **kw: Any) -> Plan:
    return make_plan(p, "hand", assignments, unplaced or [], **kw)


def violations(p: Problem, plan: Plan, needle: str) -> list[str]:
    found = check_plan(p, plan)
    assert any(needle in v for v in found), found
    return found


def test_valid_plan_passes() -> None:
    """A correct hand-made plan has no violations and assert_valid returns it."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "gpus": 4}])
    plan = plan_of(p, [a("w", 0, "n1", (0, 1, 2, 3)), a("w", 1, "n1", (4, 5, 6, 7))])
    assert check_plan(p, plan) == []
    assert assert_valid(p, plan) is plan


def test_every_replica_placed_or_unplaced() -> None:
    """A replica neither placed nor listed unplaced is a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "gpus": 1}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,))]), "neither placed nor listed unplaced")


def test_replica_placed_twice() -> None:
    """The same replica assigned twice is a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 1, "gpus": 1}])
    plan = plan_of(p, [a("w", 0, "n1", (0,))]).model_copy(
        update={"assignments": (a("w", 0, "n1", (0,)), a("w", 0, "n1", (1,)))})
    violations(p, plan, "assigned twice")


def test_whole_gpu_shared_by_two_replicas() -> None:
    """A whole GPU used by two replicas is a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "gpus": 1}])
    violations(p, plan_of(p, [a("w", 0, "n1", (3,)), a("w", 1, "n1", (3,))]), "whole GPU used by 2")


def test_wrong_gpu_count() -> None:
    """A replica holding fewer GPUs than it asks for is a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 2}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,))]), "needs exactly 2 whole GPUs")


def test_gpu_index_out_of_range() -> None:
    """GPU indices beyond the node's GPUs are a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 1}])
    violations(p, plan_of(p, [a("w", 0, "n1", (8,))]), "outside 0..7")


def test_mig_profile_not_supported_by_model() -> None:
    """A MIG profile the GPU model does not have is a violation."""
    p = scenario([node("n1")], [{"name": "w", "mig": "3g.40gb"}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,), ("3g.20gb", 0))]), "has no profile")


def test_mig_start_not_allowed() -> None:
    """A MIG instance at a start its profile does not allow is a violation."""
    p = scenario([node("n1")], [{"name": "w", "mig": "3g.40gb"}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,), ("3g.40gb", 2))]), "may not start at 2")


def test_mig_overlap() -> None:
    """Two MIG instances whose memory slices overlap are a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "mig": "2g.20gb"},
                                {"name": "v", "mig": "3g.40gb"}])
    plan = plan_of(p, [a("w", 0, "n1", (0,), ("2g.20gb", 4)), a("w", 1, "n1", (1,), ("2g.20gb", 0)),
                       a("v", 0, "n1", (0,), ("3g.40gb", 4))])
    violations(p, plan, "overlaps another")


def test_mig_max_count() -> None:
    """More +me instances than the profile's max count is a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "mig": "1g.10gb+me"}])
    plan = plan_of(p, [a("w", 0, "n1", (0,), ("1g.10gb+me", 0)), a("w", 1, "n1", (0,), ("1g.10gb+me", 1))])
    violations(p, plan, "at most 1 allowed")


def test_mig_mixed_with_whole_use() -> None:
    """A GPU with a MIG instance and a whole-GPU replica is a violation."""
    p = scenario([node("n1")], [{"name": "w", "mig": "1g.10gb"}, {"name": "v", "gpus": 1}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,), ("1g.10gb", 0)), a("v", 0, "n1", (0,))]), "mixes")


def test_mig_not_in_preset_layout() -> None:
    """A MIG instance outside the GPU's preset layout is a violation."""
    p = scenario([node("n1", gpu_modes=[{"gpus": [0], "mode": "mig",
                                         "layout": [{"profile": "3g.40gb", "start": 0}]}])],
                 [{"name": "w", "mig": "3g.40gb"}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,), ("3g.40gb", 4))]), "not in the GPU's preset MIG layout")


def test_preset_whole_mode_rejects_fraction() -> None:
    """A time-sliced share on a GPU preset to whole mode is a violation."""
    p = scenario([node("n1", gpu_modes=[{"gpus": [0], "mode": "whole"}])], [{"name": "w", "gpu_fraction": 0.5}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,), fraction=0.5)]), "preset to mode whole")


def test_amd_partitions_homogeneous() -> None:
    """Mixing MI300X partition modes on one GPU is a violation."""
    mi = {"name": "m1", "gpu": "MI300X-192GB", "gpus": 8, "cpu": 64, "memory_gib": 512}
    p = scenario([mi], [{"name": "w", "mig": "DPX"}, {"name": "v", "mig": "CPX"}])
    violations(p, plan_of(p, [a("w", 0, "m1", (0,), ("DPX", 0)), a("v", 0, "m1", (0,), ("CPX", 4))]),
               "one partition mode per GPU")


def test_fractions_exceed_gpu() -> None:
    """Time-sliced shares summing over one GPU are a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 3, "gpu_fraction": 0.4}])
    plan = plan_of(p, [a("w", r, "n1", (0,), fraction=0.4) for r in range(3)])
    violations(p, plan, "shares sum to 1.200")


def test_fraction_gpu_memory() -> None:
    """Shares whose GPU memory needs exceed the GPU's memory are a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "gpu_fraction": 0.25, "gpu_memory_gib": 50}])
    plan = plan_of(p, [a("w", r, "n1", (0,), fraction=0.25) for r in range(2)])
    violations(p, plan, "MiB of GPU memory")


def test_node_cpu() -> None:
    """Replicas whose CPU exceeds the node's is a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "gpus": 1, "cpu": 40}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,)), a("w", 1, "n1", (1,))]), "cores requested")


def test_node_memory() -> None:
    """Replicas whose host memory exceeds the node's is a violation."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "cpu": 1, "memory_gib": 300}])
    violations(p, plan_of(p, [a("w", 0, "n1"), a("w", 1, "n1")]), "memory")


def test_allowed_gpu_models() -> None:
    """A replica on a GPU model outside its allowed list is a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 1, "gpu_models": ["A100-SXM4-80GB"]}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,))]), "not among the allowed")


def test_gang_all_or_nothing() -> None:
    """A training gang placed partially is a violation."""
    p = scenario([node("n1")], [{"name": "g", "kind": "training", "replicas": 2, "gpus": 8}])
    plan = plan_of(p, [a("g", 0, "n1", tuple(range(8)))], [Unplaced(workload="g", replicas=(1,), reason="x")])
    violations(p, plan, "gang placed partially")


def test_required_topology_domain(small_h100_pod: Problem) -> None:
    """A gang that must sit in one rack but spans two is a violation."""
    p = small_h100_pod
    plan = plan_of(p, [a("gang", 0, "r1n1", tuple(range(8))), a("gang", 1, "r2n1", tuple(range(8)))])
    violations(p, plan, "must sit inside one rack")


def test_tenant_isolation() -> None:
    """Two tenants on a GPU where one asks for tenant isolation is a violation."""
    p = scenario([node("n1")], [{"name": "w", "mig": "1g.10gb", "tenant": "a", "isolation": "tenant"},
                                {"name": "v", "mig": "1g.10gb", "tenant": "b"}])
    plan = plan_of(p, [a("w", 0, "n1", (0,), ("1g.10gb", 0)), a("v", 0, "n1", (0,), ("1g.10gb", 1))])
    violations(p, plan, "tenant isolation violated")


def test_node_isolation() -> None:
    """Another tenant on a node held with node isolation is a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 1, "tenant": "a", "isolation": "node"},
                                {"name": "v", "cpu": 1, "tenant": "b"}])
    violations(p, plan_of(p, [a("w", 0, "n1", (0,)), a("v", 0, "n1")]), "node isolation violated")


def test_rack_power() -> None:
    """GPUs drawing more than the rack's power budget is a violation."""
    racks = [{"name": "r1", "power_kw": 2, "nodes": [node("n1")]}]
    p = scenario([], [{"name": "w", "gpus": 3}], racks=racks)
    violations(p, plan_of(p, [a("w", 0, "n1", (0, 1, 2))]), "budget 2 kW")


def test_guaranteed_unplaced_needs_infeasible_status() -> None:
    """A guaranteed workload left unplaced in a plan not marked infeasible is a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 1, "sla": "guaranteed"}])
    plan = plan_of(p, [], [Unplaced(workload="w", replicas=(0,), reason="x")])
    assert plan.status == "infeasible" and check_plan(p, plan) == []
    violations(p, plan.model_copy(update={"status": "feasible"}), "guaranteed workloads")


def test_objective_recomputed() -> None:
    """An objective that does not match the assignments is a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 2}])
    plan = plan_of(p, [a("w", 0, "n1", (0, 1))])
    violations(p, plan.model_copy(update={"objective": (3.0,)}), "differs from the recomputed")


def test_bound_below_objective() -> None:
    """A bound below the achieved objective is a violation."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 2}])
    plan = plan_of(p, [a("w", 0, "n1", (0, 1))])
    violations(p, plan.model_copy(update={"bound": (1.0,)}), "is below the objective")


def running_problem(**w: Any) -> Problem:
    return scenario([node("n1")], [{"name": "low", "gpus": 8, "priority": 1, **w},
                                   {"name": "high", "gpus": 8, "priority": 10}],
                    running=[{"workload": "low", "replica": 0, "node": "n1", "gpus": list(range(8))}])


def test_running_replica_must_stay() -> None:
    """A running replica that disappears without an eviction is a violation."""
    p = running_problem()
    plan = plan_of(p, [a("high", 0, "n1", tuple(range(8)))], [Unplaced(workload="low", replicas=(0,), reason="x")])
    violations(p, plan, "moved or stopped without an eviction")


def test_eviction_needs_preemptible() -> None:
    """Evicting a non-preemptible replica is a violation; a preemptible one is fine."""
    ev = [Eviction(workload="low", replica=0, node="n1", reason="room for high")]
    args: dict[str, Any] = {"evictions": ev}
    for preemptible, ok in ((False, False), (True, True)):
        p = running_problem(preemptible=preemptible)
        plan = plan_of(p, [a("high", 0, "n1", tuple(range(8)))],
                       [Unplaced(workload="low", replicas=(0,), reason="evicted")], **args)
        assert (check_plan(p, plan) == []) == ok


def test_migration_needs_migratable() -> None:
    """Moving a running replica of a non-migratable workload is a violation."""
    p = scenario([node("n1"), node("n2")], [{"name": "w", "gpus": 8}],
                 running=[{"workload": "w", "replica": 0, "node": "n1", "gpus": list(range(8))}])
    mig = [Migration(workload="w", replica=0, from_node="n1", to_node="n2", reason="defragment")]
    plan = plan_of(p, [a("w", 0, "n2", tuple(range(8)))], migrations=mig)
    violations(p, plan, "not migratable")


def test_assert_valid_raises() -> None:
    """assert_valid raises PlanValidationError listing the violations."""
    p = scenario([node("n1")], [{"name": "w", "replicas": 2, "gpus": 1}])
    with pytest.raises(PlanValidationError, match="whole GPU used by 2"):
        assert_valid(p, plan_of(p, [a("w", 0, "n1", (3,)), a("w", 1, "n1", (3,))]))


def test_plan_numbers_must_be_finite() -> None:
    """A plan whose objective, bound or gap is not a finite number is invalid (model_construct skips pydantic)."""
    p = scenario([node("n1")], [{"name": "w", "gpus": 1}])
    good = plan_of(p, [a("w", 0, "n1", (0,))])
    for field, value in (("objective", (float("nan"),)), ("bound", (float("inf"),)), ("gap", float("nan"))):
        bad = Plan.model_construct(**(dict(good) | {field: value}))
        assert any("not a finite number" in v for v in check_plan(p, bad)), field


def test_power_rule_counts_busy_gpus_only() -> None:
    """The power check scales with busy GPUs: 2 busy H100s of a 128-GPU node fit a 1.5 kW rack."""
    racks = [{"name": "r1", "power_kw": 1.5, "nodes": [{"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 128,
                                                        "cpu": 64, "memory_gib": 512}]}]
    p = scenario([], [{"name": "w", "gpus": 1, "replicas": 3}], racks=racks)
    assert check_plan(p, plan_of(p, [a("w", 0, "n1", (0,)), a("w", 1, "n1", (1,))],
                                 [Unplaced(workload="w", replicas=(2,), reason="power")])) == []
    violations(p, plan_of(p, [a("w", r, "n1", (r,)) for r in range(3)]), "budget 1.5 kW")
