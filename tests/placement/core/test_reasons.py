"""Every unplaced reason names its constraint family, the numbers in GPUs and who holds the capacity.

Each case is built so that exactly one family leaves replicas out; every strategy must say so.
"""

from __future__ import annotations

from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.placement import STRATEGIES, PlanOptions, solve
from capplan.placement.cpsat.explain import explain_workload

NAMES = sorted(STRATEGIES)
OPTS = PlanOptions(time_limit=1.5, seed=0, workers=1)


def _h100(name: str, gpus: int = 8, cpu: int = 64, mem: int = 512) -> dict[str, Any]:
    return {"name": name, "gpu": "H100-SXM5-80GB", "gpus": gpus, "cpu": cpu, "memory_gib": mem}


def _flat(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> Problem:
    return problem_from_data({"cluster": {"levels": ["node"], "nodes": nodes}, "workloads": workloads})


def _racks(racks: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> Problem:
    return problem_from_data({"cluster": {"levels": ["rack", "node"], "racks": racks}, "workloads": workloads})


CASES: dict[str, tuple[Problem, str, list[str]]] = {
    "model": (_flat([_h100("n1")], [{"name": "w", "mig": "1g.6gb", "gpu_models": ["A30-24GB"]}]),
              "w", ["GPU model:", "no node offers it", "H100-SXM5-80GB"]),
    "cpu": (_flat([_h100("n1", cpu=64)], [{"name": "w", "gpus": 1, "cpu": 100}]),
            "w", ["host CPU:", "100 cores", "64"]),
    "memory": (_flat([_h100("n1", mem=512)], [{"name": "w", "gpus": 1, "memory_gib": 1000}]),
               "w", ["host memory:", "1000 GiB", "512 GiB"]),
    "gpu": (_flat([_h100("n1")], [{"name": "big", "gpus": 1, "replicas": 6, "priority": 10},
                                  {"name": "small", "gpus": 1, "replicas": 4, "priority": 1}]),
            "small", ["GPU capacity:", "2 x 1 GPU (2 GPUs)", "big (priority 10): 6 GPUs"]),
    "isolation": (_flat([_h100("n1")], [{"name": "a", "gpus": 1, "tenant": "ta", "isolation": "node",
                                         "priority": 10},
                                        {"name": "b", "gpus": 1, "tenant": "tb", "priority": 1}]),
                  "b", ["isolation:", "another tenant", "a (priority 10): 1 GPUs"]),
    "power": (_racks([{"name": "r1", "power_kw": 0.7, "nodes": [_h100("n1")]}],
                     [{"name": "a", "gpus": 1, "priority": 10}, {"name": "b", "gpus": 1, "priority": 1}]),
              "b", ["power:", "power budget", "a (priority 10): 1 GPUs"]),
    "topology": (_racks([{"name": "r1", "nodes": [_h100("n1")]}, {"name": "r2", "nodes": [_h100("n2")]}],
                        [{"name": "w", "kind": "training", "replicas": 2, "gpus": 8,
                          "topology": {"required": "rack"}}]),
                 "w", ["topology:", "2 x 8 GPUs in one rack", "(r1) has room for"]),
    "gang": (_flat([_h100("n1"), _h100("n2")], [{"name": "w", "kind": "training", "replicas": 3, "gpus": 8}]),
             "w", ["gang:", "3 x 8 GPUs (24 GPUs) at once", "room for"]),
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_reason_names_the_family(case: str, name: str) -> None:
    """The one binding family starts the reason, with its numbers and (where shared) the holders."""
    p, wname, expected = CASES[case]
    plan = solve(p, name, OPTS)
    reasons = [u.reason for u in plan.unplaced if u.workload == wname]
    assert reasons, (case, name, plan.assignments)
    for text in expected:
        assert text in reasons[0], (case, name, reasons[0])


def test_explain_blames_the_workload_in_the_way() -> None:
    """`explain` names the higher-priority workload holding the GPUs, in GPUs, and not a bystander."""
    p = _flat([_h100("n1"), {"name": "c1", "cpu": 64, "memory_gib": 256}],
              [{"name": "hi", "gpus": 1, "replicas": 6, "priority": 10},
               {"name": "mid", "gpus": 1, "replicas": 4, "priority": 5},
               {"name": "etl", "cpu": 4, "replicas": 4, "priority": 1}])
    plan = solve(p, "cpsat", OPTS)
    ex = explain_workload(p, "mid", plan, PlanOptions(time_limit=8, seed=0, workers=1))
    assert ex.placed == 2
    assert ex.competitors == (("hi", 2),)
    assert ex.message.startswith("capacity: needs 4 x 1 GPU (4 GPUs)")
    assert "2 replicas of hi (priority 10; 2 GPUs) were left out" in ex.message


def test_explain_names_the_one_model_rule() -> None:
    """A gang that fits only across GPU models is blamed on the one-model rule, with the way out."""
    p = _flat([_h100("h1"), {"name": "a1", "gpu": "A100-SXM4-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}],
              [{"name": "train", "kind": "training", "replicas": 2, "gpus": 8}])
    plan = solve(p, "cpsat", OPTS)
    ex = explain_workload(p, "train", plan, PlanOptions(time_limit=8, seed=0, workers=1))
    assert ex.blocking == ("models",)
    assert ex.message.startswith("one GPU model per gang:") and "mixed_models: true" in ex.message
