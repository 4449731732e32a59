"""The greedy planner: priority order, gangs first, best fit by topology domain.

Workloads are taken in order of priority (highest first), gangs before independent replicas
within a priority, larger demands first. Each replica goes to the feasible node that leaves
the fewest free whole GPUs (best fit; the order in :mod:`capplan.placement.bestfit`); a gang or a
workload with a required topology level is tried in the domains of that level (most promising first)
and kept in the tightest one that holds it all. MIG slices start where the most valid placements stay
free. The run's deadline is checked between workloads; those not reached are reported as not tried.
Deterministic: no randomness is used.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment, Eviction, Migration, Plan, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.placement.core.budget import SUMMARY_COST, reserve
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.power import domain_room
from capplan.placement.core.reasons import Holdings, explain, explain_fast, room_estimate
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.core.subproblem import lex_key
from capplan.placement.core.summary import NOT_TRIED_PREFIX, make_plan
from capplan.placement.evict import Evictor
from capplan.placement.nodefill import NodeFill

#: Most domains tried for a workload tied to one domain once one has held it.
_DOMAIN_TRIES = 8
#: The reason of running replicas greedy evicted (allow_preemption); the plan's ``evictions`` say for what.
EVICTED = "evicted for higher-priority work that needs its node (allow_preemption; see the plan's evictions)"
#: The reason of a workload tried but not placed when the time left no room to work out why.
NO_ROOM = ("no node had room for it when the greedy pass reached it, after the higher-priority work "
           "(the detailed reason was not worked out: the time limit ran out; a longer --time-limit gives it)")
#: Fleets above this many nodes get the array form of the unplaced reasons (:func:`explain_fast`).
FAST_REASONS_NODES = 1000
#: The reason of a workload the pass did not reach (the priorities not reached are in ``metrics.not_tried``;
#: the text has no numbers of its own, so the summary groups every such workload under one cause).
NOT_TRIED = NOT_TRIED_PREFIX + " before the greedy planner reached this workload (a longer --time-limit places more)"


def shape_key(w: Workload) -> tuple[object, ...]:
    """Everything about a workload but its name and replica count that decides where it fits."""
    return (w.kind, w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.cpu, w.memory_gib, w.gpu_models,
            w.topology.required, w.topology.preferred, w.tenant, w.isolation, w.queue)


def workload_order(p: Problem) -> list[Workload]:
    """Priority first, gangs first, bigger total demand first, then input order."""
    return sorted(p.workloads, key=lambda w: (-w.priority, not w.is_gang, -p.demand_units(w) * w.replicas,
                                              -w.cpu_milli, p.workload_index[w.name]))


class GreedyPlacer(NodeFill):
    """Constructive placement on a :class:`ClusterState`; reused by other planners for repair.

    Replicas of one workload are identical, so the best-fit order of the candidate nodes is computed
    once per group of replicas and walked: each node is filled until it takes no more (placing on the
    best node keeps it the best, and no other node changes), which is what asking for the best node
    replica by replica gives, at one array pass per workload. The order is
    :class:`~capplan.placement.bestfit.BestFitOrder`'s, the filling of one node
    :class:`~capplan.placement.nodefill.NodeFill`'s.

    Parameters
    ----------
    p, st
        The problem and the occupancy to fill.
    deadline
        Optional: when it expires, domain searches stop trying further domains (the caller checks it
        between workloads and reports the workloads it did not try).
    """

    def __init__(self, p: Problem, st: ClusterState, deadline: Deadline | None = None) -> None:
        super().__init__(p, st)
        self.deadline = deadline
        self._levels: dict[str, tuple[np.ndarray, list[str], dict[str, int]]] = {}

    def place_group(self, w: Workload, n: int, within: np.ndarray | None, all_or_nothing: bool,
                    prefer: set[str] | None = None) -> list[Placement]:
        """Place up to ``n`` replicas; with ``all_or_nothing`` roll back unless all fit."""
        lvl = w.topology.preferred
        done: list[Placement] = []
        pref = set(prefer or ())
        while len(done) < n:
            grown = False
            for i in self.ordered(w, within, pref if lvl else None):
                if self._fill(w, i, n, done) and lvl:
                    dom = self.p.cluster.domain_of(self.st.nodes[i], lvl)
                    if dom not in pref:  # the order changes: nodes of this domain come first now
                        pref.add(dom)
                        grown = True
                if len(done) == n or grown:
                    break
            if not grown:
                break
        if all_or_nothing and len(done) < n:
            self.undo(w, done)
            return []
        return done

    def domain_leftover(self, nodes: np.ndarray) -> int:
        """Free whole GPUs left in a set of nodes (smaller means a tighter fit)."""
        return int(self.st.free_whole[nodes].sum())

    def _domains(self, level: str) -> tuple[np.ndarray, list[str], dict[str, int]]:
        """Domain id per node, domain names and the id of each name, for topology ``level`` (cached)."""
        hit = self._levels.get(level)
        if hit is None:
            st = self.st
            if level == self.p.cluster.levels[-1]:
                ids, names = np.arange(st.n, dtype=np.int64), [x.name for x in st.nodes]
            else:
                ids, names = st.domain_ids(level)
            hit = self._levels[level] = (ids, names, {nm: k for k, nm in enumerate(names)})
        return hit

    def place_in_one_domain(self, w: Workload, n: int, level: str, fixed_domain: str | None,
                            all_or_nothing: bool, within: np.ndarray | None = None) -> list[Placement]:
        """Place replicas of ``w`` inside the single domain of ``level`` that fits them most tightly.

        Domains are ranked by an optimistic estimate (replicas that fit by CPU, memory, free whole GPUs and
        the power budgets over them, :func:`~capplan.placement.core.power.domain_room`; then the free whole
        GPUs left) and tried in that order, skipping those whose estimate cannot hold an all-or-nothing group (under
        binding power budgets most racks cannot, and trying each cost a failed trial per gang); the search
        stops at a domain whose trial meets its estimate (no later domain can do better), or after a few tries.
        """
        st = self.st
        ids, names, pos = self._domains(level)
        idx, _ = st.eligible(w)
        if within is not None:
            idx = self._inside(idx, within)
        if fixed_domain is not None:
            idx = idx[ids[idx] == pos[fixed_domain]]
        if idx.size == 0:
            return []
        ok = st.node_ok(w, idx)
        room = np.where(ok, np.minimum(room_estimate(st, w, idx), n), 0)
        cap = domain_room(st, w, idx, room, ids, len(names))
        scope = np.arange(st.n, dtype=np.int64) if within is None else within
        free = np.bincount(ids[scope], weights=st.free_whole[scope], minlength=len(names)).astype(np.int64)
        est_n = np.minimum(cap, n)
        if w.gpus is not None:
            est_left = free - est_n * w.gpus
        elif w.has_gpu_demand:  # a slice or share turns at most one free GPU busy
            est_left = np.maximum(free - est_n, 0)
        else:
            est_left = free
        has = np.zeros(len(names), dtype=bool)
        has[ids[idx]] = True
        cand = np.flatnonzero(has & (est_n >= (n if all_or_nothing else 1)))
        if fixed_domain is not None:
            cand = np.array([pos[fixed_domain]], dtype=np.int64)
        order = cand[np.lexsort((cand, est_left[cand], -est_n[cand]))].tolist()
        best: tuple[tuple[int, int], int] | None = None
        kept: list[Placement] = []  # the best trial stays applied while it may be the last one
        for tries, dom in enumerate(order):
            est = (-int(est_n[dom]), int(est_left[dom]))
            if best is not None and (best[0] <= est or tries >= _DOMAIN_TRIES
                                     or (self.deadline is not None and self.deadline.expired())):
                break  # no domain left can beat the best (estimates are optimistic), or enough tries
            self.undo(w, kept)
            kept = []
            trial = self.place_group(w, n, idx[ids[idx] == dom], all_or_nothing)
            if trial:
                key = (-len(trial), self.domain_leftover(scope[ids[scope] == dom]))
                if best is None or key < best[0]:
                    best, kept = (key, dom), trial
                else:
                    self.undo(w, trial)
                if len(trial) == n and key[1] == 0:
                    break
        if best is None:
            return []
        if kept:
            return kept
        return self.place_group(w, n, idx[ids[idx] == best[1]], all_or_nothing)


def place_workload(placer: GreedyPlacer, w: Workload, n: int, running: list[Assignment],
                   within: np.ndarray | None = None) -> list[Placement]:
    """Place ``n`` more replicas of ``w`` by its gang, GPU-model and topology rules (inside ``within`` nodes,
    sorted, when given).

    ``running`` are its replicas already placed (they fix the required domain and, for a gang
    that must stay on one GPU model, the model).
    """
    p, st = placer.p, placer.st
    if not w.one_model:
        return _place_within(placer, w, n, running, within)
    models = {p.cluster.nodes[p.cluster.node_index[a.node]].gpu_model for a in running}
    per = st.eligible(w)[1]
    options = sorted((m for m in per if m is not None and (not models or m in models)),
                     key=lambda m: (per[m].units, m))
    best: tuple[tuple[int, int], str] | None = None
    scope = {m: st.model_nodes[m] if within is None else placer._inside(st.model_nodes[m], within)
             for m in options}
    for m in options:  # each GPU model on its own; keep the one holding least, then fitting tightest
        if scope[m].size == 0:
            continue
        trial = _place_within(placer, w, n, running, scope[m])
        if len(trial) == n:
            key = (per[m].units, placer.domain_leftover(scope[m]))
            if best is None or key < best[0]:
                best = (key, m)
        placer.undo(w, trial)
    if best is None:
        return []
    return _place_within(placer, w, n, running, scope[best[1]])


def _place_within(placer: GreedyPlacer, w: Workload, n: int, running: list[Assignment],
                  within: np.ndarray | None) -> list[Placement]:
    p = placer.p
    lvl = w.topology.required
    gang = w.is_gang
    if lvl:
        fixed = (p.cluster.domain_of(p.cluster.nodes[p.cluster.node_index[running[0].node]], lvl)
                 if running else None)
        return placer.place_in_one_domain(w, n, lvl, fixed, gang, within)
    if gang and w.topology.preferred:
        placed = placer.place_in_one_domain(w, n, w.topology.preferred, None, True, within)
        return placed or placer.place_group(w, n, within, True)
    prefer = ({p.cluster.domain_of(p.cluster.nodes[p.cluster.node_index[a.node]], w.topology.preferred)
               for a in running} if w.topology.preferred else None)
    return placer.place_group(w, n, within, gang, prefer)


def plan_greedy(p: Problem, options: PlanOptions) -> Plan:
    """Plan ``p`` greedily; running replicas stay where they are unless evictions or moves are allowed.

    With ``allow_preemption`` (or ``allow_migration``), a workload that does not fit may take the place of
    lower-priority running replicas (:mod:`capplan.placement.evict`). Stopping them first and moving them
    only where that fails can lose lower-priority work that a move would have kept, and moving first can
    take room a priority between the two needs; with both kinds of replica running, the pass runs both ways
    (the second one only if twice the first's time is left) and keeps the lexicographically better plan.

    The clock (``options.clock()``, the run's one deadline) is checked between workloads: when it runs
    out, the workloads not reached are left unplaced with a reason saying they were not tried (and at which
    priority), the plan so far is returned, and ``metrics.cut_by_time_limit`` is set.
    """
    t0 = time.perf_counter()
    clock = options.clock()  # one deadline for both passes (a call without one starts it here, once)
    options = replace(options, deadline=clock)
    plan, made_room = _greedy_pass(p, options, moves_first=False)
    spent = time.perf_counter() - t0
    if not (made_room and options.allow_migration and any(p.workload(a.workload).migratable for a in p.running)):
        return plan
    if clock.remaining() < 2 * spent + reserve(p, clock.budget, SUMMARY_COST):
        return plan
    other, _ = _greedy_pass(p, options, moves_first=True)
    best = other if lex_key(p, other.assignments) > lex_key(p, plan.assignments) else plan
    return best.model_copy(update={"solve_seconds": round(time.perf_counter() - t0, 4)})


def _greedy_pass(p: Problem, options: PlanOptions, moves_first: bool) -> tuple[Plan, bool]:
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
    missing_of: list[tuple[Workload, list[int]]] = []
    late: list[Unplaced] = []
    evictor = (Evictor(p, st, lambda w, n, anchors, within: place_workload(placer, w, n, anchors, within), clock,
                       allow_migration=options.allow_migration, moves_first=moves_first)
               if options.allow_preemption or options.allow_migration else None)
    for w in workload_order(p):
        running = running_of.get(w.name, [])
        taken = {a.replica for a in running}
        free_ids = [r for r in range(w.replicas) if r not in taken]
        if not free_ids:
            continue
        if late or clock.expired():
            late.append(Unplaced(workload=w.name, replicas=tuple(free_ids), reason=NOT_TRIED))
            continue
        placed = place_workload(placer, w, len(free_ids), running)
        for r, pl in zip(free_ids, placed, strict=False):
            assignments.append(st.assignment(w, r, pl))
        missing = free_ids[len(placed):]
        if missing and evictor:
            anchors = running + assignments[len(assignments) - len(placed):]
            more = evictor.make_room(w, len(missing), anchors)
            for r, pl in zip(missing, more, strict=False):
                assignments.append(st.assignment(w, r, pl))
            missing = missing[len(more):]
        if missing:
            missing_of.append((w, missing))
    extra: dict[str, object] = {}
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
    form (:func:`explain_fast`), for large fleets or when the time is already up. Once ``deadline`` has
    passed, the workloads left get :data:`NO_ROOM` (thousands of distinct shapes took 19 s on a 100k-GPU fleet)."""
    reasons: dict[tuple[object, ...], str] = {}
    unplaced: list[Unplaced] = []
    holdings = Holdings(p, assignments) if missing_of else None
    memo: dict[object, object] = {}  # what workloads of one shape share in explain_fast (the state is final)
    for w, missing in missing_of:
        key = (shape_key(w), w.mixed_models, w.replicas, len(missing))
        if key not in reasons:
            if deadline is not None and deadline.expired():
                reasons[key] = NO_ROOM
            else:
                reasons[key] = (explain_fast(st, w, len(missing), st.eligible(w)[0], holdings, memo) if fast
                                else explain(st, w, len(missing), holdings))
        unplaced.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=reasons[key]))
    return unplaced
