"""The nightly Kueue job at scale: import + ``schedule --policy kueue`` + ``export kueue-eta`` (docs/benchmarks-eta.md).

``python benchmarks/kueue_nightly.py [--nodes 1000] [--workloads 5000] [--seed 0] [--dir DIR]`` writes a synthetic
cluster as ``kubectl get ... -o json`` would (racks of eight 8 x H100 nodes; three ClusterQueues in one cohort,
StrictFIFO and BestEffortFIFO, sized to the fleet; 30% of the Workloads admitted and running, the rest pending;
single pods of 1, 2, 4 or 8 GPUs and gangs of 2 or 4 x 8 GPUs, some asking for one rack), then times the three
commands in-process (the CLI's own functions) and prints one JSON line: wall and CPU seconds per step (the
machine may be shared: the CPU time is what the job itself costs). Target: <= 60 s in all.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

API = "kueue.x-k8s.io/v1beta2"
H100 = "NVIDIA-H100-80GB-HBM3"
RACK = "cloud.provider.com/topology-rack"
NOW = "2026-03-02T02:00:00Z"
QUEUES = (("team-a", "StrictFIFO"), ("team-b", "BestEffortFIFO"), ("team-c", "BestEffortFIFO"))


def lst(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def node(i: int) -> dict[str, Any]:
    name = f"gpu-{i:04d}"
    alloc = {"cpu": "190", "memory": "2000Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, RACK: f"rack-{i // 8:03d}",
                                                  "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "8"}},
            "status": {"capacity": alloc, "allocatable": alloc}}


def template(gpus: int) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main", "resources": {"requests": {
        "cpu": str(2 * gpus), "memory": f"{16 * gpus}Gi", "nvidia.com/gpu": str(gpus)}}}]}}


def build(n_nodes: int, n_workloads: int, seed: int) -> dict[str, dict[str, Any]]:
    """The six input files of ``capplan import kueue``."""
    rng = random.Random(seed)
    nodes = [node(i) for i in range(n_nodes)]
    free = [8] * n_nodes
    workloads, pods = [], []
    for k in range(n_workloads):
        ns, _ = QUEUES[k % len(QUEUES)]
        shape = rng.choice([(1, 1), (1, 2), (1, 4), (1, 8), (1, 8), (2, 8), (4, 8)])
        count, gpus = shape
        rack = count > 1 and rng.random() < 0.5
        ps: dict[str, Any] = {"name": "main", "count": count, "template": template(gpus)}
        if rack:
            ps["topologyRequest"] = {"required": RACK}
        job = f"job{k:05d}"
        meta = {"name": f"job-{job}-{k % 99991:05d}", "namespace": ns,
                "creationTimestamp": f"2026-03-01T{rng.randrange(0, 24):02d}:{rng.randrange(0, 60):02d}:00Z",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"u{k}",
                                     "controller": True}]}
        spec = {"podSets": [ps], "queueName": "main", "priority": rng.choice([100, 100, 1000]),
                "maximumExecutionTimeSeconds": rng.choice([1800, 3600, 7200, 14400, 28800])}
        status: dict[str, Any] = {}
        if rng.random() < 0.3:
            where = [i for i in range(n_nodes) if free[i] >= gpus][:count]
            if rack:  # Kueue's TAS placed it inside one rack
                racks = [[i for i in range(r, min(r + 8, n_nodes)) if free[i] >= gpus] for r in range(0, n_nodes, 8)]
                where = next((r[:count] for r in racks if len(r) >= count), [])
            if len(where) == count:
                admitted = f"2026-03-02T0{rng.randrange(0, 2)}:{rng.randrange(0, 60):02d}:00Z"
                status = {"admission": {"clusterQueue": ns, "podSetAssignments": [
                    {"name": "main", "count": count, "flavors": {"nvidia.com/gpu": "h100", "cpu": "h100",
                                                                 "memory": "h100"}}]},
                          "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                          "lastTransitionTime": admitted}]}
                for r, i in enumerate(where):
                    free[i] -= gpus
                    pods.append({"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": f"{job}-{r}", "namespace": ns, "ownerReferences": [
                                     {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"u{k}",
                                      "controller": True}]},
                                 "spec": {"nodeName": nodes[i]["metadata"]["name"], **template(gpus)["spec"]},
                                 "status": {"phase": "Running"}})
        workloads.append({"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec, "status": status})
    share = n_nodes * 8 // len(QUEUES)
    cqs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": q},
         "spec": {"cohortName": "all", "queueingStrategy": strategy, "resourceGroups": [
             {"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                 {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": share * 4},
                                                {"name": "memory", "nominalQuota": f"{share * 32}Gi"},
                                                {"name": "nvidia.com/gpu", "nominalQuota": share,
                                                 "lendingLimit": share // 2}]}]}]}}
        for q, strategy in QUEUES]
    cqs.append({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100}, "topologyName": "default"}})
    cqs.append({"apiVersion": API, "kind": "Topology", "metadata": {"name": "default"},
                "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}})
    lqs = [{"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": q},
            "spec": {"clusterQueue": q}} for q, _ in QUEUES]
    return {"nodes": lst(nodes), "pods": lst(pods), "workloads": lst(workloads), "cluster-queues": lst(cqs),
            "local-queues": lst(lqs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--horizon", default="7d")
    ap.add_argument("--dir", help="keep the files here (default: a temporary directory)")
    args = ap.parse_args(argv)
    from capplan.cli.main import main as capplan

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(args.dir or tmp)
        d.mkdir(parents=True, exist_ok=True)
        for name, doc in build(args.nodes, args.workloads, args.seed).items():
            (d / f"{name}.json").write_text(json.dumps(doc))
        times: dict[str, float] = {}
        cpu: dict[str, float] = {}  # this process's CPU seconds per step: the wall time on a shared machine is not
        steps = {
            "import": ["import", "kueue", *(x for f in ("nodes", "pods", "workloads", "cluster-queues", "local-queues")
                                            for x in (f"--{f}", str(d / f"{f}.json"))),
                       "--now", NOW, "-o", str(d / "kueue.yaml")],
            "schedule": ["schedule", str(d / "kueue.yaml"), "--policy", "kueue", "--horizon", args.horizon, "-q",
                         "-o", str(d / "kueue-schedule.json")],
            "export": ["export", "kueue-eta", str(d / "kueue.yaml"), str(d / "kueue-schedule.json"),
                       "-o", str(d / "eta.json")],
            "export_prometheus": ["export", "kueue-eta", str(d / "kueue.yaml"), str(d / "kueue-schedule.json"),
                                  "--format", "prometheus", "-o", str(d / "eta.prom")],
        }
        for name, cmd in steps.items():
            t0, c0 = time.perf_counter(), time.process_time()
            rc = capplan(cmd)
            times[name] = round(time.perf_counter() - t0, 2)
            cpu[name] = round(time.process_time() - c0, 2)
            if rc != 0:
                print(f"{name} exited {rc}", file=sys.stderr)
                return rc
        sched = json.loads((d / "kueue-schedule.json").read_text())
        out = {"nodes": args.nodes, "workloads": args.workloads, "seconds": times,
               "total_s": round(sum(times.values()), 2), "cpu_seconds": cpu, "total_cpu_s": round(sum(cpu.values()), 2),
               "replicas_scheduled": sched["metrics"]["replicas_scheduled"],
               "replicas_total": sched["metrics"]["replicas_total"], "unscheduled": len(sched["unscheduled"])}
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
