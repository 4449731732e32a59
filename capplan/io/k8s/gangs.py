"""Owners and gangs: which pods form one workload, and which replicas are still to be created.

Sources, first match wins for a pod: Volcano PodGroup (annotation ``scheduling.k8s.io/group-name``),
Kueue plain pod group (label ``kueue.x-k8s.io/pod-group-name``), Kubeflow training job (label
``training.kubeflow.org/job-name``), JobSet / TrainJob (label ``jobset.sigs.k8s.io/jobset-name``),
the controller owner reference, else the pod itself. Training jobs, TrainJobs, JobSets, PodGroups
(their first ``minMember`` pods), Kueue pod groups and Kueue Workloads of more than one pod are
gangs. Missing replicas of a job, TrainJob or Kueue pod set are added from its template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capplan.io.k8s import labels as L
from capplan.io.k8s.pods import (
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    SYSTEM_PRIORITIES,
    PodSpec,
    finished,
    priority_classes,
    read_pod,
)
from capplan.io.k8s.trainjob import trainjob_template
from capplan.model.errors import InputError

VOLCANO_GROUP = "scheduling.k8s.io/group-name"
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
KUBEFLOW_JOB = "training.kubeflow.org/job-name"
KUBEFLOW_ROLE = "training.kubeflow.org/replica-type"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_ROLE = "jobset.sigs.k8s.io/replicatedjob-name"
Key = tuple[str, str, str]


def _meta(item: dict[str, Any], path: str) -> tuple[str, str]:
    meta = L.mapping(item.get("metadata"), f"{path}.metadata")
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _owner(item: dict[str, Any], path: str) -> tuple[str, str] | None:
    refs = L.mapping(item.get("metadata"), f"{path}.metadata").get("ownerReferences") or []
    refs = [r for r in refs if isinstance(r, dict)]
    ctrl = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (str(ctrl.get("kind")), str(ctrl.get("name"))) if ctrl else None


class _Collector:
    def __init__(
        self, items: list[dict[str, Any]], levels: Sequence[tuple[str, str]], warnings: list[str]
    ) -> None:
        self.items = items
        self.levels = {label: level for level, label in levels}  # label key -> capplan level
        self.order = [*(level for level, _ in levels), "node"]  # Volcano tier t -> order[-1 - t]
        self.warnings = warnings
        self.classes, self.default = priority_classes(items)
        self.pods: list[PodSpec] = []  # append-only: :meth:`have` indexes it by key as it grows
        self._by_key: dict[Key, list[PodSpec]] = {}
        self._indexed = 0
        self.kinds: dict[tuple[str, str], str] = {}  # (ns, name) -> kind of a Kubeflow job / TrainJob
        for i, it in enumerate(items):
            spec = it.get("spec")
            if isinstance(spec, dict) and (
                it.get("kind") == "TrainJob" or any(k.endswith("ReplicaSpecs") for k in spec)
            ):
                self.kinds[_meta(it, f"items[{i}]")] = str(it.get("kind"))

    def key_of(self, item: dict[str, Any], pod: PodSpec, path: str) -> tuple[Key, str, bool]:
        ns, lab, ann = pod.namespace, pod.labels, pod.annotations
        if VOLCANO_GROUP in ann:
            return ("PodGroup", ns, ann[VOLCANO_GROUP]), "", True
        if KUEUE_POD_GROUP in lab:
            return ("KueuePodGroup", ns, lab[KUEUE_POD_GROUP]), "", True
        if KUBEFLOW_JOB in lab:
            name = lab[KUBEFLOW_JOB]
            owner = _owner(item, path)
            kind = self.kinds.get((ns, name)) or (owner[0] if owner else "PyTorchJob")
            return (kind, ns, name), lab.get(KUBEFLOW_ROLE, "").lower(), True
        if JOBSET_NAME in lab:
            name = lab[JOBSET_NAME]
            kind = "TrainJob" if self.kinds.get((ns, name)) == "TrainJob" else "JobSet"
            return (kind, ns, name), lab.get(JOBSET_ROLE, ""), True
        owner = _owner(item, path)
        if owner:
            return (owner[0], ns, owner[1]), "", False
        return ("Pod", ns, pod.name or ""), "", False

    def topology(self, pod: PodSpec) -> None:
        for ann, attr in ((KUEUE_REQUIRED, "required"), (KUEUE_PREFERRED, "preferred")):
            label = pod.annotations.get(ann)
            if label is None:
                continue
            level = "node" if label == L.HOSTNAME else self.levels.get(label)
            if level is None and attr == "required":
                raise InputError(
                    L.label_path(f"{pod.path}.metadata.annotations", ann),
                    f"topology label {label!r} maps to no capplan level; add "
                    f"--level-label LEVEL={label} (known: {sorted(self.levels) or 'none'})",
                )
            if level is None:
                self.warnings.append(f"{pod.path}: preferred topology {label!r} maps to no level; ignored")
            setattr(pod, attr, level)

    def add(self, pod: PodSpec) -> None:
        self.topology(pod)
        self.pods.append(pod)

    def read_pods(self) -> None:
        skipped = 0
        for i, it in enumerate(self.items):
            if it.get("kind", "Pod") != "Pod":
                continue
            path = f"items[{i}]"
            phase = L.mapping(it.get("status"), f"{path}.status").get("phase", "Pending")
            if phase in ("Succeeded", "Failed"):
                continue
            pod = read_pod(it, path, self.classes, self.default, self.warnings)
            if pod.gpu.kind == "none" and pod.cpu_milli == 0 and pod.memory_mib == 0:
                skipped += 1
                continue
            pod.key, pod.role, pod.gang = self.key_of(it, pod, path)
            self.add(pod)
        if skipped:
            self.warnings.append(
                f"{skipped} pod(s) without CPU, memory or GPU requests (BestEffort) left out"
            )

    def have(self, key: Key, role: str | None = None) -> list[PodSpec]:
        """The pods of ``key`` (of ``role``), in reading order (an index, not a scan: thousands of Workloads)."""
        for p in self.pods[self._indexed:]:  # a pod's key is set before it is added, and never changes
            self._by_key.setdefault(p.key, []).append(p)
        self._indexed = len(self.pods)
        return [p for p in self._by_key.get(key, ()) if role is None or p.role == role]

    def fill(
        self, key: Key, role: str, want: int, template: dict[str, Any], path: str, priority: int | None = None,
        priority_class: str | None = None,
    ) -> None:
        """Add replicas ``key``/``role`` still has to create, from ``template``."""
        missing = want - len(self.have(key, role))
        if missing <= 0:
            return
        base = read_pod(
            {
                "metadata": {**L.mapping(template.get("metadata"), f"{path}.metadata"), "namespace": key[1]},
                "spec": template.get("spec") or {},
            },
            path,
            self.classes,
            self.default,
            self.warnings,
            template=True,
        )
        if priority is not None and "priority" not in (template.get("spec") or {}):
            base.priority = priority
        if priority_class and priority_class not in base.priority_classes:
            base.priority_classes = (*base.priority_classes, priority_class)
        base.key, base.role, base.gang = key, role, True
        for _ in range(missing):
            self.add(base.clone_virtual(path))

    def jobs(self) -> None:
        for i, it in enumerate(self.items):
            path = f"items[{i}]"
            spec = it.get("spec")
            if not isinstance(spec, dict) or finished(it) or it.get("kind") in ("Pod", "Workload"):
                continue
            ns, name = _meta(it, path)
            kind = str(it.get("kind"))
            if kind == "TrainJob":
                want, tmpl = trainjob_template(self.items, it, ns, path, self.warnings)
                self.fill((kind, ns, name), "node", want, tmpl, f"{path}.spec.trainer")
                continue
            for rs_key, rs in spec.items():
                if not rs_key.endswith("ReplicaSpecs") or not isinstance(rs, dict):
                    continue
                sched = L.mapping(
                    L.mapping(spec.get("runPolicy"), f"{path}.spec.runPolicy").get("schedulingPolicy"),
                    f"{path}.spec.runPolicy.schedulingPolicy",
                )
                pc = sched.get("priorityClass")
                prio = self.class_value(pc, f"{path}.spec.runPolicy.schedulingPolicy.priorityClass")
                for role, r in rs.items():
                    rp = f"{path}.spec.{rs_key}.{role}"
                    r = L.mapping(r, rp)
                    self.fill(
                        (kind, ns, name),
                        role.lower(),
                        int(r.get("replicas", 1)),
                        L.mapping(r.get("template"), f"{rp}.template"),
                        f"{rp}.template",
                        prio,
                        pc if isinstance(pc, str) else None,
                    )

    def class_value(self, name: Any, path: str) -> int | None:
        """The value of PriorityClass ``name`` (None if unset; unknown: None with a warning)."""
        if not isinstance(name, str) or not name:
            return None
        if name in self.classes:
            return self.classes[name]
        if name in SYSTEM_PRIORITIES:
            return SYSTEM_PRIORITIES[name]
        self.warnings.append(
            f"{path}: PriorityClass {name!r} is not in the input; ignored (add `kubectl get priorityclasses -o json` "
            "items to the pods file)"
        )
        return None

    def kueue(self) -> None:
        for i, it in enumerate(self.items):
            path = f"items[{i}]"
            if it.get("kind") != "Workload" or not str(it.get("apiVersion", "")).startswith(
                "kueue.x-k8s.io/"
            ):
                continue
            if finished(it):
                continue
            ns, name = _meta(it, path)
            owner = _owner(it, path)
            if owner is None or owner[0] == "Pod":
                key: Key = ("KueuePodGroup", ns, name)
            else:
                kind = owner[0]
                if kind == "JobSet" and self.kinds.get((ns, owner[1])) == "TrainJob":
                    kind = "TrainJob"
                key = (kind, ns, owner[1])
            spec = L.mapping(it.get("spec"), f"{path}.spec")
            sets = spec.get("podSets") or []
            prio = spec.get("priority") if isinstance(spec.get("priority"), int) else None
            ref = spec.get("priorityClassRef")
            wpc = ref.get("name") if isinstance(ref, dict) else spec.get("priorityClassName")
            wpc = wpc if isinstance(wpc, str) and wpc else None
            gang = sum(int(s.get("count", 1)) for s in sets if isinstance(s, dict)) > 1
            for j, s in enumerate(sets):
                sp = f"{path}.spec.podSets[{j}]"
                s = L.mapping(s, sp)
                role = "" if s.get("name") == "main" else str(s.get("name", ""))
                members = self.have(key, role) or (self.have(key) if len(sets) == 1 else [])
                topo = L.mapping(s.get("topologyRequest"), f"{sp}.topologyRequest")
                for p in members:
                    p.gang = p.gang or gang
                    if wpc and wpc not in p.priority_classes:
                        p.priority_classes = (*p.priority_classes, wpc)
                    for attr, ann in (("required", KUEUE_REQUIRED), ("preferred", KUEUE_PREFERRED)):
                        if isinstance(topo.get(attr), str):
                            p.annotations.setdefault(ann, topo[attr])
                    self.topology(p)
                tmpl = L.mapping(s.get("template"), f"{sp}.template")
                if tmpl:
                    before = len(self.pods)
                    self.fill(key, role, int(s.get("count", 1)), tmpl, f"{sp}.template", prio, wpc)
                    for p in self.pods[before:]:
                        p.gang = gang
                        for attr, ann in (("required", KUEUE_REQUIRED), ("preferred", KUEUE_PREFERRED)):
                            if isinstance(topo.get(attr), str):
                                p.annotations.setdefault(ann, topo[attr])
                        self.topology(p)

    def podgroups(self) -> None:
        groups = {
            (_meta(it, f"items[{i}]"), i): it
            for i, it in enumerate(self.items)
            if it.get("kind") == "PodGroup"
        }
        for ((ns, name), i), pg in groups.items():
            path = f"items[{i}]"
            spec = L.mapping(pg.get("spec"), f"{path}.spec")
            members = sorted(self.have(("PodGroup", ns, name)), key=lambda p: (not p.running, p.name or ""))
            mm = spec.get("minMember", 1)
            if not isinstance(mm, int) or mm < 0:
                raise InputError(f"{path}.spec.minMember", "expected a non-negative integer")
            pc = self.class_value(spec.get("priorityClassName"), f"{path}.spec.priorityClassName")
            level, hard = self.network_topology(spec, path, f"{ns}/{name}")
            for k, p in enumerate(members):
                if k >= mm:
                    p.gang, p.role = False, "elastic"
                if pc is not None and p.priority == self.default:
                    p.priority = pc
                pcn = spec.get("priorityClassName")
                if isinstance(pcn, str) and pcn and pcn not in p.priority_classes:
                    p.priority_classes = (*p.priority_classes, pcn)
                if level is not None:
                    setattr(p, "required" if hard else "preferred", level)
            if len(members) < mm:
                self.warnings.append(
                    f"{path}: PodGroup {ns}/{name} wants minMember {mm} but only "
                    f"{len(members)} pod(s) exist; planning the existing pods"
                )

    def network_topology(self, spec: dict[str, Any], path: str, who: str) -> tuple[str | None, bool]:
        """The capplan level of a PodGroup's ``networkTopology`` and whether it is hard.

        ``highestTierName`` names a level (the ``tierName`` capplan's HyperNodes carry);
        ``highestTierAllowed: t`` is the t-th level above ``node``. A hard limit that maps to no
        level is an error; a soft one is dropped with a warning.
        """
        np_ = f"{path}.spec.networkTopology"
        net = L.mapping(spec.get("networkTopology"), np_)
        if not net:
            return None, False
        hard = net.get("mode", "hard") == "hard"
        name, tier = net.get("highestTierName"), net.get("highestTierAllowed")
        levels = self.order[:-1]
        if name is not None:
            field_, level = "highestTierName", str(name) if str(name) in levels else None
            known = f"levels: {', '.join(levels) or 'none (give --level-label)'}"
        elif tier is not None:
            field_ = "highestTierAllowed"
            ok = isinstance(tier, int) and not isinstance(tier, bool) and tier >= 1
            if ok and tier >= len(self.order):
                self.warnings.append(f"{np_}.{field_}: tier {tier} of PodGroup {who} is above every level; no limit")
                return None, hard
            level = self.order[-1 - tier] if ok else None
            known = f"tiers 1..{len(self.order) - 1} ({', '.join(reversed(levels)) or 'none'})"
        else:
            return None, hard
        if level is None:
            msg = f"PodGroup {who}: {field_} {name if name is not None else tier!r} maps to no capplan level ({known})"
            if hard:
                raise InputError(f"{np_}.{field_}", msg + "; add --level-label for it")
            self.warnings.append(f"{np_}.{field_}: {msg}; soft limit dropped")
        return level, hard

    def kueue_pod_groups(self) -> None:
        seen: set[Key] = set()
        for p in list(self.pods):
            if p.key[0] != "KueuePodGroup" or p.key in seen or KUEUE_GROUP_TOTAL not in p.annotations:
                continue
            seen.add(p.key)
            try:
                total = int(p.annotations[KUEUE_GROUP_TOTAL])
            except ValueError:
                raise InputError(
                    L.label_path(f"{p.path}.metadata.annotations", KUEUE_GROUP_TOTAL),
                    "expected an integer pod count",
                ) from None
            for _ in range(total - len(self.have(p.key))):
                self.pods.append(p.clone_virtual(p.path))


def collect_pods(data: Any, levels: Sequence[tuple[str, str]], warnings: list[str]) -> list[PodSpec]:
    """Read pods and the objects that group them from a Kubernetes List.

    ``levels`` are the ``(level, label key)`` pairs of ``--level-label``, outermost first; Kueue
    topology annotations name label keys, Volcano ``highestTierAllowed`` tier *t* means the
    *t*-th level above ``node``.
    """
    items = L.k8s_list(data, "pods")
    c = _Collector(items, levels, warnings)
    c.read_pods()
    c.jobs()
    c.kueue()
    c.podgroups()
    c.kueue_pod_groups()
    return c.pods
