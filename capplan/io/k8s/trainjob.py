"""Kubeflow Trainer ``TrainJob``: replicas and pod template as the runtime applies its defaults.

A TrainJob names a ``ClusterTrainingRuntime`` or ``TrainingRuntime`` (``spec.runtimeRef``); the
runtime's ``mlPolicy.numNodes`` and its trainer job's pod spec are the defaults that
``spec.trainer.numNodes`` and ``spec.trainer.resourcesPerNode`` override.
"""

from __future__ import annotations

import copy
from typing import Any

from capplan.io.k8s import labels as L


def _trainer_pod_spec(rspec: dict[str, Any], path: str) -> dict[str, Any]:
    """A copy of the pod spec of a training runtime's trainer job (``node``, or labelled the trainer step)."""
    tpath = f"{path}.template.spec"
    jobs = L.mapping(L.mapping(rspec.get("template"), f"{path}.template").get("spec"), tpath).get("replicatedJobs")
    for j, job in enumerate(jobs or []):
        jp = f"{tpath}.replicatedJobs[{j}].template"
        if not isinstance(job, dict):
            continue
        tmpl = L.mapping(job.get("template"), jp)
        labels = L.mapping(tmpl.get("metadata"), f"{jp}.metadata").get("labels") or {}
        if job.get("name") == "node" or labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer":
            inner = L.mapping(L.mapping(tmpl.get("spec"), f"{jp}.spec").get("template"), f"{jp}.spec.template")
            return copy.deepcopy(L.mapping(inner.get("spec"), f"{jp}.spec.template.spec"))
    return {}


def find_runtime(items: list[dict[str, Any]], ref: dict[str, Any], ns: str) -> tuple[str, dict[str, Any]] | None:
    """The (Cluster)TrainingRuntime a TrainJob's ``runtimeRef`` names and its path, if it is in the input."""
    kind = str(ref.get("kind") or "ClusterTrainingRuntime")
    for i, it in enumerate(items):
        if it.get("kind") != kind:
            continue
        meta = L.mapping(it.get("metadata"), f"items[{i}].metadata")
        rns, rname = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        if rname == ref.get("name") and (kind == "ClusterTrainingRuntime" or rns == ns):
            return f"items[{i}]", it
    return None

def trainjob_template(
    items: list[dict[str, Any]], it: dict[str, Any], ns: str, path: str, warnings: list[str]
) -> tuple[int, dict[str, Any]]:
    """Nodes and per-node pod template of a TrainJob, with its runtime's defaults applied.

    ``spec.trainer.numNodes`` overrides the runtime's ``mlPolicy.numNodes``; ``resourcesPerNode``
    overrides the resources of the runtime's trainer container (``node``). A value neither gives is
    guessed (1 node; no requests) with a warning.

    Parameters
    ----------
    items
        Every object of the input (the runtime is looked up among them).
    it, ns, path
        The TrainJob, its namespace and its field path.
    warnings
        Where a guessed value is reported.

    Returns
    -------
    tuple
        The number of nodes (replicas) and a pod template ``{"spec": ...}`` for one node.
    """
    spec = L.mapping(it.get("spec"), f"{path}.spec")
    tr = L.mapping(spec.get("trainer"), f"{path}.spec.trainer")
    ref = L.mapping(spec.get("runtimeRef"), f"{path}.spec.runtimeRef")
    found = find_runtime(items, ref, ns) if ref else None
    rpath, rt = found if found else (path, None)
    rspec = L.mapping(rt.get("spec"), f"{rpath}.spec") if rt else {}
    pod_spec = _trainer_pod_spec(rspec, f"{rpath}.spec")
    want = tr.get("numNodes")
    name = L.mapping(it.get("metadata"), f"{path}.metadata").get("name") or ""
    where = f"TrainJob {ns}/{name}"
    need = "add `kubectl get clustertrainingruntimes,trainingruntimes -A -o json` items to the pods file"
    if not isinstance(want, int) or isinstance(want, bool):
        want = L.mapping(rspec.get("mlPolicy"), f"{rpath}.spec.mlPolicy").get("numNodes")
        if not isinstance(want, int) or isinstance(want, bool):
            warnings.append(
                f"{path}: {where} sets no numNodes and its runtime "
                f"{ref.get('name')!r} {'gives none' if rt else 'is not in the input'}; 1 node assumed"
                + ("" if rt else f" ({need})")
            )
            want = 1
    res = tr.get("resourcesPerNode")
    containers = [c for c in pod_spec.get("containers") or [] if isinstance(c, dict)]
    node = next((c for c in containers if c.get("name") == "node"), containers[0] if containers else None)
    if isinstance(res, dict):
        if node is None:
            pod_spec["containers"] = [{"name": "node", "resources": res}]
        else:
            node["resources"] = res
    elif node is None:
        warnings.append(
            f"{path}: {where} sets no resourcesPerNode and its runtime "
            f"{'has no trainer container' if rt else 'is not in the input'}; its pods are taken as "
            f"asking for nothing{'' if rt else f' ({need})'}"
        )
        pod_spec["containers"] = [{"name": "node", "resources": {}}]
    return int(want), {"spec": pod_spec}
