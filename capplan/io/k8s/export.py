"""Exports a controller applies: nvidia-mig-parted configs with node labels, bindings and evictions.

MIG: each node with an NVIDIA MIG-capable GPU gets one mig-parted config (identical nodes share
it) holding, per GPU, the instance counts the plan uses plus the instances of a preset layout;
GPUs without MIG use are ``mig-enabled: false``. mig-parted creates instances by count and picks
the placements itself; every count set capplan emits fits on one GPU.

Bindings: one entry per replica the plan starts or moves, with the pod (when the import's
metadata knows it) and a patch pinning it to its node. Evictions and migrations are listed so a
controller can delete (and re-create) those pods first.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

import yaml

from capplan.io.k8s.labels import HOSTNAME, MIG_CONFIG
from capplan.model.plan import Plan
from capplan.model.problem import Problem

BINDINGS_API = "capplan.io/v1"


def gpu_configs(problem: Problem, plan: Plan) -> dict[str, list[dict[str, int] | None]]:
    """Per NVIDIA MIG-capable node, per GPU: None (MIG off) or profile -> instance count."""
    used: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    for a in plan.assignments:
        if a.mig is not None:
            c = used[(a.node, a.gpus[0])]
            c[a.mig.profile] = c.get(a.mig.profile, 0) + 1
    out: dict[str, list[dict[str, int] | None]] = {}
    for n in problem.cluster.nodes:
        model = problem.gpu_model(n)
        if model is None or model.vendor != "nvidia" or model.partitioning != "mig":
            continue
        per: list[dict[str, int] | None] = []
        for g in range(n.gpus):
            fixed = n.mode_of(g)
            if fixed is not None and fixed.mode == "mig" and fixed.layout is not None:
                cfg: dict[str, int] = {}
                for s in fixed.layout:
                    cfg[s.profile] = cfg.get(s.profile, 0) + 1
                per.append(cfg)
            elif (n.name, g) in used or (fixed is not None and fixed.mode == "mig"):
                per.append(dict(used.get((n.name, g), {})))
            else:
                per.append(None)
        out[n.name] = per
    return out


def _entries(per: list[dict[str, int] | None]) -> list[dict[str, Any]]:
    groups: dict[str, tuple[list[int], dict[str, int] | None]] = {}
    for g, cfg in enumerate(per):
        key = json.dumps(cfg, sort_keys=True)
        groups.setdefault(key, ([], cfg))[0].append(g)
    entries = []
    for devices, cfg in groups.values():
        e: dict[str, Any] = {
            "devices": "all" if len(devices) == len(per) else devices,
            "mig-enabled": cfg is not None,
        }
        if cfg is not None:
            e["mig-devices"] = {p: c for p, c in sorted(cfg.items())}
        entries.append(e)
    return entries


def mig_parted(problem: Problem, plan: Plan) -> tuple[dict[str, Any], dict[str, str]]:
    """The mig-parted config (``version: v1``) and the ``nvidia.com/mig.config`` value per node."""
    configs: dict[str, list[dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    for node, per in gpu_configs(problem, plan).items():
        if all(c is None for c in per):
            name = "all-disabled"
            entries: list[dict[str, Any]] = [{"devices": "all", "mig-enabled": False}]
        else:
            entries = _entries(per)
            model = problem.gpu_model(problem.cluster.nodes[problem.cluster.node_index[node]])
            assert model is not None
            digest = hashlib.sha256(json.dumps([model.name, entries], sort_keys=True).encode()).hexdigest()
            name = f"capplan-{digest[:10]}"
        configs.setdefault(name, entries)
        labels[node] = name
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}, labels


def mig_parted_yaml(problem: Problem, plan: Plan) -> tuple[str, dict[str, Any]]:
    """The mig-parted file text and the node-label document (JSON-ready)."""
    cfg, labels = mig_parted(problem, plan)
    head = (
        "# nvidia-mig-parted config written by `capplan export mig-parted`; select per node with\n"
        f"# the label {MIG_CONFIG}=<name> (see the node-labels file).\n"
    )
    doc = {
        "apiVersion": BINDINGS_API,
        "kind": "NodeLabels",
        "label": MIG_CONFIG,
        "nodes": [{"node": n, "labels": {MIG_CONFIG: v}} for n, v in sorted(labels.items())],
    }
    return head + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=120), doc


def _pod(meta: dict[str, Any] | None, workload: str, replica: int) -> dict[str, Any]:
    reps = (meta or {}).get("workloads", {}).get(workload)
    if reps and replica < len(reps):
        r = reps[replica]
        return {
            "namespace": r.get("namespace"),
            "pod": r.get("pod"),
            "owner": {"kind": r.get("owner_kind"), "name": r.get("owner")},
            "role": r.get("role") or None,
        }
    ns, _, _ = workload.partition("/")
    return {"namespace": ns if "/" in workload else None, "pod": None}


def _patch(node: str, style: str) -> dict[str, Any]:
    if style == "affinity":
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
        return {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                    }
                }
            }
        }
    return {"spec": {"nodeSelector": {HOSTNAME: node}}}


def bindings(
    problem: Problem, plan: Plan, meta: dict[str, Any] | None = None, style: str = "nodeSelector"
) -> dict[str, Any]:
    """Bindings for replicas the plan starts or moves, plus evictions and migrations.

    ``style`` is ``nodeSelector`` (default) or ``affinity`` (a required node-affinity term).
    """
    running = {a.key: a for a in problem.running}
    out_b = []
    for a in sorted(plan.assignments, key=lambda a: (a.workload, a.replica)):
        if running.get(a.key) == a:
            continue  # unchanged
        b: dict[str, Any] = {
            "workload": a.workload,
            "replica": a.replica,
            **_pod(meta, a.workload, a.replica),
            "node": a.node,
            "gpus": list(a.gpus),
        }
        if a.mig is not None:
            b["mig"] = a.mig.model_dump()
        b["patch"] = _patch(a.node, style)
        out_b.append({k: v for k, v in b.items() if v is not None})
    ev = [
        {
            "action": "evict",
            "workload": e.workload,
            "replica": e.replica,
            **_pod(meta, e.workload, e.replica),
            "node": e.node,
            "reason": e.reason,
        }
        for e in plan.evictions
    ]
    mv = [
        {
            "action": "migrate",
            "workload": m.workload,
            "replica": m.replica,
            **_pod(meta, m.workload, m.replica),
            "from_node": m.from_node,
            "to_node": m.to_node,
            "reason": m.reason,
        }
        for m in plan.migrations
    ]
    return {
        "apiVersion": BINDINGS_API,
        "kind": "PlacementBindings",
        "status": plan.status,
        "bindings": out_b,
        "evictions": [{k: v for k, v in e.items() if v is not None} for e in ev],
        "migrations": [{k: v for k, v in m.items() if v is not None} for m in mv],
    }
