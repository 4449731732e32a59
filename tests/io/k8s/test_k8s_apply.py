"""Issue 26 on a small kubectl-style cluster: today's layout kept, priority -> SLA, taints and tolerations,
and the apply path (Bindings for Pending ungated pods, patches for gated ones, owners for the rest)."""

from __future__ import annotations

from typing import Any

from capplan.io.k8s.bindings import actions, apply_warnings, bindings, gated_patches
from capplan.io.k8s.importer import import_kubernetes
from capplan.io.k8s.pods import SlaPolicy
from capplan.model.catalog import load_catalog
from capplan.placement import solve

H100 = "NVIDIA-H100-80GB-HBM3"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _node(name: str, product: str, alloc: dict[str, str], labels: dict[str, str] | None = None,
          taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
                                                  "nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed",
                                                  **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": "96", "memory": "1000Gi", **alloc}}}


def _pod(ns: str, name: str, res: dict[str, str], *, node: str | None = None, prio: int = 0, pc: str | None = None,
         tol: list[dict[str, str]] | None = None, gates: list[str] | None = None,
         owner: tuple[str, str] | None = None, ann: dict[str, str] | None = None,
         selector: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{name}", "annotations": ann or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": owner[0], "name": owner[1], "uid": "u",
                                    "controller": True}]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi",
                                                                                       **res}}}],
                            "priority": prio, "tolerations": tol or [], "nodeSelector": selector or {}}
    if pc:
        spec["priorityClassName"] = pc
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


NODES = {"apiVersion": "v1", "kind": "List", "items": [
    _node("gpu-a-0", H100, {"nvidia.com/gpu": "8"}, {"nvidia.com/mig.config": "all-disabled"}, [GPU_TAINT]),
    _node("gpu-a-1", H100, {"nvidia.com/gpu": "8"}, {"nvidia.com/mig.config": "all-disabled"},
          [GPU_TAINT, {"key": "dedicated", "value": "research", "effect": "NoExecute"}]),
    # GPUs 0-6 MIG off, GPU 7 seven configured 1g.10gb instances; a soft taint capplan ignores
    _node("a100-mig-0", "NVIDIA-A100-SXM4-80GB", {"nvidia.com/gpu": "7", "nvidia.com/mig-1g.10gb": "7"},
          {"nvidia.com/mig-1g.10gb.count": "7"}, [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
]}
TOL_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
PODS = {"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "prod-high"},
     "value": 1000},
    _pod("serve", "llm-0", {"nvidia.com/gpu": "2"}, prio=1000, pc="prod-high", tol=TOL_GPU,
         selector={"nvidia.com/gpu.product": H100}),
    _pod("serve", "mig-rs-x1", {"nvidia.com/mig-1g.10gb": "1"}, prio=1000, gates=["capplan.io/placement"],
         owner=("ReplicaSet", "mig-rs")),
    _pod("serve", "critical-0", {"nvidia.com/gpu": "1"}, node="a100-mig-0", prio=1000),
    _pod("serve", "old-0", {"nvidia.com/gpu": "1"}, node="gpu-a-1", selector={"nvidia.com/gpu.product": H100}),
    _pod("research", "nb-0", {"nvidia.com/gpu": "1"}, prio=1000, ann={"capplan.io/sla": "best-effort"},
         tol=[{"key": "dedicated", "operator": "Equal", "value": "research", "effect": "NoExecute"}],
         selector={"nvidia.com/gpu.product": H100}),
]}


def _imp(policy: SlaPolicy | None = None) -> Any:
    return import_kubernetes(NODES, PODS, [], load_catalog(), sla_policy=policy)


def test_import_records_modes_taints_tolerations_and_sla() -> None:
    res = _imp(SlaPolicy(priority=1000))
    p = res.problem
    nodes = {n.name: n for n in p.cluster.nodes}
    a100 = nodes["a100-mig-0"]
    assert [m.mode for m in a100.gpu_modes] == ["whole"] * 7 + ["mig"]
    assert [str(t) for t in nodes["gpu-a-1"].taints] == ["nvidia.com/gpu=present:NoSchedule",
                                                         "dedicated=research:NoExecute"]
    w = {x.name: x for x in p.workloads}
    # priority >= 1000 -> guaranteed; the annotation overrides the mapping; no policy -> best-effort
    assert {n: x.sla for n, x in w.items()} == {"serve/llm-0": "guaranteed", "serve/mig-rs": "guaranteed",
                                               "serve/critical-0": "guaranteed", "serve/old-0": "best-effort",
                                               "research/nb-0": "best-effort"}
    assert w["serve/llm-0"].tolerations[0].operator == "Exists"
    assert all(x.sla == "best-effort" for x in _imp().problem.workloads)
    by_class = {x.name: x.sla for x in _imp(SlaPolicy(classes=frozenset({"prod-high"}))).problem.workloads}
    assert by_class["serve/llm-0"] == "guaranteed" and by_class["serve/mig-rs"] == "best-effort"
    # old-0 runs on gpu-a-1 without tolerating its taint: running state, with a warning
    assert any("old-0 runs on gpu-a-1 without tolerating its taint nvidia.com/gpu=present:NoSchedule" in x
               for x in res.warnings)
    assert any(a.workload == "serve/old-0" and a.node == "gpu-a-1" for a in p.running)


def test_plan_uses_preset_instances_and_keeps_taints() -> None:
    """Hand-worked: llm-0 tolerates only the GPU taint -> gpu-a-0 (gpu-a-1 also has dedicated:NoExecute);
    mig-rs takes a configured 1g.10gb of a100-mig-0's GPU 7 (GPUs 0-6 have MIG off: whole); nb-0 tolerates
    dedicated but not nvidia.com/gpu, so no H100 node takes it and the reason names the taint."""
    p = _imp(SlaPolicy(priority=1000)).problem
    plan = solve(p, "cpsat", time_limit=10)
    at = {a.workload: a for a in plan.assignments}
    assert at["serve/llm-0"].node == "gpu-a-0"
    mig = at["serve/mig-rs"]
    assert mig.node == "a100-mig-0" and mig.gpus == (7,) and mig.mig is not None
    (u,) = plan.unplaced
    assert u.workload == "research/nb-0" and u.reason.startswith("taint: ")
    assert "nvidia.com/gpu=present:NoSchedule on nodes gpu-a-0, gpu-a-1" in u.reason


def test_apply_path_routes_each_pod() -> None:
    """llm-0 (Pending, ungated, bare) -> a v1 Binding to its UID; mig-rs-x1 (gated, owned by a ReplicaSet) ->
    the pin plus capplan's gate removed, the owner-level change and a warning that a direct patch would be lost."""
    res = _imp()
    p = res.problem
    plan = solve(p, "cpsat", time_limit=10)
    binds = bindings(p, plan, res.meta)
    assert binds["items"] == [{"apiVersion": "v1", "kind": "Binding",
                               "metadata": {"name": "llm-0", "namespace": "serve", "uid": "uid-llm-0"},
                               "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-a-0"}}]
    (patch,) = gated_patches(p, plan, res.meta)["items"]
    assert patch["metadata"]["name"] == "mig-rs-x1"
    assert patch["spec"] == {"nodeSelector": {"kubernetes.io/hostname": "a100-mig-0"},
                             "schedulingGates": [{"$patch": "delete", "name": "capplan.io/placement"}]}
    acts = actions(p, plan, res.meta)
    assert {b["pod"]: b["apply"] for b in acts["bindings"]} == {"llm-0": "binding", "mig-rs-x1": "patch"}
    (owner,) = acts["owner_changes"]
    assert (owner["kind"], owner["name"], owner["nodes"]) == ("ReplicaSet", "mig-rs", ["a100-mig-0"])
    terms = owner["template_patch"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                            "values": ["a100-mig-0"]}]}]
    (warn,) = apply_warnings(p, plan, res.meta)
    assert warn.startswith("pod serve/mig-rs-x1 is patched but owned by ReplicaSet mig-rs: a direct patch would "
                           "be lost")
