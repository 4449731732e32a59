"""Kueue's queues as a scenario (``capplan import kueue``): Workloads, ClusterQueues, flavors, quotas.

Nodes and pods go through the Kubernetes importer (:func:`capplan.io.k8s.importer.import_kubernetes`),
with the Workloads in the pods List so that pods join their Workload's gang and pending pod sets are
filled from their templates. On top of that:

* ResourceFlavors become ``quotas.flavors`` (the nodes whose labels match ``spec.nodeLabels``; a flavor
  without a ResourceFlavor object, or without nodeLabels, holds every node);
* ClusterQueues become ``quotas.queues``: ``cohortName`` (``cohort`` in v1beta1), ``queueingStrategy``,
  and per flavor and resource ``nominalQuota``, ``borrowingLimit``, ``lendingLimit``;
* each workload gets its ClusterQueue (``status.admission.clusterQueue``, else its LocalQueue's), its
  priority (``spec.priority``, else its WorkloadPriorityClass), its creation time relative to now and a
  duration: the annotation ``capplan.io/expected-duration``, else ``spec.maximumExecutionTimeSeconds``, else
  the queue's default (``--default-duration``); running replicas of admitted workloads end that long after
  the admission (``Admitted`` condition), at least one minute from now. With a spread (``--duration-spread``:
  the run times are believed up to a lognormal error of that sigma) the scenario gets expected values instead
  (:mod:`capplan.model.spread`): a duration ``d exp(-sigma^2 / 2)``, and a running replica's remaining time the
  expected remaining time of a run that has lasted since the admission.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from capplan.io.k8s import labels as L
from capplan.io.k8s.importer import ImportResult, import_kubernetes
from capplan.io.k8s.pods import SlaPolicy
from capplan.io.k8s.quantity import parse_quantity
from capplan.model.catalog import Catalog
from capplan.model.errors import InputError
from capplan.model.quota import ClusterQueue, Flavor, QuotaEntry, known_resource
from capplan.model.spread import expected_remaining, expected_run_time
from capplan.model.timing import RunningEnd, parse_seconds

DURATION_ANNOTATION = "capplan.io/expected-duration"
GROUP = "kueue.x-k8s.io/"


def parse_time(text: Any, path: str) -> datetime:
    """An RFC 3339 timestamp (``2026-03-02T01:40:00Z``) as an aware datetime."""
    if not isinstance(text, str):
        raise InputError(path, f"expected an RFC 3339 time such as 2026-03-02T01:40:00Z, got {text!r}")
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(path, f"expected an RFC 3339 time such as 2026-03-02T01:40:00Z, got {text!r}") from None
    if t.tzinfo is None:
        raise InputError(path, f"{text!r} has no time zone; add Z or an offset")
    return t


def format_time(t: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, whole seconds."""
    return t.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _kind(items: list[dict[str, Any]], kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, it) for i, it in enumerate(items)
            if it.get("kind") == kind and str(it.get("apiVersion", "")).startswith(GROUP)]


def _flavors(items: list[dict[str, Any]], nodes_data: Any, used: set[str], warnings: list[str]) -> list[Flavor]:
    node_labels = {}
    for it in L.k8s_list(nodes_data, "nodes"):
        meta = L.mapping(it.get("metadata"), "metadata")
        node_labels[str(meta.get("name"))] = L.mapping(meta.get("labels"), "metadata.labels")
    objs = {str(L.mapping(it.get("metadata"), f"items[{i}].metadata").get("name")): (i, it)
            for i, it in _kind(items, "ResourceFlavor")}
    out = []
    for name in sorted(used):
        if name not in objs:
            warnings.append(f"ResourceFlavor {name} is not in the input; it holds every node (add `kubectl get "
                            "resourceflavors -o json` items to the ClusterQueues file)")
            out.append(Flavor(name=name))
            continue
        i, it = objs[name]
        spec = L.mapping(it.get("spec"), f"items[{i}].spec")
        want = L.mapping(spec.get("nodeLabels"), f"items[{i}].spec.nodeLabels")
        topo = spec.get("topologyName")
        if not want:
            out.append(Flavor(name=name, topology=topo if isinstance(topo, str) else None))
            continue
        members = tuple(n for n, lab in node_labels.items() if all(lab.get(k) == v for k, v in want.items()))
        if not members:
            warnings.append(f"ResourceFlavor {name}: no node has the labels {want}; its quota is unusable")
        out.append(Flavor(name=name, nodes=members, topology=topo if isinstance(topo, str) else None))
    return out


def _amount(resource: str, q: Any, path: str) -> float:
    v = parse_quantity(q, path)
    if resource == "memory":
        return float(v / 2**30)
    return float(v)


def _queues(items: list[dict[str, Any]], warnings: list[str]) -> list[ClusterQueue]:
    out = []
    for i, it in _kind(items, "ClusterQueue"):
        path = f"items[{i}]"
        name = str(L.mapping(it.get("metadata"), f"{path}.metadata").get("name"))
        spec = L.mapping(it.get("spec"), f"{path}.spec")
        cohort = spec.get("cohortName", spec.get("cohort"))
        entries = []
        for g, group in enumerate(spec.get("resourceGroups") or []):
            gp = f"{path}.spec.resourceGroups[{g}]"
            for f, fl in enumerate(L.mapping(group, gp).get("flavors") or []):
                fp = f"{gp}.flavors[{f}]"
                fl = L.mapping(fl, fp)
                for r, res in enumerate(fl.get("resources") or []):
                    rp = f"{fp}.resources[{r}]"
                    res = L.mapping(res, rp)
                    rname = str(res.get("name"))
                    if not known_resource(rname):
                        warnings.append(f"{rp}: ClusterQueue {name} quota for {rname} is not modelled; ignored")
                        continue
                    limits = {k: _amount(rname, res[src], f"{rp}.{src}")
                              for k, src in (("borrowing_limit", "borrowingLimit"), ("lending_limit", "lendingLimit"))
                              if res.get(src) is not None and cohort}
                    entries.append(QuotaEntry(flavor=str(fl.get("name")), resource=rname,
                                              nominal=_amount(rname, res.get("nominalQuota", 0), f"{rp}.nominalQuota"),
                                              **limits))
        strategy = spec.get("queueingStrategy") or "BestEffortFIFO"
        if strategy not in ("StrictFIFO", "BestEffortFIFO"):
            raise InputError(f"{path}.spec.queueingStrategy", "expected StrictFIFO or BestEffortFIFO")
        if spec.get("fairSharing") or spec.get("admissionChecks") or spec.get("admissionChecksStrategy"):
            warnings.append(f"ClusterQueue {name}: fair sharing and admission checks are not modelled")
        out.append(ClusterQueue(name=name, cohort=str(cohort) if cohort else None, strategy=strategy,
                                quotas=tuple(entries)))
    return out


def _key(it: dict[str, Any], path: str) -> tuple[str, str, str]:
    """The importer's owner key of a Workload (the pods it groups carry it), as in :mod:`capplan.io.k8s.gangs`."""
    meta = L.mapping(it.get("metadata"), f"{path}.metadata")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
    ctrl = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if ctrl is None or ctrl.get("kind") == "Pod":
        return ("KueuePodGroup", ns, name)
    return (str(ctrl.get("kind")), ns, str(ctrl.get("name")))


def _admitted_at(it: dict[str, Any]) -> str | None:
    for c in L.mapping(it.get("status"), "status").get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Admitted" and c.get("status") == "True":
            return str(c.get("lastTransitionTime"))
    return None


def _class_name(spec: dict[str, Any]) -> str | None:
    """The WorkloadPriorityClass (or PriorityClass) a Workload names: ``priorityClassRef`` (v1beta2) or
    ``priorityClassName`` (v1beta1)."""
    ref = spec.get("priorityClassRef") if isinstance(spec.get("priorityClassRef"), dict) else None
    name = ref.get("name") if ref else spec.get("priorityClassName")
    return str(name) if name else None


def _priority(spec: dict[str, Any], classes: Mapping[str, int]) -> int | None:
    if isinstance(spec.get("priority"), int):
        return int(spec["priority"])
    name = _class_name(spec)
    return classes.get(name) if name else None


class _Info:
    """What the scenario keeps of one Kueue Workload."""

    def __init__(self, i: int, it: dict[str, Any], now: datetime, lqs: Mapping[tuple[str, str], str],
                 classes: Mapping[str, int]) -> None:
        path = f"workloads.items[{i}]"
        self.path = path
        meta = L.mapping(it.get("metadata"), f"{path}.metadata")
        spec = L.mapping(it.get("spec"), f"{path}.spec")
        self.namespace, self.name = str(meta.get("namespace") or "default"), str(meta.get("name"))
        adm = L.mapping(L.mapping(it.get("status"), f"{path}.status").get("admission"), f"{path}.status.admission")
        self.local_queue = str(spec.get("queueName") or "")
        self.queue = adm.get("clusterQueue") or lqs.get((self.namespace, self.local_queue))
        self.priority = _priority(spec, classes)
        self.priority_class = _class_name(spec)
        self.created = round((parse_time(meta.get("creationTimestamp"), f"{path}.metadata.creationTimestamp")
                              - now).total_seconds())
        at = _admitted_at(it)
        self.admitted = None if at is None else round((parse_time(at, f"{path}.status.conditions") - now)
                                                      .total_seconds())
        ann = L.mapping(meta.get("annotations"), f"{path}.metadata.annotations")
        self.duration: int | None = None
        if DURATION_ANNOTATION in ann:
            try:
                self.duration = parse_seconds(ann[DURATION_ANNOTATION]) or None
            except ValueError as exc:
                raise InputError(L.label_path(f"{path}.metadata.annotations", DURATION_ANNOTATION), str(exc)) from None
        elif isinstance(spec.get("maximumExecutionTimeSeconds"), int):
            self.duration = int(spec["maximumExecutionTimeSeconds"])

    def entry(self, capplan_name: str) -> dict[str, Any]:
        """The import metadata entry of this Workload (read by ``capplan export kueue-eta``)."""
        return {"namespace": self.namespace, "name": self.name, "cluster_queue": self.queue,
                "local_queue": self.local_queue, "workload": capplan_name}


def import_kueue(nodes_data: Any, pods_data: Any | None, workloads_data: Any, queues_data: Any,
                 local_queues: Any | None, priority_classes: Any | None, level_labels: Sequence[tuple[str, str]],
                 catalog: Catalog, now: datetime, default_durations: Mapping[str, int] | None = None,
                 name: str = "kueue", sla_policy: SlaPolicy | None = None,
                 duration_spreads: Mapping[str, float] | None = None) -> ImportResult:
    """Build a scenario with quotas from ``kubectl get ... -o json`` of nodes, pods and Kueue's objects.

    Parameters
    ----------
    nodes_data, pods_data, workloads_data, queues_data, local_queues, priority_classes
        Parsed Lists: nodes; pods; Workloads; ClusterQueues (with their ResourceFlavors and Topologies in
        the same List, or the flavors hold every node); LocalQueues; WorkloadPriorityClasses.
    level_labels
        ``(level, label key)`` pairs, outermost first (when empty: the TAS Topology's levels).
    now
        The time the objects were read; time 0 of the scenario.
    default_durations
        Run time per ClusterQueue (key ``*``: every queue) for workloads that give none.
    duration_spreads
        Lognormal sigma of the believed run times per ClusterQueue (key ``*``: every queue; default 0, exact):
        the scenario gets expected durations and remaining times (:mod:`capplan.model.spread`).
    sla_policy
        Which workloads are ``sla: guaranteed`` by priority or (Workload)PriorityClass name, judged on the
        Workload's own priority and class; the pods' ``capplan.io/sla`` annotation overrides it.

    Raises
    ------
    InputError
        Malformed input, naming the field.
    """
    warnings: list[str] = []
    qitems = L.k8s_list(queues_data, "ClusterQueues")
    witems = L.k8s_list(workloads_data, "Workloads")
    levels = list(level_labels) or topology_levels(qitems)
    lqs = {}
    for i, it in _kind(L.k8s_list(local_queues, "LocalQueues") if local_queues is not None else [], "LocalQueue"):
        meta = L.mapping(it.get("metadata"), f"items[{i}].metadata")
        lqs[(str(meta.get("namespace") or "default"), str(meta.get("name")))] = str(
            L.mapping(it.get("spec"), f"items[{i}].spec").get("clusterQueue"))
    classes = {str(L.mapping(it.get("metadata"), "metadata").get("name")): int(it.get("value", 0))
               for _, it in _kind(L.k8s_list(priority_classes, "WorkloadPriorityClasses")
                                  if priority_classes is not None else [], "WorkloadPriorityClass")}
    pods = L.k8s_list(pods_data, "pods") if pods_data is not None else []
    policy = sla_policy or SlaPolicy()
    res = import_kubernetes(nodes_data, {"apiVersion": "v1", "kind": "List", "items": pods + witems}, levels, catalog,
                            name=name, sla_policy=policy)
    warnings += res.warnings
    queues = _queues(qitems, warnings)
    known = {q.name for q in queues}
    flavors = _flavors(qitems, nodes_data, {e.flavor for q in queues for e in q.quotas}, warnings)
    infos = {_key(it, f"workloads.items[{i}]"): _Info(i, it, now, lqs, classes)
             for i, it in _kind(witems, "Workload") if not _finished(it)}
    problem = res.problem
    defaults = dict(default_durations or {})
    spreads = dict(duration_spreads or {})
    changed, ends, kueue_meta = [], [], {}
    running = {a.key for a in problem.running}
    for w in problem.workloads:
        members = res.meta["workloads"].get(w.name) or [{}]
        m = members[0]
        info = infos.get((str(m.get("owner_kind")), str(m.get("namespace")), str(m.get("owner"))))
        if info is None:
            changed.append(w)
            continue
        queue = info.queue if info.queue in known else None
        if queue is None:
            warnings.append(f"Workload {info.namespace}/{info.name}: no ClusterQueue (LocalQueue "
                            f"{info.local_queue!r} unknown); imported without quota")
        dur = info.duration or defaults.get(str(queue), defaults.get("*"))
        if dur is None and w.duration is None:
            warnings.append(f"Workload {info.namespace}/{info.name}: no run time (annotation {DURATION_ANNOTATION}, "
                            "spec.maximumExecutionTimeSeconds or --default-duration); it runs to the horizon")
        upd: dict[str, Any] = {"queue": queue, "created": info.created}
        if info.priority is not None:
            upd["priority"] = info.priority
        if w.name not in res.sla_annotated and policy.guaranteed(
                upd.get("priority", w.priority), tuple(c for c in (info.priority_class,) if c)):
            upd["sla"] = "guaranteed"
        if dur is not None:
            sigma = spreads.get(str(queue), spreads.get("*", 0.0))
            upd["duration"] = expected_run_time(dur, sigma)
            if info.admitted is not None:
                left = expected_remaining(dur, -info.admitted, sigma)  # admitted: seconds from now (<= 0)
                ends += [RunningEnd(workload=w.name, replica=r, ends_in=left, elapsed=max(0, -info.admitted))
                         for r in range(w.replicas) if (w.name, r) in running]
        changed.append(w.model_copy(update=upd))
        kueue_meta[w.name] = info.entry(w.name) | {"admitted": info.admitted is not None}
    problem = problem.replace(workloads=tuple(changed), ends_in=tuple(ends), flavors=tuple(flavors),
                              queues=tuple(queues), now=format_time(now))
    meta = dict(res.meta, levels=[list(x) for x in levels], kueue=kueue_meta)
    return ImportResult(problem=problem, meta=meta, warnings=warnings, sla_annotated=res.sla_annotated)


def _finished(it: dict[str, Any]) -> bool:
    from capplan.io.k8s.pods import finished

    return finished(it)


def topology_levels(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(level, label)`` pairs from the first Kueue Topology: ``.../topology-rack`` is level ``rack``;
    the hostname level (the node) is left out."""
    for i, it in _kind(items, "Topology"):
        out = []
        for lv in L.mapping(it.get("spec"), f"items[{i}].spec").get("levels") or []:
            label = str(L.mapping(lv, f"items[{i}].spec.levels").get("nodeLabel"))
            if label == "kubernetes.io/hostname":
                continue
            level = label.rsplit("/", 1)[-1].removeprefix("topology-").replace(".", "-")
            out.append((level, label))
        return out
    return []
