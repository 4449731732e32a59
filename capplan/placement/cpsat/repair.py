"""Region repair: re-solve small regions exactly, with the left-out replicas as candidates.

The aggregated model rarely improves a full plan by itself when the improvement needs several
coordinated changes: an H100 holding two 3g.40gb instances has all eight memory slices taken
and one compute slice idle; turning it into 3g.40gb + 1g.10gb x 4 gains a slice only if the
other 3g.40gb moves to a GPU whose whole-GPU job gives way, in a rack whose power budget allows
the busy GPUs. Such moves touch few nodes, so small regions are solved on their own: a rack, a
pair of nodes (one with stranded room, one carrying lowest-priority work), a pair of racks. Each
small problem holds the region's nodes, the replicas placed on them, every left-out replica that
could go there, and its domains' power budgets minus what the rest of each domain draws
(:func:`capplan.placement.core.subproblem.neighbourhood`), and the search loop of
:mod:`capplan.placement.core.search` solves it; replicas of a gang or of a workload with a required topology
that also sit outside the region stay where they are. It is solved by the exact planner in
well under a second for a node pair; the region's new arrangement is kept when it is
lexicographically better (guaranteed replicas, then placed demand and replicas per priority),
which makes the whole plan better by the same amount because nothing outside the region changes.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace

from capplan.model.plan import Assignment
from capplan.model.problem import Problem
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.search import Pick, SubResult, missing_replicas, search

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

SubSolver = Callable[[Problem, PlanOptions], list[Assignment]]


def regions(p: Problem) -> list[list[int]]:
    """Node indices per domain of the innermost level above ``node`` (racks); chunks of 8 without one."""
    cl = p.cluster
    if len(cl.levels) < 2:
        idx = list(range(len(cl.nodes)))
        return [idx[k:k + 8] for k in range(0, len(idx), 8)]
    level = cl.levels[-2]
    out: dict[str, list[int]] = defaultdict(list)
    for i, n in enumerate(cl.nodes):
        out[cl.domain_of(n, level)].append(i)
    return list(out.values())


def _busy(p: Problem, assignments: list[Assignment]) -> dict[str, set[int]]:
    busy: dict[str, set[int]] = defaultdict(set)
    for a in assignments:
        busy[a.node].update(a.gpus)
    return busy


def offer_for(p: Problem, assignments: list[Assignment], region: list[int]) -> Pick:
    """The region's neighbourhood: its nodes, with every left-out replica that could go there offered."""
    nodes = [p.cluster.nodes[i] for i in region]
    offer = [(w, rs) for w, rs in missing_replicas(p, assignments)
             if any(p.can_host(w, n) is not None for n in nodes)]
    return Pick(nodes={n.name for n in nodes}, offer=offer)


class _Regions:
    """Regions in the order of :func:`_neighbourhoods`, each tried once until the plan changes near it."""

    def __init__(self, p: Problem, current: list[Assignment], regs: list[list[int]]) -> None:
        self.p, self.regs = p, regs
        self.tried: set[tuple[int, ...]] = set()  # neighbourhoods solved with no improvement since
        self.order = _neighbourhoods(p, current, regs)  # recomputed only when the plan changes
        self.last: list[int] = []

    def next(self, current: list[Assignment]) -> Pick | None:
        region = next((n for n in self.order if tuple(n) not in self.tried), None)
        if region is None:
            return None
        self.tried.add(tuple(region))
        self.last = region
        return offer_for(self.p, current, region)

    def improved(self, pick: Pick, current: list[Assignment]) -> None:
        # Only neighbourhoods overlapping the region can improve now: elsewhere the arrangement is
        # unchanged and the left-out pool only shrank.
        self.tried = {t for t in self.tried if not set(t) & set(self.last)}
        self.order = _neighbourhoods(self.p, current, self.regs)


def repair(
    p: Problem, assignments: list[Assignment], options: PlanOptions, deadline: float, solve_sub: SubSolver,
    done: Callable[[list[Assignment]], bool] | None = None,
) -> tuple[list[Assignment], dict[str, object]]:
    """Improve ``assignments`` region by region until ``deadline`` or a pass without improvement.

    Parameters
    ----------
    p
        The problem (no running replicas).
    assignments
        A valid plan's assignments.
    options
        Seed and workers for the small solves.
    deadline
        A :func:`time.perf_counter` value.
    solve_sub
        Solves a region's problem and returns its assignments (the exact CP-SAT planner).
    done
        Asked after each improvement: True when the plan is proven optimal (repair stops there).

    Returns
    -------
    tuple
        The improved assignments and statistics (regions solved, improved, seconds).
    """
    regs = regions(p)
    if p.running or len(regs) < 2:
        return assignments, {"regions_solved": 0, "regions_improved": 0}

    def solve(sub: Problem, left: float) -> SubResult:
        ts = time.perf_counter()
        got = solve_sub(sub, replace(options.within(options.clock().within(min(left, 4.0))), progress=None))
        log.debug("repair: %d nodes solved in %.1fs", len(sub.cluster.nodes), time.perf_counter() - ts)
        return SubResult(got)

    current, st = search(p, assignments, _Regions(p, list(assignments), regs), solve, deadline, margin=0.5,
                         stop=done)
    return current, {"regions_solved": st.solved, "regions_improved": st.improved, "seconds": st.seconds}


def _neighbourhoods(p: Problem, assignments: list[Assignment], regs: list[list[int]]) -> list[list[int]]:
    """Node pairs, then racks by stranded room, then rack pairs.

    Node pairs join two nodes with stranded room (busy GPUs not full: MIG memory taken with
    compute idle, shares), whose instances can be regrouped (two GPUs of 3g.40gb x 2 and two of
    2g.20gb x 3 become three of 3g.40gb + 2g.20gb x 2 and a free GPU), then a node with stranded
    room and one carrying the most lowest-priority demand, whose work can make way for instances
    moved off the first one; rack pairs join the racks with most room with the other racks. A node
    pair keeps each rack's busy GPU count within its power budget and is solved in a fraction of a
    second.
    """
    singles = _by_slack(p, assignments, regs)
    nodes = _by_slack(p, assignments, [[i] for i in range(len(p.cluster.nodes))])
    room = _slack(p, assignments)
    stranded = [n for n in nodes if room(n) > 0][:12]
    donor_nodes = _donors(p, assignments, [[i] for i in range(len(p.cluster.nodes))])[:24]
    node_pairs = [sorted(a + b) for k, b in enumerate(stranded) for a in stranded[:k]]
    node_pairs += [sorted(a + b) for b in donor_nodes for a in stranded if a != b and sorted(a + b) not in node_pairs]
    rack_pairs = [sorted(a + b) for a in singles[:3] for b in _donors(p, assignments, regs) if a != b]
    return _regroups(p, assignments, stranded) + node_pairs + singles + rack_pairs


def _regroups(p: Problem, assignments: list[Assignment], stranded: list[list[int]]) -> list[list[int]]:
    """Two nodes with stranded room and two carrying the most small shareable MIG instances.

    A GPU holding two ``3g.40gb`` instances has its memory full and a compute slice idle; holding
    ``3g.40gb + 2g.20gb + 1g.10gb x 2`` it is full. When the small instances sit on other nodes (and
    the stranded GPUs' instances are of a workload placed in full at a higher priority, as on
    medium-1, where 22 H100s held two ``3g.40gb`` each), no node pair regroups them and frees a GPU:
    the small instances must come in while half the large ones go out, a four-node exchange. The
    donors are the nodes with the most instances of at most two compute slices of workloads without
    tenant isolation (those may share a GPU with any tenant's).
    """
    cl = p.cluster
    small: dict[int, int] = defaultdict(int)
    for a in assignments:
        w = p.workload(a.workload)
        if a.mig is not None and w.isolation != "tenant":
            n = cl.nodes[cl.node_index[a.node]]
            prof = p.catalog.get(n.gpu_model).profile(a.mig.profile) if n.gpu_model else None
            if prof is not None and prof.compute_slices <= 2:
                small[cl.node_index[a.node]] += 1
    donors = [i for i in sorted(small, key=lambda i: (-small[i], i)) if small[i] > 0][:6]
    tops = [r[0] for r in stranded[:6]]
    out: list[list[int]] = []
    for k in range(0, len(tops) - 1, 2):
        for j in range(0, len(donors) - 1, 2):
            region = sorted({tops[k], tops[k + 1], donors[j], donors[j + 1]})
            if len(region) == 4 and region not in out:
                out.append(region)
    return out


def _donors(p: Problem, assignments: list[Assignment], regs: list[list[int]]) -> list[list[int]]:
    """Regions by placed demand of the lowest priority, most first."""
    low = min(p.priorities, default=0)
    cl = p.cluster
    low_units: dict[str, int] = defaultdict(int)
    for a in assignments:
        w = p.workload(a.workload)
        if w.priority == low:
            d = p.demand_on(w, cl.nodes[cl.node_index[a.node]])
            low_units[a.node] += d.units if d is not None else 0
    return sorted(regs, key=lambda r: (-sum(low_units[cl.nodes[i].name] for i in r), r[0]))


def _slack(p: Problem, assignments: list[Assignment]) -> Callable[[list[int]], int]:
    """Unused demand units on the busy GPUs of a region (stranded MIG or share room)."""
    cl = p.cluster
    used: dict[str, int] = defaultdict(int)
    for a in assignments:
        d = p.demand_on(p.workload(a.workload), cl.nodes[cl.node_index[a.node]])
        used[a.node] += d.units if d is not None else 0
    busy = _busy(p, assignments)

    def slack(reg: list[int]) -> int:
        return sum(UNITS_PER_GPU * len(busy.get(cl.nodes[i].name, ())) - used[cl.nodes[i].name] for i in reg)

    return slack


def _by_slack(p: Problem, assignments: list[Assignment], regs: list[list[int]]) -> list[list[int]]:
    """Regions with the most stranded room first."""
    slack = _slack(p, assignments)
    return sorted(regs, key=lambda r: (-slack(r), r[0]))
