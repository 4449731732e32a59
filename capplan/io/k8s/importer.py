"""Join nodes and pods into a :class:`~capplan.model.problem.Problem` (``capplan import kubernetes``).

Pods of one owner (or gang) with identical requests become one workload with replicas; the
namespace is the tenant. Running pods become ``running:`` entries. Kubernetes does not say which
GPU (or MIG instance) a pod holds, so the importer chooses a valid packing: pods are placed on
their node, largest GPU demand first, with the same best-fit rules the greedy planner uses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from capplan.io.k8s import labels as L
from capplan.io.k8s.gangs import collect_pods
from capplan.io.k8s.mig import profile_name
from capplan.io.k8s.nodes import NodeFacts, import_nodes
from capplan.io.k8s.pods import CRITICAL_PRIORITY, PREEMPTIBLE_ANNOTATION, SLA_ANNOTATION, PodSpec, SlaPolicy
from capplan.model.catalog import Catalog
from capplan.model.errors import InputError
from capplan.model.plan import Assignment, input_error_from
from capplan.model.problem import Cluster, Problem, untolerated
from capplan.placement.core.state import ClusterState

META_FORMAT = "capplan-k8s/v1"


@dataclass
class ImportResult:
    """The imported problem, the metadata exports need (pod names, labels) and warnings."""

    problem: Problem
    meta: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    #: Workloads whose SLA a ``capplan.io/sla`` pod annotation set (a priority mapping leaves them alone).
    sla_annotated: frozenset[str] = frozenset()


class _Demands:
    """Turn a pod's GPU request into workload fields, knowing the nodes and the catalog."""

    def __init__(self, cluster: Cluster, facts: Mapping[str, NodeFacts], catalog: Catalog) -> None:
        self.cluster, self.facts, self.catalog = cluster, facts, catalog
        present = {n.gpu_model for n in cluster.nodes if n.gpu_model}
        self.vendor_models = {
            v: [m.name for m in catalog.models if m.vendor == v and m.name in present]
            or [m.name for m in catalog.models if m.vendor == v]
            for v in ("nvidia", "amd")
        }

    def _with_profile(self, vendor: str, prof: str, path: str) -> list[str]:
        models = [
            m for m in self.vendor_models[vendor] if prof in {p.name for p in self.catalog.get(m).profiles}
        ]
        if not models:
            models = [
                m.name
                for m in self.catalog.models
                if m.vendor == vendor and prof in {p.name for p in m.profiles}
            ]
        if not models:
            raise InputError(path, f"no {vendor} GPU in the catalog has MIG profile/partition {prof!r}")
        return models

    def fields(self, p: PodSpec) -> dict[str, Any]:
        ask = p.gpu
        if ask.kind == "none":
            return {}
        sp = f"{p.path}.spec.nodeSelector"
        if ask.kind == "slice":
            assert ask.profile is not None
            vendor = "amd" if ask.profile.isupper() else "nvidia"
            return {
                "mig": ask.profile,
                "gpu_models": self._with_profile(vendor, ask.profile, f"{p.path}.spec"),
            }
        facts = self.facts.get(p.node) if p.node else None
        if facts is not None and facts.single_profile and facts.vendor == ask.kind:
            if ask.count != 1:
                raise InputError(
                    f"{p.path}.spec",
                    f"node {p.node} exposes {facts.single_profile} slices as "
                    f"{ask.kind}.com/gpu; capplan models one slice per pod, not {ask.count}",
                )
            return {
                "mig": facts.single_profile,
                "gpu_models": self._with_profile(ask.kind, facts.single_profile, f"{p.path}.spec"),
                **({"mig_strategy": "single"} if facts.mig_strategy == "single" else {}),
            }
        if ask.kind == "nvidia" and L.GPU_PRODUCT in p.selector:
            vals = p.selector[L.GPU_PRODUCT]
            parts = [v.partition("-MIG-") for v in vals]
            models = sorted(
                {L.resolve_model(b, self.catalog, L.label_path(sp, L.GPU_PRODUCT)).name for b, _, _ in parts}
            )
            profs = {profile_name(s) for _, _, s in parts}
            if len(profs) == 1 and (prof := profs.pop()):
                return {"mig": prof, "gpu_models": models, "mig_strategy": "single"}
            return {"gpus": ask.count, "gpu_models": models}
        if ask.kind == "amd":
            key = L.first_label(p.selector, L.AMD_PARTITION_KEYS)
            part = (p.selector[key][0] if key else "").split("_")[0].upper()
            if part and part != "SPX":
                return {"mig": part, "gpu_models": self._with_profile("amd", part, f"{p.path}.spec")}
            for key in L.AMD_PRODUCT:
                if key in p.selector:
                    return {
                        "gpus": ask.count,
                        "gpu_models": sorted(
                            {
                                L.resolve_model(v, self.catalog, L.label_path(sp, key)).name
                                for v in p.selector[key]
                            }
                        ),
                    }
        return {"gpus": ask.count, "gpu_models": self.vendor_models[ask.kind]}


def _policy(p: PodSpec, sla_policy: SlaPolicy) -> tuple[str, bool]:
    """(sla, preemptible) of a pod: the ``capplan.io/sla`` annotation, else ``sla_policy``."""
    default = "guaranteed" if sla_policy.guaranteed(p.priority, p.priority_classes) else "best-effort"
    sla = p.annotations.get(SLA_ANNOTATION, default)
    if sla not in ("guaranteed", "best-effort"):
        raise InputError(
            L.label_path(f"{p.path}.metadata.annotations", SLA_ANNOTATION),
            "expected guaranteed or best-effort",
        )
    pre = p.annotations.get(PREEMPTIBLE_ANNOTATION)
    if pre not in (None, "true", "false"):
        raise InputError(
            L.label_path(f"{p.path}.metadata.annotations", PREEMPTIBLE_ANNOTATION),
            'expected "true" or "false"',
        )
    return sla, (p.priority < CRITICAL_PRIORITY) if pre is None else pre == "true"


def _group(
    pods: list[PodSpec], demands: _Demands, warnings: list[str], sla_policy: SlaPolicy
) -> tuple[list[dict[str, Any]], list[list[PodSpec]]]:
    groups: dict[tuple[Any, ...], list[PodSpec]] = {}
    specs: dict[tuple[Any, ...], dict[str, Any]] = {}
    for p in pods:
        f = demands.fields(p)
        sla, pre = _policy(p, sla_policy)
        gm = f.pop("gpu_models", None)
        # Pods of one gang with the same shape form one workload whatever their role (master/worker).
        sig = (
            p.key,
            "" if p.gang else p.role,
            p.gang,
            p.cpu_milli,
            p.memory_mib,
            tuple(sorted(f.items())),
            tuple(gm) if gm else None,
            p.required,
            p.preferred,
            p.priority,
            sla,
            pre,
            p.tolerations,
        )
        if sig not in groups:
            groups[sig] = []
            topo = {k: v for k, v in (("required", p.required), ("preferred", p.preferred)) if v}
            specs[sig] = {
                "kind": "training" if p.gang else "inference",
                **f,
                **({"gpu_models": list(gm)} if gm else {}),
                "cpu": p.cpu_milli / 1000,
                "memory_gib": p.memory_mib / 1024,
                "tenant": p.namespace,
                "priority": p.priority,
                "sla": sla,
                "preemptible": pre,
                **({"topology": topo} if topo else {}),
                **({"tolerations": p.tolerations} if p.tolerations else {}),
            }
        groups[sig].append(p)
    used: set[str] = set()
    shapes: dict[tuple[Any, ...], int] = {}
    workloads, members = [], []
    split = {k for k, n in Counter(sig[0] for sig in groups if sig[2]).items() if n > 1}
    for key in sorted(split):
        warnings.append(
            f"gang {key[0]} {key[1]}/{key[2]} has pods of different shapes; capplan plans each "
            "shape as its own all-or-nothing gang"
        )
    for sig, ps in groups.items():
        key, role = sig[0], sig[1]
        shapes[(key, role)] = shapes.get((key, role), 0) + 1
        base = f"{key[1]}/{key[2]}" + (f"/{role}" if role else "")
        name = base if shapes[(key, role)] == 1 else f"{base}-{shapes[(key, role)]}"
        k = 2
        while name in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name)
        ps.sort(key=lambda p: (not p.running, p.name is None, p.name or ""))
        workloads.append({"name": name, "replicas": len(ps), **specs[sig]})
        members.append(ps)
    return workloads, members


def _running(
    problem: Problem, today: Cluster, members: list[list[PodSpec]], warnings: list[str]
) -> list[Assignment]:
    """Concrete GPUs / MIG instances for running pods, packed on today's layouts (MIG-off GPUs whole)."""
    st = ClusterState(problem.replace(cluster=today))
    todo = []
    for w, ps in zip(problem.workloads, members, strict=True):
        for r, p in enumerate(ps):
            if p.running and p.node is not None:
                todo.append((w, r, p))
    todo.sort(key=lambda t: (-(t[0].gpus or 0), t[0].mig is None, -problem.demand_units(t[0]), t[2].path))
    out = []
    for w, r, p in todo:
        i = problem.cluster.node_index[p.node]  # type: ignore[index]
        d = problem.demand_on(w, problem.cluster.nodes[i])
        fit = st.fit(w, d, i) if d is not None else "model"
        if isinstance(fit, str):
            warnings.append(
                f"pod {p.namespace}/{p.name} on {p.node} does not fit there by the catalog "
                f"({fit}); imported as pending"
            )
            continue
        st.apply(w, d, fit)  # type: ignore[arg-type]
        out.append(st.assignment(w, r, fit))
        node = problem.cluster.nodes[i]
        if problem.can_host(w, node) is None:
            bad = untolerated(node.taints, w.tolerations)[0]
            warnings.append(
                f"pod {p.namespace}/{p.name} runs on {p.node} without tolerating its taint {bad}; kept as running "
                "state (new pods of its workload never land there)"
            )
    return sorted(out, key=lambda a: (a.workload, a.replica))


def import_kubernetes(
    nodes_data: Any,
    pods_data: Any | None,
    level_labels: Sequence[tuple[str, str]],
    catalog: Catalog,
    mig_configs: Mapping[str, list[dict[str, Any]]] | None = None,
    keep_mig: bool = True,
    name: str = "kubernetes",
    sla_policy: SlaPolicy | None = None,
) -> ImportResult:
    """Build a problem from ``kubectl get nodes -o json`` and (optionally) ``kubectl get pods -A -o json``.

    Parameters
    ----------
    nodes_data, pods_data
        Parsed JSON Lists. The pods List may also hold PriorityClass, Kubeflow job, TrainJob,
        Volcano PodGroup and Kueue Workload objects.
    level_labels
        ``(level, label key)`` pairs, outermost first.
    catalog
        GPU catalog.
    mig_configs
        See :func:`capplan.io.k8s.nodes.import_nodes`.
    keep_mig
        Every GPU's mode today (MIG layouts, ``whole`` for MIG off) is recorded either way; with True (default)
        the problem keeps them (``reconfigure: forbidden``), with False a plan may change them at their cost
        (``reconfigure: allowed``: each changed GPU counts in ``metrics.gpus_reconfigured``).
    name
        Cluster name.
    sla_policy
        Which pods are ``sla: guaranteed`` by priority or priority class (default: none; the pod annotation
        ``capplan.io/sla`` overrides it either way).

    Raises
    ------
    InputError
        Malformed input, naming the field (``items[3].metadata.labels["nvidia.com/gpu.product"]``).
    """
    nodes = import_nodes(nodes_data, level_labels, catalog, mig_configs, name)
    warnings = list(nodes.warnings)
    pods = collect_pods(pods_data, level_labels, warnings) if pods_data is not None else []
    known = nodes.cluster.node_index
    for p in pods:
        if p.running and p.node not in known:
            warnings.append(
                f"pod {p.namespace}/{p.name} runs on node {p.node!r}, which is not in the nodes "
                "file; left out"
            )
    pods = [p for p in pods if not (p.running and p.node not in known)]
    workloads, members = _group(
        pods, _Demands(nodes.cluster, nodes.facts, catalog), warnings, sla_policy or SlaPolicy()
    )
    try:
        problem = Problem.model_validate(
            {"cluster": nodes.cluster, "workloads": workloads, "catalog": catalog,
             "reconfigure": "forbidden" if keep_mig else "allowed"}
        )
    except ValidationError as exc:
        raise input_error_from(exc, "workloads") from None
    problem = problem.replace(running=tuple(_running(problem, nodes.today, members, warnings)))
    meta = {
        "format": META_FORMAT,
        "levels": [list(x) for x in level_labels],
        "nodes": {
            n: {"product": f.product, "vendor": f.vendor, **({"selector": f.selector} if f.selector else {})}
            for n, f in nodes.facts.items()
        },
        "workloads": {
            w.name: [
                {
                    "namespace": p.namespace,
                    "pod": p.name,
                    "owner_kind": p.key[0],
                    "owner": p.key[2],
                    "role": p.role,
                    **({"uid": p.uid} if p.uid else {}),
                    **({"node_name": p.node} if p.node else {}),
                    **({"gates": list(p.gates)} if p.gates else {}),
                    **({"controller": {"kind": p.controller[0], "name": p.controller[1]}} if p.controller else {}),
                    **({"node_selector_terms": p.affinity_terms} if p.affinity_terms else {}),
                }
                for p in ps
            ]
            for w, ps in zip(problem.workloads, members, strict=True)
        },
    }
    annotated = frozenset(
        w.name for w, ps in zip(problem.workloads, members, strict=True)
        if any(SLA_ANNOTATION in p.annotations for p in ps)
    )
    return ImportResult(problem=problem, meta=meta, warnings=warnings, sla_annotated=annotated)
