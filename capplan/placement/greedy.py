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
from dataclasses import dataclass, replace
from itertools import groupby

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
from capplan.placement.core.summary import NOT_TRIED_PREFIX, make_plan, placed_units
from capplan.placement.evict import Evictor
from capplan.placement.gangrepair import GangRepair, Held
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

    def _ranking(self, w: Workload, n: int, level: str, fixed_domain: str | None, all_or_nothing: bool,
                 within: np.ndarray | None) -> _Ranking | None:
        """The domains of ``level`` that may hold the replicas, best first (see :meth:`place_in_one_domain`)."""
        st = self.st
        ids, names, pos = self._domains(level)
        idx, _ = st.eligible(w)
        if within is not None:
            idx = self._inside(idx, within)
        if fixed_domain is not None:
            idx = idx[ids[idx] == pos[fixed_domain]]
        if idx.size == 0:
            return None
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
        return _Ranking(idx, ids, scope, est_n, est_left, order)

    def place_in_one_domain(self, w: Workload, n: int, level: str, fixed_domain: str | None,
                            all_or_nothing: bool, within: np.ndarray | None = None) -> list[Placement]:
        """Place replicas of ``w`` inside the single domain of ``level`` that fits them most tightly.

        Domains are ranked by an optimistic estimate (replicas that fit by CPU, memory, free whole GPUs and
        the power budgets over them, :func:`~capplan.placement.core.power.domain_room`; then the free whole
        GPUs left) and tried in that order, skipping those whose estimate cannot hold an all-or-nothing group (under
        binding power budgets most racks cannot, and trying each cost a failed trial per gang); the search
        stops at a domain whose trial meets its estimate (no later domain can do better), or after a few tries.
        """
        r = self._ranking(w, n, level, fixed_domain, all_or_nothing, within)
        if r is None:
            return []
        idx, ids, scope, est_n, est_left = r.idx, r.ids, r.scope, r.est_n, r.est_left
        best: tuple[tuple[int, int], int] | None = None
        kept: list[Placement] = []  # the best trial stays applied while it may be the last one
        for tries, dom in enumerate(r.order):
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

    def place_gang_best_fit(self, w: Workload, n: int, level: str,
                            options: list[tuple[tuple[int, ...], np.ndarray]]) -> list[Placement]:
        """Place gang ``w`` (all ``n`` replicas) in one domain of ``level`` on one GPU model: over every model's
        domains at once (``options``: a tie-break key and the model's nodes, sorted), the domain that holds it
        with the fewest free whole GPUs of the model left (best fit), tried in that order until one holds it."""
        entries: list[tuple[tuple[int, ...], int, int, _Ranking]] = []
        for k, (tie, within) in enumerate(options):
            r = self._ranking(w, n, level, None, True, within)
            if r is not None:
                entries += [((_fit_key(r, dom, tie)), k, dom, r) for dom in r.order]
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
        for tries, (_, _, dom, r) in enumerate(entries):
            if tries >= _DOMAIN_TRIES or (tries and self.deadline is not None and self.deadline.expired()):
                break
            trial = self.place_group(w, n, r.idx[r.ids[r.idx] == dom], True)
            if len(trial) == n:
                return trial
        return []


@dataclass
class _Ranking:
    """Domains ranked for one workload: its candidate nodes, domain id per node, the nodes counted for the
    leftover, the estimated replicas and free whole GPUs left per domain, and the domains in order."""

    idx: np.ndarray
    ids: np.ndarray
    scope: np.ndarray
    est_n: np.ndarray
    est_left: np.ndarray
    order: list[int]


def _fit_key(r: _Ranking, dom: int, tie: tuple[int, ...]) -> tuple[int, ...]:
    """Best fit first: the fewest free whole GPUs left in the domain (of the model), then ``tie``."""
    return (int(r.est_left[dom]), *tie)


def place_workload(placer: GreedyPlacer, w: Workload, n: int, running: list[Assignment],
                   within: np.ndarray | None = None, best_fit: bool = False) -> list[Placement]:
    """Place ``n`` more replicas of ``w`` by its gang, GPU-model and topology rules (inside ``within`` nodes,
    sorted, when given).

    ``running`` are its replicas already placed (they fix the required domain and, for a gang
    that must stay on one GPU model, the model). ``best_fit``: a gang on one model bound to a domain goes to
    the domain and model that hold it with the fewest free whole GPUs of the model left
    (:meth:`GreedyPlacer.place_gang_best_fit`) rather than to the model with the fewest free GPUs overall.
    """
    p, st = placer.p, placer.st
    if not w.one_model:
        return _place_within(placer, w, n, running, within)
    models = {p.cluster.nodes[p.cluster.node_index[a.node]].gpu_model for a in running}
    per = st.eligible(w)[1]
    options = sorted((m for m in per if m is not None and (not models or m in models)),
                     key=lambda m: (per[m].units, m))
    scope = {m: st.model_nodes[m] if within is None else placer._inside(st.model_nodes[m], within)
             for m in options}
    options = [m for m in options if scope[m].size]
    if best_fit and w.topology.required and not running and w.gpus is not None:
        return placer.place_gang_best_fit(w, n, w.topology.required, [((per[m].units,), scope[m]) for m in options])
    if w.gpus is not None:
        # each GPU model on its own; keep the one holding least, then leaving the fewest free whole GPUs of the
        # model: a gang takes n x gpus whole GPUs wherever it goes, so the order is known before any trial and
        # the first model whose trial holds the gang is the one the trials of all would choose
        order = sorted(options, key=lambda m: (per[m].units, int(st.free_whole[scope[m]].sum())))
        for m in order:
            got = _place_within(placer, w, n, running, scope[m])
            if len(got) == n:
                return got
            placer.undo(w, got)
        return []
    best: tuple[tuple[int, int], str] | None = None
    for m in options:  # each GPU model on its own; keep the one holding least, then fitting tightest
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
    evictor = (Evictor(p, st, lambda w, n, anchors, within: place_workload(placer, w, n, anchors, within), clock,
                       allow_migration=options.allow_migration, moves_first=moves_first)
               if options.allow_preemption or options.allow_migration else None)
    run = _Run(p, placer, clock, assignments, running_of, evictor)
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


#: Where a priority's placement started: assignments, missing workloads, workloads not tried, movable gangs.
_Mark = tuple[int, int, int, dict[str, Held]]


class _Run:
    """The workloads of one greedy pass, a priority at a time (see :meth:`level`), and what they got."""

    def __init__(self, p: Problem, placer: GreedyPlacer, clock: Deadline, assignments: list[Assignment],
                 running_of: dict[str, list[Assignment]], evictor: Evictor | None) -> None:
        self.p, self.placer, self.st, self.clock = p, placer, placer.st, clock
        self.assignments, self.running_of, self.evictor = assignments, running_of, evictor
        self.missing_of: list[tuple[Workload, list[int]]] = []
        self.late: list[Unplaced] = []
        # gangs this pass placed whole may be moved to open a domain for a later gang (their assignments are
        # written at the end, from where they finally are)
        self.repair = GangRepair(placer, lambda w, n: place_workload(placer, w, n, []),
                                 lambda w, n, dom, within: placer.place_in_one_domain(
                                     w, n, w.topology.required or "", dom, True, within),
                                 placer._domains, clock)
        self._guaranteed = sorted((w.priority for w in p.workloads if w.sla == "guaranteed"), reverse=True)

    def level(self, ws: list[Workload]) -> None:
        """Place one priority's workloads in greedy order, then, if a gang bound to a domain was left out that
        moving gangs may place, try two more ways and keep the one that places most at this priority
        (guaranteed replicas, value, replicas; the first of equals):

        1. the greedy order as it is (the plain pass);
        2. the same from the first gang left out on, repairing each such gang when it does not fit (moving gangs
           already placed, :class:`~capplan.placement.gangrepair.GangRepair`): up to that gang the two are the
           same; repairing as soon as a gang does not fit can take room later gangs needed, hence the choice;
        3. the whole priority again with each gang on one GPU model in the domain and model that hold it with
           the fewest free GPUs left (best fit, :meth:`GreedyPlacer.place_gang_best_fit`), and repairs.

        The plain pass is one of the three, so the plan is never worse, in the plan order, than without them."""
        q = ws[0].priority
        t0 = time.perf_counter()
        acted, late = self._evictor_count(), len(self.late)
        mark0 = self._mark()
        mark: _Mark | None = None
        start = 0
        for k, w in enumerate(ws):
            if not self._place(w, repair=False) and mark is None and self.repair.may_fit(w, w.replicas):
                mark, start = self._mark(-1), k  # a gang left out leaves the state as it was: 2 starts here
        if mark is None or not self._worth_repairing(q, acted, late, time.perf_counter() - t0):
            return
        evictor, self.evictor = self.evictor, None  # the evictor did nothing at this priority: none here either
        try:
            self._another(q, mark, ws[start:], best_fit=False)
            if self.clock.remaining() > 3 * (time.perf_counter() - t0):
                self._another(q, mark0, ws, best_fit=True)
        finally:
            self.evictor = evictor

    def _mark(self, missing: int = 0) -> _Mark:
        return len(self.assignments), len(self.missing_of) + missing, len(self.late), dict(self.repair.held)

    def _another(self, q: int, mark: _Mark, ws: list[Workload], best_fit: bool) -> None:
        """Place ``ws`` again from ``mark`` on (with repairs; ``best_fit`` gangs) and keep that only if it places
        more at priority ``q`` than what is there now."""
        key_now = self._key(q, self.assignments[mark[0]:], self.repair.held)
        now = self._undo_to(mark)
        counts = (self.repair.repaired, self.repair.moved)
        for w in ws:
            self._place(w, repair=True, best_fit=best_fit)
        if not self.late[mark[2]:] and self._key(q, self.assignments[mark[0]:], self.repair.held) > key_now:
            return
        self._undo_to(mark)
        self._redo(now)
        self.repair.repaired, self.repair.moved = counts

    def _worth_repairing(self, q: int, acted: int, late: int, spent: float) -> bool:
        """Whether to place the priority another way (once a gang left out had a domain that moving gangs may
        open): no eviction or move made at this priority, no work cut by the clock, no guaranteed work below
        it, and time for it."""
        if self.late[late:] or acted != self._evictor_count() or not self.repair.held:
            return False
        if any(g < q for g in self._guaranteed):
            return False
        return self.clock.remaining() > 3 * spent

    def _evictor_count(self) -> int:
        ev = self.evictor
        return -1 if ev is None else len(ev.evicted) + len(ev.moved)

    def _key(self, q: int, assignments: list[Assignment], held: dict[str, Held]) -> tuple[int, int, int]:
        """Guaranteed replicas, value and replicas placed at priority ``q`` (its workloads only)."""
        mine = [a for a in assignments if self.p.workload(a.workload).priority == q]
        mine += [self.st.assignment(h.w, r, pl) for h in held.values() if h.w.priority == q
                 for r, pl in zip(h.replicas, h.placements, strict=True)]
        g = sum(1 for a in mine if self.p.workload(a.workload).sla == "guaranteed")
        return g, placed_units(self.p, mine)[q], len(mine)

    def _undo_to(self, mark: _Mark
                 ) -> tuple[list[Assignment], dict[str, Held], list[tuple[Workload, list[int]]]]:
        """Take the priority's placements off (back to ``mark``); returns them (assignments not held by the
        repair, the repair's gangs, the workloads missing) for :meth:`_redo`."""
        k, m, late, held = mark
        del self.late[late:]
        gone = self.assignments[k:]
        for a in reversed(gone):
            self.placer.undo(self.p.workload(a.workload), [self.st.placement_of(a)])
        del self.assignments[k:]
        now = dict(self.repair.held)
        self.repair.restore(held)
        missing = self.missing_of[m:]
        del self.missing_of[m:]
        return gone, now, missing

    def _redo(self, taken: tuple[list[Assignment], dict[str, Held], list[tuple[Workload, list[int]]]]) -> None:
        """Put back what :meth:`_undo_to` took off."""
        gone, held, missing = taken
        self.repair.restore(held)
        for a in gone:
            w = self.p.workload(a.workload)
            self.st.apply(w, self.st.demand_at(w, self.p.cluster.node_index[a.node]), self.st.placement_of(a))
        self.assignments += gone
        self.missing_of += missing

    def _place(self, w: Workload, repair: bool, best_fit: bool = False) -> bool:
        """Place ``w``'s replicas not running (and, with ``repair``, repair a domain-bound gang that does not fit);
        record what it got, evicting or moving running replicas for it when allowed. False when ``w`` is a gang
        a repair may place that was left out whole."""
        st, running = self.st, self.running_of.get(w.name, [])
        taken = {a.replica for a in running}
        free_ids = [r for r in range(w.replicas) if r not in taken]
        if not free_ids:
            return True
        if self.late or self.clock.expired():
            self.late.append(Unplaced(workload=w.name, replicas=tuple(free_ids), reason=NOT_TRIED))
            return True
        placed = place_workload(self.placer, w, len(free_ids), running, best_fit=best_fit)
        movable = not running and GangRepair.movable(w)
        if movable and repair and not placed:
            placed = self.repair.fit(w, len(free_ids))
        if movable and len(placed) == len(free_ids):
            self.repair.add(w, free_ids, placed)
            return True
        left_out = movable and bool(w.topology.required) and not placed
        for r, pl in zip(free_ids, placed, strict=False):
            self.assignments.append(st.assignment(w, r, pl))
        missing = free_ids[len(placed):]
        if missing and self.evictor:
            anchors = running + self.assignments[len(self.assignments) - len(placed):]
            more = self.evictor.make_room(w, len(missing), anchors)
            for r, pl in zip(missing, more, strict=False):
                self.assignments.append(st.assignment(w, r, pl))
            missing = missing[len(more):]
        if missing:
            self.missing_of.append((w, missing))
        return not (left_out and len(missing) == len(free_ids))


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
    for w, missing in missing_of:
        key = (shape_key(w), w.mixed_models, w.replicas, len(missing))
        if key not in reasons:
            if deadline is not None and deadline.expired():
                reasons[key] = NO_ROOM
            else:
                reasons[key] = (explain_fast(st, w, len(missing), st.eligible(w)[0], holdings) if fast
                                else explain(st, w, len(missing), holdings))
        unplaced.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=reasons[key]))
    return unplaced
