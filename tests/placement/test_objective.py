"""The objective contract of docs/concepts.md, on hand-made cases where the right plan is known.

A replica's value is fixed by its workload (never by where it lands); after the priorities
every strategy holds as little capacity as it can (the smallest MIG slice, CPU-only pods on
CPU-only nodes); a training gang sits on one GPU model unless it says ``mixed_models: true``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.plan import Plan
from capplan.model.problem import Problem, Workload
from capplan.model.validate import check_plan
from capplan.placement import STRATEGIES, PlanOptions, solve
from tests.strategies_gen import scenario_data

NAMES = sorted(STRATEGIES)
OPTS = PlanOptions(time_limit=10, seed=0, workers=1)
EXAMPLES = Path(__file__).parents[2] / "models" / "examples"


def _problem(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> Problem:
    return problem_from_data({"cluster": {"levels": ["node"], "nodes": nodes}, "workloads": workloads})


def _gpus(name: str, gpu: str, n: int = 8, cpu: int = 64) -> dict[str, Any]:
    return {"name": name, "gpu": gpu, "gpus": n, "cpu": cpu, "memory_gib": 512}


# ------------------------------------------------------------------ the value of a replica
def value_from_workload(p: Problem, w: Workload) -> float:
    """A replica's value in GPUs, written from the contract alone (floats, not the planner's units)."""
    if w.gpus is not None:
        return float(w.gpus)
    if w.gpu_fraction is not None:
        return w.gpu_fraction
    if w.mig is None:
        return 0.0
    models = [p.catalog.get(m) for m in w.gpu_models] if w.gpu_models else list(p.catalog.models)
    need = w.gpu_memory_gib or 0.0
    fractions = [pr.compute_slices / m.compute_slices for m in models for pr in m.profiles
                 if pr.memory_gib >= need and (pr.name == w.mig if w.mig != "auto" else "+" not in pr.name)]
    return min(fractions, default=0.0)


def test_replica_value_follows_the_contract() -> None:
    """Whole GPUs, shares, named profiles (A30: 4 compute slices, H100: 7) and `auto` on the allowed models."""
    p = _problem([_gpus("h", "H100-SXM5-80GB"), _gpus("a", "A30-24GB", 4)], [
        {"name": "whole", "gpus": 2},
        {"name": "share", "gpu_fraction": 0.25},
        {"name": "a30", "mig": "1g.6gb", "gpu_models": ["A30-24GB"]},
        {"name": "h100", "mig": "3g.40gb", "gpu_models": ["H100-SXM5-80GB"]},
        {"name": "auto", "mig": "auto", "gpu_memory_gib": 9, "gpu_models": ["A30-24GB", "H100-SXM5-80GB"]},
        {"name": "auto-a30", "mig": "auto", "gpu_memory_gib": 9, "gpu_models": ["A30-24GB"]},
        {"name": "cpu", "cpu": 2},
    ])
    got = {w.name: p.replica_value(w) / 7000 for w in p.workloads}
    assert got == pytest.approx({"whole": 2, "share": 0.25, "a30": 0.25, "h100": 3 / 7, "auto": 1 / 7,
                                 "auto-a30": 0.5, "cpu": 0})
    for w in p.workloads:
        assert got[w.name] == pytest.approx(value_from_workload(p, w))


def _plan_values(p: Problem, plan: Plan) -> list[float]:
    per: Counter[int] = Counter()
    for a in plan.assignments:
        w = p.workload(a.workload)
        per[w.priority] += value_from_workload(p, w)
    return [per[q] for q in p.priorities]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_data())
def test_every_strategys_values_are_recomputable_from_the_workloads(data: dict[str, Any]) -> None:
    """Each strategy's per-priority objective equals the values recomputed from the workloads alone."""
    p = problem_from_data(data)
    for name in NAMES:
        plan = solve(p, name, time_limit=2.0, seed=1)
        assert list(plan.objective) == pytest.approx(_plan_values(p, plan), abs=1e-5), name
        assert check_plan(p, plan) == []


# ----------------------------------------------------- the shipped A30/H100 example
def test_mig_inference_example_places_the_a30_models() -> None:
    """`embed` (mig: auto, 9 GiB) takes 1g.10gb slices off the A30s, so `small-models` (A30 only) fits."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    for name in NAMES:
        plan = solve(p, name, OPTS)
        where = Counter((a.workload, str(p.cluster.nodes[p.cluster.node_index[a.node]].gpu_model),
                         a.mig.profile if a.mig else None) for a in plan.assignments)
        assert plan.unplaced == (), (name, plan.unplaced)
        assert where[("small-models", "A30-24GB", "1g.6gb")] == 12, name
        embed = {k: v for k, v in where.items() if k[0] == "embed"}
        assert sum(embed.values()) == 40 and all(k[2] == "1g.10gb" for k in embed), (name, embed)
        assert [round(x, 4) for x in plan.objective] == [8, 10.7143, 6.8571, 3, 15], name
        assert plan.metrics["gpus_allocated"] == pytest.approx(44.285714), name  # least capacity held


# ------------------------------------------------------------ one GPU model per gang
def _gang_problem(mixed: bool) -> Problem:
    gang: dict[str, Any] = {"name": "train", "kind": "training", "replicas": 3, "gpus": 8, "cpu": 8,
                            "priority": 10}
    if mixed:
        gang["mixed_models"] = True
    return _problem([_gpus("h1", "H100-SXM5-80GB"), _gpus("h2", "H100-SXM5-80GB"),
                     _gpus("a1", "A100-SXM4-80GB"), {"name": "c1", "cpu": 32, "memory_gib": 128}],
                    [gang, {"name": "svc", "gpus": 1, "replicas": 4, "priority": 1}])


@pytest.mark.parametrize("name", NAMES)
def test_gang_stays_unplaced_rather_than_split_across_models(name: str) -> None:
    """3 x 8 GPUs fit only across H100 and A100: the gang stays out, with the reason; opting in places it."""
    p = _gang_problem(mixed=False)
    plan = solve(p, name, OPTS)
    assert not [a for a in plan.assignments if a.workload == "train"]
    (u,) = [u for u in plan.unplaced if u.workload == "train"]
    assert u.reason.startswith("one GPU model per gang"), u.reason
    assert "mixed_models: true" in u.reason
    mixed = solve(_gang_problem(mixed=True), name, OPTS)
    assert len([a for a in mixed.assignments if a.workload == "train"]) == 3


def test_validator_rejects_a_gang_across_models() -> None:
    """The independent validator flags a training gang on two GPU models."""
    p = _gang_problem(mixed=True)
    plan = solve(p, "greedy", OPTS)
    strict = p.replace(workloads=tuple(w.model_copy(update={"mixed_models": False}) for w in p.workloads))
    assert any("gang spans GPU models" in v for v in check_plan(strict, plan))


# ------------------------------------------------------------- CPU pods on CPU nodes
@pytest.mark.parametrize("name", NAMES)
def test_cpu_only_pods_go_to_the_cpu_node(name: str) -> None:
    """With room on both, CPU-only pods land on the CPU-only node and leave the GPU node's CPU to GPU work."""
    p = _problem([_gpus("g1", "H100-SXM5-80GB", cpu=64), {"name": "c1", "cpu": 64, "memory_gib": 256}],
                 [{"name": "infer", "gpus": 1, "replicas": 4, "cpu": 8, "priority": 5},
                  {"name": "etl", "cpu": 8, "memory_gib": 16, "replicas": 6, "priority": 1}])
    plan = solve(p, name, OPTS)
    assert {a.node for a in plan.assignments if a.workload == "etl"} == {"c1"}
    assert plan.metrics["cpu_replicas_on_gpu_nodes"] == 0


@pytest.mark.parametrize("name", NAMES)
def test_smallest_slice_is_held(name: str) -> None:
    """`mig: auto` on an idle H100 (1g.10gb) rather than an idle A30 (2g.12gb): same value, less held."""
    p = _problem([_gpus("a1", "A30-24GB", 4), _gpus("h1", "H100-SXM5-80GB", 1)],
                 [{"name": "embed", "mig": "auto", "gpu_memory_gib": 9, "replicas": 7,
                   "gpu_models": ["A30-24GB", "H100-SXM5-80GB"]}])
    plan = solve(p, name, OPTS)
    assert {(a.node, a.mig.profile if a.mig else None) for a in plan.assignments} == {("h1", "1g.10gb")}
    assert plan.objective == (1.0,)


def test_mixed_models_only_for_gangs() -> None:
    """`mixed_models` on a workload that is not a training gang is an input error naming the field."""
    from capplan.model.errors import InputError

    with pytest.raises(InputError) as exc:
        _problem([_gpus("h", "H100-SXM5-80GB")], [{"name": "svc", "gpus": 1, "mixed_models": True}])
    assert "workloads[0]" in str(exc.value) and "training" in str(exc.value)
