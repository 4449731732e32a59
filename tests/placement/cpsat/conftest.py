"""Shared builders for CP-SAT placement tests: tiny scenarios named by meaning."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.placement.core.options import PlanOptions

ONE_WORKER = PlanOptions(time_limit=30, seed=0, workers=1)


def scenario(
    nodes: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    running: list[dict[str, Any]] | None = None,
    racks: int = 1,
    power_kw: float | None = None,
) -> Problem:
    """A cluster of ``racks`` racks (nodes split round-robin) with the given workloads."""
    rs: list[dict[str, Any]] = [{"name": f"r{k + 1}", "nodes": []} for k in range(racks)]
    for j, n in enumerate(nodes):
        rs[j % racks]["nodes"].append(n)
    if power_kw is not None:
        for r in rs:
            r["power_kw"] = power_kw
    return problem_from_data(
        {
            "cluster": {"levels": ["rack", "node"], "racks": rs},
            "workloads": workloads,
            "running": running or [],
        }
    )


def node(
    name: str, gpu: str | None = "H100-SXM5-80GB", gpus: int = 8, cpu: int = 64, mem: int = 512, **extra: Any
) -> dict[str, Any]:
    """One node entry."""
    d: dict[str, Any] = {"name": name, "cpu": cpu, "memory_gib": mem, **extra}
    if gpu:
        d.update(gpu=gpu, gpus=gpus)
    return d


@pytest.fixture
def small_h100_pod() -> Problem:
    """Two racks of two 8x H100 nodes with a gang, MIG inference, shares and CPU pods."""
    return scenario(
        [node(f"n{i}") for i in range(4)],
        [
            {
                "name": "train",
                "kind": "training",
                "replicas": 2,
                "gpus": 8,
                "topology": {"required": "rack"},
                "priority": 100,
                "cpu": 16,
            },
            {
                "name": "chat",
                "replicas": 10,
                "mig": "3g.40gb",
                "priority": 50,
                "cpu": 2,
                "tenant": "a",
                "isolation": "tenant",
            },
            {"name": "embed", "replicas": 12, "mig": "1g.10gb", "priority": 50, "cpu": 1, "tenant": "b"},
            {
                "name": "nb",
                "kind": "shared",
                "replicas": 6,
                "gpu_fraction": 0.3,
                "gpu_memory_gib": 20,
                "priority": 10,
                "cpu": 1,
                "preemptible": True,
            },
            {"name": "etl", "replicas": 3, "cpu": 8, "priority": 1},
        ],
        racks=2,
    )
