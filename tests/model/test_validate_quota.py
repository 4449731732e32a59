"""The validator's quota rule on hand-made plans and schedules (hand-worked usage, cohort pools)."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.plan import Assignment
from capplan.model.problem import Problem
from capplan.model.validate_quota import check_plan_quotas, check_quota_spans

H100 = "H100-SXM5-80GB"


def quota_problem(queues: list[dict[str, Any]], workloads: list[dict[str, Any]], nodes: int = 4,
                  flavors: list[dict[str, Any]] | None = None, running: list[dict[str, Any]] | None = None) -> Problem:
    return problem_from_data({
        "cluster": {"levels": ["rack", "node"], "racks": [
            {"name": "r1", "nodes": [{"name_prefix": "n", "count": nodes, "gpu": H100, "gpus": 8, "cpu": 128,
                                      "memory_gib": 1024}]}]},
        "workloads": workloads, "running": running or [],
        "quotas": {"flavors": flavors or [{"name": "h100"}], "queues": queues}})


def gpus(q: str, n: int) -> dict[str, Any]:
    return {"name": q, "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": n}]}


def whole(name: str, node: str, gpus: int, replica: int = 0) -> Assignment:
    return Assignment(workload=name, replica=replica, node=node, gpus=tuple(range(gpus)))


def test_queue_over_nominal_is_rejected() -> None:
    """team-a has 8 GPUs; two 8-GPU replicas at once use 16."""
    p = quota_problem([gpus("team-a", 8)], [{"name": "A", "gpus": 8, "replicas": 2, "queue": "team-a"}])
    ok = check_plan_quotas(p, [whole("A", "n1", 8)])
    bad = check_plan_quotas(p, [whole("A", "n1", 8), whole("A", "n2", 8, 1)])
    assert ok == []
    assert bad == ["ClusterQueue team-a uses 16 nvidia.com/gpu of flavor h100, over its quota of 8 nvidia.com/gpu"]


def test_cpu_quota_in_cores() -> None:
    """A cpu quota of 10 cores: two 6-core replicas (12) break it."""
    q = {"name": "q", "quotas": [{"flavor": "h100", "resource": "cpu", "nominal": 10}]}
    p = quota_problem([q], [{"name": "C", "cpu": 6, "replicas": 2, "queue": "q"}])
    cpu = [Assignment(workload="C", replica=r, node="n1") for r in (0, 1)]
    assert check_plan_quotas(p, cpu[:1]) == []
    assert "12 cores" in check_plan_quotas(p, cpu)[0]


def test_uncovered_resource_is_rejected() -> None:
    """A queue with only a GPU quota may not run a pod that also asks for CPU (Kueue would not admit it)."""
    p = quota_problem([gpus("q", 8)], [{"name": "A", "gpus": 1, "cpu": 1, "queue": "q"}])
    assert "has no quota for cpu" in check_plan_quotas(p, [whole("A", "n1", 1)])[0]


def test_flavor_node_set() -> None:
    """Flavor h100 holds n1 only: a replica of the queue on n2 has no quota there."""
    p = quota_problem([gpus("q", 16)], [{"name": "A", "gpus": 8, "queue": "q"}],
                      flavors=[{"name": "h100", "nodes": ["n1"]}])
    assert check_plan_quotas(p, [whole("A", "n1", 8)]) == []
    assert "no quota for nvidia.com/gpu" in check_plan_quotas(p, [whole("A", "n2", 8)])[0]


def test_cohort_borrowing_and_lending() -> None:
    """Cohort of a (nominal 8, lends 4: keeps 4 for itself) and b (nominal 8, lends all: keeps 0). The pool is
    4 + 8 = 12; usage above what a queue keeps draws on it. a at 16 with b idle: 16 - 4 = 12 <= 12, valid.
    a at 16 and b at 8: 12 + 8 = 20 > 12."""
    qa = {"name": "a", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8,
                                                  "lending_limit": 4}]}
    qb = {"name": "b", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8}]}
    p = quota_problem([qa, qb], [{"name": "A", "gpus": 8, "replicas": 2, "queue": "a"},
                                 {"name": "B", "gpus": 8, "queue": "b"}])
    a2 = [whole("A", "n1", 8), whole("A", "n2", 8, 1)]
    assert check_plan_quotas(p, a2) == []
    bad = check_plan_quotas(p, [*a2, whole("B", "n3", 8)])
    assert bad == ["cohort c uses 20 nvidia.com/gpu of flavor h100 from its shared pool, over the 12 nvidia.com/gpu "
                   "its members lend"]


def test_borrowing_limit() -> None:
    """a (nominal 8, borrowing_limit 4) in a cohort with idle b (8): a may use 12, not 16."""
    qa = {"name": "a", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8,
                                                  "borrowing_limit": 4}]}
    qb = {"name": "b", "cohort": "c", "quotas": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8}]}
    p = quota_problem([qa, qb], [{"name": "A", "gpus": 4, "replicas": 4, "queue": "a"}, {"name": "B", "gpus": 1,
                                                                                         "queue": "b"}])
    three = [whole("A", f"n{r + 1}", 4, r) for r in range(3)]
    assert check_plan_quotas(p, three) == []
    assert "over its quota of 12" in check_plan_quotas(p, [*three, whole("A", "n4", 4, 3)])[0]


def test_running_state_over_quota_is_not_faulted() -> None:
    """The running state already over a lowered quota is no violation; a new replica on top is."""
    p = quota_problem([gpus("q", 4)], [{"name": "R", "gpus": 8, "queue": "q"}, {"name": "N", "gpus": 1, "queue": "q"}],
                      running=[{"workload": "R", "replica": 0, "node": "n1", "gpus": list(range(8))}])
    assert check_plan_quotas(p, list(p.running)) == []
    assert len(check_plan_quotas(p, [*p.running, whole("N", "n2", 1)])) == 1


def test_schedule_instants() -> None:
    """Quota 8: A (8 GPUs) 0..3600 then B (8) 3600..7200 is valid; B from 1800 overlaps A."""
    p = quota_problem([gpus("q", 8)], [{"name": "A", "gpus": 8, "queue": "q"}, {"name": "B", "gpus": 8, "queue": "q"}])
    a, b = whole("A", "n1", 8), whole("B", "n2", 8)
    assert check_quota_spans(p, [(0, 3600, a, True), (3600, 7200, b, True)]) == []
    bad = check_quota_spans(p, [(0, 3600, a, True), (1800, 7200, b, True)])
    assert bad == ["at 1800 s: ClusterQueue q uses 16 nvidia.com/gpu of flavor h100, over its quota of 8 "
                   "nvidia.com/gpu"]


@pytest.mark.parametrize(("quotas", "needle"), [
    ({"flavors": [{"name": "f"}], "queues": [{"name": "q", "quotas": [{"flavor": "g", "resource": "cpu",
                                                                       "nominal": 1}]}]}, "unknown flavor 'g'"),
    ({"flavors": [{"name": "f"}], "queues": [{"name": "q", "quotas": [{"flavor": "f", "resource": "pods",
                                                                       "nominal": 1}]}]}, "unknown quota resource"),
    ({"flavors": [{"name": "f"}], "queues": [{"name": "q", "quotas": [{"flavor": "f", "resource": "cpu", "nominal": 1,
                                                                       "borrowing_limit": 1}]}]}, "need a cohort"),
    ({"flavors": [{"name": "f", "nodes": ["nx"]}], "queues": []}, "unknown node 'nx'"),
])
def test_bad_quotas(quotas: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        problem_from_data({"cluster": {"nodes": [{"name": "n1", "cpu": 8, "memory_gib": 8}]}, "workloads": [],
                           "quotas": quotas})


def test_unknown_queue() -> None:
    with pytest.raises(InputError, match="unknown ClusterQueue 'x'"):
        quota_problem([gpus("q", 8)], [{"name": "A", "gpus": 1, "queue": "x"}])
