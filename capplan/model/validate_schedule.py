"""The independent schedule validator.

A schedule is a plan in time. Every rule of ``capplan plan`` must hold at every instant, and
the resource use only grows when something starts, so the rules are checked at every start
time, on the replicas running at that instant (start <= t < end), with the plan validator's
own bookkeeping (:func:`capplan.model.validate.check_assignments`). On top come the time rules:
the step grid, releases, durations, deadlines, the horizon, gangs starting together and the
running state. Like the plan validator it uses no planner code. A gang with ``checkpoint`` runs for its
expected wall time, ``duration / u`` (the contract's formula, :mod:`capplan.model.goodput`).
"""

from __future__ import annotations

from collections import defaultdict

from capplan.model.errors import PlanValidationError
from capplan.model.interruptions import with_expected_durations
from capplan.model.plan import Assignment
from capplan.model.problem import Node, Problem, Workload
from capplan.model.schedule import Schedule, TimedAssignment
from capplan.model.units import UNITS_PER_GPU
from capplan.model.validate import check_claims, check_coverage
from capplan.model.validate_gpu import check_shape
from capplan.model.validate_insertion import budget_groups, insertions, space
from capplan.model.validate_quota import check_quota_spans
from capplan.model.validate_rules import check_assignments, check_groups, check_taints

_TOL = 1e-5


def _gpu_hours(units_seconds: int) -> float:
    return round(units_seconds / UNITS_PER_GPU / 3600, 6)


def _of_workload(placed: dict[tuple[str, int], TimedAssignment]) -> dict[str, list[TimedAssignment]]:
    """The placed replicas per workload, in replica order."""
    of: dict[str, list[TimedAssignment]] = defaultdict(list)
    for key in sorted(placed):
        of[key[0]].append(placed[key])
    return of


def _check_times(p: Problem, s: Schedule, placed: dict[tuple[str, int], TimedAssignment]) -> list[str]:
    v: list[str] = []
    horizon, step = s.horizon_s, s.step_s
    running = {a.key: a for a in p.running}
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    for key, a in placed.items():
        w = p.workload(a.workload)
        who = f"{a.workload}[{a.replica}]"
        if key in running:
            if space(a) != running[key]:
                v.append(f"running replica {who} moved")
            expected = min(ends.get(key, horizon), horizon)
            if a.start_s != 0 or a.end_s != expected:
                v.append(f"running replica {who} runs {a.start_s}..{a.end_s}, expected 0..{expected}")
            continue
        if a.start_s % step:
            v.append(f"{who} starts at {a.start_s} s, not on the {step} s grid")
        if a.start_s < w.release:
            v.append(f"{who} starts at {a.start_s} s, before its release {w.release} s")
        expected = a.start_s + w.duration if w.duration is not None else horizon
        if a.end_s != expected:
            v.append(f"{who} ends at {a.end_s} s, expected {expected} s")
        if a.end_s > horizon or a.start_s >= horizon:
            v.append(f"{who} runs {a.start_s}..{a.end_s} s, past the horizon {horizon} s")
        if w.deadline is not None and a.end_s > w.deadline:
            v.append(f"{who} ends at {a.end_s} s, after its deadline {w.deadline} s")
    for key in running:
        if key not in placed:
            v.append(f"running replica {key[0]}[{key[1]}] is not in the schedule")
    of = _of_workload(placed)
    for w in p.workloads:
        starts = {a.start_s for a in of.get(w.name, ()) if a.key not in running}
        if w.is_gang and len(starts) > 1:
            v.append(f"{w.name}: gang replicas start at different times {sorted(starts)}")
    return v


def _check_instants(p: Problem, placed: dict[tuple[str, int], TimedAssignment]) -> list[str]:
    """Every rule of a plan on the replicas running at each start time (nodes that changed only)."""
    v: list[str] = []
    by_node: dict[str, list[tuple[int, int, Assignment]]] = defaultdict(list)
    starting: dict[int, set[str]] = defaultdict(set)
    for a in placed.values():
        by_node[a.node].append((a.start_s, a.end_s, space(a)))
        starting[a.start_s].add(a.node)
    groups = budget_groups(p)
    for t in sorted(starting):
        nodes: set[str] = set()
        for name in starting[t]:
            nodes.update(groups.get(name, [name]))
        active = [a for name in sorted(nodes) for start, end, a in by_node.get(name, ()) if start <= t < end]
        for msg in check_assignments(p, active):
            v.append(f"at {t} s: {msg}")
    return list(dict.fromkeys(v))


def _units(p: Problem, w: Workload, a: TimedAssignment, nodes: dict[str, Node]) -> int:
    return check_shape(p, w, space(a), nodes[a.node])[1]


def _check_summary(p: Problem, s: Schedule, placed: dict[tuple[str, int], TimedAssignment]) -> list[str]:
    v: list[str] = []
    nodes = {n.name: n for n in p.cluster.nodes}
    running = {a.key for a in p.running}
    work: dict[int, int] = defaultdict(int)
    wait = 0
    replica_wait = 0  # unweighted: seconds summed over replicas, whatever their demand
    late_guaranteed: list[str] = []
    of = _of_workload(placed)
    units: dict[tuple[str, str], int] = {}  # per workload and node: the demand units (the same for every replica)
    for w in p.workloads:
        mine = of.get(w.name, [])
        fresh = [a for a in mine if a.key not in running]
        for a in mine:
            if a.node in nodes:
                u = units.get((w.name, a.node)) if not a.gpus and a.mig is None and a.fraction is None else None
                if u is None:
                    u = _units(p, w, a, nodes)
                    if not a.gpus and a.mig is None and a.fraction is None:
                        units[(w.name, a.node)] = u
                work[w.priority] += u * (a.end_s - a.start_s)
                if a.key not in running:
                    wait += u * max(0, a.start_s - w.release)
        replica_wait += sum(max(0, a.start_s - w.release) for a in fresh)
        earliest = -(-w.release // s.step_s) * s.step_s
        if w.sla == "guaranteed" and (len(mine) < w.replicas or any(a.start_s != earliest for a in fresh)):
            late_guaranteed.append(w.name)
    if late_guaranteed and s.status != "infeasible":
        v.append(f"status is {s.status} but guaranteed workloads {late_guaranteed} do not start at their release")
    if not late_guaranteed and s.status == "infeasible":
        v.append("status is infeasible although every guaranteed workload starts at its release")
    if tuple(s.priorities) != p.priorities:
        v.append(f"priorities {list(s.priorities)} differ from the problem's {list(p.priorities)}")
        return v
    expected = [_gpu_hours(work[q]) for q in p.priorities]
    v.extend(check_claims(s.objective, s.bound, expected))
    if abs(s.wait_gpu_h - _gpu_hours(wait)) > _TOL:
        v.append(f"wait_gpu_h {s.wait_gpu_h} differs from the recomputed {_gpu_hours(wait)}")
    if s.wait_replica_s is not None and s.wait_replica_s != replica_wait:
        v.append(f"wait_replica_s {s.wait_replica_s} differs from the recomputed {replica_wait}")
    v.extend(_check_rows(p, s, placed))
    return v


def _check_rows(p: Problem, s: Schedule, placed: dict[tuple[str, int], TimedAssignment]) -> list[str]:
    v: list[str] = []
    rows = {r.name: r for r in s.workloads}
    if [r.name for r in s.workloads] != [w.name for w in p.workloads]:
        v.append("workloads rows must list every workload once, in the scenario's order")
    running = {a.key for a in p.running}
    of = _of_workload(placed)
    for w in p.workloads:
        row = rows.get(w.name)
        if row is None:
            continue
        mine = of.get(w.name, [])
        fresh = [a for a in mine if a.key not in running] or mine
        start = min((a.start_s for a in fresh), default=None)
        end = max((a.end_s for a in mine), default=None)
        wait = None if start is None else max(0, start - w.release)
        limit = w.deadline if w.deadline is not None else s.horizon_s
        met = len(mine) == w.replicas and end is not None and end <= limit
        if (row.start_s, row.end_s, row.wait_s, row.deadline_met) != (start, end, wait, met):
            v.append(f"workloads row {w.name}: {(row.start_s, row.end_s, row.wait_s, row.deadline_met)} "
                     f"differs from the recomputed {(start, end, wait, met)}")
    return v


def check_schedule(p: Problem, s: Schedule) -> list[str]:
    """Check every rule of ``p`` on schedule ``s`` at every instant; return the violations (empty when valid).

    Parameters
    ----------
    p
        The problem the schedule was made for.
    s
        The schedule; its ``horizon_s`` and ``step_s`` define the time grid checked.

    Returns
    -------
    list of str
        One readable line per violated rule.
    """
    orig, p = p, with_expected_durations(p)  # gangs with checkpoint run for their expected wall time
    v: list[str] = []
    placed = check_coverage(p, s.assignments, [(u.workload, u.replicas) for u in s.unscheduled],
                            ("scheduled", "unscheduled"), v)
    v.extend(_check_times(p, s, placed))
    v.extend(check_groups(p, {k: space(a) for k, a in placed.items()}))
    v.extend(check_taints(p, (space(a) for a in placed.values())))
    v.extend(_check_instants(p, placed))
    running = {a.key for a in p.running}
    v.extend(check_quota_spans(p, ((a.start_s, a.end_s, space(a), a.key not in running) for a in placed.values())))
    v.extend(_check_summary(p, s, placed))
    v.extend(_check_expected(orig, s))
    if not v:
        v.extend(_check_insertion(p, s))
    return v


def _check_expected(p: Problem, s: Schedule) -> list[str]:
    """``expected_end_s``: the end of a scheduled gang with checkpoint (its expected wall time), else absent."""
    rows = {r.name: r for r in s.workloads}
    v = []
    for w in p.workloads:
        row = rows.get(w.name)
        if row is None:
            continue
        timed = w.checkpoint is not None and w.duration is not None and p.interruptions is not None
        want = row.end_s if timed else None
        if row.expected_end_s != want:
            v.append(f"workloads row {w.name}: expected_end_s {row.expected_end_s}, expected {want}")
    return v


def _check_insertion(p: Problem, s: Schedule) -> list[str]:
    """A replica left out that fits as it is disproves ``optimal`` and any bound it would exceed."""
    v: list[str] = []
    if s.status == "infeasible" or tuple(s.priorities) != p.priorities or len(s.bound) != len(s.objective):
        return v
    for ins in insertions(p, s, first_only=False):
        q = p.priorities.index(p.workload(ins.workload).priority)
        gain = _gpu_hours(ins.units * (ins.end_s - ins.start_s))
        if s.status == "optimal":
            v.append(f"status is optimal but {ins} without moving anything")
        elif gain > 0 and s.objective[q] + gain > s.bound[q] + _TOL and all(
                s.objective[k] >= s.bound[k] - _TOL for k in range(q)):
            v.append(f"bound {s.bound[q]} at priority {p.priorities[q]} is below a feasible schedule: {ins} "
                     f"(+{gain} GPU-h) without moving anything")
    return v


def assert_valid_schedule(p: Problem, s: Schedule) -> Schedule:
    """Return ``s`` if it passes :func:`check_schedule`, else raise :class:`PlanValidationError`."""
    violations = check_schedule(p, s)
    if violations:
        raise PlanValidationError(violations)
    return s
