"""Sub-problems: a problem restricted to some nodes, with the replicas that stay fixed as its running state.

Large-neighbourhood search, region repair and decomposition all solve such a restriction and map its
replicas back. This module is the one place that builds them, and :func:`lex_key` is the one way plans
are compared lexicographically (guaranteed replicas first, then per priority, highest first).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence

from capplan.model.plan import Assignment
from capplan.model.problem import Cluster, Domain, Node, Problem, Workload
from capplan.placement.core.summary import capacity_key, placed_units

Key = tuple[str, int]
PowerShare = Callable[[Domain], int | None]
"""The power budget a sub-problem keeps for one of its domains (``None``: unlimited)."""


def lex_key(p: Problem, assignments: Sequence[Assignment]) -> tuple[int, ...]:
    """Guaranteed replicas placed, then (placed value, replicas) per priority, highest first, then
    least capacity held (GPU units held, CPU-only replicas on GPU nodes; negated: larger is better)."""
    g = sum(1 for a in assignments if p.workload(a.workload).sla == "guaranteed")
    units = placed_units(p, list(assignments))
    reps: dict[int, int] = defaultdict(int)
    for a in assignments:
        reps[p.workload(a.workload).priority] += 1
    held, cpu_on_gpu = capacity_key(p, assignments)
    return (g, *[x for q in p.priorities for x in (units[q], reps[q])], -held, -cpu_on_gpu)


def power_minus_busy(p: Problem, assignments: Sequence[Assignment], nodes: Collection[str]) -> PowerShare:
    """Budgets less the draw of the busy GPUs outside ``nodes`` (exact for a neighbourhood of one plan)."""
    cl = p.cluster
    draw: dict[str, int] = defaultdict(int)
    busy = {(a.node, g) for a in assignments if a.node not in nodes for g in a.gpus}
    for node, _ in busy:
        n = cl.nodes[cl.node_index[node]]
        tdp = p.catalog.get(n.gpu_model).tdp_w if n.gpu_model else 0
        for d in n.path:
            draw[d] += tdp or 0
    return lambda d: None if d.power_w is None else max(0, d.power_w - draw[d.name])


def power_by_gpu_share(p: Problem, nodes: Collection[str]) -> PowerShare:
    """Budgets shared in proportion to GPUs (parts solved independently never exceed a budget together)."""
    gpus_in: dict[str, int] = defaultdict(int)
    gpus_all: dict[str, int] = defaultdict(int)
    for n in p.cluster.nodes:
        for d in n.path:
            gpus_all[d] += n.gpus
            if n.name in nodes:
                gpus_in[d] += n.gpus
    return lambda d: None if d.power_w is None else (d.power_w * gpus_in[d.name]) // max(1, gpus_all[d.name])


def restrict(p: Problem, nodes: Sequence[Node], free: Mapping[str, list[int]],
             fixed: Mapping[str, list[Assignment]], power: PowerShare) -> tuple[Problem, dict[Key, Key]]:
    """``p`` on ``nodes`` only: ``fixed`` replicas become running, ``free`` ones are to place.

    Returns the sub-problem and the map from its replica keys to the original ones (a workload's fixed
    replicas come first, then its free ones in the order given).
    """
    cl = p.cluster
    used = {d for n in nodes for d in n.path}
    doms = tuple(Domain(level=d.level, name=d.name, parent=d.parent, power_w=power(d))
                 for d in cl.domains if d.name in used)
    works: list[Workload] = []
    running: list[Assignment] = []
    back: dict[Key, Key] = {}
    for name in sorted(set(free) | set(fixed), key=p.workload_index.__getitem__):
        w = p.workload(name)
        ids = [a.replica for a in fixed.get(name, [])] + list(free.get(name, []))
        for j, r in enumerate(ids):
            back[(name, j)] = (name, r)
        running += [a.model_copy(update={"replica": j}) for j, a in enumerate(fixed.get(name, []))]
        works.append(w.model_copy(update={"replicas": len(ids)}))
    names = {n.name for n in nodes}
    flavors = tuple(f if f.nodes is None else f.model_copy(update={"nodes": tuple(x for x in f.nodes if x in names)})
                    for f in p.flavors)
    sub = p.replace(cluster=Cluster(name=cl.name, levels=cl.levels, domains=doms, nodes=tuple(nodes)),
                    workloads=tuple(works), running=tuple(running), flavors=flavors)
    return sub, back


def neighbourhood(p: Problem, assignments: Sequence[Assignment], nodes: set[str],
                  offer: Sequence[tuple[Workload, list[int]]]) -> tuple[Problem, dict[Key, Key]]:
    """The sub-problem on ``nodes`` of a plan: their replicas (free or fixed) plus ``offer`` (workload, replicas).

    A replica stays fixed when it is running, or when its gang or required-topology workload also has
    replicas outside ``nodes``, or when its workload is in a ClusterQueue (its quota is charged outside too);
    offered workloads tied to a domain outside, or in a ClusterQueue, are left out. Power budgets keep what
    the busy GPUs outside do not draw.
    """
    running_keys = {a.key for a in p.running}
    by_w: dict[str, list[Assignment]] = defaultdict(list)
    for a in assignments:
        by_w[a.workload].append(a)
    free: dict[str, list[int]] = defaultdict(list)
    fixed: dict[str, list[Assignment]] = defaultdict(list)
    for name, ass in by_w.items():
        inside = [a for a in ass if a.node in nodes]
        if not inside:
            continue
        w = p.workload(name)
        tied = (w.is_gang or w.topology.required) and len(inside) < len(ass)
        queued = w.queue is not None and bool(p.queues)  # its quota is shared with replicas outside: keep it
        if tied or queued or any(a.key in running_keys for a in inside):
            fixed[name] = inside
        else:
            free[name] = [a.replica for a in inside]
    for w, reps in offer:
        outside = any(a.node not in nodes for a in by_w.get(w.name, ()))
        if (w.is_gang or w.topology.required) and outside:
            continue  # its other replicas pin the domain; the sub-problem cannot see them
        if w.queue is not None and p.queues:
            continue  # its ClusterQueue's quota is charged outside the neighbourhood too
        if w.name not in fixed:
            free[w.name] = free.get(w.name, []) + reps
    sorted_free = {k: sorted(v) for k, v in free.items()}
    sub_nodes = [n for n in p.cluster.nodes if n.name in nodes]
    return restrict(p, sub_nodes, sorted_free, fixed, power_minus_busy(p, assignments, nodes))
