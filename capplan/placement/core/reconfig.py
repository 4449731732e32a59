"""The cost of change: GPUs whose preset mode or MIG layout a plan changes (``reconfigure: allowed``).

With ``reconfigure: forbidden`` (the default) a preset mode (``gpu_modes``) is fixed and no plan changes it.
With ``allowed`` it is the GPU's mode today: a plan may change it, and each GPU changed is *reconfigured*
(drained and re-partitioned). The plan order puts the fewest reconfigured GPUs after the placed value and the
evictions/migrations, before the least capacity held (docs/concepts.md).

Every strategy plans problems with fixed presets; :func:`plan_reconfiguring` (run by ``solve`` around the
strategy) turns that into the order above: it plans with today's presets kept; only when that leaves work out
(or evicts or moves some) it plans again with the presets of every changeable GPU lifted, takes that plan
when it places more (or moves less), and then hands back every reconfigured GPU whose replicas fit elsewhere
without a change (:func:`restore`). A GPU is changeable when no running replica is on it and its node is not
``mig_strategy: single``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence

from capplan.model.plan import Assignment, Plan, lexicographic_gap, priority_gaps
from capplan.model.problem import GpuMode, Node, Problem
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.core.subproblem import lex_key
from capplan.placement.core.summary import metrics

log = logging.getLogger(__name__)

Gpu = tuple[str, int]
_MODE = {"whole": "whole", "mig": "mig", "fraction": "shared"}


def reconfigured(p: Problem, assignments: Sequence[Assignment]) -> list[Gpu]:
    """The GPUs (node, index) whose preset mode or MIG layout ``assignments`` change, sorted."""
    preset = {n.name: n for n in p.cluster.nodes if n.gpu_modes}  # only these can change
    out: set[Gpu] = set()
    if not preset:
        return []
    for a in assignments:
        node = preset.get(a.node)
        if node is None:
            continue
        w = p.workload(a.workload)
        kind = "whole" if w.gpus is not None else "mig" if w.mig is not None else "fraction"
        for g in a.gpus:
            m = node.mode_of(g)
            if m is not None and (_MODE[kind] != m.mode or (kind == "mig" and m.layout is not None
                                                             and a.mig not in m.layout)):
                out.add((a.node, g))
    return sorted(out)


def change_metrics(p: Problem, assignments: Sequence[Assignment]) -> dict[str, object]:
    """``gpus_reconfigured`` and ``nodes_to_drain`` (the nodes with a reconfigured GPU) of a plan."""
    gpus = reconfigured(p, assignments)
    return {"gpus_reconfigured": len(gpus), "nodes_to_drain": sorted({n for n, _ in gpus})}


def changeable(p: Problem) -> set[Gpu]:
    """Preset GPUs a plan may reconfigure: none unless ``reconfigure: allowed``; never under a running replica
    or on a ``mig_strategy: single`` node."""
    if p.reconfigure != "allowed":
        return set()
    busy = {(a.node, g) for a in p.running for g in a.gpus}
    return {(n.name, m.gpu) for n in p.cluster.nodes if n.mig_strategy != "single"
            for m in n.gpu_modes if (n.name, m.gpu) not in busy}


def lift(p: Problem, gpus: set[Gpu]) -> Problem:
    """``p`` with the presets of ``gpus`` removed and presets fixed (what a strategy plans)."""
    if not gpus:
        return p.replace(reconfigure="forbidden") if p.reconfigure != "forbidden" else p

    def strip(n: Node) -> Node:
        keep: tuple[GpuMode, ...] = tuple(m for m in n.gpu_modes if (n.name, m.gpu) not in gpus)
        return n if len(keep) == len(n.gpu_modes) else n.model_copy(update={"gpu_modes": keep})

    cl = p.cluster
    nodes = tuple(strip(n) for n in cl.nodes)
    return p.replace(cluster=cl.model_copy(update={"nodes": nodes}), reconfigure="forbidden")


def _moves(p: Problem, plan: Plan) -> int:
    return len(plan.evictions) + sum(p.workload(m.workload).migration_cost for m in plan.migrations)


def _value_key(p: Problem, plan: Plan) -> tuple[int, ...]:
    """The plan order down to the evictions and migrations (larger is better)."""
    return (*lex_key(p, plan.assignments)[:-2], -_moves(p, plan))


def plan_reconfiguring(p: Problem, run: Callable[[Problem, PlanOptions], Plan], opts: PlanOptions) -> Plan:
    """Plan ``p`` with ``run`` (a strategy on fixed presets) in the order that counts reconfigured GPUs.

    Without changeable GPUs this is ``run`` on ``p``. Otherwise today's presets are planned first (with half
    the time); a plan that places everything without evicting or moving anything is final (nothing to gain by
    a change). Else the presets of the changeable GPUs are lifted and planned again; the better plan in the
    value order wins, the fixed one on a tie (no reconfiguration), and the bound is the lifted plan's.
    """
    free = changeable(p)
    if not free:
        return _with_metrics(p, run(lift(p, set()), opts))
    deadline = opts.clock()
    fixed = run(lift(p, set()), opts.within(deadline.share(0.5)))
    everything = len(fixed.assignments) == sum(w.replicas for w in p.workloads)
    if everything and not fixed.evictions and not fixed.migrations:
        return _with_metrics(p, fixed)
    lifted = run(lift(p, free), opts.within(deadline))
    best = fixed
    if _value_key(p, lifted) > _value_key(p, fixed):
        kept = restore(p, list(lifted.assignments))
        order = {w.name: i for i, w in enumerate(p.workloads)}
        kept.sort(key=lambda a: (order[a.workload], a.replica))
        best = lifted.model_copy(update={"assignments": tuple(kept),
                                         "metrics": {**lifted.metrics, **metrics(p, kept)}})
    log.info("reconfigure: today's presets place %d replicas, changed presets %d; %s", len(fixed.assignments),
             len(lifted.assignments), "changing" if best is not fixed else "keeping today's presets")
    return _with_metrics(p, _bounded(p, best, lifted))


def _bounded(p: Problem, plan: Plan, lifted: Plan) -> Plan:
    """``plan`` with the lifted plan's bound (valid for every change), its gap and status recomputed."""
    obj = [round(x * UNITS_PER_GPU) for x in plan.objective]
    bnd = [max(o, round(b * UNITS_PER_GPU)) for o, b in zip(obj, lifted.bound, strict=True)]
    status = plan.status
    if status == "optimal" and not (lifted.status == "optimal" and plan.objective == lifted.objective
                                    and len(plan.assignments) >= len(lifted.assignments)):
        status = "feasible"
    return plan.model_copy(update={"bound": tuple(b / UNITS_PER_GPU for b in bnd),
                                   "gap": lexicographic_gap(obj, bnd), "gaps": priority_gaps(obj, bnd),
                                   "status": status})


def _with_metrics(p: Problem, plan: Plan) -> Plan:
    return plan.model_copy(update={"metrics": {**plan.metrics, **change_metrics(p, plan.assignments)}})


def restore(p: Problem, assignments: list[Assignment]) -> list[Assignment]:
    """Give back reconfigured GPUs: move the replicas of each (fewest first) to room that changes nothing.

    A replica moves only within its node's GPU model and required-topology domain (its gang and topology
    rules keep), never when it is running or charged to a ClusterQueue; the value placed does not change.
    """
    running = {a.key for a in p.running}
    changed = reconfigured(p, assignments)
    on: dict[Gpu, list[Assignment]] = defaultdict(list)
    for a in assignments:
        for g in a.gpus:
            on[(a.node, g)].append(a)
    for gpu in sorted(changed, key=lambda x: (len(on[x]), x)):
        still = set(reconfigured(p, assignments))
        if gpu not in still:
            continue
        movers = on[gpu]
        if any(a.key in running or p.workload(a.workload).queue is not None for a in movers):
            continue
        moved = _relocate(p, assignments, still - {gpu}, movers)
        if moved is not None:
            assignments = moved
            on = defaultdict(list)
            for a in assignments:
                for g in a.gpus:
                    on[(a.node, g)].append(a)
    return assignments


def _relocate(p: Problem, assignments: list[Assignment], changed: set[Gpu],
              movers: list[Assignment]) -> list[Assignment] | None:
    """``assignments`` with ``movers`` placed where no GPU outside ``changed`` changes, or None."""
    q = lift(p, changed)
    keys = {a.key for a in movers}
    stay = [a for a in assignments if a.key not in keys]
    st = ClusterState.with_assignments(q, stay)
    cl = q.cluster
    out: list[Assignment] = []
    for a in sorted(movers, key=lambda x: (-p.replica_value(p.workload(x.workload)), x.workload, x.replica)):
        w = q.workload(a.workload)
        home = cl.nodes[cl.node_index[a.node]]
        lvl = w.topology.required
        placed: Assignment | None = None
        for i, n in enumerate(cl.nodes):
            if n.gpu_model != home.gpu_model or (lvl and cl.domain_of(n, lvl) != cl.domain_of(home, lvl)):
                continue
            d = q.can_host(w, n)
            if d is None:
                continue
            r = st.fit(w, d, i)
            if isinstance(r, Placement):
                st.apply(w, d, r)
                placed = st.assignment(w, a.replica, r)
                break
        if placed is None:
            return None
        out.append(placed)
    result = stay + out
    if set(reconfigured(p, result)) - changed:
        return None  # a mover changed another preset (it cannot: the state keeps them), kept as a guard
    return result
