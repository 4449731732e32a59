"""Pods from ``kubectl get pods -A -o json``: requests, GPU demand, priority, topology, node binding.

One :class:`PodSpec` per pod (or per replica a training job, PodGroup or Kueue Workload still
has to create, built from its template). :mod:`capplan.io.k8s.gangs` groups them into workloads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from capplan.io.k8s import labels as L
from capplan.io.k8s.mig import profile_from_resource
from capplan.io.k8s.quantity import MAX_DEVICES, count, parse_quantity
from capplan.model.errors import InputError
from capplan.model.problem import Toleration

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLA_ANNOTATION = "capplan.io/sla"
#: The label Kueue puts on a pod (or job) to name its WorkloadPriorityClass.
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PREEMPTIBLE_ANNOTATION = "capplan.io/preemptible"
#: Built-in PriorityClasses of every cluster.
SYSTEM_PRIORITIES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
#: Pods at or above this priority (system-critical) are never marked preemptible.
CRITICAL_PRIORITY = 1_000_000_000
_MIG = re.compile(r"^nvidia\.com/mig-(.+)$")
_AMD_MIXED = re.compile(r"^amd\.com/(spx|dpx|qpx|cpx)_nps\d$")


@dataclass(frozen=True)
class SlaPolicy:
    """Which pods are ``sla: guaranteed``: priority at or above ``priority``, or a class in ``classes``.

    ``classes`` names PriorityClasses (``spec.priorityClassName``) and Kueue WorkloadPriorityClasses (the
    ``kueue.x-k8s.io/priority-class`` label, a Workload's ``priorityClassRef``). The pod annotation
    ``capplan.io/sla`` overrides both. The default policy makes no pod guaranteed.
    """

    priority: int | None = None
    classes: frozenset[str] = frozenset()

    def guaranteed(self, priority: int, classes: tuple[str, ...]) -> bool:
        """Whether a pod of ``priority`` and priority class names ``classes`` is guaranteed."""
        return (self.priority is not None and priority >= self.priority) or any(c in self.classes for c in classes)


@dataclass(frozen=True)
class GpuAsk:
    """The raw GPU request of a pod: vendor resource and count, or a named slice."""

    kind: str  # "none" | "nvidia" | "amd" | "slice"
    count: int = 0
    profile: str | None = None


@dataclass
class PodSpec:
    """One pod (``name`` None: a replica its owner has not created yet)."""

    path: str
    namespace: str
    name: str | None
    node: str | None
    running: bool
    cpu_milli: int
    memory_mib: int
    gpu: GpuAsk
    priority: int
    labels: dict[str, str]
    annotations: dict[str, str]
    selector: dict[str, list[str]] = field(default_factory=dict)
    key: tuple[str, str, str] = ("Pod", "", "")
    role: str = ""
    gang: bool = False
    required: str | None = None
    preferred: str | None = None
    affinity_terms: list[dict[str, Any]] = field(default_factory=list)  # required nodeSelectorTerms as given
    priority_classes: tuple[str, ...] = ()  # PriorityClass and WorkloadPriorityClass names behind `priority`
    tolerations: tuple[Toleration, ...] = ()
    gates: tuple[str, ...] = ()  # spec.schedulingGates names
    uid: str | None = None
    controller: tuple[str, str] | None = None  # (kind, name) of the ownerReference with controller: true

    def clone_virtual(self, path: str) -> PodSpec:
        """A not-yet-created sibling with the same template."""
        return replace(self, path=path, name=None, node=None, running=False, selector=dict(self.selector))


def _requests(spec: dict[str, Any], path: str) -> dict[str, Fraction]:
    """Effective pod requests: max(sum over containers, each init container) plus overhead."""
    total: dict[str, Fraction] = {}
    init: dict[str, Fraction] = {}
    for key, acc, add in (("containers", total, True), ("initContainers", init, False)):
        conts = spec.get(key) or []
        if not isinstance(conts, list):
            raise InputError(f"{path}.{key}", "expected a list of containers")
        for j, c in enumerate(conts):
            res = L.mapping(
                L.mapping(c, f"{path}.{key}[{j}]").get("resources"), f"{path}.{key}[{j}].resources"
            )
            req = dict(L.mapping(res.get("limits"), f"{path}.{key}[{j}].resources.limits"))
            req.update(L.mapping(res.get("requests"), f"{path}.{key}[{j}].resources.requests"))
            for r, v in req.items():
                q = parse_quantity(v, f'{path}.{key}[{j}].resources.requests["{r}"]')
                acc[r] = acc.get(r, Fraction(0)) + q if add else max(acc.get(r, Fraction(0)), q)
    for r, q in init.items():
        total[r] = max(total.get(r, Fraction(0)), q)
    for r, v in L.mapping(spec.get("overhead"), f"{path}.overhead").items():
        total[r] = total.get(r, Fraction(0)) + parse_quantity(v, f'{path}.overhead["{r}"]')
    return total


def gpu_ask(req: Mapping[str, Fraction], path: str) -> GpuAsk:
    """The GPU request among the pod's resources (at most one GPU resource per pod)."""
    asks: list[tuple[str, GpuAsk]] = []
    for r, q in req.items():
        if q == 0:
            continue
        rp = f'{path}.containers[*].resources.requests["{r}"]'
        if r in (L.NVIDIA_GPU, L.AMD_GPU):
            n = count(str(q), rp, MAX_DEVICES)
            asks.append((r, GpuAsk(kind="nvidia" if r == L.NVIDIA_GPU else "amd", count=n)))
        elif (m := _MIG.match(r)) or _AMD_MIXED.match(r):
            prof = profile_from_resource(m.group(1)) if m else r.split("/")[1].split("_")[0].upper()
            if prof is None:
                raise InputError(
                    rp, f"cannot read a MIG profile from {r!r} (expected nvidia.com/mig-1g.10gb)"
                )
            if q != 1:
                raise InputError(
                    rp,
                    "capplan models one MIG instance / partition per pod; split the pod or "
                    "request whole GPUs",
                )
            asks.append((r, GpuAsk(kind="slice", count=1, profile=prof)))
    if len(asks) > 1:
        raise InputError(
            path, f"a pod may ask for one kind of GPU resource, not {', '.join(r for r, _ in asks)}"
        )
    return asks[0][1] if asks else GpuAsk(kind="none")


_GPU_KEYS = (L.GPU_PRODUCT, *L.AMD_PRODUCT, *L.AMD_PARTITION_KEYS)


def node_selector_terms(spec: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The pod's required node-affinity ``nodeSelectorTerms`` as written (empty if none)."""
    aff = L.mapping(
        L.mapping(spec.get("affinity"), f"{path}.affinity").get("nodeAffinity"), f"{path}.affinity"
    )
    req = L.mapping(aff.get("requiredDuringSchedulingIgnoredDuringExecution"), f"{path}.affinity")
    terms = req.get("nodeSelectorTerms") or []
    return [t for t in terms if isinstance(t, dict)] if isinstance(terms, list) else []


def _selector(spec: dict[str, Any], path: str, warnings: list[str]) -> dict[str, list[str]]:
    """Node-label constraints: nodeSelector plus required node-affinity ``In`` terms (single term only).

    A GPU-label constraint capplan cannot read (several terms, another operator) is dropped with a warning.
    """
    out = {k: [v] for k, v in L.string_map(spec.get("nodeSelector"), f"{path}.nodeSelector").items()}
    terms = node_selector_terms(spec, path)
    exprs = [e for t in terms for e in (t.get("matchExpressions") or []) if isinstance(e, dict)]
    gpu_exprs = [e for e in exprs if e.get("key") in _GPU_KEYS]
    if len(terms) > 1 and gpu_exprs:
        warnings.append(
            f"{path}.affinity: {len(terms)} alternative node-affinity terms on GPU labels; capplan reads one "
            "term only, so the GPU constraint is dropped"
        )
        return out
    for e in exprs:
        if e.get("operator") == "In" and isinstance(e.get("values"), list):
            out[str(e.get("key"))] = [str(v) for v in e["values"]]
        elif e in gpu_exprs:
            warnings.append(
                f"{path}.affinity: operator {e.get('operator')} on {e.get('key')} is not modelled; dropped"
            )
    return out


def tolerations_of(spec: dict[str, Any], path: str, warnings: list[str]) -> tuple[Toleration, ...]:
    """``spec.tolerations`` in Kubernetes' matching terms; ``tolerationSeconds`` is dropped (the scheduler's
    filter ignores it too) and an operator other than Exists/Equal is dropped with a warning (it tolerates
    nothing, as upstream's matching says for an unknown operator)."""
    raw = spec.get("tolerations") or []
    if not isinstance(raw, list):
        raise InputError(f"{path}.tolerations", "expected a list of {key, operator, value, effect}")
    out = []
    for j, t in enumerate(raw):
        tp = f"{path}.tolerations[{j}]"
        t = L.mapping(t, tp)
        op = t.get("operator") or "Equal"
        if op not in ("Exists", "Equal"):
            warnings.append(f"{tp}.operator: {op!r} is not modelled; the toleration is dropped")
            continue
        effect = t.get("effect") or ""
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise InputError(f"{tp}.effect", f"expected NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}")
        try:
            out.append(Toleration(key=str(t.get("key") or ""), operator=op, value=str(t.get("value") or ""),
                                  effect=effect))
        except ValidationError as exc:
            raise InputError(tp, exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    return tuple(out)


def priority_of(
    spec: dict[str, Any], classes: Mapping[str, int], default: int, path: str, warnings: list[str]
) -> int:
    """``spec.priority`` if set, else the value of ``spec.priorityClassName``, else the global default."""
    p = spec.get("priority")
    if isinstance(p, int) and not isinstance(p, bool):
        return p
    pc = spec.get("priorityClassName")
    if isinstance(pc, str) and pc:
        if pc in classes:
            return classes[pc]
        if pc in SYSTEM_PRIORITIES:
            return SYSTEM_PRIORITIES[pc]
        warnings.append(
            f"{path}.priorityClassName: PriorityClass {pc!r} is not in the input; priority "
            f"{default} used (add `kubectl get priorityclasses -o json` items to the pods file)"
        )
    return default


def read_pod(
    item: dict[str, Any],
    path: str,
    classes: Mapping[str, int],
    default_priority: int,
    warnings: list[str],
    template: bool = False,
) -> PodSpec:
    """Read one Pod object (or a pod template with ``template=True``)."""
    meta = L.mapping(item.get("metadata"), f"{path}.metadata")
    spec = L.mapping(item.get("spec"), f"{path}.spec")
    status = L.mapping(item.get("status"), f"{path}.status")
    ns = str(meta.get("namespace") or "default")
    req = _requests(spec, f"{path}.spec")
    for r in sorted(req):
        if req[r] and r.startswith(("nvidia.com/", "amd.com/")) and not (
            r in (L.NVIDIA_GPU, L.AMD_GPU) or _MIG.match(r) or _AMD_MIXED.match(r)
        ):
            warnings.append(
                f'{path}.spec.containers[*].resources.requests["{r}"]: not modelled (shared or renamed device '
                "resource); dropped, so the pod is planned without it"
            )
    node = spec.get("nodeName") if not template else None
    phase = status.get("phase", "Pending")
    labels = L.string_map(meta.get("labels"), f"{path}.metadata.labels")
    gates = tuple(
        str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, dict) and g.get("name")
    )
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller") is True]
    pc = spec.get("priorityClassName")
    classes_named = tuple(
        c for c in (pc if isinstance(pc, str) else None, labels.get(KUEUE_PRIORITY_LABEL)) if c
    )
    return PodSpec(
        path=path,
        namespace=ns,
        name=None if template else str(meta.get("name") or ""),
        node=node if isinstance(node, str) and node else None,
        running=bool(node) and phase in ("Running", "Pending"),
        cpu_milli=int(-(-req.get("cpu", Fraction(0)) * 1000 // 1)),
        memory_mib=int(-(-req.get("memory", Fraction(0)) / 2**20 // 1)),
        gpu=gpu_ask(req, f"{path}.spec"),
        priority=priority_of(spec, classes, default_priority, f"{path}.spec", warnings),
        labels=labels,
        annotations=L.string_map(meta.get("annotations"), f"{path}.metadata.annotations"),
        selector=_selector(spec, f"{path}.spec", warnings),
        affinity_terms=node_selector_terms(spec, f"{path}.spec"),
        priority_classes=classes_named,
        tolerations=tolerations_of(spec, f"{path}.spec", warnings),
        gates=() if template else gates,
        uid=str(meta["uid"]) if meta.get("uid") and not template else None,
        controller=(str(refs[0].get("kind")), str(refs[0].get("name"))) if refs and not template else None,
    )


def priority_classes(items: list[dict[str, Any]]) -> tuple[dict[str, int], int]:
    """PriorityClass values by name and the global default value (0 if none)."""
    classes: dict[str, int] = {}
    default = 0
    for i, it in enumerate(items):
        if it.get("kind") == "PriorityClass":
            name = L.mapping(it.get("metadata"), f"items[{i}].metadata").get("name")
            val = it.get("value")
            if not isinstance(val, int) or isinstance(val, bool):
                raise InputError(f"items[{i}].value", "a PriorityClass needs an integer value")
            classes[str(name)] = val
            if it.get("globalDefault") is True:
                default = val
    return classes, default


def finished(item: dict[str, Any]) -> bool:
    """True for a job/workload whose status says it succeeded, failed or finished."""
    conds = L.mapping(item.get("status"), "status").get("conditions") or []
    return any(
        isinstance(c, dict)
        and c.get("type") in ("Succeeded", "Failed", "Finished", "Complete")
        and c.get("status") == "True"
        for c in conds
    )
