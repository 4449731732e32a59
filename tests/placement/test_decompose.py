"""Decomposition: splits cover everything once, merged plans are valid, executors agree (Ray for real)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capplan.io.scenario import load_scenario
from capplan.model.validate import check_plan
from capplan.placement.core.executor import LocalExecutor, SerialExecutor
from capplan.placement.core.options import PlanOptions
from capplan.placement.decompose import plan_decompose, split

EXAMPLES = Path(__file__).parents[2] / "models" / "examples"


@pytest.mark.parametrize("how", ["domain", "model", "random"])
def test_split_covers_every_replica_once(how: str) -> None:
    """Every node is in one part and every replica in at most one part."""
    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    parts = split(p, how, 2, seed=1)  # type: ignore[arg-type]
    nodes = [n.name for sub, _ in parts for n in sub.cluster.nodes]
    assert sorted(nodes) == sorted(n.name for n in p.cluster.nodes)
    keys = [orig for _, back in parts for orig in back.values()]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("how", ["domain", "model", "random"])
def test_decomposed_plan_is_valid(how: str) -> None:
    """Merged and repaired plans pass the independent validator."""
    for name in ("training-cluster", "mig-inference"):
        p = load_scenario(EXAMPLES / f"{name}.yaml")
        plan = plan_decompose(p, PlanOptions(time_limit=5), how=how, parts=2,  # type: ignore[arg-type]
                              executor=SerialExecutor())
        assert check_plan(p, plan) == []


def test_local_processes_match_serial() -> None:
    """Local worker processes give the same plan as the serial executor."""
    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    a = plan_decompose(p, PlanOptions(time_limit=5), parts=2, executor=SerialExecutor())
    b = plan_decompose(p, PlanOptions(time_limit=5), parts=2, executor=LocalExecutor(2))
    assert a.assignments == b.assignments


def test_ray_executor_on_a_local_ray_instance() -> None:
    """The Ray path runs for real on a local Ray instance started here, and matches serial."""
    ray = pytest.importorskip("ray")
    from capplan.placement.core.executor import RayExecutor

    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        a = plan_decompose(p, PlanOptions(time_limit=5), parts=2, executor=RayExecutor())
    finally:
        ray.shutdown()
    b = plan_decompose(p, PlanOptions(time_limit=5), parts=2, executor=SerialExecutor())
    assert check_plan(p, a) == []
    assert a.assignments == b.assignments


def test_repair_keeps_its_deadline() -> None:
    """The repair of the merged plan stops at its deadline: with none left, every missing replica is reported
    as not tried (it used to run greedy and the exact reasons to the end: 19 s over a 6 s limit at 10k GPUs)."""
    import time

    from capplan.model.deadline import Deadline
    from capplan.placement.decompose import repair

    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    out, unplaced = repair(p, [], Deadline(time.perf_counter() - 1.0, 1.0))
    assert out == []
    assert {u.workload for u in unplaced} == {w.name for w in p.workloads}
    assert all(u.reason.startswith("not tried: the time limit ran out") for u in unplaced)
    placed, rest = repair(p, [], Deadline.start(60))  # time enough: greedy's plan, its reasons exact
    assert placed and not any(u.reason.startswith("not tried") for u in rest)
