"""List scheduling in time order, for large problems: one pass over the events, exact per instant.

Time moves forward over releases and ends (on the step grid). At each instant the occupancy
state holds exactly the replicas running then; the waiting workloads are tried in the order of
:func:`~capplan.placement.schedule.heuristic.schedule_order` and every one that fits starts now
(backfill without reservations). Nothing is ever scheduled in the future, so a replica that fits
when it starts fits for its whole run: each replica is applied once and removed once, which makes
this pass linear in the events where :class:`~capplan.placement.schedule.heuristic.ListScheduler`
re-builds a window per candidate start. The price: a big workload may wait behind smaller ones
that start first.
"""

from __future__ import annotations

import bisect
import heapq
import time
from dataclasses import dataclass

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.model.schedule import Schedule, Unscheduled
from capplan.model.timing import ceil_to, describe_seconds
from capplan.placement.core.budget import speed
from capplan.placement.core.reasons import explain
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.core.summary import describe_demand
from capplan.placement.greedy import GreedyPlacer, place_workload, shape_key
from capplan.placement.schedule.heuristic import Outcome, schedule_order
from capplan.placement.schedule.result import make_schedule
from capplan.placement.schedule.timeline import Item

#: Share of the run's deadline kept after the sweep for the energy bound, the reasons and the schedule.
SWEEP_POST_SHARE = 0.3
#: What follows the sweep costs about this many :func:`~capplan.placement.core.budget.speed` loops per replica it
#: started (the schedule's assembly and insertion check, the independent validator, the JSON writer): the sweep
#: stops while that much of its deadline is left (limits_bench's ``cpureplicas1m`` at 30 s: 57 us of CPU per
#: replica started, after the sweep; the loop takes about 3 ms on an idle core).
SCHEDULED_POST_COST = 0.025
LATE = "not tried: the time limit ran out"


@dataclass
class _Waiting:
    """A workload waiting to start, with what the sweep needs about it."""

    order: int
    w: Workload
    earliest: int
    limit: int  # latest end
    key: tuple[object, ...]
    failed_epoch: int = -1  # the removal epoch of its last failed try


class _Sweep:
    """The state of one forward pass: occupancy, running replicas, waiting workloads, events."""

    def __init__(self, p: Problem, horizon: int, step: int) -> None:
        self.p, self.horizon, self.step = p, horizon, step
        self.st = ClusterState(p)
        self.placer = GreedyPlacer(p, self.st)
        self.out = Outcome(items=[])
        # heap of (end, first item index, item count): the replicas of one workload started on one node at one
        # instant end together and leave the occupancy in one step (:meth:`ClusterState.apply_many`)
        self.active: list[tuple[int, int, int]] = []
        self.events: list[int] = [0]
        self.done: dict[str, set[int]] = {}
        self.left: dict[str, list[int]] = {}  # per workload, the replicas not started yet, in index order
        self.next: dict[str, int] = {}  # per workload, how many of ``left`` have started
        self.domain: dict[str, str] = {}
        self.epoch = 0  # counts the instants at which capacity was freed
        self.by_workload: dict[str, list[Item]] = {}
        ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
        cl = p.cluster
        for a in p.running:
            w = p.workload(a.workload)
            d = p.demand_on(w, cl.nodes[cl.node_index[a.node]])
            assert d is not None
            pl = self.st.place_assignment(w, d, a)
            self._start([Item(w=w, replica=a.replica, d=d, pl=pl, start=0,
                              end=min(ends.get(a.key, horizon), horizon), running=True)])
        self.pending: list[tuple[int, int, _Waiting]] = []  # heap by earliest start
        for k, w in enumerate(schedule_order(p)):
            started = self.done.get(w.name, set())
            self.left[w.name] = [r for r in range(w.replicas) if r not in started] if started else list(
                range(w.replicas))
            self.next[w.name] = 0
            if len(started) < w.replicas:
                wt = _Waiting(k, w, ceil_to(w.release, step),
                              min(w.deadline if w.deadline is not None else horizon, horizon), shape_key(w))
                heapq.heappush(self.pending, (wt.earliest, k, wt))
                heapq.heappush(self.events, wt.earliest)
        self.ready: list[_Waiting] = []

    def placed_of(self, w: Workload) -> list[Assignment]:
        """``w``'s replicas started so far, as assignments, where they matter: they fix its required domain and
        GPU model and steer a preferred domain (other workloads: none, whatever has started)."""
        if not (w.one_model or w.topology.required or w.topology.preferred):
            return []
        nodes = self.p.cluster.nodes
        return [Assignment(workload=w.name, replica=it.replica, node=nodes[it.pl.node].name)
                for it in self.by_workload.get(w.name, ())]

    def _start(self, group: list[Item]) -> None:
        """Start ``group``: replicas of one workload, on one node, from one instant to one end."""
        it = group[0]
        self.by_workload.setdefault(it.w.name, []).extend(group)
        first = len(self.out.items)
        self.out.items.extend(group)
        heapq.heappush(self.active, (it.end, first, len(group)))
        heapq.heappush(self.events, ceil_to(it.end, self.step))
        self.done.setdefault(it.w.name, set()).update(x.replica for x in group)
        lvl = it.w.topology.required
        if lvl and it.w.name not in self.domain:
            self.domain[it.w.name] = self.p.cluster.domain_of(self.p.cluster.nodes[it.pl.node], lvl)

    def _start_placed(self, w: Workload, todo: list[int], placed: list[Placement], t: int, end: int) -> None:
        """Start the replicas ``todo`` at ``placed`` (in order; as many as were placed), grouped by node."""
        k = 0
        while k < len(placed):
            node = placed[k].node
            j = k
            while j < len(placed) and placed[j].node == node:
                j += 1
            d = self.st.demand_at(w, node)
            self._start([Item(w=w, replica=r, d=d, pl=pl, start=t, end=end)
                         for r, pl in zip(todo[k:j], placed[k:j], strict=True)])
            k = j
        self.next[w.name] += len(placed)

    def advance(self, t: int) -> None:
        """Move to instant ``t``: end what ends, release what is released."""
        if self.active and self.active[0][0] <= t:
            self.epoch += 1  # capacity was freed: every waiting workload may fit again
        while self.active and self.active[0][0] <= t:
            _, first, count = heapq.heappop(self.active)
            it = self.out.items[first]
            self.st.apply_many(it.w, it.d, [x.pl for x in self.out.items[first:first + count]], -1)
        while self.pending and self.pending[0][0] <= t:
            bisect.insort(self.ready, heapq.heappop(self.pending)[2], key=lambda x: x.order)

    def out_of_time(self, deadline: Deadline | None, keep_per_item: float) -> bool:
        """Whether ``deadline`` has passed, or what is left of it is needed for what follows the sweep on the
        replicas started so far (``keep_per_item`` seconds each: the schedule's assembly, the validator, writing)."""
        return deadline is not None and deadline.remaining() <= keep_per_item * len(self.out.items)

    def start_what_fits(self, t: int, deadline: Deadline | None = None, keep_per_item: float = 0.0) -> bool:
        """Start every ready workload that fits now, in order; drop those that can no longer finish. Stop when
        :meth:`out_of_time` (False then: the workloads not reached stay ready)."""
        failed: set[tuple[object, ...]] = set()
        still: list[_Waiting] = []
        reasons = self.out.reasons
        for k, wt in enumerate(self.ready):
            if self.out_of_time(deadline, keep_per_item):
                self.ready = still + self.ready[k:]
                return False
            w = wt.w
            end = t + w.duration if w.duration is not None else self.horizon
            if end > wt.limit:  # can no longer finish in time: left unscheduled
                reasons[w.name] = _too_late(self.p, w, wt, t, self.step)
                continue
            if wt.failed_epoch == self.epoch or wt.key in failed:
                still.append(wt)
                continue
            todo = self.left[w.name][self.next[w.name]:]
            whole = len(todo)
            if deadline is not None and keep_per_item > 0 and _bulk(self.st, w):
                # no more replicas than what follows the sweep has time for (the rest wait, then are not tried)
                todo = todo[:max(1, int(deadline.remaining() / keep_per_item) - len(self.out.items))]
            placed = _place(self.placer, w, len(todo), self.domain.get(w.name), self.placed_of(w))
            self._start_placed(w, todo, placed, t, end)
            if len(placed) == len(todo) < whole:
                still.append(wt)
            elif len(placed) < len(todo):
                wt.failed_epoch = self.epoch
                failed.add(wt.key)
                still.append(wt)
                if t == wt.earliest and w.sla == "guaranteed" and w.name not in reasons:
                    reasons[w.name] = (f"cannot start at its release {describe_seconds(t)}: "
                                       f"{explain(self.st, w, len(todo) - len(placed))}")
            elif w.name in reasons and w.sla == "guaranteed":
                reasons[w.name] += f"; it starts at {describe_seconds(t)}"
        self.ready = still
        return True

    def run(self, deadline: Deadline | None = None, keep_per_item: float = 0.0) -> Outcome:
        """Sweep to the horizon, or until ``deadline`` less ``keep_per_item`` seconds per replica started
        (:meth:`out_of_time`; what has not started by then is reported as not tried); the scheduled replicas,
        what does not run, and reasons."""
        seen = -1
        cut: int | None = None
        while self.events and (self.ready or self.pending):
            if self.out_of_time(deadline, keep_per_item):
                cut = seen
                break
            t = heapq.heappop(self.events)
            if t == seen or t >= self.horizon:
                continue
            seen = t
            self.advance(t)
            if not self.start_what_fits(t, deadline, keep_per_item):
                cut = t
                break
        out = self.out
        out.cut_at = None if cut is None else max(0, cut)
        for wt in [*self.ready, *(x[2] for x in self.pending)]:
            if cut is not None:
                out.reasons[wt.w.name] = (f"{LATE}: the sweep stopped at {describe_seconds(max(0, cut))} "
                                          "of the horizon (a longer limit schedules more)")
            elif wt.w.name not in out.reasons or wt.w.sla != "guaranteed":
                out.reasons[wt.w.name] = _too_late(self.p, wt.w, wt, self.horizon, self.step)
        for w in self.p.workloads:
            missing = self.left[w.name][self.next[w.name]:] if w.name in self.left else []
            if missing:
                out.unscheduled.append(Unscheduled(workload=w.name, replicas=tuple(missing),
                                                   reason=out.reasons[w.name]))
        return out


def sweep_schedule(p: Problem, horizon: int, step: int, deadline: Deadline | None = None,
                   keep_per_item: float = 0.0) -> Outcome:
    """Schedule ``p`` by one forward pass over time: every replica (running ones first), and reasons;
    stopped at ``deadline``, less ``keep_per_item`` seconds per replica started (what has not started then
    is not tried)."""
    return _Sweep(p, horizon, step).run(deadline, keep_per_item)


def _too_late(p: Problem, w: Workload, wt: _Waiting, t: int, step: int) -> str:
    """Why ``w`` never started: no room from its release until starting became too late."""
    what = describe_demand(p, w)
    if w.replicas > 1:
        what = f"{w.replicas} x {what}" + (f" in one {w.topology.required}" if w.topology.required else
                                           " at once" if w.is_gang else "")
    last = wt.limit - w.duration if w.duration is not None else t
    until = "its deadline" if w.deadline is not None and w.deadline <= wt.limit else "the horizon"
    if last < wt.earliest:
        return (f"needs {what} for {describe_seconds(w.duration or 0)} from its release "
                f"{describe_seconds(wt.earliest)}, past {until} {describe_seconds(wt.limit)}")
    return (f"needs {what}; no room from its release {describe_seconds(wt.earliest)} until "
            f"{describe_seconds(ceil_to(last, step) if last % step else last)}, the last start that ends by "
            f"{until} {describe_seconds(wt.limit)}")


def _domains(st: ClusterState, w: Workload, n: int, fixed: str | None) -> list[str] | None:
    """Domains of ``w``'s required level that may hold ``n`` whole-GPU replicas, tightest first.

    A fast necessary condition from the free-capacity arrays (free GPUs, CPU and memory per node);
    None when it does not apply (no required level above the node, or no whole-GPU demand).
    """
    lvl = w.topology.required
    if w.gpus is None or not lvl or lvl == st.p.cluster.levels[-1]:
        return None
    idx, _ = st.eligible(w)
    per = st.free_whole[idx] // w.gpus
    if w.cpu_milli:
        per = np.minimum(per, st.cpu[idx] // w.cpu_milli)
    if w.memory_mib:
        per = np.minimum(per, st.mem[idx] // w.memory_mib)
    room: dict[str, int] = {}
    for i, c in zip(idx.tolist(), per.tolist(), strict=True):
        if c:
            dom = st.p.cluster.domain_of(st.nodes[i], lvl)
            room[dom] = room.get(dom, 0) + c
    need = n if w.is_gang else 1
    return sorted((d for d, c in room.items() if c >= need and (fixed is None or d == fixed)),
                  key=lambda d: (room[d], d))


def _bulk(st: ClusterState, w: Workload) -> bool:
    """Whether ``w``'s replicas may be placed node by node in one step each (:func:`_place_bulk`): no GPU demand,
    no topology, not a gang, no ClusterQueue quotas (then only CPU and memory change from one replica to the
    next on a node, and its other rules hold for all of them once they hold for one)."""
    return (not w.has_gpu_demand and not w.is_gang and not w.topology.required and not w.topology.preferred
            and st.quota is None)


def _place_bulk(placer: GreedyPlacer, w: Workload, n: int) -> list[Placement]:
    """Up to ``n`` replicas of ``w`` (see :func:`_bulk`) as the greedy placer places them one by one, a node at a
    time: in its best-fit order, each node that takes one takes as many as its free CPU and memory hold (one
    capacity query per node instead of one per replica); a node filled is remembered as full, as the placer
    does when the next replica fails there."""
    st = placer.st
    done: list[Placement] = []
    for i in placer.ordered(w, None):
        if len(done) == n:
            break
        d = st.demand_at(w, i)
        first = st.fit(w, d, i)
        if not isinstance(first, Placement):  # no GPU and no quota: the reason is the node's own, as the placer
            placer.remember(w, np.array([i], dtype=np.int64))  # remembers such a node
            continue
        k = n - len(done)
        if w.cpu_milli:
            k = min(k, int(st.cpu[i]) // w.cpu_milli)
        if w.memory_mib:
            k = min(k, int(st.mem[i]) // w.memory_mib)
        got = [first] * k  # a replica without GPUs is placed on the node alone: one (frozen) placement for all
        st.apply_many(w, d, got)
        done.extend(got)
        if len(done) < n:  # the node takes no more: the placer's next try there fails on CPU or memory
            placer.remember(w, np.array([i], dtype=np.int64))
    return done


def _place(placer: GreedyPlacer, w: Workload, n: int, fixed: str | None, placed: list[Assignment]) -> list[Placement]:
    """Place up to ``n`` replicas of ``w`` now (all or none for a gang), as the greedy placer would.

    With a required level, the domains that pass the necessary condition are tried tightest first
    and the first that holds the replicas is kept (for a gang that must stay on one GPU model, when
    each of those domains has one model; otherwise the greedy placer's per-model search decides).
    """
    st = placer.st
    if _bulk(st, w):
        return _place_bulk(placer, w, n)
    doms = _domains(st, w, n, fixed)
    lvl = w.topology.required
    if doms is not None and lvl is not None and (not w.one_model or all(
            len({st.model_of[i] for i in st.domain_nodes[(lvl, d)].tolist()}) == 1 for d in doms)):
        # (a one-model gang inside a domain of one GPU model keeps the rule by itself)
        for dom in doms:
            got = placer.place_group(w, n, st.domain_nodes[(lvl, dom)], w.is_gang)
            if got:
                return got
        return []
    if doms is not None and not doms:
        return []
    if w.gpus is not None and not w.topology.required:
        idx, _ = st.eligible(w)
        if int((st.free_whole[idx] // w.gpus).sum()) < (n if w.is_gang else 1):
            return []
    return place_workload(placer, w, n, placed)


def schedule_sweep(p: Problem, horizon: int, step: int, seed: int = 0, deadline: Deadline | None = None) -> Schedule:
    """The forward-pass schedule of ``p`` with its energy bound and reasons (not yet validated); the sweep
    stops at ``deadline`` less :data:`SWEEP_POST_SHARE` of it (the bound, reasons and schedule follow)."""
    t0 = time.perf_counter()
    keep = 0.0 if deadline is None else SCHEDULED_POST_COST * speed()
    out = sweep_schedule(p, horizon, step, None if deadline is None else deadline.share(1 - SWEEP_POST_SHARE), keep)
    late = {w.name for w in p.workloads if w.sla == "guaranteed"} | {u.workload for u in out.unscheduled}
    reasons = {k: v for k, v in out.reasons.items() if k in late}
    extra: dict[str, object] = {"method": "time-order sweep"}
    if out.cut_at is not None:
        extra.update(cut_by_time_limit=True, sweep_stopped_at_s=out.cut_at)
    return make_schedule(p, "heuristic", out.items, out.unscheduled, horizon=horizon, step=step,
                         reasons=reasons, seconds=time.perf_counter() - t0, seed=seed, extra_metrics=extra,
                         deadline=deadline)
