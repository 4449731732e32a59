"""Hot-spare nodes for gangs with ``checkpoint``, and the plan's goodput rows: one step for every strategy.

Spares are held right after their gang's priority: the strategy plans the problem; for the highest
priority with a gang asking for spares, each such gang placed in that plan gets its spare nodes (whole,
free nodes of its GPU model, inside the domain of its ``topology.required`` level, anywhere without one);
then the work of that priority and above is pinned where it is (as running, neither movable nor
evictable), the spare nodes leave the cluster, and the strategy plans again, for the next priority
with spares and finally for the rest. Higher-priority work is never displaced (it was placed before
the spares were chosen, and stays); lower priorities never see a spare. A node is a candidate only if
the stage's plan puts no work of the gang's priority or above on it and nothing runs on it.

The cost is one more solve per distinct priority with spares (each stage gets an even share of the
time left of the run's deadline). Without gangs asking for spares the strategy runs once, as before.
See docs/concepts.md (Goodput).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from capplan.model.errors import InputError
from capplan.model.interruptions import gang_goodput, wanted_spares
from capplan.model.plan import (
    Assignment,
    Eviction,
    GoodputRow,
    Migration,
    Plan,
    Unplaced,
    lexicographic_gap,
    priority_gaps,
)
from capplan.model.problem import Cluster, Node, Problem, Workload
from capplan.model.units import UNITS_PER_GPU, units_to_gpus
from capplan.placement.core.options import PlanOptions, Strategy
from capplan.placement.core.summary import metrics, placed_units

log = logging.getLogger(__name__)
#: The least time a stage is given, however little is left (it then returns its fastest plan).
MIN_STAGE_SECONDS = 0.05


def plan_with_spares(p: Problem, fn: Strategy, options: PlanOptions) -> Plan:
    """Run strategy ``fn`` on ``p`` holding the spare nodes its gangs ask for; add the goodput rows.

    Falls back to the plan without spares (``metrics.spares_warning``) when the stages cannot be told as one
    plan (a replica both moved and evicted; part of a gang evicted).
    """
    levels = sorted({w.priority for w in p.workloads if w.checkpoint is not None and w.spares != 0}, reverse=True)
    if not levels:
        return _with_rows(p, fn(p, options), {}, {})
    clock, stages = options.clock(), len(levels) + 1
    cur = p
    held: dict[str, list[str]] = {}
    carried: tuple[list[Eviction], list[Migration]] = ([], [])
    short: dict[str, int] = {}
    for k, prio in enumerate(levels):  # each stage gets an even share of what is left
        plan = fn(cur, options.within(clock.share(1.0 / (stages - k)).at_least(MIN_STAGE_SECONDS)))
        for w in cur.workloads:
            if w.priority == prio and w.checkpoint is not None and w.spares != 0:
                mine = [a for a in plan.assignments if a.workload == w.name]
                if len(mine) == w.replicas:
                    held[w.name], wanted = _choose(cur, plan, w, mine, held)
                    if len(held[w.name]) < wanted:
                        short[w.name] = wanted
        try:
            cur = _pinned(cur, plan, prio, {n for names in held.values() for n in names}, carried)
        except InputError as exc:  # the stage's plan breaks a rule: a strategy bug, not the user's input
            raise RuntimeError(f"the plan of the stage at priority {prio} cannot be pinned: {exc}") from exc
    final = fn(cur, options.within(clock.at_least(MIN_STAGE_SECONDS)))
    merged = _merge(p, final, carried)
    if merged is None:
        log.warning("spares not held: the stages' evictions and migrations do not add up to one plan")
        plan = fn(p, options.within(clock.at_least(MIN_STAGE_SECONDS)))
        return _with_rows(p, plan.model_copy(update={"metrics": {**plan.metrics, "spares_warning":
                          "spares not held: the stages' evictions and migrations do not add up to one plan"}}),
                          {}, {})
    return _with_rows(p, merged, held, short)


def _choose(cur: Problem, plan: Plan, w: Workload, mine: list[Assignment],
            held: dict[str, list[str]]) -> tuple[list[str], int]:
    """The spare nodes of gang ``w`` placed as ``mine`` in ``plan`` and how many it asks for."""
    cl = cur.cluster
    nodes = [cl.nodes[cl.node_index[name]] for name in dict.fromkeys(a.node for a in mine)]
    per_node: dict[str, int] = defaultdict(int)
    for a in mine:
        per_node[a.node] += len(a.gpus)
    gpus = sum(per_node.values())
    wanted = wanted_spares(cur, w, gpus, len(nodes), _model(cur, nodes))
    if not wanted:
        return [], 0
    prio = {x.name: x.priority for x in cur.workloads}
    busy = {a.node for a in plan.assignments if prio[a.workload] >= w.priority}
    busy |= {a.node for a in cur.running} | {n for names in held.values() for n in names}
    models = {n.gpu_model for n in nodes}
    need = max(per_node.values())
    req, pref = w.topology.required, w.topology.preferred
    dom = cl.domain_of(nodes[0], req) if req else None
    near = {cl.domain_of(n, pref) for n in nodes} if pref else set()
    free = [n for n in cl.nodes if n.name not in busy and n.gpu_model in models and n.gpus >= need
            and (dom is None or cl.domain_of(n, req or "node") == dom)]
    # close to the gang first (its preferred domains), then the smallest node that serves
    free.sort(key=lambda n: (pref is not None and cl.domain_of(n, pref) not in near, n.gpus, cl.node_index[n.name]))
    return [n.name for n in free[:wanted]], wanted


def _model(p: Problem, nodes: list[Node]) -> str | None:
    """The gang's GPU model for its failure rate: the highest rate among its nodes' models."""
    it = p.interruptions
    models = sorted({n.gpu_model for n in nodes if n.gpu_model})
    if it is None or not models:
        return None
    return max(models, key=lambda m: (it.rate(m), m))


def _pinned(cur: Problem, plan: Plan, prio: int, held: set[str],
            carried: tuple[list[Eviction], list[Migration]]) -> Problem:
    """``cur`` with the work of priority ``prio`` and above fixed where ``plan`` put it, without ``held``.

    Replicas the stage evicted stay out; replicas it moved run where it moved them (the move is kept).
    """
    pin = {w.name for w in cur.workloads if w.priority >= prio}
    evicted = {(e.workload, e.replica) for e in plan.evictions}
    moved = {(m.workload, m.replica) for m in plan.migrations}
    carried[0].extend(plan.evictions)
    carried[1].extend(plan.migrations)
    placed = {a.key: a for a in plan.assignments}
    running = [placed[a.key] if a.key in moved else a for a in cur.running
               if a.workload not in pin and a.key not in evicted]
    running += [a for a in plan.assignments if a.workload in pin]
    workloads = tuple(w.model_copy(update={"migratable": False, "preemptible": False}) if w.name in pin else w
                      for w in cur.workloads)
    cl = cur.cluster
    cluster = Cluster(name=cl.name, levels=cl.levels, domains=cl.domains,
                      nodes=tuple(n for n in cl.nodes if n.name not in held))
    return cur.replace(cluster=cluster, workloads=workloads, running=tuple(running))


def _merge(p: Problem, final: Plan, carried: tuple[list[Eviction], list[Migration]]) -> Plan | None:
    """The final stage's plan with the evictions and migrations of the earlier stages, against ``p``.

    A replica an earlier stage evicted stays evicted: if a later stage placed it again elsewhere (it was just an
    unplaced replica there), that placement is dropped (its whole gang's, for a gang). None when the stages
    cannot be told as one plan (a replica both moved and evicted).
    """
    placed = {a.key: a for a in final.assignments}
    running = {a.key: a for a in p.running}
    evictions: dict[tuple[str, int], Eviction] = {}
    again: set[str] = set()
    for e in [*carried[0], *final.evictions]:
        key = (e.workload, e.replica)
        if key in placed and placed[key] == running.get(key):
            continue  # placed again exactly where it ran: not evicted after all
        if key in placed:
            again.add(e.workload)
        evictions[key] = e
    migrations: dict[tuple[str, int], Migration] = {}
    for m in [*carried[1], *final.migrations]:
        key = (m.workload, m.replica)
        before = running.get(key)
        if key in evictions or key not in placed or before is None:
            return None
        if placed[key] != before:
            migrations[key] = m.model_copy(update={"from_node": before.node, "to_node": placed[key].node})
        else:
            migrations.pop(key, None)
    prios = {w.name: w.priority for w in p.workloads}
    if any(not p.workload(m.workload).migratable for m in migrations.values()):
        return None
    order = lambda x: (-prios[x.workload], x.workload, x.replica)  # noqa: E731
    plan = final.model_copy(update={"evictions": tuple(sorted(evictions.values(), key=order)),
                                    "migrations": tuple(sorted(migrations.values(), key=order))})
    drop = {k for k in placed if k in evictions or (k[0] in again and p.workload(k[0]).is_gang)}
    if any(placed[k] == running.get(k) for k in drop):
        return None  # part of a gang still runs where it ran: the gang cannot lose its other replicas
    return _unplace(p, plan, drop) if drop else plan


def _unplace(p: Problem, plan: Plan, drop: set[tuple[str, int]]) -> Plan:
    """``plan`` without the replicas ``drop`` (evicted earlier): listed unplaced, objective and status recomputed."""
    kept = [a for a in plan.assignments if a.key not in drop]
    left = {u.workload: (set(u.replicas), u.reason) for u in plan.unplaced}
    dropped: dict[str, list[int]] = defaultdict(list)
    for name, r in sorted(drop):
        dropped[name].append(r)
    for name, rs in dropped.items():
        why = f"replicas {rs} are evicted for higher-priority work and not started again in this plan"
        before, old = left.get(name, (set(), ""))
        left[name] = (before | set(rs), f"{why}; the others: {old}" if before - set(rs) else why)
    unplaced = tuple(Unplaced(workload=n, replicas=tuple(sorted(rs)), reason=why)
                     for n, (rs, why) in sorted(left.items(), key=lambda x: p.workload_index[x[0]]))
    got = placed_units(p, kept)
    obj = [got[q] for q in p.priorities]
    bound = [round(b * UNITS_PER_GPU) for b in plan.bound]
    placed = {a.key for a in kept}
    status = plan.status
    if any(w.sla == "guaranteed" and any((w.name, r) not in placed for r in range(w.replicas))
           for w in p.workloads):
        status = "infeasible"
    elif status == "optimal" and obj != bound:
        status = "feasible"
    return plan.model_copy(update={"assignments": tuple(kept), "unplaced": unplaced, "status": status,
                                   "objective": tuple(units_to_gpus(x) for x in obj),
                                   "gap": lexicographic_gap(obj, bound) if bound else plan.gap,
                                   "gaps": priority_gaps(obj, bound) if bound else plan.gaps,
                                   "metrics": {**plan.metrics, **metrics(p, kept, got)}})


def _with_rows(p: Problem, plan: Plan, held: dict[str, list[str]], short: dict[str, int]) -> Plan:
    """``plan`` with one goodput row per placed gang with ``checkpoint`` (``held``: its spare nodes)."""
    if p.interruptions is None:
        return plan
    cl = p.cluster
    by_workload: dict[str, list[Assignment]] = defaultdict(list)
    for a in plan.assignments:
        by_workload[a.workload].append(a)
    rows = []
    for w in p.workloads:
        mine = by_workload.get(w.name, [])
        if w.checkpoint is None or len(mine) != w.replicas:
            continue
        nodes = [cl.nodes[cl.node_index[name]] for name in dict.fromkeys(a.node for a in mine)]
        gpus = sum(len(a.gpus) for a in mine)
        spare = held.get(w.name, [])
        res = gang_goodput(p, w, gpus, len(nodes), _model(p, nodes), len(spare))
        rows.append(GoodputRow(workload=w.name, nodes=len(nodes), gpus=gpus, spares=len(spare),
                               spare_nodes=tuple(spare), failure_rate_per_hour=res.failures_per_hour,
                               checkpoint_interval_s=res.interval_s, goodput=res.goodput,
                               goodput_per_provisioned_gpu=res.per_provisioned_gpu,
                               lost_gpu_hours_per_day=res.lost_gpu_hours_per_day))
    m = dict(plan.metrics)
    unplaced = plan.unplaced
    if held:  # the stages planned a cluster without the spare nodes: count over the whole cluster
        m.update(metrics(p, list(plan.assignments)))
        m["spare_nodes"] = sum(len(v) for v in held.values())
        unplaced = tuple(_spare_note(p, u, held) for u in plan.unplaced)
    if short:
        m["spares_wanted"] = short
    return plan.model_copy(update={"goodput": tuple(rows), "metrics": m, "unplaced": unplaced})


def _spare_note(p: Problem, u: Unplaced, held: dict[str, list[str]]) -> Unplaced:
    """``u`` noting the hot-spare nodes that could host it (its reason saw the cluster without them)."""
    w = p.workload(u.workload)
    cl = p.cluster
    could = [(n, g) for g, names in held.items() for n in names
             if p.can_host(w, cl.nodes[cl.node_index[n]]) is not None]
    if not could:
        return u
    names = ", ".join(f"{n} for {g}" for n, g in could)
    return u.model_copy(update={"reason": f"{u.reason}; {len(could)} node(s) that could host it are held as hot "
                                          f"spares ({names})"})
