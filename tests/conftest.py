"""Shared fixtures: small named instances built from scenario data."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "models" / "examples"
SHARED = REPO.parent / "shared"


def scenario(nodes: list[dict[str, Any]], workloads: list[dict[str, Any]], *, levels: list[str] | None = None,
             running: list[dict[str, Any]] | None = None, racks: list[dict[str, Any]] | None = None) -> Problem:
    """Build a problem from node and workload entries (flat cluster unless racks are given)."""
    if racks is not None:
        cluster: dict[str, Any] = {"name": "t", "levels": levels or ["rack", "node"], "racks": racks}
    else:
        cluster = {"name": "t", "levels": ["node"], "nodes": nodes}
    return problem_from_data({"cluster": cluster, "workloads": workloads, "running": running or []})


@pytest.fixture
def small_h100_pod() -> Problem:
    """Two racks of two 8xH100 nodes, a 16-GPU gang that needs one rack."""
    racks = [{"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": 2, "gpu": "H100-SXM5-80GB", "gpus": 8,
                                          "cpu": 224, "memory_gib": 2048}]} for r in (1, 2)]
    return scenario([], [{"name": "gang", "kind": "training", "replicas": 2, "gpus": 8,
                          "topology": {"required": "rack"}, "cpu": 64, "memory_gib": 512}], racks=racks)


@pytest.fixture
def fragmented_mig_node() -> Problem:
    """One A100-80GB node whose GPU 0 is preset to MIG with a 3g slice free at start 4 only."""
    node = {"name": "a1", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 64, "memory_gib": 512,
            "gpu_modes": [{"gpus": [0], "mode": "mig", "layout": [{"profile": "3g.40gb", "start": 4},
                                                                  {"profile": "1g.10gb", "start": 0}]}]}
    return scenario([node], [{"name": "svc", "replicas": 3, "mig": "3g.40gb", "cpu": 1}])


def script_module(path: Path, name: str) -> ModuleType:
    """A script (a benchmark, a corpus maker) imported as module ``name``, registered in ``sys.modules`` (worker
    processes unpickle its functions by that name)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
