"""Turning a CP-SAT run into a plan: stage results, bounds, rack repair, unplaced reasons, validation."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.reasons import Holdings, explain
from capplan.placement.core.state import ClusterState
from capplan.placement.core.summary import make_plan, placed_units, trivial_bound
from capplan.placement.cpsat.bound import stage_bounds
from capplan.placement.cpsat.config_bound import config_bound
from capplan.placement.cpsat.decode import DecodeError, decode
from capplan.placement.cpsat.model import PlacementModel
from capplan.placement.cpsat.objective import Stage
from capplan.placement.cpsat.repair import repair
from capplan.placement.cpsat.tiebreak import ReplicaTable

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


@dataclass
class StageResult:
    """Outcome of one stage solve."""

    name: str
    status: str
    value: int
    bound: float
    seconds: float
    units_proven: bool = False  # a priority stage: the demand units are optimal (replica tie-break maybe not)


@dataclass
class Run:
    """State of a lexicographic solve."""

    solution: list[int] | None = None
    results: list[StageResult] = field(default_factory=list)
    priorities_done_s: float = 0.0  # seconds from the start until the last priority stage ended
    tables: dict[str, ReplicaTable | None] = field(default_factory=dict)  # per priority stage name
    lp_bounds: dict[tuple[str, int, tuple[tuple[int | None, int], ...]], float] = field(default_factory=dict)


def bounds(pm: PlacementModel, stages: list[Stage], run: Run, got: list[Assignment],
           lp: bool = True, deadline: float | None = None) -> tuple[dict[int, int], bool]:
    """Per-priority bound (lexicographic) and whether the plan with assignments ``got`` is proven optimal.

    Priority stages are taken in order. A stage's bound (in its own value, ``units * (R + 1) +
    replicas``) is the smallest of: its CP-SAT value when CP-SAT proved it, else CP-SAT's bound
    (only while every earlier stage was fixed in CP-SAT at its proven value), the LP relaxations
    (:mod:`capplan.placement.cpsat.bound`, :mod:`capplan.placement.cpsat.config_bound`, with the
    earlier stages at their proven values) and the trivial bound, tightened by the stage's
    :class:`~capplan.placement.cpsat.tiebreak.ReplicaTable`. When the plan's own value there meets
    that bound, the stage is proven for the plan (units and replica tie-break) and the next one is
    bounded; the first stage it does not meet gets the bound in demand units, later ones the
    trivial bound. The plan is optimal when every priority stage is proven.
    """
    p = pm.p
    trivial = trivial_bound(p)
    out = dict(trivial)
    if any(r.optional for r in pm.ix.runs):
        # With evictions or moves the model restricts some choices (see docs/placement-model.md),
        # so its proofs are not proofs for the full problem: report the trivial bound only.
        return out, False
    units = placed_units(p, got)
    reps: dict[int, int] = defaultdict(int)
    for a in got:
        reps[p.workload(a.workload).priority] += 1
    by_name = {r.name: r for r in run.results}
    g = by_name.get("guaranteed")
    if any(s.name == "guaranteed" for s in stages) and (g is None or g.status != "optimal"):
        return out, False
    fixed: list[tuple[int | None, int]] = [(None, g.value)] if g is not None else []
    cpsat_valid = True  # CP-SAT's model still holds every lexicographically optimal plan
    for st in stages:
        if st.priority is None:
            continue
        q = st.priority
        r = by_name.get(st.name)
        mine = units.get(q, 0) * st.per_unit + reps[q]  # the plan's value of this stage (running included)
        cands = [trivial.get(q, 0) * st.per_unit + st.per_unit - 1]
        if r is not None and cpsat_valid:
            if r.status == "optimal":
                cands.append(r.value + st.constant)
            elif abs(r.bound) != float("inf"):
                cands.append(int(r.bound + 1e-6) + st.constant)
        table = run.tables.get(st.name)
        best = min(cands) if table is None else table.tighten(min(cands))
        if lp and best // st.per_unit > units.get(q, 0):
            # the LP relaxations (skipped by small solves whose callers compare placements only)
            for k, fn in enumerate((stage_bounds, config_bound)):
                key = (fn.__name__, q, tuple(fixed))
                b = run.lp_bounds.get(key)
                if b is None:
                    # each LP gets its share of the time left before ``deadline`` (a bound stopped early is none)
                    left = None if deadline is None else max(0.2, (deadline - time.perf_counter()) / (2 - k))
                    b = fn(pm.ix, fixed, q, left)
                    if b is not None:  # the same LP again (after region repair) costs nothing
                        run.lp_bounds[key] = b
                if b is not None:
                    cands.append(int(b))
            best = min(cands) if table is None else table.tighten(min(cands))
        if mine >= best:  # proven for this plan: the next stage is bounded with this one fixed
            out[q] = units.get(q, 0)
            fixed.append((q, mine))
            # CP-SAT fixed this stage at its own value: still a proof for the later stages only if
            # that is the optimum (else its constraint may cut off the optimal plans).
            cpsat_valid = cpsat_valid and r is not None and r.value + st.constant == mine
            continue
        out[q] = max(best // st.per_unit, units.get(q, 0))
        return out, False
    return out, True


BoundOf = Callable[[list[Assignment]], tuple[dict[int, int], bool]]


def repaired(p: Problem, plan: Plan, options: PlanOptions, t0: float, deadline: float,
             solve_sub: Callable[[Problem, PlanOptions], list[Assignment]], bound_of: BoundOf,
             quick_bound_of: BoundOf | None = None) -> Plan:
    """The plan after region repair, if that passes the validator.

    ``bound_of`` gives the bound per priority and whether it is proven, for the placed units of
    the repaired plan (:func:`bounds` with the model, or the trivial bound without one).
    ``quick_bound_of``, a cheaper valid bound, is asked after each improvement: repair stops when
    the plan meets it at every priority (proven optimal).
    """
    def proven(cur: list[Assignment]) -> bool:  # every priority at its bound: nothing left to repair
        assert quick_bound_of is not None
        return quick_bound_of(cur)[1]

    got, rstats = repair(p, list(plan.assignments), options, deadline, solve_sub,
                         done=proven if quick_bound_of is not None else None)
    stats = dict(plan.metrics.get("cpsat", {}), repair=rstats)
    if not rstats.get("regions_improved"):
        return plan.model_copy(update={"metrics": {**plan.metrics, "cpsat": stats},
                                       "solve_seconds": round(time.perf_counter() - t0, 4)})
    bound, optimal = bound_of(got)
    better = make_plan(p, "cpsat", got, unplaced_of(p, got, []), bound=bound, seconds=time.perf_counter() - t0,
                       seed=options.seed, proven_optimal=optimal, extra_metrics={"cpsat": stats})
    violations = check_plan(p, better, goodput=False)  # goodput rows come later (core/spares.py)
    if violations:
        log.warning("cpsat: rack repair gave an invalid plan %s; keeping the plan before it", violations[:3])
        return plan
    return better


def greedy_as_cpsat(greedy: Plan, t0: float, stats: dict[str, object]) -> Plan:
    """The greedy plan reported by the cpsat strategy (with why CP-SAT's own result was not used)."""
    return greedy.model_copy(
        update={
            "strategy": "cpsat",
            "solve_seconds": round(time.perf_counter() - t0, 4),
            "metrics": {**greedy.metrics, "cpsat": stats},
        }
    )


def from_solution(
    p: Problem,
    pm: PlacementModel,
    stages: list[Stage],
    run: Run,
    options: PlanOptions,
    t0: float,
    stats: dict[str, object],
    lp_bounds: bool = True,
) -> Plan | None:
    sol = run.solution
    if sol is None:
        return None

    def val(x: Any) -> int:
        return x if isinstance(x, int) else sol[x.index]

    try:
        dec = decode(pm, val)
    except DecodeError as exc:  # a modelling bug: report it and fall back to greedy
        log.warning("cpsat: could not decode the solution (%s); using the greedy plan", exc)
        stats["decode_error"] = str(exc)
        return None
    unplaced = unplaced_of(p, dec.assignments, dec.evictions)
    bound, optimal = bounds(pm, stages, run, list(dec.assignments), lp_bounds, deadline=options.clock().end)
    plan = make_plan(
        p,
        "cpsat",
        dec.assignments,
        unplaced,
        bound=bound,
        seconds=time.perf_counter() - t0,
        seed=options.seed,
        evictions=dec.evictions,
        migrations=dec.migrations,
        proven_optimal=optimal,
        extra_metrics={"cpsat": stats},
    )
    violations = check_plan(p, plan, goodput=False)
    if violations:
        log.warning("cpsat: decoded plan violates %s; using the greedy plan", violations[:3])
        stats["violations"] = violations[:5]
        return None
    return plan


def unplaced_of(p: Problem, assignments: list[Any], evictions: list[Any]) -> list[Unplaced]:
    st = ClusterState.with_assignments(p, list(assignments))
    holdings = Holdings(p, assignments)
    placed = {a.key for a in assignments}
    evicted = {(e.workload, e.replica): e for e in evictions}
    out: list[Unplaced] = []
    for w in p.workloads:
        ev = [r for r in range(w.replicas) if (w.name, r) in evicted]
        if ev:
            out.append(Unplaced(workload=w.name, replicas=tuple(ev), reason=evicted[(w.name, ev[0])].reason))
        missing = [r for r in range(w.replicas) if (w.name, r) not in placed and (w.name, r) not in evicted]
        if missing:
            reason = explain(st, w, len(missing), holdings)
            out.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=reason))
    return out
