"""The ``heuristic`` strategy: vectorised fragmentation-aware placement plus the fast bound."""

from __future__ import annotations

import time
from typing import Literal

import numpy as np

from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.reasons import Holdings, explain_fast
from capplan.placement.core.state import ClusterState
from capplan.placement.core.summary import NOT_TRIED_PREFIX
from capplan.placement.heuristics.placer import FleetPlacer, batch_order
from capplan.placement.heuristics.score import BestFit, Fgd, Scorer, ShapeMix

ScoreName = Literal["fgd", "bestfit"]
#: Share of the limit for the LP bound after the constructive pass, and where (share of the pass's time) it
#: switches from fragmentation-aware scoring to best fit.
BOUND_SHARE = 0.15
BESTFIT_FROM = 0.5
LATE = NOT_TRIED_PREFIX + " before the planner reached this workload (a longer limit places more)"


def make_scorer(name: ScoreName, p: Problem, st: ClusterState, workloads: list[Workload] | None = None) -> Scorer:
    """A scorer by name; FGD measures fragmentation against the shape mix of ``workloads``."""
    if name == "bestfit":
        return BestFit()
    return Fgd(ShapeMix.of(p, st, workloads))


def place(p: Problem, score: ScoreName = "fgd", order: list[Workload] | None = None,
          st: ClusterState | None = None, targets: dict[str, np.ndarray] | None = None,
          seed: int = 0, deadline: float | None = None,
          stop: float | None = None) -> tuple[list[Assignment], list[Unplaced], FleetPlacer]:
    """Place the workloads of ``p`` (running replicas stay) in ``order`` (default :func:`batch_order`).

    With ``deadline`` (a :func:`time.perf_counter` value), workloads reached after it are scored
    by best fit instead of ``score``: an FGD score costs far more per candidate on large fleets,
    and the pass must end close to the caller's time limit (the switch is recorded in
    ``placer.switched_at``, the index of the first workload scored by best fit). With ``stop``, the
    workloads reached after it are not tried at all: they are left unplaced, with a reason saying so
    (the pass then ends at the caller's hard limit).

    Returns
    -------
    tuple
        All assignments (running ones included), unplaced replicas with reasons, and the placer
        (whose state holds the final occupancy).
    """
    st = st or ClusterState.with_assignments(p, p.running)
    placer = FleetPlacer(st, make_scorer(score, p, st))
    todo = order if order is not None else batch_order(p, seed=seed)
    placer.bulk.pack_mig(todo)  # MIG instances packed by a layout plan for this order's demand
    cl = p.cluster
    assignments = list(p.running)
    running: dict[str, list[Assignment]] = {}
    for a in p.running:
        running.setdefault(a.workload, []).append(a)
    missed: list[tuple[Workload, list[int]]] = []
    # Demand shapes that fit nowhere any more: nothing is removed during the pass, so a later workload
    # of the same shape cannot fit either and is not tried (most of a trace's leftovers, at no cost).
    full: set[tuple[object, ...]] = set()
    late: list[Unplaced] = []
    for k, w in enumerate(todo):
        if deadline is not None and placer.switched_at is None and time.perf_counter() > deadline:
            placer.use_scorer(BestFit())
            placer.switched_at = k
        taken = {a.replica for a in running.get(w.name, [])}
        free_ids = [r for r in range(w.replicas) if r not in taken]
        if not free_ids:
            continue
        if stop is not None and (late or time.perf_counter() > stop):
            late.append(Unplaced(workload=w.name, replicas=tuple(free_ids), reason=LATE))
            continue
        nodes = [cl.node_index[a.node] for a in running.get(w.name, [])]
        target = targets.get(w.name) if targets else None
        skey = _fit_key(w, len(free_ids)) if target is None else None
        if skey is not None and skey in full:
            missed.append((w, free_ids))
            continue
        got = placer.place_workload(w, len(free_ids), nodes, target)
        if skey is not None and len(got) < len(free_ids):
            full.add(skey)
        assignments.extend(st.assignment(w, r, c) for r, c in zip(free_ids, got, strict=False))
        missing = free_ids[len(got):]
        if missing:
            missed.append((w, missing))
    return assignments, explain_all(placer, missed, assignments) + late, placer


def _fit_key(w: Workload, n: int) -> tuple[object, ...]:
    """Everything that decides whether ``n`` replicas of ``w`` fit (the count matters only for
    workloads placed all in one domain or not at all)."""
    grouped = w.is_gang or bool(w.topology.required)
    return (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.gpu_models, w.cpu_milli, w.memory_mib, w.tenant,
            w.isolation, w.topology, w.kind, w.mig_strategy, w.mixed_models, n if grouped else 0)


def explain_all(placer: FleetPlacer, missed: list[tuple[Workload, list[int]]],
                assignments: list[Assignment] | None = None) -> list[Unplaced]:
    """Reasons for the unplaced replicas, on the final occupancy; workloads of one shape share one text.

    With ``assignments`` (the plan's) each reason names the workloads holding the contested capacity.
    """
    memo: dict[tuple[object, ...], str] = {}
    out = []
    holdings = Holdings(placer.p, assignments) if assignments is not None and missed else None
    for w, missing in missed:
        key = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, None if w.gpu_models is None else
               tuple(w.gpu_models), w.cpu_milli, w.memory_mib, w.tenant, w.isolation, w.topology.required,
               w.is_gang, w.one_model, w.replicas, len(missing))
        if key not in memo:
            memo[key] = explain_fast(placer.st, w, len(missing), placer.st.demands(w)[1], holdings)
        out.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=memo[key]))
    return out


def plan_heuristic(p: Problem, options: PlanOptions, score: ScoreName = "fgd") -> Plan:
    """Plan ``p`` with the fragmentation-aware heuristic; the bound comes from :mod:`capplan.placement.core.bound`.

    Running replicas stay where they are (no preemption or migration in this strategy).
    """
    from capplan.placement.core.bound import lexicographic_bound
    from capplan.placement.core.budget import SUMMARY_COST, reserve
    from capplan.placement.core.summary import make_plan, placed_units

    t0 = time.perf_counter()
    clock = options.clock()
    # The plan's assembly keeps its expected cost and the bound gets up to BOUND_SHARE of the limit; the
    # constructive pass stops before them (workloads not reached are reported as such) and switches to
    # best fit BESTFIT_FROM of its way.
    body = clock.less(reserve(p, clock.remaining(), SUMMARY_COST))
    bound_seconds = BOUND_SHARE * clock.remaining()
    construct = body.less(bound_seconds)
    assignments, unplaced, placer = place(p, score, seed=options.seed, deadline=construct.share(BESTFIT_FROM).end,
                                          stop=construct.end)
    achieved = placed_units(p, assignments)
    placed = {a.key for a in assignments}
    met = all((w.name, r) in placed for w in p.workloads if w.sla == "guaranteed" for r in range(w.replicas))
    bound = lexicographic_bound(p, {q: achieved[q] for q in p.priorities},
                                time_limit=max(0.05, min(bound_seconds, body.remaining())),
                                guaranteed_met=met)
    extra: dict[str, object] = {"bound_seconds": round(bound.seconds, 3), "bound_exact": bound.converged}
    if placer.switched_at is not None:
        extra["bestfit_from_workload"] = placer.switched_at
    plan = make_plan(p, "heuristic", assignments, unplaced, bound=bound.per_priority,
                     seconds=time.perf_counter() - t0, seed=options.seed, extra_metrics=extra)
    if options.progress:
        options.progress({"stage": "heuristic", "elapsed": round(time.perf_counter() - t0, 3),
                          "objective": list(plan.objective), "bound": list(plan.bound), "gap": plan.gap})
    return plan
