"""The greedy pass one priority at a time: the plain greedy order, then (when a gang bound to a domain was left
out) the same with repairs and with best-fit gangs, keeping what places most at the priority.

:class:`PriorityPass` holds what one greedy pass has placed so far (assignments, movable gangs, workloads missing
or not tried) and places a priority's workloads (:meth:`PriorityPass.level`); the greedy planner
(:mod:`capplan.placement.greedy`) runs it priority by priority and assembles the plan.
"""

from __future__ import annotations

import time

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.placement.core.summary import NOT_TRIED_PREFIX, placed_units
from capplan.placement.evict import Evictor
from capplan.placement.gangrepair import GangRepair, Held
from capplan.placement.placer import GreedyPlacer, place_workload

#: The reason of a workload the pass did not reach (the priorities not reached are in ``metrics.not_tried``;
#: the text has no numbers of its own, so the summary groups every such workload under one cause).
NOT_TRIED = NOT_TRIED_PREFIX + " before the greedy planner reached this workload (a longer --time-limit places more)"

#: Where a priority's placement started: assignments, missing workloads, workloads not tried, movable gangs.
_Mark = tuple[int, int, int, dict[str, Held]]


class PriorityPass:
    """The workloads of one greedy pass, a priority at a time (see :meth:`level`), and what they got.

    Parameters
    ----------
    p, placer, clock
        The problem, the placer on the pass's occupancy, and the pass's deadline.
    assignments, running_of
        The running replicas (applied to the occupancy), also by workload; placements are appended.
    evictor
        Evictions and moves of running replicas, when allowed.
    other_ways
        False: the greedy order only (the reference the other ways are judged against).
    """

    def __init__(self, p: Problem, placer: GreedyPlacer, clock: Deadline, assignments: list[Assignment],
                 running_of: dict[str, list[Assignment]], evictor: Evictor | None, other_ways: bool = True) -> None:
        self.p, self.placer, self.st, self.clock = p, placer, placer.st, clock
        self.other_ways = other_ways
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
        2. the same from the first gang left out that a repair places (tried, then undone, in pass 1) on,
           repairing each such gang when it does not fit (moving gangs already placed,
           :class:`~capplan.placement.gangrepair.GangRepair`): up to that gang the two are the same; repairing
           as soon as a gang does not fit can take room later gangs needed, hence the choice;
        3. the whole priority again with each gang on one GPU model in the domain and model that hold it with
           the fewest free GPUs left (best fit, :meth:`GreedyPlacer.place_gang_best_fit`), and repairs.

        2 is tried only when a repair placed a gang in pass 1, 3 only when 2 placed more than 1.

        The plain pass is one of the three, so the plan is never worse, in the plan order, than without them."""
        q = ws[0].priority
        t0 = time.perf_counter()
        acted, late = self._evictor_count(), len(self.late)
        mark0 = self._mark()
        mark: _Mark | None = None
        start = 0
        for k, w in enumerate(ws):
            if (not self._place(w, repair=False) and mark is None and self.other_ways
                    and self.repair.can_fit(w, w.replicas)):
                # the first gang left out that a repair places; the state is as before it: 2 starts here
                mark, start = self._mark(-1), k
        if mark is None or not self._worth_repairing(q, acted, late, time.perf_counter() - t0):
            return
        evictor, self.evictor = self.evictor, None  # the evictor did nothing at this priority: none here either
        try:
            # the whole priority again only where repairs paid (at 100k GPUs it is a second of CPU per priority)
            if (self._another(q, mark, ws[start:], best_fit=False)
                    and self.clock.remaining() > 3 * (time.perf_counter() - t0)):
                self._another(q, mark0, ws, best_fit=True)
        finally:
            self.evictor = evictor

    def _mark(self, missing: int = 0) -> _Mark:
        return len(self.assignments), len(self.missing_of) + missing, len(self.late), dict(self.repair.held)

    def _another(self, q: int, mark: _Mark, ws: list[Workload], best_fit: bool) -> bool:
        """Place ``ws`` again from ``mark`` on (with repairs; ``best_fit`` gangs) and keep that only if it places
        more at priority ``q`` than what is there now; whether it did."""
        key_now = self._key(q, self.assignments[mark[0]:], self.repair.held)
        now = self._undo_to(mark)
        counts = (self.repair.repaired, self.repair.moved)
        for w in ws:
            self._place(w, repair=True, best_fit=best_fit)
        if not self.late[mark[2]:] and self._key(q, self.assignments[mark[0]:], self.repair.held) > key_now:
            return True
        self._undo_to(mark)
        self._redo(now)
        self.repair.repaired, self.repair.moved = counts
        return False

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
