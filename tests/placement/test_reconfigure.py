"""Plans an operator can apply: the cost of change, running state as reality, reasons that name the cause.

Hand-worked cases (issue 26): preset MIG instances are used before a GPU is partitioned anew; with
``reconfigure: allowed`` a preset changes only when that places more, and each change is counted; a running
state that breaks a rule (a gang across models, isolation, a required domain, a partly running gang) is
planned around, never an internal error; unplaced reasons name the single MIG strategy and the one-model rule.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.errors import InputError
from capplan.model.plan import Assignment, MigSlot, Plan
from capplan.model.problem import Problem
from capplan.model.validate import check_plan, reconfigured_gpus
from capplan.placement import STRATEGIES, PlanOptions, solve
from capplan.placement.core.reality import running_breaks

NAMES = sorted(STRATEGIES)
OPTS = PlanOptions(time_limit=10, seed=0, workers=1)
EXAMPLES = Path(__file__).parents[2] / "models" / "examples"
ONE_G = [{"profile": "1g.10gb", "start": s} for s in range(7)]


def _node(name: str, gpu: str = "H100-SXM5-80GB", n: int = 8, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu": gpu, "gpus": n, "cpu": 64, "memory_gib": 512, **extra}


def _imported(reconfigure: str, workloads: list[dict[str, Any]], running: list[dict[str, Any]] | None = None
              ) -> Problem:
    """The issue's node: GPUs 0-6 MIG off (``whole``), GPU 7 seven empty 1g.10gb instances."""
    modes = [{"gpus": list(range(7)), "mode": "whole"}, {"gpus": [7], "mode": "mig", "layout": ONE_G}]
    return problem_from_data({"reconfigure": reconfigure, "cluster": {"levels": ["node"], "nodes": [
        _node("n1", gpu_modes=modes)]}, "workloads": workloads, "running": running or []})


# ------------------------------------------------------------------ the cost of change
def test_mig_inference_uses_the_preset_slices_first() -> None:
    """inf-hm1 GPUs 0-1 offer 3g.40gb@0 + 2g.20gb@4 + 1g.10gb@6: `vision` (3g, ads) and `rerank` (2g, ads,
    tenant-isolated) fill both; the 1g slice stays free because `embed` (search) may not join rerank's GPU."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    for name in NAMES:
        plan = solve(p, name, OPTS)
        used = Counter((a.gpus[0], a.mig.profile) for a in plan.assignments
                       if a.node == "inf-hm1" and a.gpus[0] in (0, 1) and a.mig is not None)
        assert used == {(0, "3g.40gb"): 1, (0, "2g.20gb"): 1, (1, "3g.40gb"): 1, (1, "2g.20gb"): 1}, (name, used)
        assert plan.metrics["gpus_reconfigured"] == 0 and plan.metrics["nodes_to_drain"] == [], name


@pytest.mark.parametrize("name", NAMES)
def test_free_preset_instances_serve_before_any_change(name: str) -> None:
    """Three 1g.10gb replicas fit in GPU 7's empty instances: nothing is re-partitioned, even when allowed."""
    small = {"name": "small", "replicas": 3, "mig": "1g.10gb", "cpu": 1, "memory_gib": 1}
    for reconf in ("forbidden", "allowed"):
        plan = solve(_imported(reconf, [small]), name, OPTS)
        assert {a.gpus[0] for a in plan.assignments} == {7}, (name, reconf)
        assert plan.metrics["gpus_reconfigured"] == 0


@pytest.mark.parametrize("name", NAMES)
def test_a_change_only_when_it_places_more_and_counted(name: str) -> None:
    """2 x 3g.40gb need one re-partitioned GPU (two 3g fit one H100): with `allowed` exactly one GPU changes;
    with `forbidden` the 3g replicas stay out and nothing changes."""
    works = [{"name": "small", "replicas": 3, "mig": "1g.10gb", "cpu": 1, "memory_gib": 1},
             {"name": "big", "replicas": 2, "mig": "3g.40gb", "cpu": 1, "memory_gib": 1},
             {"name": "train", "replicas": 1, "gpus": 4, "cpu": 1, "memory_gib": 1}]
    plan = solve(_imported("allowed", works), name, OPTS)
    assert len(plan.assignments) == 6
    assert plan.metrics["gpus_reconfigured"] == 1 and plan.metrics["nodes_to_drain"] == ["n1"], name
    # the 1g replicas sit on GPU 7's instances or beside the 3g ones on the one changed GPU (1 change either way)
    assert len({a.gpus[0] for a in plan.assignments if a.mig is not None} - {7}) == 1
    fixed = solve(_imported("forbidden", works), name, OPTS)
    assert [u.workload for u in fixed.unplaced] == ["big"] and fixed.metrics["gpus_reconfigured"] == 0


def test_a_gpu_with_a_running_replica_is_not_reconfigured() -> None:
    """GPU 7 runs a 1g.10gb replica: a 7g.80gb replica may not take it (it would have to be drained); it takes
    a MIG-off GPU instead, re-partitioned (1 change), never GPU 7."""
    works = [{"name": "small", "replicas": 1, "mig": "1g.10gb", "cpu": 1, "memory_gib": 1},
             {"name": "full", "replicas": 1, "mig": "7g.80gb", "cpu": 1, "memory_gib": 1}]
    run = [{"workload": "small", "replica": 0, "node": "n1", "gpus": [7], "mig": {"profile": "1g.10gb", "start": 0}}]
    p = _imported("allowed", works, run)
    for name in NAMES:
        plan = solve(p, name, OPTS)
        (full,) = [a for a in plan.assignments if a.workload == "full"]
        assert full.gpus[0] != 7 and plan.metrics["gpus_reconfigured"] == 1, name


def test_validator_checks_changes_and_their_count() -> None:
    """A 3g.40gb instance on a whole-preset GPU: a violation when forbidden, one reconfigured GPU when allowed;
    a wrong `gpus_reconfigured`, and a running replica left on a changed GPU, are rejected."""
    works = [{"name": "big", "replicas": 1, "mig": "3g.40gb", "cpu": 1, "memory_gib": 1},
             {"name": "svc", "replicas": 1, "gpu_fraction": 0.5, "cpu": 1, "memory_gib": 1}]
    a = Assignment(workload="big", replica=0, node="n1", gpus=(3,), mig=MigSlot(profile="3g.40gb", start=0))
    base = {"status": "feasible", "strategy": "hand", "objective": [3 / 7], "bound": [1.0], "priorities": [0],
            "gap": 0.5, "unplaced": [{"workload": "svc", "replicas": [0], "reason": "capacity: hand"}]}
    forbidden = _imported("forbidden", works)
    assert any("preset to mode whole" in v for v in check_plan(forbidden, Plan.model_validate(
        {**base, "assignments": [a]})))
    allowed = _imported("allowed", works)
    assert reconfigured_gpus(allowed, [a]) == [("n1", 3)]
    good = Plan.model_validate({**base, "assignments": [a], "metrics": {"gpus_reconfigured": 1,
                                                                        "nodes_to_drain": ["n1"]}})
    assert check_plan(allowed, good) == []
    bad = good.model_copy(update={"metrics": {"gpus_reconfigured": 0, "nodes_to_drain": []}})
    assert len(check_plan(allowed, bad)) == 2
    run = Assignment(workload="svc", replica=0, node="n1", gpus=(3,), fraction=0.5)
    shared = problem_from_data({"reconfigure": "allowed", "cluster": {"levels": ["node"], "nodes": [
        _node("n1", gpu_modes=[{"gpus": [3], "mode": "shared"}])]}, "workloads": works,
        "running": [run.model_dump(mode="json", exclude_none=True)]})
    busy = Plan.model_validate({**base, "unplaced": [], "objective": [3 / 7 + 0.5],
                                "assignments": [a, run], "metrics": {"gpus_reconfigured": 1,
                                                                     "nodes_to_drain": ["n1"]}})
    assert any("stays on it" in v for v in check_plan(shared, busy))


def test_reconfigure_field_is_checked() -> None:
    with pytest.raises(InputError) as e:
        problem_from_data({"reconfigure": "yes", "cluster": {"levels": ["node"], "nodes": [_node("n1")]}})
    assert e.value.path == "reconfigure"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 7), st.integers(0, 3), st.integers(0, 3), st.sampled_from(["forbidden", "allowed"]))
def test_plans_with_presets_are_valid_and_change_no_more_than_needed(small: int, big: int, whole: int,
                                                                    reconf: str) -> None:
    """Small instances on the imported node: greedy's plan is valid, changes nothing when forbidden, and when
    allowed changes at most the GPUs the 3g.40gb replicas need (two per GPU: ceil(big / 2)), and none when
    today's presets already place everything."""
    works = [{"name": "small", "replicas": small, "mig": "1g.10gb", "cpu": 1, "memory_gib": 1},
             {"name": "big", "replicas": big, "mig": "3g.40gb", "cpu": 1, "memory_gib": 1},
             {"name": "whole", "replicas": whole, "gpus": 1, "cpu": 1, "memory_gib": 1}]
    p = _imported(reconf, [w for w in works if w["replicas"]])
    plan = solve(p, "greedy", PlanOptions(time_limit=5))
    assert check_plan(p, plan) == []
    n = plan.metrics["gpus_reconfigured"]
    if reconf == "forbidden":
        assert n == 0
    else:
        placed_big = sum(1 for a in plan.assignments if a.workload == "big")
        assert n <= -(-placed_big // 2)
        fixed = solve(_imported("forbidden", [w for w in works if w["replicas"]]), "greedy", PlanOptions())
        if not fixed.unplaced:
            assert n == 0


# ------------------------------------------------------------------ running state is reality
def _two_models(workloads: list[dict[str, Any]], running: list[dict[str, Any]]) -> Problem:
    return problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": [
        {"name": "r1", "nodes": [_node("h1"), _node("h2")]},
        {"name": "r2", "nodes": [_node("a1", "A100-SXM4-80GB")]}]}, "workloads": workloads, "running": running})


GANG = {"name": "job", "kind": "training", "replicas": 2, "gpus": 8, "cpu": 4, "memory_gib": 16,
        "preemptible": True, "migratable": True}
GANG_RUN = [{"workload": "job", "replica": 0, "node": "h1", "gpus": list(range(8))},
            {"workload": "job", "replica": 1, "node": "a1", "gpus": list(range(8))}]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("flags", [(False, False), (True, True)])
def test_a_running_gang_across_models_is_planned_around(name: str, flags: tuple[bool, bool]) -> None:
    """The gang runs on an H100 and an A100 node (no mixed_models): a valid plan, the gang stays unless the
    whole gang is evicted; the 4-GPU service takes h2."""
    p = _two_models([GANG, {"name": "svc", "replicas": 2, "gpus": 4, "cpu": 1, "memory_gib": 1}], GANG_RUN)
    assert [b.rule for b in running_breaks(p)] == ["one_model"]
    plan = solve(p, name, PlanOptions(time_limit=10, allow_preemption=flags[0], allow_migration=flags[1]))
    assert check_plan(p, plan) == [] and "fallback_from" not in plan.metrics
    job = {a.node for a in plan.assignments if a.workload == "job"}
    assert job in ({"h1", "a1"}, set()) and len(plan.evictions) in (0, 2)
    assert {a.node for a in plan.assignments if a.workload == "svc"} == {"h2"}
    assert plan.metrics["running_breaks"][0].startswith("running gang job spans GPU models")


def test_a_higher_priority_gang_evicts_a_broken_one_whole() -> None:
    """With --allow-preemption cpsat evicts both replicas of the broken gang for a priority-10 job of 2 x 8."""
    hi = {"name": "hi", "kind": "training", "replicas": 2, "gpus": 8, "cpu": 1, "memory_gib": 1, "priority": 10,
          "gpu_models": ["A100-SXM4-80GB", "H100-SXM5-80GB"], "mixed_models": True}
    p = problem_from_data({"cluster": {"levels": ["node"], "nodes": [_node("h1"), _node("a1", "A100-SXM4-80GB")]},
                           "workloads": [GANG, hi], "running": GANG_RUN})
    plan = solve(p, "cpsat", PlanOptions(time_limit=10, allow_preemption=True))
    assert sorted(e.replica for e in plan.evictions) == [0, 1]
    assert len([a for a in plan.assignments if a.workload == "hi"]) == 2


ISO = [{"name": "sec", "replicas": 3, "mig": "1g.10gb", "tenant": "a", "isolation": "tenant", "cpu": 1,
        "memory_gib": 1, "topology": {"required": "rack"}},
       {"name": "other", "replicas": 2, "mig": "1g.10gb", "tenant": "b", "cpu": 1, "memory_gib": 1},
       {"name": "solo", "replicas": 2, "cpu": 1, "memory_gib": 1, "tenant": "c", "isolation": "node"}]
ISO_RUN = [{"workload": "sec", "replica": 0, "node": "h1", "gpus": [0], "mig": {"profile": "1g.10gb", "start": 0}},
           {"workload": "sec", "replica": 1, "node": "a1", "gpus": [0], "mig": {"profile": "1g.10gb", "start": 0}},
           {"workload": "other", "replica": 0, "node": "h1", "gpus": [0], "mig": {"profile": "1g.10gb", "start": 1}},
           {"workload": "solo", "replica": 0, "node": "a1"}]


@pytest.mark.parametrize("name", NAMES)
def test_broken_isolation_and_domain_stay_and_bind_newcomers(name: str) -> None:
    """sec and other share GPU 0 of h1 against tenant isolation; sec spans racks r1 and r2 although it requires
    one; solo (node isolation) shares a1 with sec. All stay; nothing new joins GPU 0 of h1 or node a1."""
    p = _two_models(ISO, ISO_RUN)
    assert sorted(b.rule for b in running_breaks(p)) == ["isolation", "isolation", "topology"]
    plan = solve(p, name, PlanOptions(time_limit=10, allow_preemption=True, allow_migration=True))
    assert check_plan(p, plan) == [] and "fallback_from" not in plan.metrics
    kept = {(a.workload, a.replica): a for a in plan.assignments}
    assert all(kept.get((r["workload"], r["replica"])) is not None for r in ISO_RUN)
    new = [a for a in plan.assignments if not any(a.workload == r["workload"] and a.replica == r["replica"]
                                                  for r in ISO_RUN)]
    assert not [a for a in new if a.node == "a1"], new
    assert not [a for a in new if a.node == "h1" and a.gpus == (0,)], new


def _two_a100s_breaking_isolation() -> Problem:
    """Two 2-GPU A100 nodes in two racks: GPU 0 of a1 runs sec (tenant-isolated) beside other; a2 runs sec
    beside iso (node-isolated)."""
    node = {"gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 64, "memory_gib": 512}
    mig = {"profile": "1g.10gb", "start": 0}
    p = problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": [
        {"name": "r1", "nodes": [{"name": "a1", **node}]}, {"name": "r2", "nodes": [{"name": "a2", **node}]}]},
        "workloads": [ISO[0], {**ISO[1], "replicas": 3},
                      {"name": "iso", "replicas": 2, "gpu_fraction": 0.25, "tenant": "c", "isolation": "node",
                       "cpu": 1, "memory_gib": 1}],
        "running": [{"workload": "sec", "replica": 0, "node": "a1", "gpus": [0], "mig": mig},
                    {"workload": "sec", "replica": 1, "node": "a2", "gpus": [0], "mig": mig},
                    {"workload": "other", "replica": 0, "node": "a1", "gpus": [0], "mig": {**mig, "start": 1}},
                    {"workload": "iso", "replica": 0, "node": "a2", "gpus": [1], "fraction": 0.25}]})
    return p


def test_cpsat_plans_around_a_gpu_that_breaks_isolation() -> None:
    """Two 2-GPU A100 nodes; GPU 0 of a1 runs sec (isolated) beside other, a2 runs sec beside a node-isolated
    pod. Neither GPU 0 of a1 nor node a2 takes anything new, so GPU 1 of a1 is the only room: two `other`
    replicas (2/7 GPU) beat one `sec` (1/7). 6 of 8 placed, proven."""
    p = _two_a100s_breaking_isolation()
    plan = solve(p, "cpsat", OPTS)
    assert check_plan(p, plan) == [] and plan.status == "optimal" and len(plan.assignments) == 6
    assert sorted((a.workload, a.node, a.gpus) for a in plan.assignments if a.workload == "other") == [
        ("other", "a1", (0,)), ("other", "a1", (1,)), ("other", "a1", (1,))]


def test_validator_accepts_reality_but_not_a_newcomer_breaking_it() -> None:
    """The running state alone is valid; a new `other` replica on sec's shared GPU is not."""
    p = _two_models(ISO, ISO_RUN)
    run = [Assignment.model_validate(r) for r in ISO_RUN]
    base = {"status": "feasible", "strategy": "hand", "priorities": [0], "gap": 0.0}
    left = [{"workload": "sec", "replicas": [2], "reason": "capacity: hand"},
            {"workload": "solo", "replicas": [1], "reason": "capacity: hand"}]
    ok = Plan.model_validate({**base, "assignments": run, "objective": [3 / 7], "bound": [3 / 7],
                              "unplaced": [*left, {"workload": "other", "replicas": [1], "reason": "capacity: h"}]})
    assert check_plan(p, ok) == []
    extra = Assignment(workload="other", replica=1, node="h1", gpus=(0,), mig=MigSlot(profile="1g.10gb", start=2))
    bad = Plan.model_validate({**base, "assignments": [*run, extra], "objective": [4 / 7], "bound": [4 / 7],
                               "unplaced": left})
    assert any("tenant isolation violated" in v for v in check_plan(p, bad))


def test_a_partly_running_gang_stays_as_it_runs() -> None:
    """2 of 3 gang replicas run and the third fits nowhere: the two stay, the third is unplaced, no error."""
    gang = {**GANG, "replicas": 3, "preemptible": False, "migratable": False}
    p = _two_models([gang, {"name": "fill", "replicas": 1, "gpus": 8, "cpu": 1, "memory_gib": 1, "priority": 5}],
                    [GANG_RUN[0], {**GANG_RUN[1], "node": "h2"}])
    for name in NAMES:
        plan = solve(p, name, OPTS)
        assert check_plan(p, plan) == [], name
        assert sorted(a.replica for a in plan.assignments if a.workload == "job") == [0, 1], name


# ------------------------------------------------------------------ reasons name the cause
def test_single_strategy_with_mig_off_is_named() -> None:
    p = problem_from_data({"cluster": {"levels": ["node"], "nodes": [
        _node("a1", "A100-SXM4-80GB", mig_strategy="single")]}, "workloads": [
        {"name": "m", "replicas": 1, "mig": "3g.40gb", "mig_strategy": "single", "cpu": 1, "memory_gib": 1}]})
    for name in NAMES:
        (u,) = solve(p, name, OPTS).unplaced
        assert u.reason.startswith("GPU model:") and "mig_strategy single" in u.reason, (name, u.reason)
        assert "MIG off" in u.reason


def test_gang_that_fits_only_across_models_in_its_rack_is_told_so() -> None:
    """A 2 x 8 gang requiring one rack: r1 has an H100 node free (h2 is taken by `hold`) and an A100 node, so
    it fits only across models; the reason is the one-model rule, not topology or capacity."""
    p = problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": [
        {"name": "r1", "nodes": [_node("h1"), _node("h2"), _node("a1", "A100-SXM4-80GB")]}]}, "workloads": [
        {"name": "job", "kind": "training", "replicas": 2, "gpus": 8, "cpu": 4, "memory_gib": 16,
         "topology": {"required": "rack"}},
        {"name": "hold", "replicas": 1, "gpus": 8, "gpu_models": ["H100-SXM5-80GB"], "cpu": 1, "memory_gib": 1,
         "priority": 10}]})
    for name in ("greedy", "cpsat"):
        (u,) = solve(p, name, OPTS).unplaced
        assert u.reason.startswith("one GPU model per gang") and "mixed_models: true" in u.reason, u.reason


def test_explain_keeps_running_breaks_in_place() -> None:
    """`capplan explain` on the broken-isolation case: the running replicas that break a rule stay where they run,
    so sec is told which workload holds its only room (not that the plan was suboptimal), and iso that the broken
    running state leaves it nowhere."""
    from capplan.placement.cpsat.explain import explain_workload

    p = _two_a100s_breaking_isolation()
    plan = solve(p, "cpsat", OPTS)
    sec = explain_workload(p, "sec", plan, OPTS)
    assert "not optimal" not in sec.message and sec.competitors == (("other", 2),), sec.message
    iso = explain_workload(p, "iso", plan, OPTS)
    assert "stay where they run against a rule" in iso.message and "not optimal" not in iso.message, iso.message
