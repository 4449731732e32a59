"""The greedy planner: priority order, gangs first, best fit by topology domain.

Workloads are taken in order of priority (highest first), gangs before independent replicas
within a priority, larger demands first. Each replica goes to the feasible node that leaves
the fewest free whole GPUs (best fit; the order in :mod:`capplan.placement.bestfit`); a gang or a
workload with a required topology level is tried in the domains of that level (most promising first)
and kept in the tightest one that holds it all (:mod:`capplan.placement.placer`). MIG slices start where the
most valid placements stay free. A priority whose domain-bound gangs were left out is placed two more ways, with
planned gangs moved to open a domain (:mod:`capplan.placement.gangrepair`) and with best-fit gangs, and the one
placing most at the priority is kept (:mod:`capplan.placement.levels`). The run's deadline is checked between
workloads; those not reached are reported as not tried. Deterministic: no randomness is used.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import replace
from itertools import groupby

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment, Eviction, Migration, Plan, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.placement.core.budget import SUMMARY_COST, reserve
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.reasons import Holdings, explain, explain_fast
from capplan.placement.core.state import ClusterState
from capplan.placement.core.subproblem import lex_key
from capplan.placement.core.summary import make_plan
from capplan.placement.evict import Evictor
from capplan.placement.levels import NOT_TRIED as NOT_TRIED
from capplan.placement.levels import PriorityPass
from capplan.placement.placer import GreedyPlacer as GreedyPlacer
from capplan.placement.placer import place_workload as place_workload

#: The reason of running replicas greedy evicted (allow_preemption); the plan's ``evictions`` say for what.
EVICTED = "evicted for higher-priority work that needs its node (allow_preemption; see the plan's evictions)"
#: The reason of a workload tried but not placed when the time left no room to work out why.
NO_ROOM = ("no node had room for it when the greedy pass reached it, after the higher-priority work "
           "(the detailed reason was not worked out: the time limit ran out; a longer --time-limit gives it)")
#: Fleets above this many nodes get the array form of the unplaced reasons (:func:`explain_fast`).
FAST_REASONS_NODES = 1000
#: The exact unplaced reasons try each unplaced shape on each of its eligible nodes (tens of microseconds a node);
#: past this many node checks in one plan the shapes left get the array form: 2,100 unplaced shapes on 500 nodes
#: (time-sliced shares of 200 tenants, GPU memory the scarcer) took 40 s of exact reasons for a 1 s pass.
EXACT_REASON_CHECKS = 50_000
#: The last complete greedy plan: (the problem, weakly; the options it depends on; the plan). ``solve`` makes the
#: greedy plan before any other strategy, and strategies that start from it (CP-SAT's hint, LNS's start) ask for
#: the same problem object again: a second pass over a 10k-GPU fleet cost seconds of the limit.
_last: tuple[weakref.ref[Problem], tuple[bool, bool, int, bool], Plan] | None = None


def shape_key(w: Workload) -> tuple[object, ...]:
    """Everything about a workload but its name and replica count that decides where it fits."""
    return (w.kind, w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.cpu, w.memory_gib, w.gpu_models,
            w.topology.required, w.topology.preferred, w.tenant, w.isolation, w.queue)


def workload_order(p: Problem) -> list[Workload]:
    """Priority first, gangs first, bigger total demand first, then input order; within a priority, MIG
    workloads (not gangs) eligible on fewer of the fleet's GPU models before those on more, all of them before
    the other workloads, except at the lowest priority, where they come after them.

    A named profile of one model (``mig: 2g.45gb`` on B200) has only that model's GPUs, where a ``mig: auto``
    replica of the same priority could go to several and, placed first, takes the slices the named one needed.
    The lowest priority is the one an over-subscribed fleet leaves short, and there a whole GPU or a share is
    worth all of the GPU it takes, a MIG slice often less (a 20 GiB replica is worth a seventh of an H100 and
    takes a quarter of it). Measured on shape e of ``benchmarks/shapes.py`` (docs/benchmarks-fleet-scale.md,
    "Gaps of shapes a and e"): the two together place more than either alone and than the order by demand.
    """
    fleet = sorted({n.gpu_model for n in p.cluster.nodes if n.gpu_model})
    lowest = min((w.priority for w in p.workloads), default=0)

    def mig_rank(w: Workload) -> int:
        if w.mig is None or w.is_gang:
            return 0
        models = sum(p.model_demand(w, m) is not None for m in fleet)
        return models if w.priority == lowest else models - len(fleet) - 1  # negative: before the others

    return sorted(p.workloads, key=lambda w: (-w.priority, not w.is_gang, mig_rank(w), -p.demand_units(w) * w.replicas,
                                              -w.cpu_milli, p.workload_index[w.name]))


def plan_greedy(p: Problem, options: PlanOptions, other_ways: bool = True) -> Plan:
    """Plan ``p`` greedily; running replicas stay where they are unless evictions or moves are allowed.

    With ``allow_preemption`` (or ``allow_migration``), a workload that does not fit may take the place of
    lower-priority running replicas (:mod:`capplan.placement.evict`). Stopping them first and moving them
    only where that fails can lose lower-priority work that a move would have kept, and moving first can
    take room a priority between the two needs; with both kinds of replica running, the pass runs both ways
    (the second one only if twice the first's time is left) and keeps the lexicographically better plan.

    ``other_ways=False`` places each priority in the greedy order only (no repairs of domain-bound gangs, no
    best-fit pass: :class:`~capplan.placement.levels.PriorityPass`), the reference those are judged against.

    The clock (``options.clock()``, the run's one deadline) is checked between workloads: when it runs
    out, the workloads not reached are left unplaced with a reason saying they were not tried (and at which
    priority), the plan so far is returned, and ``metrics.cut_by_time_limit`` is set.
    """
    global _last
    known = last_greedy_plan(p, options, other_ways)
    if known is not None:
        return known
    t0 = time.perf_counter()
    clock = options.clock()  # one deadline for both passes (a call without one starts it here, once)
    options = replace(options, deadline=clock)
    plan, made_room = _greedy_pass(p, options, moves_first=False, other_ways=other_ways)
    spent = time.perf_counter() - t0
    if made_room and options.allow_migration and any(p.workload(a.workload).migratable for a in p.running) \
            and clock.remaining() >= 2 * spent + reserve(p, clock.budget, SUMMARY_COST):
        other, _ = _greedy_pass(p, options, moves_first=True, other_ways=other_ways)
        best = other if lex_key(p, other.assignments) > lex_key(p, plan.assignments) else plan
        plan = best.model_copy(update={"solve_seconds": round(time.perf_counter() - t0, 4)})
    if not plan.metrics.get("cut_by_time_limit"):  # a cut plan depends on the clock: never reused
        _last = (weakref.ref(p), _memo_key(options, other_ways), plan)
    return plan


def _memo_key(options: PlanOptions, other_ways: bool = True) -> tuple[bool, bool, int, bool]:
    return (options.allow_preemption, options.allow_migration, options.seed, other_ways)


def last_greedy_plan(p: Problem, options: PlanOptions, other_ways: bool = True) -> Plan | None:
    """The greedy plan already made for this very problem object with these options (None if not the last one).

    Greedy is deterministic and, when not cut by the clock, does not depend on the time limit: the plan is
    the same whoever asks.
    """
    hit = _last
    if hit is None or hit[0]() is not p or hit[1] != _memo_key(options, other_ways):
        return None
    return hit[2]


def _greedy_pass(p: Problem, options: PlanOptions, moves_first: bool, other_ways: bool) -> tuple[Plan, bool]:
    """One greedy pass (see :func:`plan_greedy`); also whether it tried to make room by evicting or moving."""
    t0 = time.perf_counter()
    # the pass stops early enough for the reasons and the plan's assembly (their expected cost) to fit
    whole = options.clock()
    summary = reserve(p, whole.budget, SUMMARY_COST)
    clock = whole.less(2 * summary)  # one share for the reasons, one for the plan's assembly
    st = ClusterState(p)
    placer = GreedyPlacer(p, st, clock)
    assignments: list[Assignment] = []
    running_of: dict[str, list[Assignment]] = {}
    for a in p.running:
        w = p.workload(a.workload)
        node = p.cluster.nodes[p.cluster.node_index[a.node]]
        d = p.demand_on(w, node)
        assert d is not None
        st.place_assignment(w, d, a)
        assignments.append(a)
        running_of.setdefault(w.name, []).append(a)
    evictor = (Evictor(p, st, lambda w, n, anchors, within: place_workload(placer, w, n, anchors, within), clock,
                       allow_migration=options.allow_migration, moves_first=moves_first,
                       allow_preemption=options.allow_preemption)
               if options.allow_preemption or options.allow_migration else None)
    run = PriorityPass(p, placer, clock, assignments, running_of, evictor, other_ways)
    for _, ws in groupby(workload_order(p), key=lambda w: w.priority):
        run.level(list(ws))
    missing_of, late, repair = run.missing_of, run.late, run.repair
    for h in repair.held.values():
        assignments += [st.assignment(h.w, r, pl) for r, pl in zip(h.replicas, h.placements, strict=True)]
    extra: dict[str, object] = {}
    if repair.repaired:
        extra["gangs_repaired"] = repair.repaired
        extra["gangs_moved"] = repair.moved
    evictions: list[Eviction] = []
    migrations: list[Migration] = []
    if evictor is not None and (evictor.evicted or evictor.moved):
        gone = {v.a.key for v, _ in evictor.evicted} | {v.a.key for v, _, _ in evictor.moved}
        assignments = [a for a in assignments if a.key not in gone]
        for v, to, taker in evictor.moved:
            a = st.assignment(v.w, v.a.replica, to)
            assignments.append(a)
            migrations.append(Migration(workload=v.w.name, replica=v.a.replica, from_node=v.a.node, to_node=a.node,
                                        reason=f"moved to make room for higher-priority {taker} "
                                               f"(migration cost {v.w.migration_cost})"))
        extra["migrated"] = len(migrations)
    fast = bool(late) or len(p.cluster.nodes) > FAST_REASONS_NODES
    unplaced = unplaced_reasons(p, st, assignments, missing_of, fast, whole.less(summary))
    if evictor is not None and evictor.evicted:
        by_workload: dict[str, list[int]] = {}
        for v, taker in evictor.evicted:
            reason = f"preempted for higher-priority {taker} on {v.a.node}"
            evictions.append(Eviction(workload=v.w.name, replica=v.a.replica, node=v.a.node, reason=reason))
            by_workload.setdefault(v.w.name, []).append(v.a.replica)
        # one cause for the summary's grouping; each eviction names the workload that took the node
        unplaced += [Unplaced(workload=name, replicas=tuple(sorted(reps)), reason=EVICTED)
                     for name, reps in by_workload.items()]
        extra["evicted"] = len(evictions)
    if late:
        extra["cut_by_time_limit"] = True
        extra["not_tried"] = {"workloads": len(late), "replicas": sum(len(u.replicas) for u in late),
                              "priorities": sorted({p.workload(u.workload).priority for u in late}, reverse=True)}
    plan = make_plan(p, "greedy", assignments, unplaced + late, seconds=time.perf_counter() - t0,
                     seed=options.seed, extra_metrics=extra, evictions=evictions, migrations=migrations)
    return plan, evictor is not None and evictor.tried

def unplaced_reasons(p: Problem, st: ClusterState, assignments: list[Assignment],
                     missing_of: list[tuple[Workload, list[int]]], fast: bool,
                     deadline: Deadline | None = None) -> list[Unplaced]:
    """Why each missing replica is unplaced, on the final occupancy (greedy never removes a placement, so
    it explains every failure); workloads of the same shape share one diagnosis. ``fast``: the array
    form (:func:`explain_fast`), for large fleets or when the time is already up; the exact form stops at
    :data:`EXACT_REASON_CHECKS` node checks, the shapes after it get the array form. Once ``deadline`` has
    passed, the workloads left get :data:`NO_ROOM` (thousands of distinct shapes took 19 s on a 100k-GPU fleet)."""
    reasons: dict[tuple[object, ...], str] = {}
    unplaced: list[Unplaced] = []
    holdings = Holdings(p, assignments) if missing_of else None
    memo: dict[object, object] = {}  # what workloads of one shape share in explain_fast (the state is final)
    checks = 0  # nodes the exact form tried so far
    for w, missing in missing_of:
        key = (shape_key(w), w.mixed_models, w.replicas, len(missing))
        if key not in reasons:
            if deadline is not None and deadline.expired():
                reasons[key] = NO_ROOM
            else:
                idx = st.eligible(w)[0]
                exact = not fast and checks + idx.size <= EXACT_REASON_CHECKS
                if exact:
                    checks += idx.size
                reasons[key] = (explain(st, w, len(missing), holdings) if exact
                                else explain_fast(st, w, len(missing), idx, holdings, memo))
        unplaced.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=reasons[key]))
    return unplaced
