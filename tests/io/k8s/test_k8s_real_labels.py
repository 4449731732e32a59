"""Import as the real labellers and controllers write it: AMD label keys, GFD `.me`, MIG strategy,
PodGroup tier names, TrainJob runtime defaults, real product names, and a warning for each guess."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from capplan.io.k8s.importer import import_kubernetes
from capplan.io.k8s.labels import resolve_model
from capplan.io.k8s.nodes import import_nodes
from capplan.model.catalog import load_catalog
from capplan.model.errors import InputError

from .conftest import LEVELS


def _node(nodes_doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(it for it in nodes_doc["items"] if it["metadata"]["name"] == name)


@pytest.mark.parametrize(
    "key",
    ["amd.com/gpu.compute-memory-partition", "beta.amd.com/gpu.compute-memory-partition",
     "amd.com/compute-memory-partition"],
)
def test_amd_partition_label_keys(nodes_doc: dict[str, Any], key: str) -> None:
    """The labeller's key (amd.com/gpu.compute-memory-partition) and the documented one both give 8 CPX GPUs."""
    doc = copy.deepcopy(nodes_doc)
    labels = _node(doc, "mi300x-cpx-0")["metadata"]["labels"]
    value = labels.pop("amd.com/compute-memory-partition")
    labels[key] = value
    n = {x.name: x for x in import_nodes(doc, LEVELS, load_catalog()).cluster.nodes}["mi300x-cpx-0"]
    assert n.gpus == 8 and all({s.profile for s in m.layout or ()} == {"CPX"} for m in n.gpu_modes)


def test_amd_without_partition_label_warns(nodes_doc: dict[str, Any]) -> None:
    """No partition label at all: the amd.com/gpu count is taken as whole GPUs, with a warning (not silently)."""
    doc = copy.deepcopy(nodes_doc)
    del _node(doc, "mi300x-cpx-0")["metadata"]["labels"]["amd.com/compute-memory-partition"]
    res = import_nodes(doc, LEVELS, load_catalog())
    assert [w for w in res.warnings if "mi300x-cpx-0" in w and "SPX" in w]


def test_gfd_me_spelling_on_single_strategy(nodes_doc: dict[str, Any]) -> None:
    """GFD writes `+me` as `.me`: `...-MIG-1g.5gb.me` is the 1g.5gb+me profile, one per GPU."""
    doc = copy.deepcopy(nodes_doc)
    it = _node(doc, "a100-single-0")
    it["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb.me"
    it["status"]["allocatable"]["nvidia.com/gpu"] = it["metadata"]["labels"]["nvidia.com/gpu.count"] = "8"
    res = import_nodes(doc, LEVELS, load_catalog())
    n = {x.name: x for x in res.cluster.nodes}["a100-single-0"]
    assert n.gpus == 8 and n.mig_strategy == "single" and n.single_profile == "1g.5gb+me"
    assert any("a100-single-0" in w and "GPU(s)" in w for w in res.warnings)  # GPU count is a guess


def test_mig_strategy_label_and_missing_label_warns(nodes_doc: dict[str, Any]) -> None:
    """`nvidia.com/mig.strategy` sets the node's strategy; a MIG-capable node without it is planned mixed, warned."""
    doc = copy.deepcopy(nodes_doc)
    del _node(doc, "h100-0")["metadata"]["labels"]["nvidia.com/mig.strategy"]
    res = import_nodes(doc, LEVELS, load_catalog())
    nodes = {x.name: x for x in res.cluster.nodes}
    assert nodes["a100-single-0"].mig_strategy == "single" and nodes["a100-mixed-0"].mig_strategy == "mixed"
    assert [w for w in res.warnings if "nvidia.com/mig.strategy" in w and "h100-0" in w]


def test_single_strategy_pods(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """Pods asking nvidia.com/gpu on a single node become single-strategy MIG workloads; mig-* pods stay mixed."""
    p = import_kubernetes(nodes_doc, pods_doc, LEVELS, load_catalog()).problem
    w = {x.name: x for x in p.workloads}
    assert w["lab/notebook-0"].mig_strategy == "single" and w["lab/notebook-2"].mig_strategy == "single"
    assert w["inference/embed-6f7c9d"].mig_strategy == "mixed"


def _podgroup(pods_doc: dict[str, Any]) -> dict[str, Any]:
    return next(it for it in pods_doc["items"] if it["kind"] == "PodGroup")


def test_podgroup_highest_tier_name(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """`highestTierName` names a level (the tierName of capplan's HyperNodes)."""
    doc = copy.deepcopy(pods_doc)
    _podgroup(doc)["spec"]["networkTopology"] = {"mode": "hard", "highestTierName": "block"}
    w = {x.name: x for x in import_kubernetes(nodes_doc, doc, LEVELS, load_catalog()).problem.workloads}
    assert w["hpc/mpi-sim"].topology.required == "block"


def test_podgroup_unknown_tier(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """An unknown hard tier is an error naming the field; a soft one is dropped with a warning."""
    doc = copy.deepcopy(pods_doc)
    pg = _podgroup(doc)
    pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierName": "spine"}
    with pytest.raises(InputError) as e:
        import_kubernetes(nodes_doc, doc, LEVELS, load_catalog())
    assert e.value.path.endswith("spec.networkTopology.highestTierName") and "block" in e.value.message
    pg["spec"]["networkTopology"]["mode"] = "soft"
    res = import_kubernetes(nodes_doc, doc, LEVELS, load_catalog())
    assert [x for x in res.warnings if "highestTierName" in x and "dropped" in x]
    assert {x.name: x for x in res.problem.workloads}["hpc/mpi-sim"].topology.required is None


def test_unknown_priority_class_of_a_group_warns(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """A PodGroup naming a PriorityClass that is not in the input is not dropped silently."""
    doc = copy.deepcopy(pods_doc)
    _podgroup(doc)["spec"]["priorityClassName"] = "no-such-class"
    res = import_kubernetes(nodes_doc, doc, LEVELS, load_catalog())
    assert [w for w in res.warnings if "no-such-class" in w and "priorityClassName" in w]


def _trainjob(pods_doc: dict[str, Any]) -> dict[str, Any]:
    return next(it for it in pods_doc["items"] if it["kind"] == "TrainJob")


RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {
        "mlPolicy": {"numNodes": 3, "torch": {"numProcPerNode": "auto"}},
        "template": {"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "dataset-initializer", "resources": {"requests": {"cpu": "2"}}}]}}}}},
            {"name": "node", "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": 4, "cpu": "32",
                                                                         "memory": "256Gi"}}}]}}}}},
        ]}},
    },
}


def test_trainjob_takes_runtime_defaults(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """Without numNodes / resourcesPerNode a TrainJob gets its runtime's mlPolicy.numNodes and node container."""
    doc = copy.deepcopy(pods_doc)
    tr = _trainjob(doc)["spec"]["trainer"]
    del tr["numNodes"], tr["resourcesPerNode"]
    doc["items"].append(copy.deepcopy(RUNTIME))
    res = import_kubernetes(nodes_doc, doc, LEVELS, load_catalog())
    llama = {x.name: x for x in res.problem.workloads}["ml-train/llama-ft"]
    assert llama.replicas == 3 and llama.gpus == 4 and llama.cpu == 32
    assert not [w for w in res.warnings if "llama-ft" in w]
    tr["numNodes"] = 2  # the TrainJob's own value wins
    assert {x.name: x for x in import_kubernetes(nodes_doc, doc, LEVELS, load_catalog()).problem.workloads}[
        "ml-train/llama-ft"].replicas == 2


def test_trainjob_without_runtime_warns(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """A TrainJob whose runtime is not in the input and that sets no numNodes: 1 node, with a warning."""
    doc = copy.deepcopy(pods_doc)
    del _trainjob(doc)["spec"]["trainer"]["numNodes"]
    res = import_kubernetes(nodes_doc, doc, LEVELS, load_catalog())
    assert {x.name: x for x in res.problem.workloads}["ml-train/llama-ft"].replicas == 1
    assert [w for w in res.warnings if "numNodes" in w and "trainingruntimes" in w]


def test_dropped_gpu_affinity_warns(nodes_doc: dict[str, Any], pods_doc: dict[str, Any]) -> None:
    """A GPU-product affinity capplan cannot read (NotIn) is dropped with a one-line warning."""
    doc = copy.deepcopy(pods_doc)
    pod = next(it for it in doc["items"] if it["kind"] == "Pod")
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["NVIDIA-L4"]}]}]}}}
    res = import_kubernetes(nodes_doc, doc, LEVELS, load_catalog())
    assert [w for w in res.warnings if "NotIn" in w and "\n" not in w]


@pytest.mark.parametrize(
    ("label", "model"),
    [
        ("NVIDIA-H100-PCIe", "H100-PCIe-80GB"),
        ("NVIDIA-H100-NVL", "H100-NVL-94GB"),
        ("NVIDIA-H200-NVL", "H200-NVL-141GB"),
        ("NVIDIA-GH200-480GB", "GH200-96GB"),
        ("NVIDIA-GH200-144G-HBM3e", "GH200-144GB"),
        ("NVIDIA-A100-PCIE-40GB", "A100-PCIe-40GB"),
        ("NVIDIA-A100-80GB-PCIe", "A100-PCIe-80GB"),
        ("NVIDIA-L4", "L4-24GB"),
        ("NVIDIA-A10G", "A10G-24GB"),
        ("NVIDIA-A10", "A10-24GB"),
        ("NVIDIA-L40", "L40-48GB"),
        ("NVIDIA-L40S", "L40S-48GB"),
        ("NVIDIA-RTX-6000-Ada-Generation", "RTX-6000-Ada-48GB"),
        ("NVIDIA-B200", "B200-180GB"),
        ("NVIDIA-GB200", "GB200-186GB"),
        ("NVIDIA-H200-141GB-HBM3e", "H200-SXM-141GB"),
        ("NVIDIA-B200-180GB-HBM3e", "B200-180GB"),
        ("NVIDIA-A30-PCIE-24GB", "A30-24GB"),
        ("AMD_Instinct_MI250X", "MI250X-64GB"),
        ("AMD_Instinct_MI300X_OAM", "MI300X-192GB"),
        ("AMD_Instinct_MI325X_OAM", "MI325X-256GB"),
    ],
)
def test_real_product_names(label: str, model: str) -> None:
    """Product labels clusters really report resolve to a catalog model."""
    assert resolve_model(label, load_catalog(), "p").name == model


def test_single_strategy_mig_on_new_models(nodes_doc: dict[str, Any]) -> None:
    """Every MIG model added for real names imports as a single-strategy node of its smallest profile."""
    cat = load_catalog()
    for label, prof in [("NVIDIA-H100-PCIe", "1g.10gb"), ("NVIDIA-GH200-480GB", "1g.12gb"),
                        ("NVIDIA-GB200", "1g.23gb"), ("NVIDIA-A100-80GB-PCIe", "1g.10gb")]:
        doc = copy.deepcopy(nodes_doc)
        it = _node(doc, "a100-single-0")
        it["metadata"]["labels"]["nvidia.com/gpu.product"] = f"{label}-MIG-{prof}"
        n = {x.name: x for x in import_nodes(doc, LEVELS, cat).cluster.nodes}["a100-single-0"]
        assert n.single_profile == prof and n.gpus == 8


def test_user_catalog_alias(tmp_path: Path, nodes_doc: dict[str, Any]) -> None:
    """`aliases: {My-Name: H100-SXM5-80GB}` in a user catalog names an existing model without copying it."""
    f = tmp_path / "site.yaml"
    f.write_text("aliases:\n  Acme-H100-Special: H100-SXM5-80GB\n  acme-a100: A100-80GB\n")
    cat = load_catalog([f])
    assert cat.get("Acme-H100-Special").name == "H100-SXM5-80GB" and cat.get("acme-a100").name == "A100-SXM4-80GB"
    assert len(cat.models) == len(load_catalog().models)
    doc = copy.deepcopy(nodes_doc)
    _node(doc, "h100-0")["metadata"]["labels"]["nvidia.com/gpu.product"] = "Acme-H100-Special"
    assert {x.name: x for x in import_nodes(doc, LEVELS, cat).cluster.nodes}["h100-0"].gpu_model == "H100-SXM5-80GB"
    f.write_text("aliases:\n  X: H100-SXM5-8GB\n")
    with pytest.raises(InputError) as e:
        load_catalog([f])
    assert e.value.path == "aliases.X" and "H100-SXM5-80GB" in e.value.message
    f.write_text("aliases:\n  A100-80GB: H100-SXM5-80GB\n")
    with pytest.raises(InputError, match="already names A100-SXM4-80GB"):
        load_catalog([f])
