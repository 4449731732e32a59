"""Write the Kueue fixtures of this folder (``python tests/data/k8s/kueue/make_fixtures.py``).

A small live cluster as ``kubectl get ... -o json`` prints it, at 2026-03-02T01:40:00Z:

* nodes: racks rack-1 and rack-2 of four 8 x H100 nodes each (block-1), rack-3 of two 8 x A100 nodes, a CPU node;
* ResourceFlavors h100 (TAS, Topology ``default``: block, rack, hostname), a100, default-cpu (every node);
* ClusterQueues team-a (StrictFIFO, 16 H100 + 8 A100, lends 8 H100) and team-b (BestEffortFIFO, 16 H100,
  borrows at most 8) in cohort research; a LocalQueue ``main`` in each namespace;
* WorkloadPriorityClasses high (1000) and low (100);
* admitted Workloads with running pods (train-a1: 2 x 8 H100, 4 h limit, admitted 2 h ago; eval-a2: 4 H100,
  expected 3 h, admitted 1 h ago; train-b1: 8 H100, no duration, admitted 30 min ago) and pending ones
  (train-a3: 2 x 8 H100 in one rack, high; tune-a4: 8 H100, low; infer-b2: 4 H100; big-b3: 3 x 8 H100).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
NOW = "2026-03-02T01:40:00Z"
H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
API = "kueue.x-k8s.io/v1beta2"


def lst(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def node(name: str, rack: str, product: str | None) -> dict[str, Any]:
    labels = {HOST: name, "kubernetes.io/os": "linux", BLOCK: "block-1", RACK: rack}
    alloc = {"cpu": "191500m", "memory": "2113459452Ki", "pods": "110", "ephemeral-storage": "3500Gi"}
    if product:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                       "nvidia.com/gpu.count": "8", "nvidia.com/mig.capable": "true",
                       "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-disabled"})
        alloc["nvidia.com/gpu"] = "8"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "uid": f"uid-{name}",
                         "creationTimestamp": "2025-11-03T08:00:00Z"},
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"capacity": dict(alloc), "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def nodes() -> dict[str, Any]:
    items = [node(f"h100-r{r}-{i}", f"rack-{r}", H100) for r in (1, 2) for i in range(4)]
    items += [node(f"a100-r3-{i}", "rack-3", A100) for i in range(2)]
    items.append(node("cpu-0", "rack-3", None))
    return lst(items)


def container(gpus: int) -> dict[str, Any]:
    return {"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
            "resources": {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": str(gpus)},
                          "limits": {"nvidia.com/gpu": str(gpus)}}}


def template(gpus: int, product: str | None = H100) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container(gpus)]}
    return {"metadata": {"labels": {"app": "trainer"}}, "spec": spec}


def workload(ns: str, job: str, created: str, count: int, gpus: int, *, priority: int, klass: str,
             max_s: int | None = None, rack: bool = False, admitted: str | None = None,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    ps: dict[str, Any] = {"name": "main", "count": count, "template": template(gpus)}
    if rack:
        ps["topologyRequest"] = {"required": RACK}
    spec: dict[str, Any] = {"podSets": [ps], "queueName": "main", "priority": priority, "active": True,
                            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                 "name": klass}}
    if max_s is not None:
        spec["maximumExecutionTimeSeconds"] = max_s
    meta: dict[str, Any] = {"name": f"job-{job}-{zlib.crc32(job.encode()) % 99999:05d}", "namespace": ns,
                            "uid": f"uid-wl-{job}", "creationTimestamp": created, "generation": 1,
                            "labels": {"kueue.x-k8s.io/job-uid": f"uid-job-{job}"},
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                                 "uid": f"uid-job-{job}", "controller": True,
                                                 "blockOwnerDeletion": True}]}
    if annotations:
        meta["annotations"] = annotations
    status: dict[str, Any]
    if admitted:
        usage = {"cpu": str(16 * count), "memory": f"{128 * count}Gi", "nvidia.com/gpu": str(gpus * count)}
        status = {"admission": {"clusterQueue": f"team-{ns[-1]}", "podSetAssignments": [
            {"name": "main", "count": count, "resourceUsage": usage,
             "flavors": {"cpu": "default-cpu", "memory": "default-cpu", "nvidia.com/gpu": "h100"}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "observedGeneration": 1,
                 "message": f"Quota reserved in ClusterQueue team-{ns[-1]}", "lastTransitionTime": admitted},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "observedGeneration": 1,
                 "message": "The workload is admitted", "lastTransitionTime": admitted}]}
    else:
        status = {"conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "observedGeneration": 1,
             "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                        "in flavor h100", "lastTransitionTime": created}],
            "resourceRequests": [{"name": "main", "resources": {"cpu": "16", "memory": "128Gi",
                                                                "nvidia.com/gpu": str(gpus)}}]}
    return {"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec, "status": status}


ADMITTED = [  # namespace, job, created / admitted, count, gpus, priority, class, extra, nodes
    ("team-a", "train-a1", "2026-03-01T23:40:00Z", 2, 8, 1000, "high", {"max_s": 14400}, ["h100-r1-0", "h100-r1-1"]),
    ("team-a", "eval-a2", "2026-03-02T00:40:00Z", 1, 4, 100, "low",
     {"annotations": {"capplan.io/expected-duration": "3h"}}, ["h100-r1-2"]),
    ("team-b", "train-b1", "2026-03-02T01:10:00Z", 1, 8, 100, "low", {}, ["h100-r2-0"]),
]
PENDING = [  # namespace, job, created, count, gpus, priority, class, extra
    ("team-a", "train-a3", "2026-03-02T01:00:00Z", 2, 8, 1000, "high", {"rack": True, "max_s": 7200}),
    ("team-a", "tune-a4", "2026-03-02T00:50:00Z", 1, 8, 100, "low", {"max_s": 3600}),
    ("team-b", "infer-b2", "2026-03-02T01:20:00Z", 1, 4, 100, "low",
     {"annotations": {"capplan.io/expected-duration": "45m"}}),
    ("team-b", "big-b3", "2026-03-02T01:15:00Z", 3, 8, 100, "low", {"max_s": 10800}),
]


def pod(ns: str, job: str, k: int, gpus: int, node_name: str, started: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{job}-{k}-x{k}b7q", "namespace": ns, "uid": f"uid-pod-{job}-{k}",
                         "creationTimestamp": started,
                         "labels": {"batch.kubernetes.io/job-name": job, "kueue.x-k8s.io/queue-name": "main"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                              "uid": f"uid-job-{job}", "controller": True}]},
            "spec": {"nodeName": node_name, "restartPolicy": "Never", "schedulerName": "default-scheduler",
                     "nodeSelector": {"nvidia.com/gpu.product": H100}, "containers": [container(gpus)]},
            "status": {"phase": "Running", "startTime": started}}


def main() -> None:
    wls, pods = [], []
    for ns, job, t, count, gpus, prio, klass, extra, where in ADMITTED:
        wls.append(workload(ns, job, t, count, gpus, priority=prio, klass=klass, admitted=t, **extra))
        pods += [pod(ns, job, k, gpus, n, t) for k, n in enumerate(where)]
    for ns, job, t, count, gpus, prio, klass, extra in PENDING:
        wls.append(workload(ns, job, t, count, gpus, priority=prio, klass=klass, **extra))
    flavors = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
         "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100}, "topologyName": "default"}},
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "a100"},
         "spec": {"nodeLabels": {"nvidia.com/gpu.product": A100}}},
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default-cpu"}, "spec": {}},
        {"apiVersion": API, "kind": "Topology", "metadata": {"name": "default"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}},
    ]

    def cq(name: str, strategy: str, h100: dict[str, Any], a100: bool) -> dict[str, Any]:
        gpu_flavors = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", **h100}]}]
        if a100:
            gpu_flavors.append({"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]})
        return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"cohortName": "research", "queueingStrategy": strategy, "namespaceSelector": {},
                         "resourceGroups": [
                             {"coveredResources": ["cpu", "memory"], "flavors": [
                                 {"name": "default-cpu", "resources": [{"name": "cpu", "nominalQuota": 512},
                                                                       {"name": "memory", "nominalQuota": "4Ti"}]}]},
                             {"coveredResources": ["nvidia.com/gpu"], "flavors": gpu_flavors}]}}

    cqs = [cq("team-a", "StrictFIFO", {"nominalQuota": 16, "lendingLimit": 8}, True),
           cq("team-b", "BestEffortFIFO", {"nominalQuota": 16, "borrowingLimit": 8}, False)]
    lqs = [{"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
            "spec": {"clusterQueue": ns}} for ns in ("team-a", "team-b")]
    wpcs = [{"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": n}, "value": v,
             "description": d} for n, v, d in (("high", 1000, "production training"), ("low", 100, "experiments"))]
    out = {"nodes.json": nodes(), "pods.json": lst(pods), "workloads.json": lst(wls),
           "cluster-queues.json": lst(cqs + flavors), "local-queues.json": lst(lqs),
           "priority-classes.json": lst(wpcs)}
    for name, doc in out.items():
        (HERE / name).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"fixtures at {NOW} written to {HERE}")


if __name__ == "__main__":
    main()
