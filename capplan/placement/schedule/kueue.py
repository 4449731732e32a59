"""``capplan schedule --policy kueue``: what Kueue will do, simulated in time, not optimised.

Time moves from event to event (time 0, a release, a replica's end; starts rounded up to the step
grid). At each instant every ClusterQueue admits from its pending workloads, ordered by priority
(highest first), then creation time (``created``), then scenario order:

* ``StrictFIFO``: only the head may be admitted; while it does not fit, the queue waits (the head blocks);
* ``BestEffortFIFO``: the head first, then any later workload that fits now (the ones that do not wait).

Queues take turns by their heads' priority and creation time, one admission per turn, until no queue
admits more at that instant. A workload is admitted when all its remaining replicas fit at once on
the occupancy now (its quota, and cohort borrowing, included: the occupancy state's
:class:`~capplan.placement.core.quota.QuotaBook`), with its required or preferred topology (Kueue's
TAS) as the greedy placer places gangs. Nothing is reserved ahead and nothing is preempted. A workload
Kueue would admit but that would end after its deadline or the horizon still holds its room in the
simulation, and is listed as unscheduled (its estimated start is kept in ``metrics.kueue_starts``).
Workloads without a queue are admitted in the same way from one best-effort queue without quota.

Not modelled: fair sharing, admission checks, preemption (beyond priority order), flavor fungibility
(the greedy placer picks nodes, so flavors, by best fit rather than in the queue's flavor order),
partial admission.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

import numpy as np

from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.model.schedule import Schedule, Unscheduled
from capplan.model.timing import ceil_to, describe_seconds
from capplan.placement.core.reasons import explain
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.greedy import GreedyPlacer, place_workload, shape_key
from capplan.placement.schedule.result import make_schedule
from capplan.placement.schedule.timeline import Item

_NO_QUEUE = ""
#: ``metrics.bound`` of a ``--policy kueue`` schedule: what its ``bound`` and ``gap`` are (docs/formats.md).
BOUND_LABEL = "a priori: no schedule does more work; for comparison (a simulation, not an optimisation: no gap)"


def kueue_order(p: Problem) -> Callable[[Workload], tuple[int, int, int]]:
    """Kueue's order inside a ClusterQueue: priority (highest first), creation time, scenario order."""
    return lambda w: (-w.priority, w.created, p.workload_index[w.name])


class _DomainPlacer(GreedyPlacer):
    """The greedy placer with a faster search of the domain for a required (or preferred) topology level.

    :meth:`GreedyPlacer.place_in_one_domain` tries every domain of the level and keeps the one a full
    placement leaves with the fewest free whole GPUs (the first in domain order on a tie). For workloads of
    whole GPUs, ``g`` per replica on every eligible node, a full placement of ``n`` replicas leaves exactly
    ``free - n g`` there, and a domain whose nodes' CPU, memory and free whole GPUs hold fewer than ``n``
    replicas cannot take them all. So the domains that may hold ``n`` are tried in the order of that leftover
    (then domain order), and the first full placement is the greedy placer's answer; it is checked against
    the leftover it was predicted to leave, and anything else falls back to the greedy placer's own search.
    """

    def place_in_one_domain(self, w: Workload, n: int, level: str, fixed_domain: str | None,
                            all_or_nothing: bool, within: np.ndarray | None = None) -> list[Placement]:
        st = self.st
        idx, per = st.eligible(w)
        kinds = {(d.kind, d.gpus) for d in per.values()}
        if fixed_domain is not None or len(kinds) != 1 or idx.size == 0:
            return super().place_in_one_domain(w, n, level, fixed_domain, all_or_nothing, within)
        kind, g = next(iter(kinds))
        if kind != "whole" or g < 1:
            return super().place_in_one_domain(w, n, level, fixed_domain, all_or_nothing, within)
        size = len(st.nodes)
        inside = np.zeros(size, dtype=bool)
        inside[within if within is not None else slice(None)] = True
        room = np.zeros(size, dtype=np.int64)
        cap = st.free_whole[idx] // g
        if w.cpu_milli:
            cap = np.minimum(cap, st.cpu[idx] // w.cpu_milli)
        if w.memory_mib:
            cap = np.minimum(cap, st.mem[idx] // w.memory_mib)
        room[idx] = cap
        room[~inside] = 0
        if level == self.p.cluster.levels[-1]:
            ids, count = np.arange(size), size
        else:
            ids, names = st.domain_ids(level)
            count = len(names)
        dom_room = np.bincount(ids, weights=room, minlength=count)
        dom_free = np.bincount(ids, weights=np.where(inside, st.free_whole, 0), minlength=count)
        left = dom_free - n * g
        fits = np.flatnonzero(dom_room >= n)
        for k in fits[np.lexsort((fits, left[fits]))].tolist():
            nodes = np.flatnonzero((ids == k) & inside)
            trial = self.place_group(w, n, nodes, all_or_nothing)
            if len(trial) == n:
                if self.domain_leftover(nodes) == left[k]:
                    return trial
                self.undo(w, trial)  # not the predicted leftover: the greedy placer's own search decides
                break
            self.undo(w, trial)
        else:
            if all_or_nothing:
                return []  # no domain takes all n: every trial of the greedy placer's search comes back empty
        return super().place_in_one_domain(w, n, level, fixed_domain, all_or_nothing, within)


class KueueSim:
    """The admission simulation of one problem (see the module docstring)."""

    def __init__(self, p: Problem, horizon: int, step: int) -> None:
        self.p, self.horizon, self.step = p, horizon, step
        self.st = ClusterState(p)
        self.placer = _DomainPlacer(p, self.st)
        self.live: list[tuple[int, int, Item]] = []  # heap of (end, seq, item)
        self.items: list[Item] = []
        self.seq = 0
        self.strict = {q.name: q.strategy == "StrictFIFO" for q in p.queues}
        self.running: dict[str, list[Assignment]] = {}
        self.starts: dict[str, int] = {}
        self.reasons: dict[str, str] = {}
        self._charge_nodes: dict[object, list[int]] = {}  # per shape: one eligible node per distinct quota charge
        ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
        nodes = p.cluster.nodes
        for a in p.running:
            w = p.workload(a.workload)
            i = p.cluster.node_index[a.node]
            d = p.demand_on(w, nodes[i])
            assert d is not None
            pl = self.st.place_assignment(w, d, a)
            self._add(Item(w=w, replica=a.replica, d=d, pl=pl, start=0, end=min(ends.get(a.key, horizon), horizon),
                           running=True))
            self.running.setdefault(w.name, []).append(a)
        self.todo: dict[str, list[int]] = {}
        for w in p.workloads:
            have = {a.replica for a in self.running.get(w.name, ())}
            missing = [r for r in range(w.replicas) if r not in have]
            if missing:
                self.todo[w.name] = missing
        #: what decides whether a workload fits now: its shape and its replicas to place (failures are shared)
        # (a small number per key: failures are looked up and grouped for every pending workload at every instant)
        ids: dict[tuple[object, int], int] = {}
        self.keys: dict[str, int] = {  # replicas already running pin a domain: then its own key
            name: ids.setdefault(((name,) if name in self.running else shape_key(p.workload(name)), len(reps)),
                                 len(ids))
            for name, reps in self.todo.items()}
        order = kueue_order(p)
        self.queues: dict[str, list[Workload]] = {}
        for w in sorted((w for w in p.workloads if w.name in self.todo), key=order):
            self.queues.setdefault(w.queue or _NO_QUEUE, []).append(w)
        #: per queue, its latest release (from then on all its workloads are ready) and whether it holds admitted ones
        self.last_release = {q: max(w.release for w in ws) for q, ws in self.queues.items()}
        self.stale = dict.fromkeys(self.queues, False)

    def _add(self, it: Item) -> None:
        self.items.append(it)
        heapq.heappush(self.live, (it.end, self.seq, it))
        self.seq += 1

    def _end(self, w: Workload, t: int) -> int:
        return t + w.duration if w.duration is not None else self.horizon

    def _try(self, w: Workload, t: int, failed: set[int]) -> bool:
        n = len(self.todo[w.name])
        key = self.keys[w.name]
        if key in failed:
            return False
        if not self._may_fit(w, n):
            placed: list[Placement] = []
        else:
            placed = place_workload(self.placer, w, n, self.running.get(w.name, []))
        if len(placed) < n:
            self.placer.undo(w, placed)
            failed.add(key)
            if w.name not in self.reasons:
                self.reasons[w.name] = self._why(w, t, n)
            return False
        end = self._end(w, t)
        for r, pl in zip(self.todo.pop(w.name), placed, strict=True):
            self._add(Item(w=w, replica=r, d=self.st.demand_at(w, pl.node), pl=pl, start=t, end=end))
        self.starts[w.name] = t
        return True

    def _may_fit(self, w: Workload, n: int) -> bool:
        """A quick necessary condition for ``n`` replicas of ``w`` now: its quota has room for all of them on
        some node's flavors, and the free whole GPUs, CPU and memory of its eligible nodes (of one domain
        of its required level) hold them. False only when the placer would fail too."""
        st = self.st
        idx, per = st.eligible(w)
        if idx.size == 0:
            return False
        if st.quota is not None and w.queue is not None:
            book = st.quota
            shape = (w.queue, w.cpu_milli, w.memory_mib, w.gpus, w.mig, w.gpu_fraction, w.gpu_models)
            distinct = self._charge_nodes.get(shape)
            if distinct is None:
                seen: dict[object, int] = {}
                for i in idx.tolist():
                    seen.setdefault(book.charges(w, per.get(st.model_of[i]), i), i)
                distinct = self._charge_nodes[shape] = list(seen.values())
            need = n if (w.is_gang or w.topology.required) else 1
            if not any(book.room(w, per.get(st.model_of[i]), i, need) for i in distinct):
                return False
        big = np.int64(1 << 40)
        room = np.full(idx.size, big)
        if w.cpu_milli:
            room = np.minimum(room, st.cpu[idx] // w.cpu_milli)
        if w.memory_mib:
            room = np.minimum(room, st.mem[idx] // w.memory_mib)
        if w.gpus is not None:
            room = np.minimum(room, st.free_whole[idx] // w.gpus)
        room = np.minimum(room, n)
        lvl = w.topology.required
        if lvl and lvl != "node" and n > 1:
            ids, _ = st.domain_ids(lvl)
            return bool(np.bincount(ids[idx], weights=room).max() >= n)
        return bool(room.sum() >= (n if w.is_gang else 1))

    def _why(self, w: Workload, t: int, n: int) -> str:
        return explain(self.st, w, n)

    def _turn(self, t: int) -> bool:
        """Admit what the queues admit at ``t``; whether anything was admitted."""
        any_admitted = False
        failed: set[int] = set()
        todo = self.todo
        ready: dict[str, list[Workload]] = {}
        for q, ws in self.queues.items():
            if self.stale[q]:
                ws = self.queues[q] = [w for w in ws if w.name in todo]
                self.stale[q] = False
            # once all are released the queue's own list is the ready one (an admission leaves it at once)
            ready[q] = ws if self.last_release[q] <= t else [w for w in ws if w.release <= t]
        # A BestEffortFIFO queue's workloads before its cursor all have a shape that failed at this instant
        # (failures are kept for the instant), so its next scan starts there: the same tries, in the same order.
        cursor = dict.fromkeys(ready, 0)
        order = kueue_order(self.p)
        keys = self.keys
        # a BestEffortFIFO queue all of whose shapes failed at this instant admits nothing more at it
        shapes = {q: {keys[w.name] for w in ws} for q, ws in ready.items() if not self.strict.get(q, False)}
        noted: set[str] = set()  # StrictFIFO queues whose waiting workloads got their reason at this instant
        while True:
            heads = sorted((q for q in ready if ready[q]), key=lambda q: order(ready[q][0]))
            admitted: tuple[str, int] | None = None
            for q in heads:
                strict = self.strict.get(q, False)
                waiting = ready[q]
                if strict:
                    w = waiting[0]
                    if keys[w.name] not in failed and self._try(w, t, failed):
                        admitted = (q, 0)
                else:
                    j, end = cursor[q], len(waiting)
                    if shapes[q] <= failed:
                        j = end
                    while j < end:
                        w = waiting[j]
                        if keys[w.name] not in failed:
                            if self._try(w, t, failed):
                                admitted = (q, j)
                                break
                            if shapes[q] <= failed:
                                j = end
                                break
                        j += 1
                    cursor[q] = j
                if strict and admitted is None and q not in noted:
                    noted.add(q)
                    behind = f"queue: behind {waiting[0].name} in StrictFIFO ClusterQueue {q}"
                    for w in waiting[1:]:
                        self.reasons.setdefault(w.name, behind)
                if admitted is not None:
                    break
            if admitted is None:
                return any_admitted
            q, j = admitted
            if ready[q] is not self.queues[q]:
                self.stale[q] = True  # admitted: out of self.todo, so out of self.queues at the next instant
            del ready[q][j]
            any_admitted = True

    def run(self) -> None:
        """Simulate from time 0 until nothing is pending or the horizon."""
        releases = sorted({ceil_to(w.release, self.step) for ws in self.queues.values() for w in ws})
        t = 0
        while self.todo and t < self.horizon:
            while self.live and self.live[0][0] <= t:
                _, _, it = heapq.heappop(self.live)
                self.st.apply(it.w, it.d, it.pl, -1)
            self._turn(t)
            nxt = [ceil_to(self.live[0][0], self.step)] if self.live else []
            nxt += [r for r in releases if r > t][:1]
            if not nxt:
                break
            t = min(nxt)  # the live ends and releases left are all after t


def schedule_kueue(p: Problem, horizon: int, step: int, seed: int = 0) -> Schedule:
    """The schedule Kueue's admission gives ``p`` over ``[0, horizon)`` (not yet validated)."""
    t0 = time.perf_counter()
    sim = KueueSim(p, horizon, step)
    sim.run()
    keep: list[Item] = []
    late: dict[str, int] = {}
    for it in sim.items:
        w = it.w
        limit = min(w.deadline if w.deadline is not None else horizon, horizon)
        if it.running or it.end <= limit:
            keep.append(it)
        else:
            late[w.name] = it.start
    reasons = dict(sim.reasons)
    waited = {name: why for name, why in sim.reasons.items()
              if name in sim.starts and sim.starts[name] > ceil_to(p.workload(name).release, step)}
    unscheduled = []
    late_reps: dict[str, set[int]] = {}
    for it in sim.items:
        if it.w.name in late:
            late_reps.setdefault(it.w.name, set()).add(it.replica)
    for w in p.workloads:
        missing = sorted(set(sim.todo.get(w.name, ())) | late_reps.get(w.name, set()))
        if not missing:
            if w.name in sim.starts and sim.starts[w.name] > ceil_to(w.release, step) and w.name in reasons:
                reasons[w.name] = f"{reasons[w.name]} (admitted at {describe_seconds(sim.starts[w.name])})"
            else:
                reasons.pop(w.name, None)
            continue
        if w.name in late:
            end = sim._end(w, late[w.name])
            why = (f"Kueue admits it at {describe_seconds(late[w.name])}; it would end at {describe_seconds(end)}, "
                   f"after its deadline or the horizon {describe_seconds(horizon)}")
        else:
            first = reasons.get(w.name, "not admitted")
            why = f"{first}; Kueue does not admit it before the horizon {describe_seconds(horizon)}"
        reasons[w.name] = why
        unscheduled.append(Unscheduled(workload=w.name, replicas=tuple(missing), reason=why))
    out = make_schedule(p, "kueue", keep, unscheduled, horizon=horizon, step=step, reasons=reasons,
                        seconds=time.perf_counter() - t0, seed=seed,
                        extra_metrics={"policy": "kueue", "bound": BOUND_LABEL, "kueue_starts": dict(sim.starts),
                                       "kueue_reasons": waited})
    # A simulation searches nothing: its schedule is feasible (or infeasible: a guaranteed workload is late),
    # never "optimal"; the bound is the a-priori one, kept (the format's field) for comparison.
    return out.model_copy(update={"status": "feasible"}) if out.status == "optimal" else out

