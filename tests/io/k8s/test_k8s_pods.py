"""Pod import: GPU requests, priorities, tenants, gangs (Kubeflow, Volcano, Kueue) and running pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capplan.io.k8s.importer import ImportResult, import_kubernetes
from capplan.model.catalog import load_catalog
from capplan.model.errors import InputError
from capplan.model.validate import check_assignments

from .conftest import LEVELS


def _imp(nodes: dict[str, Any], pods: dict[str, Any] | None) -> ImportResult:
    return import_kubernetes(nodes, pods, LEVELS, load_catalog())


def test_workloads_from_sample(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """Owners become workloads with replicas, namespace as tenant and the right GPU demand."""
    p = _imp(nodes_doc, pods_doc).problem
    w = {x.name: x for x in p.workloads}
    assert w["inference/embed-6f7c9d"].replicas == 5 and w["inference/embed-6f7c9d"].mig == "1g.10gb"
    assert w["inference/embed-6f7c9d"].tenant == "inference" and w["inference/embed-6f7c9d"].priority == 50000
    assert w["inference/vllm-70b"].gpus == 4 and w["inference/vllm-70b"].sla == "guaranteed"
    assert w["lab/notebook-0"].mig == "1g.5gb"  # single strategy: nvidia.com/gpu is a 1g.5gb device
    assert w["lab/notebook-2"].mig == "1g.5gb" and w["lab/notebook-2"].gpu_models == ("A100-SXM4-40GB",)
    assert w["amd-team/rocm-infer-77f"].mig == "CPX"  # amd.com/gpu on a CPX node
    assert w["amd-team/rocm-batch-0"].mig == "CPX" and w["amd-team/rocm-batch-0"].cpu == 12  # init container
    assert w["amd-team/rocm-train-0"].gpus == 8 and w["amd-team/rocm-train-0"].gpu_models == ("MI300X-192GB",)
    assert w["web/api-7c9f"].cpu == 0.75 and w["web/api-7c9f"].memory_gib == 1.25
    assert not w["kube-system/kube-proxy"].preemptible  # system-critical
    assert "default/debug-shell" not in w  # BestEffort left out
    assert not any("old-batch" in n for n in w)  # Succeeded pods left out


def test_gangs(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """PyTorchJob, TrainJob, PodGroup minMember and Kueue pod sets become gangs with topology."""
    w = {x.name: x for x in _imp(nodes_doc, pods_doc).problem.workloads}
    bert = w["ml-train/bert-pretrain"]
    assert (
        bert.is_gang and bert.replicas == 2 and bert.topology.required == "block" and bert.priority == 100000
    )
    llama = w["ml-train/llama-ft"]  # TrainJob without pods yet: replicas from numNodes
    assert llama.is_gang and llama.replicas == 2 and llama.gpus == 2
    assert w["hpc/mpi-sim"].is_gang and w["hpc/mpi-sim"].replicas == 3  # minMember
    assert not w["hpc/mpi-sim/elastic"].is_gang and w["hpc/mpi-sim/elastic"].replicas == 1
    assert w["hpc/mpi-sim"].topology.required == "rack"  # Volcano highestTierAllowed 1
    tas = w["research/tas-sample"]  # one pod exists, the Workload's pod set asks for 2
    assert tas.is_gang and tas.replicas == 2 and tas.topology.required == "block"


def test_running_state_is_valid_and_consistent(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """Running pods get concrete GPUs / MIG instances inside today's layouts, valid by the validator."""
    res = _imp(nodes_doc, pods_doc)
    p = res.problem
    assert check_assignments(p, p.running) == []
    by = {(a.workload, a.replica): a for a in p.running}
    emb = [by[("inference/embed-6f7c9d", r)] for r in range(3)]
    assert all(a.node == "a100-mixed-0" and a.mig is not None and a.gpus[0] >= 4 for a in emb)
    assert ("inference/embed-6f7c9d", 3) not in by  # pending replicas stay unplaced
    assert by[("inference/vllm-70b", 0)].gpus == (0, 1, 2, 3)
    assert res.meta["workloads"]["inference/embed-6f7c9d"][0]["pod"] == "embed-6f7c9d-0"
    assert res.meta["workloads"]["ml-train/llama-ft"][0]["pod"] is None  # not created yet


def test_unknown_kueue_topology_label(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """A required Kueue topology on an unmapped label names the annotation and the --level-label fix."""
    with pytest.raises(InputError) as e:
        import_kubernetes(nodes_doc, pods_doc, LEVELS[1:], load_catalog())
    assert "kueue.x-k8s.io/podset-required-topology" in e.value.path and "--level-label" in e.value.message


def test_two_mig_instances_in_one_pod(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """A pod asking for two MIG instances is rejected with its field path."""
    doc = copy.deepcopy(pods_doc)
    pod = next(it for it in doc["items"] if it["metadata"]["name"] == "rerank-0")
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/mig-3g.40gb"] = "2"
    with pytest.raises(InputError, match="one MIG instance"):
        _imp(nodes_doc, doc)


def test_running_pod_that_does_not_fit_becomes_pending(
    nodes_doc: dict[str, Any], pods_doc: dict[str, Any]
) -> None:
    """A running pod the catalog says cannot fit its node is imported as pending, with a warning."""
    doc = copy.deepcopy(pods_doc)
    pod = next(it for it in doc["items"] if it["metadata"]["name"] == "api-7c9f-0")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "200"
    res = _imp(nodes_doc, doc)
    assert any("api-7c9f-0" in w and "pending" in w for w in res.warnings)


def test_nodes_only(nodes_doc: dict[str, Any]) -> None:
    """Without pods the scenario has the cluster and no workloads."""
    p = _imp(nodes_doc, None).problem
    assert p.workloads == () and p.cluster.gpus_total == 56
