"""Round trip: import the sample cluster, plan, export mig-parted + bindings, apply them, re-import, validate.

``_apply_mig_parted`` and ``_apply_bindings`` play the GPU Operator (MIG manager + GFD relabelling)
and a binding controller: they rewrite the kubectl JSON the way those components would.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from capplan.io.k8s.importer import import_kubernetes
from capplan.io.k8s.mig import parse_mig_parted
from capplan.io.scenario import load_scenario
from capplan.model.catalog import load_catalog
from capplan.model.plan import Plan
from capplan.model.validate import check_plan
from capplan.placement import solve

from .conftest import DATA, LEVEL_ARGS, LEVELS, import_sample_argv, k8s_main


def _apply_mig_parted(
    nodes: dict[str, Any], config: dict[str, Any], labels: dict[str, Any]
) -> dict[str, Any]:
    out = copy.deepcopy(nodes)
    chosen = {e["metadata"]["name"]: e["metadata"]["labels"]["nvidia.com/mig.config"] for e in labels["items"]}
    for it in out["items"]:
        name, lab, alloc = it["metadata"]["name"], it["metadata"]["labels"], it["status"]["allocatable"]
        if name not in chosen:
            continue
        single = lab["nvidia.com/mig.strategy"] == "single"
        gpus = 8
        per: list[dict[str, int] | None] = [None] * gpus
        for e in config["mig-configs"][chosen[name]]:
            for d in range(gpus) if e["devices"] == "all" else e["devices"]:
                per[d] = dict(e.get("mig-devices", {})) if e["mig-enabled"] else None
        totals: dict[str, int] = {}
        for cfg in per:
            for p, c in (cfg or {}).items():
                totals[p] = totals.get(p, 0) + c
        for k in [k for k in lab if k.startswith("nvidia.com/mig-")]:
            del lab[k]
        for k in [k for k in alloc if k.startswith("nvidia.com/mig-")]:
            del alloc[k]
        lab.update({"nvidia.com/mig.config": chosen[name], "nvidia.com/mig.config.state": "success"})
        if single:
            ((prof, n),) = totals.items()
            lab["nvidia.com/gpu.product"] = lab["nvidia.com/gpu.product"].split("-MIG-")[0] + f"-MIG-{prof}"
            lab["nvidia.com/gpu.count"] = alloc["nvidia.com/gpu"] = str(n)
            continue
        alloc["nvidia.com/gpu"] = str(sum(1 for c in per if c is None))
        for p, c in totals.items():
            lab[f"nvidia.com/mig-{p.replace('+', '.')}.count"] = str(c)
            alloc[f"nvidia.com/mig-{p.replace('+', '.')}"] = str(c)
    return out


def _merge(pod_spec: dict[str, Any], patch: dict[str, Any]) -> None:
    """Strategic merge of a pin patch: nodeSelector is a map (keys merge); nodeSelectorTerms is atomic.

    Asserts Kubernetes' rule for scheduling-gated pods: existing requirements are only added to.
    """
    if "nodeSelector" in patch:
        pod_spec.setdefault("nodeSelector", {}).update(patch["nodeSelector"])
    if "affinity" in patch:
        path = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
        old = pod_spec
        for k in path:
            old = old.get(k) or {}
        new = patch["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        before = old.get("nodeSelectorTerms") or []
        if before:
            assert len(before) == len(new["nodeSelectorTerms"])
            for t0, t1 in zip(before, new["nodeSelectorTerms"], strict=True):
                assert all(e in t1["matchExpressions"] for e in t0.get("matchExpressions") or [])
        pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})[path[-1]] = new


def _pinned_node(pod_spec: dict[str, Any]) -> str:
    """The one node a pinned pod can go to (every affinity term must allow it)."""
    if "kubernetes.io/hostname" in (pod_spec.get("nodeSelector") or {}):
        return str(pod_spec["nodeSelector"]["kubernetes.io/hostname"])
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    hosts = [set(e["values"]) for t in terms for e in t["matchExpressions"] if e["key"] == "kubernetes.io/hostname"]
    assert len(hosts) == len(terms) and len(set.intersection(*hosts)) == 1
    return str(next(iter(set.intersection(*hosts))))


def _apply_bindings(
    pods: dict[str, Any], binds: dict[str, Any], gated: dict[str, Any], doc: dict[str, Any], scenario: Any
) -> dict[str, Any]:
    """Play the API server and the controllers: post the Bindings (``kubectl create -f``: only a Pending, ungated
    pod without nodeName is bound, to its UID), patch the gated pods (``kubectl patch --type strategic``; the
    scheduler binds a pod once no gate is left), and let owners create the missing replicas pinned."""
    out = copy.deepcopy(pods)
    by_name = {
        (it["metadata"].get("namespace"), it["metadata"]["name"]): it
        for it in out["items"]
        if it["kind"] == "Pod"
    }
    for lst in (binds, gated):
        assert lst["apiVersion"] == "v1" and lst["kind"] == "List"
    for item in binds["items"]:
        assert set(item) == {"apiVersion", "kind", "metadata", "target"} and item["kind"] == "Binding"
        pod = by_name[(item["metadata"]["namespace"], item["metadata"]["name"])]
        assert not pod["spec"].get("nodeName") and not pod["spec"].get("schedulingGates")
        assert item["metadata"].get("uid", pod["metadata"].get("uid")) == pod["metadata"].get("uid")
        assert item["target"]["kind"] == "Node"
        pod["spec"]["nodeName"] = item["target"]["name"]
    for item in gated["items"]:
        assert item["apiVersion"] == "v1" and item["kind"] == "Pod" and set(item) == {"apiVersion", "kind",
                                                                                      "metadata", "spec"}
        pod = by_name[(item["metadata"]["namespace"], item["metadata"]["name"])]
        assert pod["spec"].get("schedulingGates") and not pod["spec"].get("nodeName")  # only gated pods change
        spec = dict(item["spec"])
        for g in spec.pop("schedulingGates", []):
            assert g["$patch"] == "delete"
            pod["spec"]["schedulingGates"] = [x for x in pod["spec"]["schedulingGates"] if x["name"] != g["name"]]
        _merge(pod["spec"], spec)
        pod["metadata"].setdefault("annotations", {}).update(item["metadata"]["annotations"])
        assert not pod["spec"]["schedulingGates"]
        pod["spec"]["nodeName"] = _pinned_node(pod["spec"])
    for b in doc["bindings"]:
        if b.get("pod"):
            assert b["apply"] in ("binding", "patch")
            pod = by_name[(b["namespace"], b["pod"])]
        else:  # the owner creates the missing replica; copy a sibling or build it from the workload
            w = scenario.workload(b["workload"])
            res = {"cpu": str(w.cpu), "memory": f"{int(w.memory_gib * 1024)}Mi"}
            if w.gpus:
                res["nvidia.com/gpu"] = str(w.gpus)
            kind, owner = b["owner"]["kind"], b["owner"]["name"]
            labels = (
                {"jobset.sigs.k8s.io/jobset-name": owner, "jobset.sigs.k8s.io/replicatedjob-name": b["role"]}
                if kind == "TrainJob"
                else {}
            )
            refs = [] if kind == "TrainJob" else [{"kind": kind, "name": owner, "controller": True}]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{owner}-{b['replica']}",
                    "namespace": b["namespace"],
                    "labels": labels,
                    "ownerReferences": refs,
                    "annotations": {"kueue.x-k8s.io/podset-required-topology": LEVELS[0][1]}
                    if w.topology.required == "block"
                    else {},
                },
                "spec": {
                    "priority": w.priority,
                    "containers": [{"name": "c", "resources": {"requests": res}}],
                },
                "status": {},
            }
            out["items"].append(pod)
            assert b["apply"] == "owner"
            _merge(pod["spec"], b["patch"]["spec"])
            pod["spec"]["nodeName"] = _pinned_node(pod["spec"])
        assert pod["spec"]["nodeName"] == b["node"]
        pod["status"]["phase"] = "Running"
    return out


@pytest.mark.parametrize("style", ["nodeSelector", "affinity"])
def test_round_trip(tmp_path: Path, style: str) -> None:
    """import -> plan -> export -> apply -> re-import keeps the layout: every replica runs where planned."""
    scen, plan_f = tmp_path / "c.yaml", tmp_path / "plan.json"
    pods = json.loads((DATA / "pods.json").read_text())
    if style == "affinity":  # gated pending pods with a GPU-product affinity: the patch must keep it
        term = {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                      "values": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"]}]}
        for it in pods["items"]:
            if it["metadata"]["name"].startswith("bert-pretrain-"):
                it["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [copy.deepcopy(term)]}}}
                it["spec"]["schedulingGates"] = [{"name": "capplan.io/placement"}]
    pods_f = tmp_path / "pods.json"
    pods_f.write_text(json.dumps(pods))
    argv = import_sample_argv(scen, *LEVEL_ARGS)
    argv[argv.index(str(DATA / "pods.json"))] = str(pods_f)
    assert k8s_main(argv) == 0
    problem = load_scenario(scen)
    plan = solve(problem, "greedy")
    plan_f.write_text(plan.to_json())
    mig, bind = tmp_path / "mig.yaml", tmp_path / "bind.json"
    assert k8s_main(["export", "mig-parted", str(scen), str(plan_f), "-o", str(mig)]) == 0
    assert k8s_main(["export", "bindings", str(scen), str(plan_f), "-o", str(bind), "--patch", style]) == 0
    config = yaml.safe_load(mig.read_text())
    parse_mig_parted(config)
    labels = json.loads((tmp_path / "mig.yaml.node-labels.json").read_text())
    assert labels["apiVersion"] == "v1" and labels["kind"] == "List"
    chosen = {e["metadata"]["name"]: e["metadata"]["labels"]["nvidia.com/mig.config"] for e in labels["items"]}
    nodes2 = _apply_mig_parted(json.loads((DATA / "nodes.json").read_text()), config, labels)
    podlist = json.loads((tmp_path / "bind.json.gated.json").read_text())
    if style == "affinity":
        kept = [i for i in podlist["items"] if i["metadata"]["name"].startswith("bert-pretrain-")]
        assert kept and all(
            i["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"][0]["matchExpressions"][0] == term["matchExpressions"][0] for i in kept)
    pods2 = _apply_bindings(
        pods,
        json.loads(bind.read_text()),
        podlist,
        json.loads((tmp_path / "bind.json.actions.json").read_text()),
        problem,
    )
    res = import_kubernetes(nodes2, pods2, LEVELS, load_catalog(), config["mig-configs"])
    assert not [w for w in res.warnings if "pending" in w]
    p2 = res.problem
    assert len(p2.running) == len(plan.assignments) == sum(w.replicas for w in p2.workloads)

    def layout(assignments: Any) -> Counter[tuple[str, str, int, str | None]]:
        return Counter((a.workload, a.node, len(a.gpus), a.mig.profile if a.mig else None) for a in assignments)

    assert layout(p2.running) == layout(plan.assignments)  # every replica runs where the plan put it
    assert {n.name: n.mig_strategy for n in p2.cluster.nodes} == {n.name: n.mig_strategy for n in problem.cluster.nodes}
    keep = solve(p2, "greedy")  # nothing left to place: the plan keeps everything where it runs
    assert check_plan(p2, keep) == [] and not keep.unplaced and set(keep.assignments) == set(p2.running)
    # the MIG instances on each node are exactly those of the exported configuration
    for n in p2.cluster.nodes:
        if n.name in chosen:
            got = sorted(s.profile for m in n.gpu_modes for s in (m.layout or ()))
            want = sorted(
                p
                for e in config["mig-configs"][chosen[n.name]]
                if e["mig-enabled"]
                for p, c in e["mig-devices"].items()
                for _ in range(c * (8 if e["devices"] == "all" else len(e["devices"])))
            )
            assert got == want, n.name


def test_affinity_patch_adds_to_existing_terms() -> None:
    """--patch affinity keeps every existing term and adds the hostname to each (allowed on gated pods)."""
    from capplan.io.k8s.bindings import pin_patch

    terms = [
        {"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]},
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H200"]}],
         "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}]},
    ]
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": copy.deepcopy(terms)}}}, "nodeSelector": {"team": "a"}}
    _merge(spec, pin_patch("h100-1", "affinity", terms))
    got = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][:-1] for t in got] == [t["matchExpressions"] for t in terms]
    assert got[1]["matchFields"] == terms[1]["matchFields"] and _pinned_node(spec) == "h100-1"
    _merge(spec, pin_patch("h100-1", "nodeSelector"))
    assert spec["nodeSelector"] == {"team": "a", "kubernetes.io/hostname": "h100-1"}


def test_mig_config_of_plan(tmp_path: Path) -> None:
    """A plan that puts MIG slices on an H100 (--reconfigure-mig: today's modes kept, changes allowed at their cost)
    turns that GPU's MIG on in the exported config and counts it as reconfigured."""
    nodes = json.loads((DATA / "nodes.json").read_text())
    kept = import_kubernetes(nodes, None, LEVELS, load_catalog()).problem
    kept = kept.replace(
        workloads=({"name": "x", "mig": "3g.40gb", "replicas": 2, "gpu_models": ["H100-SXM5-80GB"]},)
    )
    # today's layouts kept: every H100 has MIG off (whole), so nothing may be carved
    assert solve(kept, "greedy").assignments == ()
    p = import_kubernetes(nodes, None, LEVELS, load_catalog(), keep_mig=False).problem
    p = p.replace(
        workloads=({"name": "x", "mig": "3g.40gb", "replicas": 2, "gpu_models": ["H100-SXM5-80GB"]},)
    )
    assert p.reconfigure == "allowed" and all(len(n.gpu_modes) == n.gpus for n in p.cluster.nodes)
    plan = solve(p, "greedy")
    # the two instances share one GPU: one GPU changes from whole to MIG, and its node is drained
    assert plan.metrics["gpus_reconfigured"] == 1 and plan.metrics["nodes_to_drain"] == [plan.assignments[0].node]
    from capplan.io.k8s.export import mig_parted

    cfg, labels = mig_parted(p, plan)
    node = plan.assignments[0].node
    entries = cfg["mig-configs"][labels[node]]
    assert {
        "devices": [plan.assignments[0].gpus[0]],
        "mig-enabled": True,
        "mig-devices": {"3g.40gb": 2},
    } in entries
    assert Plan.from_json(plan.to_json()) == plan
