"""List scheduling: priority order, earliest feasible start, backfill.

Workloads are taken guaranteed first, then by priority (highest first), earliest deadline,
earliest release and larger demand. Each gets the earliest start on the step grid, from its
release on, at which the greedy placer fits it into the union of everything scheduled during
its run (:class:`~capplan.placement.schedule.timeline.Timeline`); later workloads may start
earlier than earlier ones wherever they fit (backfill). Candidate starts are the release and
the ends of scheduled replicas, the only instants at which room can appear. Deadlines are hard:
a workload that cannot end by its deadline (or, without one, by the horizon) is not scheduled,
and its reason says when it could have run. Deterministic: no randomness is used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.model.schedule import Schedule, Unscheduled
from capplan.model.timing import ceil_to, describe_seconds
from capplan.placement.core.reasons import explain
from capplan.placement.core.state import Placement
from capplan.placement.core.summary import describe_demand
from capplan.placement.greedy import GreedyPlacer, place_workload
from capplan.placement.schedule.result import lex_key, make_schedule
from capplan.placement.schedule.timeline import Item, Timeline


@dataclass
class Outcome:
    """What list scheduling produced: the replicas, what was left out, and per-workload reasons."""

    items: list[Item]
    unscheduled: list[Unscheduled] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    #: the instant at which the time-order sweep stopped for lack of time (None: it reached the horizon)
    cut_at: int | None = None


def schedule_order(p: Problem) -> list[Workload]:
    """Guaranteed first, then priority, earliest deadline, earliest release, larger demand, input order."""
    inf = 1 << 62
    return sorted(p.workloads, key=lambda w: (w.sla != "guaranteed", -w.priority,
                                              w.deadline if w.deadline is not None else inf, w.release,
                                              -p.demand_units(w) * w.replicas * (w.duration or inf),
                                              p.workload_index[w.name]))


class ListScheduler:
    """Earliest-feasible-start list scheduling on a :class:`Timeline`."""

    def __init__(self, p: Problem, horizon: int, step: int, scheduled: Sequence[Item] = ()) -> None:
        self.p = p
        self.horizon = horizon
        self.step = step
        self.tl = Timeline(p)
        ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
        nodes = p.cluster.nodes
        for a in p.running:
            w = p.workload(a.workload)
            d = p.demand_on(w, nodes[p.cluster.node_index[a.node]])
            assert d is not None
            pl = Placement(node=p.cluster.node_index[a.node], gpus=tuple(a.gpus), slot=a.mig,
                           fraction_milli=round(a.fraction * 1000) if a.fraction else 0)
            self.tl.add(Item(w=w, replica=a.replica, d=d, pl=pl, start=0,
                             end=min(ends.get(a.key, horizon), horizon), running=True))
        for it in scheduled:
            self.tl.add(it)

    def placed_of(self, w: Workload) -> list[Assignment]:
        """``w``'s replicas scheduled so far, as assignments (they fix its domain and GPU model)."""
        nodes = self.p.cluster.nodes
        return [Assignment(workload=w.name, replica=it.replica, node=nodes[it.pl.node].name)
                for it in self.tl.by_workload.get(w.name, ())]

    def try_at(self, w: Workload, n: int, t: int, end: int) -> list[Placement]:
        """Placements for up to ``n`` replicas of ``w`` running ``[t, end)`` (all or none for gangs)."""
        st = self.tl.window(t, end)
        placer = GreedyPlacer(self.p, st)
        placed = place_workload(placer, w, n, self.placed_of(w))
        placer.undo(w, placed)
        return placed

    def _candidates(self, w: Workload, earliest: int) -> list[int]:
        ends = self.tl.ends_after(earliest)
        times = {earliest} | {ceil_to(int(e), self.step) for e in ends}
        return sorted(t for t in times if t < self.horizon)

    def _end(self, w: Workload, t: int) -> int:
        return t + w.duration if w.duration is not None else self.horizon

    def earliest_fit(self, w: Workload, n: int, earliest: int) -> int | None:
        """The earliest grid start before the horizon at which ``n`` replicas of ``w`` fit, ignoring its deadline
        and letting it run past the horizon (None: never)."""
        for t in self._candidates(w, earliest):
            if len(self.try_at(w, n, t, self._end(w, t))) == (n if w.is_gang or w.topology.required else 1):
                return t
        return None

    def schedule(self, w: Workload, most: int | None = None) -> list[int]:
        """Schedule ``w``'s replicas (at most ``most`` of them) at their earliest feasible starts; return the
        replicas left."""
        taken = {it.replica for it in self.tl.by_workload.get(w.name, ())}
        todo = [r for r in range(w.replicas) if r not in taken][:most]
        if not todo:
            return []
        earliest = ceil_to(w.release, self.step)
        limit = min(w.deadline if w.deadline is not None else self.horizon, self.horizon)
        times = self._candidates(w, earliest)
        while times:
            t = times.pop(0)
            end = self._end(w, t)
            if end > limit:
                break
            placed = self.try_at(w, len(todo), t, end)
            if not placed:
                continue
            for r, pl in zip(todo, placed, strict=False):
                self.tl.add(Item(w=w, replica=r, d=self.tl.st.demand_at(w, pl.node), pl=pl, start=t, end=end))
            todo = todo[len(placed):]
            if not todo:
                break
            times = [x for x in self._candidates(w, earliest) if x > t]  # its own replicas' ends count too
        return todo

    def schedule_late(self, w: Workload) -> list[int]:
        """Schedule ``w``'s replicas at their latest feasible starts (the room before them stays free for
        others); services, whose work shrinks with a late start, go earliest. Return the replicas left."""
        if w.duration is None:
            return self.schedule(w)
        taken = {it.replica for it in self.tl.by_workload.get(w.name, ())}
        todo = [r for r in range(w.replicas) if r not in taken]
        earliest = ceil_to(w.release, self.step)
        limit = min(w.deadline if w.deadline is not None else self.horizon, self.horizon)
        latest = (limit - w.duration) // self.step * self.step
        if not todo or latest < earliest:
            return todo
        d = w.duration
        bound = latest
        while todo:
            # room appears, going back, where a scheduled replica starts at least a duration later
            times = {latest} | {(int(s) - d) // self.step * self.step
                                for s in self.tl.starts_between(earliest + d, bound + d)}
            times = {t for t in times if earliest <= t <= bound}
            for t in sorted(times, reverse=True):
                placed = self.try_at(w, len(todo), t, t + d)
                if placed:
                    for r, pl in zip(todo, placed, strict=False):
                        self.tl.add(Item(w=w, replica=r, d=self.tl.st.demand_at(w, pl.node), pl=pl,
                                         start=t, end=t + d))
                    todo = todo[len(placed):]
                    bound = t - self.step
                    break
            else:
                break
        return todo

    def late_reason(self, w: Workload, t: int) -> str:
        """Why guaranteed ``w`` cannot start at its release (``t``: when it does start, if at all)."""
        earliest = ceil_to(w.release, self.step)
        st = self.tl.window(earliest, self._end(w, earliest))
        why = explain(st, w, w.replicas)
        return f"cannot start at its release {describe_seconds(earliest)}: {why}; it starts at {describe_seconds(t)}"

    def holders(self, w: Workload, lo: int, hi: int, most: int = 3) -> str:
        """``; held in [lo, hi) by A (from .. to ..), ...``: the scheduled work on the nodes that could host ``w``
        overlapping that window, most GPU-time first (empty when none)."""
        nodes = self.p.cluster.nodes
        ok = {i for i, n in enumerate(nodes) if self.p.can_host(w, n) is not None}
        held: dict[str, list[int]] = {}  # workload -> [first start, last end, overlap units x seconds]
        for it in self.tl.live():
            if it.w.name == w.name or it.pl.node not in ok or it.end <= lo or it.start >= hi:
                continue
            h = held.setdefault(it.w.name, [it.start, it.end, 0])
            h[0], h[1] = min(h[0], it.start), max(h[1], it.end)
            h[2] += max(1, len(it.pl.gpus)) * (min(it.end, hi) - max(it.start, lo))
        if not held:
            return ""
        top = sorted(held.items(), key=lambda kv: (-kv[1][2], kv[0]))
        named = ", ".join(f"{name} ({describe_seconds(a)} to {describe_seconds(b)})" for name, (a, b, _) in top[:most])
        more = f" and {len(top) - most} more" if len(top) > most else ""
        return (f"; from {describe_seconds(lo)} to {describe_seconds(hi)} its nodes are held by {named}{more}")

    def missing_reason(self, w: Workload, missing: list[int]) -> str:
        """Why replicas of ``w`` do not run: never fit, or fit only too late (with the time they would)."""
        earliest = ceil_to(w.release, self.step)
        n = len(missing)
        what = f"{n} x {describe_demand(self.p, w)}" if n > 1 else describe_demand(self.p, w)
        if w.topology.required and n > 1:
            what += f" in one {w.topology.required}"
        elif w.is_gang and n > 1:
            what += " at once"
        if w.duration is not None and earliest + w.duration > self.horizon:
            return (f"needs {describe_seconds(w.duration)} from its release {describe_seconds(earliest)}, "
                    f"past the horizon {describe_seconds(self.horizon)}; extend the horizon (--horizon)")
        t = self.earliest_fit(w, n, earliest)
        last = min(self.horizon, w.deadline) if w.deadline is not None else self.horizon
        if t is None:
            st = self.tl.window(earliest, self._end(w, earliest))
            return (f"{explain(st, w, n)}; no room from its release to the horizon {describe_seconds(self.horizon)}"
                    f"{self.holders(w, earliest, last)}")
        end = self._end(w, t)
        if w.deadline is not None and end > w.deadline:
            return (f"needs {what}; the earliest room frees at {describe_seconds(t)}, so it would end at "
                    f"{describe_seconds(end)}, after its deadline {describe_seconds(w.deadline)}"
                    f"{self.holders(w, earliest, last)}")
        if end > self.horizon:
            return (f"needs {what}; the earliest room frees at {describe_seconds(t)}, so it would end at "
                    f"{describe_seconds(end)}, after the horizon {describe_seconds(self.horizon)}"
                    f"{self.holders(w, earliest, t)}")
        return (f"needs {what}; room for some frees at {describe_seconds(t)} (to end at {describe_seconds(end)}), "
                f"which this schedule leaves to other work{self.holders(w, earliest, end)}; a longer time limit or "
                "horizon may fit it")

    def run(self, order: list[Workload] | None = None, late_above: int | None = None) -> list[Item]:
        """Schedule every workload in ``order`` (default :func:`schedule_order`); return all replicas.

        Workloads of a priority above ``late_above`` go at their latest feasible starts."""
        for w in order or schedule_order(self.p):
            if late_above is not None and w.priority > late_above and w.sla != "guaranteed":
                self.schedule_late(w)
            else:
                self.schedule(w)
        return self.tl.live()


def diagnose(p: Problem, horizon: int, step: int, items: list[Item], known: Outcome | None = None) -> Outcome:
    """What does not run in a schedule of ``items``, and why; why guaranteed workloads start late.

    The reasons are computed on the schedule itself, whichever strategy made it. ``known``: an
    earlier schedule's outcome (e.g. the time-order sweep's, on large problems) whose entries are
    kept for workloads whose replicas (or late start) are the same in ``items``.
    """
    by_w: dict[str, list[Item]] = {}
    for it in items:
        by_w.setdefault(it.w.name, []).append(it)
    out = Outcome(items=items)
    full: ListScheduler | None = None
    same: dict[str, Unscheduled] = {u.workload: u for u in known.unscheduled} if known else {}
    before: dict[str, list[tuple[int, int]]] = {}
    if known is not None:
        for it in known.items:
            before.setdefault(it.w.name, []).append((it.replica, it.start))
    for w in p.workloads:
        mine = by_w.get(w.name, [])
        done = {it.replica for it in mine}
        missing = [r for r in range(w.replicas) if r not in done]
        was = same.get(w.name)
        if missing and was is not None and list(was.replicas) == missing:
            out.unscheduled.append(was)
            out.reasons[w.name] = was.reason
            continue
        late = w.sla == "guaranteed" and any(it.start != ceil_to(w.release, step) for it in mine if not it.running)
        if not missing and late and known is not None and w.name in known.reasons and sorted(
                (it.replica, it.start) for it in mine) == sorted(before.get(w.name, [])):
            out.reasons[w.name] = known.reasons[w.name]
            continue
        if missing:
            if full is None:
                full = ListScheduler(p, horizon, step, [it for it in items if not it.running])
            why = full.missing_reason(w, missing)
            out.unscheduled.append(Unscheduled(workload=w.name, replicas=tuple(missing), reason=why))
            out.reasons[w.name] = why
            continue
        fresh = [it for it in mine if not it.running]
        if w.sla == "guaranteed" and any(it.start != ceil_to(w.release, step) for it in fresh):
            others = ListScheduler(p, horizon, step, [it for it in items if not it.running and it.w.name != w.name])
            out.reasons[w.name] = others.late_reason(w, min(it.start for it in fresh))
    return out


def list_schedule(p: Problem, horizon: int, step: int, order: list[Workload] | None = None,
                  late_above: int | None = None) -> list[Item]:
    """Run list scheduling on ``p`` over ``[0, horizon)`` with starts on multiples of ``step`` (workloads of a
    priority above ``late_above`` at their latest feasible starts)."""
    return ListScheduler(p, horizon, step).run(order, late_above)


def compact(p: Problem, horizon: int, step: int, items: list[Item]) -> list[Item]:
    """Move work earlier where room allows, keeping every replica: in order of start, take each job (a
    gang's replicas together, otherwise one replica) out and put it back at the earliest grid start,
    from its release up to where it was, at which the greedy placer fits it (at worst where it was).

    The same replicas run for the same time, so the work per priority and the replica count are
    unchanged, and every replica's wait (so both the demand-weighted and the unweighted wait) can only shrink.
    """
    ls = ListScheduler(p, horizon, step, [it for it in items if not it.running])
    groups: dict[tuple[str, int], list[Item]] = {}
    for it in ls.tl.live():
        if not it.running:
            key = (it.w.name, it.start if it.w.is_gang else -1 - it.replica)
            groups.setdefault(key, []).append(it)
    for key in sorted(groups, key=lambda k: (groups[k][0].start, p.workload_index[k[0]], k[1])):
        mine = groups[key]
        w, was = mine[0].w, mine[0].start
        earliest = ceil_to(w.release, step)
        if was <= earliest:
            continue
        for it in mine:
            ls.tl.remove(it)
        moved = False
        for t in ls._candidates(w, earliest):
            if t >= was:
                break
            end = ls._end(w, t)
            placed = ls.try_at(w, len(mine), t, end)
            if len(placed) == len(mine):
                for it, pl in zip(mine, placed, strict=True):
                    ls.tl.add(Item(w=w, replica=it.replica, d=ls.tl.st.demand_at(w, pl.node), pl=pl, start=t,
                                   end=end))
                moved = True
                break
        if not moved:
            for it in mine:
                ls.tl.add(it)
    return ls.tl.live()


def fill(p: Problem, horizon: int, step: int, items: list[Item]) -> list[Item]:
    """Add what still fits: every replica that does not run goes, workload by workload in
    :func:`schedule_order`, to the earliest grid start at which it fits and ends in time (a gang all
    together). Nothing scheduled moves, so the higher levels only gain: a search's or compaction's
    final schedule can leave room a replica would fit in, and this takes it.
    """
    done: dict[str, set[int]] = {}
    for it in items:
        done.setdefault(it.w.name, set()).add(it.replica)
    todo = [w for w in schedule_order(p) if len(done.get(w.name, ())) < w.replicas]
    if not todo:
        return items
    ls = ListScheduler(p, horizon, step, [it for it in items if not it.running])
    for w in todo:
        ls.schedule(w)
    return ls.tl.live()


def _long_first(p: Problem) -> list[Workload]:
    inf = 1 << 62
    return sorted(p.workloads, key=lambda w: (w.sla != "guaranteed", -w.priority, -(w.duration or inf),
                                              -p.demand_units(w) * w.replicas, p.workload_index[w.name]))


def _latest_start_first(p: Problem) -> list[Workload]:
    inf = 1 << 62
    return sorted(p.workloads, key=lambda w: (w.sla != "guaranteed", -w.priority,
                                              (w.deadline if w.deadline is not None else inf) - (w.duration or 0),
                                              p.workload_index[w.name]))


def _most_work_first(p: Problem) -> list[Workload]:
    inf = 1 << 62
    return sorted(p.workloads, key=lambda w: (w.sla != "guaranteed", -w.priority,
                                              -p.demand_units(w) * w.replicas * (w.duration or inf),
                                              p.workload_index[w.name]))


def _short_first(p: Problem) -> list[Workload]:
    """Smith's rule within each priority: least run time per unit of demand first (the demand-weighted wait
    of one machine is smallest in that order); services (no duration) last."""
    inf = float(1 << 62)
    return sorted(p.workloads, key=lambda w: (w.sla != "guaranteed", -w.priority,
                                              (w.duration or inf) / max(1, p.demand_units(w) * w.replicas),
                                              p.workload_index[w.name]))


#: The orders list scheduling tries, best kept (each keeps guaranteed first and priorities highest first).
ORDERS: dict[str, Callable[[Problem], list[Workload]]] = {
    "deadline": schedule_order, "long-first": _long_first, "latest-start": _latest_start_first,
    "most-work": _most_work_first, "short-first": _short_first,
}


#: (order, higher priorities late) in the sequence list scheduling tries them. "Late" places every priority but
#: the lowest at its latest feasible start, leaving the room before it to lower priorities' long work (the
#: higher priorities' work is the same, only their wait grows); :func:`compact` then moves work earlier.
VARIANTS: tuple[tuple[str, bool], ...] = (
    ("long-first", True), ("deadline", False), ("short-first", False), ("most-work", True), ("latest-start", True),
    ("long-first", False), ("latest-start", False), ("most-work", False), ("deadline", True), ("short-first", True),
)


def best_list_schedule(p: Problem, horizon: int, step: int, time_limit: float) -> tuple[list[Item], str]:
    """List scheduling in each of :data:`VARIANTS` while time allows (the first always); the best schedule.

    Best is lexicographic (:func:`~capplan.placement.schedule.result.lex_key`): guaranteed replicas on time,
    then work per priority, then the smaller demand-weighted wait, more replicas, the smaller unweighted wait.
    The best is then compacted (:func:`compact`; a late variant's compacted form was tried already) if time
    allows: that changes no higher level (nor makes any wait longer) but starts work, CPU-only pods included,
    earlier where the rest of the schedule leaves room; then :func:`fill` adds what fits in that room.
    """
    t0 = time.perf_counter()
    best: tuple[tuple[int, ...], list[Item], str] | None = None
    lowest = min(p.priorities, default=0)
    variants = [(n, late) for n, late in VARIANTS if not late or len(p.priorities) > 1]
    runs = 0
    for name, late in variants:
        items = list_schedule(p, horizon, step, ORDERS[name](p), lowest if late else None)
        tries = [(items, f"{name}, late" if late else name)]
        if late and (time.perf_counter() - t0) * 2 <= time_limit:  # compaction costs about one more pass
            tries.append((compact(p, horizon, step, items), f"{name}, late, compacted"))
        for cand, label in tries:
            key = lex_key(p, cand, step)
            if best is None or key > best[0]:
                best = (key, cand, label)
        runs += len(tries)
        spent = time.perf_counter() - t0
        if spent * (runs + 2) / runs > time_limit:  # the next variant would likely not finish in time
            break
    assert best is not None
    if (time.perf_counter() - t0) * (runs + 1) / runs <= time_limit:
        if ", late" not in best[2]:  # a late variant's compacted form was tried already
            moved = compact(p, horizon, step, best[1])
            key = lex_key(p, moved, step)
            if key > best[0]:
                best = (key, moved, f"{best[2]}, compacted")
        more = fill(p, horizon, step, best[1])  # compaction may have left room for what did not run
        key = lex_key(p, more, step)
        if key > best[0]:
            best = (key, more, f"{best[2]}, filled")
    return best[1], best[2]


def schedule_heuristic(p: Problem, horizon: int, step: int, seed: int = 0,
                       time_limit: Deadline | float = 60.0) -> Schedule:
    """The best list-scheduling schedule of ``p`` over :data:`ORDERS`, with its energy bound (not yet validated)."""
    t0 = time.perf_counter()
    items, order = best_list_schedule(p, horizon, step, Deadline.coerce(time_limit).remaining())
    out = diagnose(p, horizon, step, items)
    return make_schedule(p, "heuristic", out.items, out.unscheduled, horizon=horizon, step=step,
                         reasons=out.reasons, seconds=time.perf_counter() - t0, seed=seed,
                         extra_metrics={"order": order})
