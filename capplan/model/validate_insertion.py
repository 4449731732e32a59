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


def _fits(p: Problem, cand: Assignment, start: int, end: int, group: list[TimedAssignment],
          placed: dict[tuple[str, int], Assignment], spans: list[Span] | None) -> bool:
    instants = [start, *sorted({a.start_s for a in group if start < a.start_s < end})]
    for t in instants:
        active = [space(a) for a in group if a.start_s <= t < a.end_s]
        if check_assignments(p, [*active, cand]):
            return False
    if check_groups(p, {**placed, (cand.workload, cand.replica): cand}):
        return False
    # ClusterQueue quotas are fleet-wide: the whole schedule with the candidate, checked last (the costliest)
    return spans is None or not check_quota_spans(p, [*spans, (start, end, cand, True)])


def _run(w: Workload, t: int, horizon: int) -> int:
    return t + w.duration if w.duration is not None else horizon


def insertions(p: Problem, s: Schedule, first_only: bool = True) -> list[Insertion]:
    """Replicas left out of ``s`` that fit into it as it is (see the module docstring); at most one per
    workload (``first_only``: stop at the first found at all)."""
    step, horizon = s.step_s, s.horizon_s
    if step <= 0 or horizon <= 0:
        return []
    placed_t = {(a.workload, a.replica): a for a in s.assignments}
    placed = {k: space(a) for k, a in placed_t.items()}
    by_node: dict[str, list[TimedAssignment]] = defaultdict(list)
    for a in s.assignments:
        by_node[a.node].append(a)
    groups = budget_groups(p)
    running = {a.key for a in p.running}
    spans: list[Span] | None = [(a.start_s, a.end_s, space(a), a.key not in running)
                                for a in s.assignments] if p.queues else None
    found: list[Insertion] = []
    for w in p.workloads:
        missing = [r for r in range(w.replicas) if (w.name, r) not in placed_t]
        if not missing or (w.is_gang and w.replicas > 1):
            continue
        limit = min(w.deadline, horizon) if w.deadline is not None else horizon
        hit = _first_fit(p, w, missing[0], limit, step, horizon, by_node, groups, placed,
                         spans if w.queue is not None else None)
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
                if _fits(p, cand, t, end, group, placed, spans):
                    return Insertion(w.name, replica, cand, t, end, d.units)
    return None
