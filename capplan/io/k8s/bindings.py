"""How a plan reaches the API server: ``v1`` Bindings, gated-pod patches, owner-level changes, the actions file.

Every replica the plan starts or moves goes one way (:func:`route`, from the import metadata):

* a Pending pod with no ``nodeName`` and no scheduling gate: a ``v1`` ``Binding`` (what a scheduler posts to
  ``pods/binding``; ``kubectl create -f`` takes a ``v1`` List of them);
* a gated pod: a strategic-merge patch with the node pin (``nodeSelector`` or required node affinity added to
  the pod's own terms: Kubernetes accepts such additions while a pod is gated) and capplan's gate removed;
* a controller-owned pod that runs elsewhere, or a replica with no pod yet: the owner-level change (its pod
  template pinned to the plan's nodes) in the actions document, with a warning that a direct patch would be
  lost when the controller re-creates the pod.

The actions document (``capplan-actions/v1``) lists every binding with its route, evictions, migrations and
the owner-level changes.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from capplan.io.k8s.labels import HOSTNAME
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Problem

ACTIONS_FORMAT = "capplan-actions/v1"
ANNOTATION = "capplan.io/{what}"


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


def _terms(meta: dict[str, Any] | None, workload: str, replica: int) -> list[dict[str, Any]]:
    reps = (meta or {}).get("workloads", {}).get(workload)
    if reps and replica < len(reps):
        return list(reps[replica].get("node_selector_terms") or [])
    return []


def pin_patch(node: str, style: str, terms: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``spec`` patch that pins a pod to ``node`` and keeps its other constraints.

    ``nodeSelector``: one key added to the pod's map (strategic merge keeps the other keys).
    ``affinity``: the pod's required ``nodeSelectorTerms`` (``terms``) each with the hostname
    requirement added, or one term of it alone (the list is replaced as a whole by a merge, so
    the patch carries the existing requirements: only additions, as Kubernetes allows on gated pods).
    """
    if style != "affinity":
        return {"nodeSelector": {HOSTNAME: node}}
    req = {"key": HOSTNAME, "operator": "In", "values": [node]}
    new = []
    for t in terms or [{}]:
        t = copy.deepcopy(t)
        t["matchExpressions"] = [*(t.get("matchExpressions") or []), req]
        new.append(t)
    required = {"nodeSelectorTerms": new}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}


def _annotations(a: Assignment) -> dict[str, str]:
    ann = {ANNOTATION.format(what="workload"): a.workload, ANNOTATION.format(what="replica"): str(a.replica),
           ANNOTATION.format(what="gpus"): ",".join(str(g) for g in a.gpus)}
    if a.mig is not None:
        ann[ANNOTATION.format(what="mig")] = f"{a.mig.profile}@{a.mig.start}"
    return ann


def _moved(problem: Problem, plan: Plan) -> list[Assignment]:
    running = {a.key: a for a in problem.running}
    return [a for a in sorted(plan.assignments, key=lambda a: (a.workload, a.replica)) if running.get(a.key) != a]


#: The scheduling gate capplan's admission set-up puts on pods it places; the gated-pod patch removes it.
SCHEDULING_GATE = "capplan.io/placement"


def _entry(meta: dict[str, Any] | None, workload: str, replica: int) -> dict[str, Any]:
    reps = (meta or {}).get("workloads", {}).get(workload)
    return dict(reps[replica]) if reps and replica < len(reps) else {}


def route(entry: dict[str, Any]) -> str:
    """How a replica's placement reaches the API server, from its import metadata entry.

    ``binding``: a Pending pod with no ``nodeName`` and no scheduling gate (a ``v1`` ``Binding``, as a
    scheduler posts); ``patch``: a gated pod (pin plus removing capplan's gate); ``owner``: a pod its
    controller owns that must be re-created (it runs elsewhere), or a replica not created yet; ``recreate``:
    a bare pod running elsewhere (delete it and create it again with the pin).
    """
    if not entry.get("pod"):
        return "owner"
    if entry.get("node_name"):
        return "owner" if entry.get("controller") else "recreate"
    return "patch" if entry.get("gates") else "binding"


def binding(entry: dict[str, Any], node: str) -> dict[str, Any]:
    """The ``v1`` ``Binding`` of a pod to ``node`` (``metadata.uid`` the pod's, when known: a re-created pod
    of the same name is then refused, never bound by mistake)."""
    meta: dict[str, Any] = {"name": entry["pod"], "namespace": entry.get("namespace") or "default"}
    if entry.get("uid"):
        meta["uid"] = entry["uid"]
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


def gated_patch(a: Assignment, entry: dict[str, Any], style: str) -> dict[str, Any]:
    """Strategic-merge patch of a gated pod: the node pin, and capplan's gate removed (other gates stay)."""
    spec = pin_patch(a.node, style, list(entry.get("node_selector_terms") or []))
    if SCHEDULING_GATE in (entry.get("gates") or []):
        spec["schedulingGates"] = [{"$patch": "delete", "name": SCHEDULING_GATE}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": entry["pod"], "namespace": entry.get("namespace") or "default",
                         "annotations": _annotations(a)},
            "spec": spec}


def bindings(
    problem: Problem, plan: Plan, meta: dict[str, Any] | None = None, style: str = "nodeSelector"
) -> dict[str, Any]:
    """``v1`` ``Binding`` objects for the Pending, ungated pods the plan starts, as a ``v1`` List
    (``kubectl create -f``); see :func:`route` for the other pods.

    Parameters
    ----------
    problem, plan
        The scenario and a plan that passed the validator.
    meta
        The import metadata (pod names, UIDs, gates, owners); without it no pod is known.
    style
        Unused by Bindings (kept for the call's symmetry with :func:`gated_patches`).
    """
    items = []
    for a in _moved(problem, plan):
        e = _entry(meta, a.workload, a.replica)
        if route(e) == "binding":
            items.append(binding(e, a.node))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def gated_patches(
    problem: Problem, plan: Plan, meta: dict[str, Any] | None = None, style: str = "nodeSelector"
) -> dict[str, Any]:
    """Patches for the gated pods the plan starts, as a ``v1`` List of partial Pods (one
    ``kubectl patch --type strategic`` each): ``nodeSelector`` or required node affinity (``style``, see
    :func:`pin_patch`) and, when present, capplan's gate ``capplan.io/placement`` removed."""
    items = []
    for a in _moved(problem, plan):
        e = _entry(meta, a.workload, a.replica)
        if route(e) == "patch":
            items.append(gated_patch(a, e, style))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def owner_changes(
    problem: Problem, plan: Plan, meta: dict[str, Any] | None = None, style: str = "nodeSelector"
) -> list[dict[str, Any]]:
    """Per controller (owner and role) with a replica the plan starts or moves: the pod-template change that
    keeps the plan when the controller (re-)creates pods: required node affinity to the plan's nodes for its
    replicas (hostname In [...], added to each of the template's own terms)."""
    del style  # a template serves several replicas on several nodes: always node affinity
    groups: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    nodes_of: dict[str, set[str]] = defaultdict(set)
    for a in plan.assignments:
        nodes_of[a.workload].add(a.node)
    for a in _moved(problem, plan):
        e = _entry(meta, a.workload, a.replica)
        ctrl = e.get("controller") or ({"kind": e.get("owner_kind"), "name": e.get("owner")}
                                       if e.get("owner_kind") not in (None, "Pod") else None)
        if ctrl is None:
            continue
        key = (str(ctrl["kind"]), str(e.get("namespace")), str(ctrl["name"]), str(e.get("role") or ""))
        g = groups.setdefault(key, {"kind": key[0], "namespace": key[1], "name": key[2],
                                    **({"role": key[3]} if key[3] else {}), "workloads": set(), "terms": e})
        g["workloads"].add(a.workload)
    out = []
    for key in sorted(groups):
        g = groups.pop(key)
        nodes = sorted({n for w in g.pop("workloads") for n in nodes_of[w]})
        terms = list(g.pop("terms").get("node_selector_terms") or [])
        req = {"key": HOSTNAME, "operator": "In", "values": nodes}
        new = []
        for t in terms or [{}]:
            t = copy.deepcopy(t)
            t["matchExpressions"] = [*(t.get("matchExpressions") or []), req]
            new.append(t)
        g["nodes"] = nodes
        g["template_patch"] = {"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": new}}}}}
        out.append(g)
    return out


def apply_warnings(problem: Problem, plan: Plan, meta: dict[str, Any] | None = None) -> list[str]:
    """What a direct change to a pod cannot do: a controller-owned pod patched or re-created loses the pin
    when its controller re-creates it; replicas not created yet need their owner's template."""
    out, later = [], 0
    for a in _moved(problem, plan):
        e = _entry(meta, a.workload, a.replica)
        r = route(e)
        ctrl = e.get("controller")
        if r == "owner" and not e.get("pod"):
            later += 1
        elif ctrl and r in ("patch", "owner"):
            what = "patched" if r == "patch" else "moved (it runs on " + str(e.get("node_name")) + ")"
            out.append(f"pod {e.get('namespace')}/{e['pod']} is {what} but owned by {ctrl['kind']} {ctrl['name']}: "
                       "a direct patch would be lost when the controller re-creates it; apply the owner-level "
                       "change (owner_changes in the actions file)")
        elif r == "recreate":
            out.append(f"pod {e.get('namespace')}/{e['pod']} runs on {e.get('node_name')} and has no controller: "
                       f"delete it and create it again pinned to {a.node} (see the actions file)")
    if later:
        out.append(f"{later} replica(s) have no pod yet: pin them in their owner's template (owner_changes in the "
                   "actions file)")
    return out


def actions(
    problem: Problem, plan: Plan, meta: dict[str, Any] | None = None, style: str = "nodeSelector"
) -> dict[str, Any]:
    """Every binding (also of replicas not created yet, with the owner to patch), evictions and migrations."""
    out_b = []
    for a in _moved(problem, plan):
        e = _entry(meta, a.workload, a.replica)
        b: dict[str, Any] = {
            "workload": a.workload,
            "replica": a.replica,
            **_pod(meta, a.workload, a.replica),
            "node": a.node,
            "gpus": list(a.gpus),
            "apply": route(e),
        }
        if a.mig is not None:
            b["mig"] = a.mig.model_dump()
        if b["apply"] == "patch":
            b["patch"] = {"spec": gated_patch(a, e, style)["spec"]}
        elif b["apply"] in ("owner", "recreate"):
            b["patch"] = {"spec": pin_patch(a.node, style, _terms(meta, a.workload, a.replica))}
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
        "format": ACTIONS_FORMAT,
        "status": plan.status,
        "bindings": out_b,
        "evictions": [{k: v for k, v in e.items() if v is not None} for e in ev],
        "migrations": [{k: v for k, v in m.items() if v is not None} for m in mv],
        "owner_changes": owner_changes(problem, plan, meta, style),
    }
