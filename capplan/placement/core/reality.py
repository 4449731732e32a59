"""Running state is reality: running replicas that break a rule the planner enforces for new placements.

A cluster may run a gang across two GPU models, tenants sharing a GPU despite isolation, or replicas outside
the one domain their ``topology.required`` asks for. Such a state is accepted (the scenario loads), and the
replicas involved stay where they run: :func:`planning_problem` pins their workloads (neither evicted nor
migrated) and lifts the group rule they already break for that workload alone (``mixed_models``, the required
level), which binds no replica of it while every running one stays. Isolation is not lifted: the GPU or node
that breaks it takes no newcomer (the occupancy state and the placement model see its tenants as mixed).
:func:`capplan.placement.planner.solve` and the time engine plan the returned problem and validate against the
original one; the independent validator accepts exactly these breaks (``capplan.model.validate_rules``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload, untolerated


@dataclass(frozen=True)
class Break:
    """One rule the running state breaks: the workloads involved and a sentence naming them."""

    workloads: tuple[str, ...]
    rule: str  # "gang", "one_model", "topology", "isolation" or "taint" (keys of capplan.model.families.FAMILIES)
    message: str


def _gpu_kind(w: Workload) -> bool:
    return w.gpus is not None or w.mig is not None or w.gpu_fraction is not None


def running_breaks(p: Problem) -> list[Break]:
    """Every rule for new placements that the running state of ``p`` breaks, in a stable order."""
    if not p.running:
        return []
    cl = p.cluster
    nodes = {n.name: n for n in cl.nodes}
    by_w: dict[str, list[Assignment]] = defaultdict(list)
    for a in p.running:
        by_w[a.workload].append(a)
    out: list[Break] = []
    for w in p.workloads:
        run = [a for a in by_w.get(w.name, []) if a.node in nodes]
        if not run:
            continue
        if w.is_gang and len(run) < w.replicas:
            out.append(Break((w.name,), "gang",
                             f"running gang {w.name} has {len(run)} of {w.replicas} replicas running; they stay "
                             "unless evicted whole, and the others are placed only all together"))
        models = sorted({str(nodes[a.node].gpu_model) for a in run})
        if w.kind == "training" and not w.mixed_models and _gpu_kind(w) and len(models) > 1:
            out.append(Break((w.name,), "one_model",
                             f"running gang {w.name} spans GPU models {models}; it stays as it runs "
                             "(new placements keep one model per gang)"))
        lvl = w.topology.required
        if lvl:
            doms = sorted({cl.domain_of(nodes[a.node], lvl) for a in run})
            if len(doms) > 1:
                out.append(Break((w.name,), "topology",
                                 f"running replicas of {w.name} span {lvl}s {doms} although it requires one "
                                 f"{lvl}; they stay as they run"))
    out.extend(_isolation_breaks(p))
    out.extend(_taint_breaks(p))
    return out


def _taint_breaks(p: Problem) -> list[Break]:
    """Running replicas on nodes with a hard taint they do not tolerate (the taint came later): they stay, the
    rule binds new replicas only; nothing is lifted, as the occupancy state and the validator exempt running ones."""
    nodes = {n.name: n for n in p.cluster.nodes if n.taints}
    out: list[Break] = []
    for a in p.running:
        node = nodes.get(a.node)
        if node is None or a.workload not in p.workload_index:
            continue
        bad = untolerated(node.taints, p.workload(a.workload).tolerations)
        if bad:
            out.append(Break((a.workload,), "taint",
                             f"running replica {a.workload}[{a.replica}] on {node.name} does not tolerate taint "
                             f"{bad[0]}; it stays as it runs (new replicas never land there)"))
    return out


def _isolation_breaks(p: Problem) -> list[Break]:
    works = {w.name: w for w in p.workloads}
    per_gpu: dict[tuple[str, int], set[str]] = defaultdict(set)
    per_node: dict[str, set[str]] = defaultdict(set)
    for a in p.running:
        if a.workload not in works:
            continue
        per_node[a.node].add(a.workload)
        for g in a.gpus:
            per_gpu[(a.node, g)].add(a.workload)
    out: list[Break] = []
    for (node, g), names in sorted(per_gpu.items()):
        ws = [works[n] for n in sorted(names)]
        if len({w.tenant for w in ws}) > 1 and any(w.isolation == "tenant" for w in ws):
            out.append(Break(tuple(sorted(names)), "isolation",
                             f"running replicas of {', '.join(sorted(names))} share GPU {g} of {node} against "
                             "tenant isolation; they stay, and the GPU takes no new replica"))
    for node, names in sorted(per_node.items()):
        ws = [works[n] for n in sorted(names)]
        if len({w.tenant for w in ws}) > 1 and any(w.isolation == "node" for w in ws):
            out.append(Break(tuple(sorted(names)), "isolation",
                             f"running replicas of {', '.join(sorted(names))} share node {node} against node "
                             "isolation; they stay, and the node takes no new replica"))
    return out


def planning_problem(p: Problem) -> tuple[Problem, list[Break]]:
    """``p`` as the strategies plan it, and the breaks of its running state (``p`` itself when there are none).

    The workloads of a break are pinned (not migratable; not preemptible either, except a gang spanning
    models, which is evicted whole or not at all); a gang spanning models gets
    ``mixed_models`` and a workload spanning its required domains loses ``topology.required``, for that
    workload only, as the rule binds nothing of it while its running replicas stay.
    """
    breaks = running_breaks(p)
    if not breaks:
        return p, []
    changes: dict[str, dict[str, object]] = defaultdict(dict)
    for b in breaks:
        if b.rule == "taint":  # binds new replicas only: nothing to pin or lift
            continue
        for name in b.workloads:
            changes[name]["migratable"] = False
            if b.rule not in ("one_model", "gang"):  # a gang is evicted whole or not at all: the rule holds
                changes[name]["preemptible"] = False
        if b.rule == "one_model":
            changes[b.workloads[0]]["mixed_models"] = True
        elif b.rule == "topology":
            w = p.workload(b.workloads[0])
            changes[w.name]["topology"] = w.topology.model_copy(update={"required": None})
    works = tuple(w.model_copy(update=changes[w.name]) if w.name in changes else w for w in p.workloads)
    return p.replace(workloads=works), breaks
