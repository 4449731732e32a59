"""The ``heuristic`` strategy: vectorised fragmentation-aware placement plus the fast bound."""

from __future__ import annotations

import time
from typing import Literal

import numpy as np

from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.reasons import Holdings
from capplan.placement.heuristics.explain import explain_fleet
from capplan.placement.heuristics.fleet import FleetState
from capplan.placement.heuristics.placer import FleetPlacer, batch_order
from capplan.placement.heuristics.score import BestFit, Fgd, Scorer, ShapeMix

ScoreName = Literal["fgd", "bestfit"]


def make_scorer(name: ScoreName, p: Problem, st: FleetState, workloads: list[Workload] | None = None) -> Scorer:
    """A scorer by name; FGD measures fragmentation against the shape mix of ``workloads``."""
    if name == "bestfit":
        return BestFit()
    return Fgd(ShapeMix.of(p, st, workloads))


def place(p: Problem, score: ScoreName = "fgd", order: list[Workload] | None = None,
          st: FleetState | None = None, targets: dict[str, np.ndarray] | None = None,
          seed: int = 0, deadline: float | None = None) -> tuple[list[Assignment], list[Unplaced], FleetPlacer]:
    """Place the workloads of ``p`` (running replicas stay) in ``order`` (default :func:`batch_order`).

    With ``deadline`` (a :func:`time.perf_counter` value), workloads reached after it are scored
    by best fit instead of ``score``: an FGD score costs far more per candidate on large fleets,
    and the pass must end close to the caller's time limit (the switch is recorded in
    ``placer.switched_at``, the index of the first workload scored by best fit).

    Returns
    -------
    tuple
        All assignments (running ones included), unplaced replicas with reasons, and the placer
        (whose state holds the final occupancy).
    """
    st = st or FleetState(p)
    placer = FleetPlacer(st, make_scorer(score, p, st))
    cl = p.cluster
    assignments = list(p.running)
    running: dict[str, list[Assignment]] = {}
    for a in p.running:
        running.setdefault(a.workload, []).append(a)
    missed: list[tuple[Workload, list[int]]] = []
    for k, w in enumerate(order if order is not None else batch_order(p, seed=seed)):
        if deadline is not None and placer.switched_at is None and time.perf_counter() > deadline:
            placer.use_scorer(BestFit())
            placer.switched_at = k
        taken = {a.replica for a in running.get(w.name, [])}
        free_ids = [r for r in range(w.replicas) if r not in taken]
        if not free_ids:
            continue
        nodes = [cl.node_index[a.node] for a in running.get(w.name, [])]
        target = targets.get(w.name) if targets else None
        got = placer.place_workload(w, len(free_ids), nodes, target)
        assignments.extend(st.assignment(w, r, c) for r, c in zip(free_ids, got, strict=False))
        missing = free_ids[len(got):]
        if missing:
            missed.append((w, missing))
    return assignments, explain_all(placer, missed, assignments), placer


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
            memo[key] = explain_fleet(placer, w, len(missing), holdings)
        out.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=memo[key]))
    return out


def plan_heuristic(p: Problem, options: PlanOptions, score: ScoreName = "fgd") -> Plan:
    """Plan ``p`` with the fragmentation-aware heuristic; the bound comes from :mod:`capplan.placement.core.bound`.

    Running replicas stay where they are (no preemption or migration in this strategy).
    """
    from capplan.placement.core.bound import lexicographic_bound
    from capplan.placement.core.summary import make_plan, placed_units

    t0 = time.perf_counter()
    # The bound gets a fifth of the limit; the constructive pass switches to best fit at 60%.
    assignments, unplaced, placer = place(p, score, seed=options.seed, deadline=t0 + 0.6 * options.time_limit)
    achieved = placed_units(p, assignments)
    placed = {a.key for a in assignments}
    met = all((w.name, r) in placed for w in p.workloads if w.sla == "guaranteed" for r in range(w.replicas))
    bound = lexicographic_bound(p, {q: achieved[q] for q in p.priorities},
                                time_limit=max(0.5, options.time_limit * 0.2), guaranteed_met=met)
    extra: dict[str, object] = {"bound_seconds": round(bound.seconds, 3), "bound_exact": bound.converged}
    if placer.switched_at is not None:
        extra["bestfit_from_workload"] = placer.switched_at
    plan = make_plan(p, "heuristic", assignments, unplaced, bound=bound.per_priority,
                     seconds=time.perf_counter() - t0, seed=options.seed, extra_metrics=extra)
    if options.progress:
        options.progress({"stage": "heuristic", "elapsed": round(time.perf_counter() - t0, 3),
                          "objective": list(plan.objective), "bound": list(plan.bound), "gap": plan.gap})
    return plan
