"""The independent plan validator.

It checks every rule of the problem from scratch, with its own simple bookkeeping and without
any planner code, so a planner bug cannot hide behind shared logic. Every planner's result goes
through :func:`assert_valid` before it is returned; a violation raises
:class:`~capplan.model.errors.PlanValidationError` and the plan is never emitted.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from capplan.model.errors import PlanValidationError
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Problem
from capplan.model.units import units_to_gpus
from capplan.model.validate_goodput import check_goodput
from capplan.model.validate_gpu import replica_value
from capplan.model.validate_quota import check_plan_quotas
from capplan.model.validate_rules import check_assignments, check_groups, check_taints

# check_assignments lives in validate_rules, replica_value in validate_gpu; this module is the validator's front.
__all__ = ["assert_valid", "check_assignments", "check_claims", "check_coverage", "check_plan", "check_plan_numbers",
           "replica_value"]

_TOL = 1e-6

class _Keyed(Protocol):
    @property
    def workload(self) -> str: ...

    @property
    def replica(self) -> int: ...


A = TypeVar("A", bound=_Keyed)


def check_coverage(p: Problem, assigned: Sequence[A], listed: Sequence[tuple[str, Sequence[int]]],
                   words: tuple[str, str], v: list[str]) -> dict[tuple[str, int], A]:
    """Every replica is assigned once or listed as left out once; violations go to ``v``.

    Returns the assignments of known replicas by key. ``words`` name the two outcomes in messages
    (``("placed", "unplaced")`` for a plan, ``("scheduled", "unscheduled")`` for a schedule).
    """
    works = {w.name: w for w in p.workloads}
    placed: dict[tuple[str, int], A] = {}
    for a in assigned:
        w = works.get(a.workload)
        if w is None or a.replica >= w.replicas:
            v.append(f"assignment for unknown replica {a.workload}[{a.replica}]")
            continue
        key = (a.workload, a.replica)
        if placed.setdefault(key, a) is not a:
            v.append(f"{a.workload}[{a.replica}] is assigned twice")
            placed[key] = a
    # per workload, how often each replica is assigned (once at most, counted above) or listed: arrays, since a
    # workload may have a million replicas and most of them listed
    seen = {w.name: np.zeros(w.replicas, dtype=np.int64) for w in p.workloads}
    of: dict[str, list[int]] = defaultdict(list)  # each key is placed once: one array update per workload
    for name, r in placed:
        of[name].append(r)
    for name, got in of.items():
        seen[name][got] += 1
    for name, replicas in listed:
        rs = np.asarray(replicas, dtype=np.int64)
        count = seen.get(name)
        bad = np.ones(rs.size, dtype=bool) if count is None else (rs < 0) | (rs >= count.size)
        for r in rs[bad].tolist():
            v.append(f"{words[1]} entry for unknown replica {name}[{r}]")
        if count is None:
            continue
        good = rs[~bad]
        before = count[good] if good.size else good
        np.add.at(count, good, 1)
        # an entry for a replica already assigned or listed (earlier, or earlier in this list)
        dup = np.zeros(good.size, dtype=bool)
        if good.size:
            order = np.argsort(good, kind="stable")
            same = np.zeros(good.size, dtype=bool)
            same[order[1:]] = good[order[1:]] == good[order[:-1]]
            dup = (before > 0) | same
        for r in good[dup].tolist():
            v.append(f"{name}[{r}] is listed more than once")
    for w in p.workloads:
        missing = np.flatnonzero(seen[w.name] == 0).tolist()
        if missing:
            v.append(f"{w.name}: replicas {missing} are neither {words[0]} nor listed {words[1]}")
    return placed


def check_plan(p: Problem, plan: Plan, goodput: bool = True) -> list[str]:
    """Check every rule of ``p`` on ``plan``; return the violations (empty when valid).

    ``goodput=False`` leaves out the goodput rows and spare nodes (a strategy checking its own plan
    before the shared step adds them).
    """
    v: list[str] = []
    placed = check_coverage(p, plan.assignments, [(u.workload, u.replicas) for u in plan.unplaced],
                            ("placed", "unplaced"), v)
    v.extend(check_assignments(p, plan.assignments))
    v.extend(check_groups(p, placed))
    v.extend(check_taints(p, plan.assignments))
    v.extend(check_plan_quotas(p, plan.assignments))
    v.extend(_check_running(p, plan, placed))
    v.extend(_check_reconfigured(p, plan))
    v.extend(_check_summary(p, plan, placed))
    v.extend(_check_numbers(plan))
    if goodput:
        v.extend(check_goodput(p, plan, placed))
    return v


def _check_numbers(plan: Plan) -> list[str]:
    """The plan's own numbers: finite objective, bound, gap and time; a gap in 0..1."""
    v = [f"{name} {list(values)} holds a value that is not a finite number"
         for name, values in (("objective", plan.objective), ("bound", plan.bound))
         if not all(math.isfinite(x) for x in values)]
    if not math.isfinite(plan.gap) or not 0 <= plan.gap <= 1:
        v.append(f"gap {plan.gap} is not a finite number in 0..1")
    if not math.isfinite(plan.solve_seconds) or plan.solve_seconds < 0:
        v.append(f"solve_seconds {plan.solve_seconds} is not a finite number >= 0")
    v.extend(_check_gaps(plan))
    return v


def _check_gaps(plan: Plan) -> list[str]:
    """``gaps`` (when given) against ``objective`` and ``bound``, ``gap`` its first nonzero entry, and
    ``metrics.cut_by_time_limit`` against the status and the reasons (recomputed here, not imported)."""
    v: list[str] = []
    if plan.gaps:
        if len(plan.gaps) != len(plan.priorities) or len(plan.bound) != len(plan.priorities):
            return [f"gaps has {len(plan.gaps)} entries for {len(plan.priorities)} priorities"]
        for q, g, o, b in zip(plan.priorities, plan.gaps, plan.objective, plan.bound, strict=True):
            want = (b - o) / b if b > o and b > 0 else 0.0
            if not math.isfinite(g) or abs(g - want) > 1e-5:
                v.append(f"gaps: priority {q} has gap {g}, but (bound - objective) / bound = {want:.6f}")
        first = next((g for g in plan.gaps if g > 0), 0.0)
        if abs(plan.gap - first) > 1e-9:
            v.append(f"gap {plan.gap} is not the first nonzero entry of gaps ({first})")
    cut = plan.metrics.get("cut_by_time_limit")
    if cut is not None:
        if not isinstance(cut, bool):
            v.append(f"metrics.cut_by_time_limit must be true or false, got {cut!r}")
        elif cut and plan.status == "optimal":
            v.append("metrics.cut_by_time_limit is true for an optimal plan")
        elif not cut and any(u.reason.startswith("not tried: the time limit") for u in plan.unplaced):
            v.append("metrics.cut_by_time_limit is false, but replicas were not tried for lack of time")
    return v

def _check_running(p: Problem, plan: Plan, placed: dict[tuple[str, int], Assignment]) -> list[str]:
    v: list[str] = []
    running = {a.key: a for a in p.running}
    evicted = {(e.workload, e.replica): e for e in plan.evictions}
    migrated = {(m.workload, m.replica): m for m in plan.migrations}
    prio = {w.name: w.priority for w in p.workloads}
    newcomer: dict[str, int] = {}  # per node, the highest priority of a replica placed there that was not running
    if evicted:
        for x in plan.assignments:
            if x.workload in prio and x.key not in running:
                newcomer[x.node] = max(newcomer.get(x.node, prio[x.workload]), prio[x.workload])
    for key, e in evicted.items():
        w = p.workload(e.workload) if e.workload in prio else None
        if key not in running or w is None:
            v.append(f"eviction of {e.workload}[{e.replica}], which is not running")
            continue
        if not w.preemptible:
            v.append(f"{w.name} is not preemptible but replica {e.replica} is evicted")
        if key in placed:
            v.append(f"{w.name}[{e.replica}] is evicted and placed at once; list it as a migration")
        if newcomer.get(e.node, w.priority) <= w.priority:
            v.append(f"{w.name}[{e.replica}] is evicted without a higher-priority replica taking its node")
    for key, m in migrated.items():
        if key not in running or m.workload not in prio:
            v.append(f"migration of {m.workload}[{m.replica}], which is not running")
            continue
        if not p.workload(m.workload).migratable:
            v.append(f"{m.workload} is not migratable but replica {m.replica} moves")
        a = placed.get(key)
        if a is None or a.node != m.to_node or running[key].node != m.from_node:
            v.append(f"{m.workload}[{m.replica}]: migration does not match its assignments")
    for key, r in running.items():
        if key in evicted or key in migrated:
            continue
        if placed.get(key) != r:
            v.append(f"running replica {r.workload}[{r.replica}] moved or stopped without an eviction/migration")
    return v


def reconfigured_gpus(p: Problem, assignments: Sequence[Assignment]) -> list[tuple[str, int]]:
    """GPUs (node, index) whose preset mode or MIG layout the assignments change, recomputed here.

    A preset GPU is changed when it hosts a replica of another mode (whole, MIG, shared) or a MIG
    instance outside its preset layout; using part of a preset layout, or nothing, changes nothing.
    """
    nodes = {n.name: n for n in p.cluster.nodes if n.gpu_modes}  # only a preset GPU can change
    mode = {"whole": "whole", "mig": "mig", "fraction": "shared"}
    works = {w.name: w for w in p.workloads}
    out: set[tuple[str, int]] = set()
    for a in assignments if nodes else ():
        node, w = nodes.get(a.node), works.get(a.workload)
        if node is None or w is None:
            continue
        kind = "whole" if w.gpus is not None else "mig" if w.mig is not None else "fraction"
        for g in a.gpus:
            preset = node.mode_of(g)
            if preset is None:
                continue
            if mode[kind] != preset.mode or (kind == "mig" and preset.layout is not None
                                              and a.mig not in preset.layout):
                out.add((a.node, g))
    return sorted(out)


def _check_reconfigured(p: Problem, plan: Plan) -> list[str]:
    """The count of reconfigured GPUs and the nodes to drain; no running replica stays on a reconfigured GPU."""
    v: list[str] = []
    changed = reconfigured_gpus(p, plan.assignments)
    got = plan.metrics.get("gpus_reconfigured")
    if got is not None and got != len(changed):
        v.append(f"metrics.gpus_reconfigured is {got}, the plan changes the preset mode of {len(changed)} GPUs")
    drain = plan.metrics.get("nodes_to_drain")
    if drain is not None and list(drain) != sorted({n for n, _ in changed}):
        v.append(f"metrics.nodes_to_drain is {list(drain)}, the plan reconfigures GPUs on "
                 f"{sorted({n for n, _ in changed})}")
    where = set(changed)
    kept = {a.key: a for a in plan.assignments} if where and p.running else {}
    for r in p.running if where else ():
        if kept.get(r.key) == r:
            for g in r.gpus:
                if (r.node, g) in where:
                    v.append(f"GPU {g} of {r.node} is reconfigured, but running replica {r.workload}[{r.replica}] "
                             "stays on it (migrate or evict it first)")
    return v


def _check_summary(p: Problem, plan: Plan, placed: dict[tuple[str, int], Assignment]) -> list[str]:
    v: list[str] = []
    works = {w.name: w for w in p.workloads}
    missing_guaranteed = sorted({w.name for w in p.workloads if w.sla == "guaranteed"
                                 and any((w.name, r) not in placed for r in range(w.replicas))})
    if missing_guaranteed and plan.status != "infeasible":
        v.append(f"status is {plan.status} but guaranteed workloads {missing_guaranteed} are not placed")
    if not missing_guaranteed and plan.status == "infeasible":
        v.append("status is infeasible although every guaranteed workload is placed")
    if tuple(plan.priorities) != p.priorities:
        v.append(f"priorities {list(plan.priorities)} differ from the problem's {list(p.priorities)}")
        return v
    units: dict[int, int] = defaultdict(int)
    nodes = {n.name: n for n in p.cluster.nodes}
    # a replica's value is fixed by its workload's request (what replica_value reads): once per request
    value: dict[tuple[object, ...], int] = {}
    for (name, at), k in Counter((a.workload, a.node) for a in placed.values()).items():
        w, node = works.get(name), nodes.get(at)
        if w is not None and node is not None:
            key = (w.gpus, w.gpu_fraction, w.mig, w.gpu_memory_gib, w.gpu_models)
            got = value.get(key)
            if got is None:
                got = value[key] = replica_value(p, w)
            units[w.priority] += k * got
    expected = [units_to_gpus(units[q]) for q in p.priorities]
    v.extend(check_claims(plan.objective, plan.bound, expected))
    return v


def check_claims(objective: Sequence[float], bound: Sequence[float], expected: Sequence[float]) -> list[str]:
    """The claimed per-priority ``objective`` equals the recomputed ``expected``, and the claimed
    ``bound`` is not below it in the lexicographic (priority) order; empty when both hold."""
    v: list[str] = []
    if len(objective) != len(expected) or any(abs(x - y) > _TOL for x, y in zip(objective, expected, strict=False)):
        v.append(f"objective {list(objective)} differs from the recomputed {list(expected)}")
    if bound:
        if len(bound) != len(expected):
            v.append("bound and objective have different lengths")
        else:
            for b, o in zip(bound, expected, strict=True):
                if b + _TOL < o:
                    v.append(f"bound {list(bound)} is below the objective {list(expected)}")
                    break
                if b > o + _TOL:
                    break
    return v


def check_plan_numbers(plan: Plan) -> list[str]:
    """The checks of a plan's own numbers only: finite values, ``gaps`` and ``gap`` against ``objective`` and
    ``bound``, the bound not below the objective, ``metrics.cut_by_time_limit``. For a plan whose assignments
    passed :func:`check_plan` and whose bound or metrics were revised afterwards (cheap: no assignment is read)."""
    return _check_numbers(plan) + check_claims(plan.objective, plan.bound, plan.objective)


def assert_valid(p: Problem, plan: Plan) -> Plan:
    """Return ``plan`` if it passes :func:`check_plan`, else raise :class:`PlanValidationError`."""
    violations = check_plan(p, plan)
    if violations:
        raise PlanValidationError(violations)
    return plan
