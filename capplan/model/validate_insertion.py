"""The insertion check of the independent schedule validator: does an unscheduled replica fit as it is?

A schedule that leaves a replica out while that replica fits into the schedule's free capacity for its
whole run, between its release and its deadline, without moving anything, is not optimal, and its
bound is wrong wherever adding the replica would raise the work above it; its reason ("no room ...")
is wrong too. :func:`insertions` finds such replicas from the rules alone (no planner code): for each
workload with replicas left out (gangs of more than one replica excepted: their replicas must start
together), each node that can host it and each grid start, it tries one placement per GPU (whole GPUs:
the lowest free indices) and checks every plan rule (:func:`~capplan.model.validate_rules.check_assignments`
on the replicas running at each instant of the run where something starts, the nodes sharing a power
budget included, the workload-wide rules of :func:`~capplan.model.validate_rules.check_groups`, and for a
workload admitted through a ClusterQueue the quotas over the whole schedule,
:func:`~capplan.model.validate_quota.check_quota_spans`).

It is sound, not complete: a replica it reports fits (the schedule with it added passes every rule); a
replica that fits only in a placement it does not try is not reported. Starts tried: the release and
every end of a replica on the node's power group, rounded up to the grid (the use of a node only grows
when something starts, so a run that fits from ``t`` also fits from the last end before ``t``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Demand, Node, Problem, Workload
from capplan.model.schedule import Schedule, TimedAssignment
from capplan.model.units import MILLI
from capplan.model.validate_quota import Span, check_quota_spans
from capplan.model.validate_rules import check_assignments, check_groups


@dataclass(frozen=True)
class Insertion:
    """One replica that fits into a schedule as it is: where and when."""

    workload: str
    replica: int
    assignment: Assignment
    start_s: int
    end_s: int
    units: int  # demand units (work = units x (end - start))

    def __str__(self) -> str:
        a = self.assignment
        where = a.node + (f" GPUs {list(a.gpus)}" if a.gpus else "") + (f" {a.mig.profile}@{a.mig.start}"
                                                                       if a.mig else "")
        return f"{self.workload}[{self.replica}] fits on {where} from {self.start_s} s to {self.end_s} s"


def space(a: TimedAssignment) -> Assignment:
    """The placement of a timed assignment, without its times."""
    return Assignment(workload=a.workload, replica=a.replica, node=a.node, gpus=a.gpus, mig=a.mig,
                      fraction=a.fraction)


def budget_groups(p: Problem) -> dict[str, list[str]]:
    """Node -> the nodes sharing a power budget with it (itself included)."""
    budgets = {(d.level, d.name) for d in p.cluster.domains if d.power_w is not None}
    members: dict[tuple[str, str], list[str]] = defaultdict(list)
    for n in p.cluster.nodes:
        for lvl, dom in zip(p.cluster.levels[:-1], n.path, strict=True):
            if (lvl, dom) in budgets:
                members[(lvl, dom)].append(n.name)
    out: dict[str, list[str]] = {}
    for n in p.cluster.nodes:
        group = {n.name}
        for lvl, dom in zip(p.cluster.levels[:-1], n.path, strict=True):
            group.update(members.get((lvl, dom), ()))
        out[n.name] = sorted(group)
    return out


def _candidates(p: Problem, w: Workload, replica: int, node: Node, d: Demand,
                busy: list[TimedAssignment]) -> list[Assignment]:
    """One placement per GPU of ``node`` (whole GPUs: the lowest indices no overlapping replica holds)."""
    base = {"workload": w.name, "replica": replica, "node": node.name}
    if d.kind == "none":
        return [Assignment(**base)]
    whole_used = {g for a in busy if a.mig is None and a.fraction is None for g in a.gpus}
    if d.kind == "whole":
        used = {g for a in busy for g in a.gpus}
        free = [g for g in range(node.gpus) if g not in used]
        return [Assignment(**base, gpus=tuple(free[:d.gpus]))] if len(free) >= d.gpus else []
    out = []
    for g in range(node.gpus):
        if g in whole_used:
            continue
        if d.kind == "fraction":
            out.append(Assignment(**base, gpus=(g,), fraction=d.fraction_milli / MILLI))
        elif d.profile is not None:
            out += [Assignment(**base, gpus=(g,), mig=MigSlot(profile=d.profile.name, start=s))
                    for s in d.profile.starts]
    return out


def _room(p: Problem, node: Node, cand: Assignment, active: list[TimedAssignment]) -> bool:
    """A necessary condition, cheap: the node's CPU and memory hold ``cand`` with the ``active`` replicas (the
    plan rules' additive host resources, summed here from the workloads' requests)."""
    w = p.workload(cand.workload)
    cpu, mem = w.cpu_milli, w.memory_mib
    for a in active:
        if a.node == node.name:
            other = p.workload(a.workload)
            cpu += other.cpu_milli
            mem += other.memory_mib
    return cpu <= node.cpu_milli and mem <= node.memory_mib


def _fits(p: Problem, node: Node, cand: Assignment, start: int, end: int, group: list[TimedAssignment],
          placed: dict[tuple[str, int], Assignment], spans: list[Span] | None) -> bool:
    instants = [start, *sorted({a.start_s for a in group if start < a.start_s < end})]
    for t in instants:
        now = [a for a in group if a.start_s <= t < a.end_s]
        if not _room(p, node, cand, now) or check_assignments(p, [*(space(a) for a in now), cand]):
            return False
    if check_groups(p, {**placed, (cand.workload, cand.replica): cand}, [cand.workload]):
        return False
    # ClusterQueue quotas are fleet-wide: the whole schedule with the candidate, checked last (the costliest)
    return spans is None or not check_quota_spans(p, [*spans, (start, end, cand, True)])


def _run(w: Workload, t: int, horizon: int) -> int:
    return t + w.duration if w.duration is not None else horizon


class InsertionIndex:
    """A schedule's assignments indexed for :func:`insertions`, built once and grown by :meth:`add` (a caller
    inserting replica after replica does not re-index the whole schedule each time)."""

    def __init__(self, p: Problem, assignments: Iterable[TimedAssignment]) -> None:
        self.p = p
        self.placed: dict[tuple[str, int], TimedAssignment] = {}
        self.by_node: dict[str, list[TimedAssignment]] = defaultdict(list)
        self.by_workload: dict[str, list[TimedAssignment]] = defaultdict(list)
        self.groups = budget_groups(p)
        self.running = {a.key for a in p.running}
        self.spans: list[Span] | None = [] if p.queues else None
        for a in assignments:
            self.add(a)

    def add(self, a: TimedAssignment) -> None:
        """Index one more assignment."""
        self.placed[(a.workload, a.replica)] = a
        self.by_node[a.node].append(a)
        self.by_workload[a.workload].append(a)
        if self.spans is not None:
            self.spans.append((a.start_s, a.end_s, space(a), a.key not in self.running))

    def placed_of(self, w: Workload) -> dict[tuple[str, int], Assignment]:
        """``w``'s placed replicas, without their times (the rules over a workload's replicas read them)."""
        return {(a.workload, a.replica): space(a) for a in self.by_workload.get(w.name, ())}


def insertions(p: Problem, s: Schedule, first_only: bool = True,
               index: InsertionIndex | None = None) -> list[Insertion]:
    """Replicas left out of ``s`` that fit into it as it is (see the module docstring); at most one per
    workload (``first_only``: stop at the first found at all). ``index``: ``s``'s assignments already
    indexed (:class:`InsertionIndex`)."""
    step, horizon = s.step_s, s.horizon_s
    if step <= 0 or horizon <= 0:
        return []
    ix = index if index is not None else InsertionIndex(p, s.assignments)
    found: list[Insertion] = []
    for w in p.workloads:
        mine = ix.by_workload.get(w.name, ())
        if len(mine) >= w.replicas or (w.is_gang and w.replicas > 1):
            continue
        taken = {a.replica for a in mine}
        first = next(r for r in range(w.replicas) if r not in taken)
        limit = min(w.deadline, horizon) if w.deadline is not None else horizon
        hit = _first_fit(p, w, first, limit, step, horizon, ix.by_node, ix.groups, ix.placed_of(w),
                         ix.spans if w.queue is not None else None)
        if hit is not None:
            found.append(hit)
            if first_only:
                break
    return found


def _first_fit(p: Problem, w: Workload, replica: int, limit: int, step: int, horizon: int,
               by_node: dict[str, list[TimedAssignment]], groups: dict[str, list[str]],
               placed: dict[tuple[str, int], Assignment], spans: list[Span] | None) -> Insertion | None:
    earliest = -(-w.release // step) * step
    for node in p.cluster.nodes:
        d = p.can_host(w, node)
        if d is None:
            continue
        group = [a for name in groups.get(node.name, [node.name]) for a in by_node.get(name, ())]
        here = by_node.get(node.name, [])
        starts = sorted({max(earliest, -(-a.end_s // step) * step) for a in group} | {earliest})
        for t in starts:
            end = _run(w, t, horizon)
            if t >= horizon or end > limit:
                break
            busy = [a for a in here if a.start_s < end and t < a.end_s]
            for cand in _candidates(p, w, replica, node, d, busy):
                if _fits(p, node, cand, t, end, group, placed, spans):
                    return Insertion(w.name, replica, cand, t, end, d.units)
    return None
