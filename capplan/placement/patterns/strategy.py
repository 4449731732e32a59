"""The ``patterns`` strategy: node-pattern column generation for fleets of many identical nodes.

Patterns are built for the highest priority only; lower priorities are placed after, by the heuristic.

1. Workloads the pattern model does not capture (:func:`~capplan.placement.patterns.shapes.covered`:
   MIG, gangs, required topology, GPU memory, guaranteed SLA) are placed first by the
   vectorised heuristic; fleets with isolation or power budgets use the heuristic throughout.
2. The remaining GPU replicas become shapes, the free nodes node types; column generation
   and a MIP over the generated patterns decide how many nodes of each type get each pattern.
3. Patterns are mapped to concrete nodes and GPUs; replicas left over (and CPU-only ones) are
   placed on what is still free by the heuristic. The bound is :func:`capplan.placement.core.bound.upper_bound`.
"""

from __future__ import annotations

import time

from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.model.units import MILLI
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.progress import plan_event
from capplan.placement.heuristics.placer import batch_order
from capplan.placement.heuristics.run import LATE, place, plan_heuristic
from capplan.placement.patterns.master import MasterResult, solve_master
from capplan.placement.patterns.pricing import Pricer, grids
from capplan.placement.patterns.shapes import Shape, covered, node_types, shapes

#: Shares of the run's deadline: the constructive pass of the highest priority's complex workloads, the LP
#: bound (of what is left), then column generation (of what is left before the plan's assembly); the integer
#: pattern counts and the best-fit fill take the rest.
FIRST_SHARE = 0.3
BOUND_SHARE = 0.2
COLUMNS_SHARE = 0.5


def _uses_pattern_unsafe_rules(p: Problem) -> bool:
    """Isolation or power budgets couple replicas the pattern model treats as independent."""
    return (any(w.isolation != "none" for w in p.workloads)
            or any(d.power_w is not None for d in p.cluster.domains))


def realise(p: Problem, shp: list[Shape], res: MasterResult, types_nodes: list[list[int]],
            gpu_index: list[list[tuple[int, ...]]]) -> list[Assignment]:
    """Assignments for the chosen pattern counts: node after node of each type, replica after replica."""
    pools = [list(reversed(s.replicas)) for s in shp]
    nxt = [0] * len(types_nodes)
    out: list[Assignment] = []
    for pat, count in res.use:
        t = pat.type
        for _ in range(count):
            if nxt[t] >= len(types_nodes[t]):
                break
            k = nxt[t]
            nxt[t] += 1
            node = p.cluster.nodes[types_nodes[t][k]].name
            for s, slots in pat.items:
                if not pools[s]:
                    continue
                w, r = pools[s].pop()
                gpus = tuple(sorted(gpu_index[t][k][i] for i in slots))
                frac = round(w.gpu_fraction * MILLI) / MILLI if w.gpu_fraction is not None else None
                out.append(Assignment(workload=w.name, replica=r, node=node, gpus=gpus, fraction=frac))
    return out


def plan_patterns(p: Problem, options: PlanOptions) -> Plan:
    """Plan ``p`` with node-pattern column generation (see the module docstring)."""
    from capplan.placement.core.bound import upper_bound
    from capplan.placement.core.budget import SUMMARY_COST, reserve
    from capplan.placement.core.summary import make_plan

    t0 = time.perf_counter()
    if _uses_pattern_unsafe_rules(p):
        plan = plan_heuristic(p, options)
        return plan.model_copy(update={"strategy": "patterns",
                                       "metrics": {**plan.metrics, "patterns_fallback": "heuristic"}})
    clock = options.clock()
    tl = clock.remaining()
    # Patterns maximise placed GPUs of the highest priority; lower priorities are filled in after.
    top = p.priorities[0] if p.priorities else 0
    complex_ws = [w for w in p.workloads if not covered(w) and not _cpu_only(w) and w.priority == top]
    if complex_ws:
        first, _, _ = place(p, "fgd", order=batch_order(p, complex_ws, seed=options.seed), seed=options.seed,
                            deadline=clock.share(FIRST_SHARE).end)
    else:
        first = list(p.running)
    done = {a.key for a in first}
    todo: list[tuple[Workload, int]] = [(w, r) for w in p.workloads if covered(w) and w.priority == top
                                        for r in range(w.replicas) if (w.name, r) not in done]
    # However little time is left, the pattern model runs (its first LP rounded down is a plan, and it is
    # the fast part: the best-fit fill after it costs far more per replica and is what a hard stop cuts).
    body = clock.less(reserve(p, tl, SUMMARY_COST))
    # The bound first (it does not depend on the plan), with at most BOUND_SHARE of the time left.
    bound = upper_bound(p, time_limit=max(0.05, min(clock.share(BOUND_SHARE).remaining(), body.remaining())))
    types = node_types(p, first)
    shp = shapes(p, todo, types) if types else []
    stats: dict[str, object] = {}
    assignments = list(first)
    if shp:
        step, unit = grids(types, shp)
        pricer = Pricer(types, shp, step, unit)
        # Of the time left, column generation gets up to COLUMNS_SHARE (it stops when it converges) and the
        # integer pattern counts 60% of what is left after it; the rest is for the final fill and the
        # plan's summary, which must end by the limit.
        res = solve_master(types, shp, pricer, deadline=body.share(COLUMNS_SHARE).end, end=body.end, seed=options.seed)
        assignments += realise(p, shp, res, [t.nodes for t in types], [t.gpu_index for t in types])
        stats = {"pattern_lp_gpus": round(res.lp_value, 3), "pattern_mip_gpus": round(res.mip_value, 3),
                 "pattern_columns": res.columns, "pattern_iterations": res.iterations,
                 "pattern_lp_converged": res.converged, "pattern_search_steps": res.lns_steps,
                 "node_types": len(types), "shapes": len(shp)}
    # Whatever is left (replicas the MIP left out, CPU-only pods) goes where there is still room. The
    # assignments come from the heuristic and the realised patterns: the problem is not checked again.
    rest = Problem.model_construct(cluster=p.cluster, workloads=p.workloads, running=tuple(assignments),
                                   catalog=p.catalog)
    placed = {a.key for a in assignments}
    left_ws = [w for w in p.workloads if any((w.name, r) not in placed for r in range(w.replicas))]
    # The fill may use the time left but the plan assembly's expected cost; workloads it does not
    # reach are reported as such.
    if not body.expired():
        final, unplaced, _ = place(rest, "bestfit", order=batch_order(rest, left_ws, seed=options.seed),
                                   seed=options.seed, stop=body.end)
    else:  # what the fill would say without trying any workload (and without building its fleet state)
        final = assignments
        unplaced = [Unplaced(workload=w.name, replicas=tuple(r for r in range(w.replicas) if (w.name, r) not in placed),
                             reason=LATE) for w in left_ws]
    plan = make_plan(p, "patterns", final, unplaced, bound=bound.per_priority, seconds=time.perf_counter() - t0,
                     seed=options.seed, extra_metrics={**stats, "bound_seconds": round(bound.seconds, 3),
                                                       "bound_exact": bound.converged})
    if options.progress:
        options.progress(plan_event("patterns", t0, plan))
    return plan


def _cpu_only(w: Workload) -> bool:
    return w.gpus is None and w.mig is None and w.gpu_fraction is None


def suits(p: Problem) -> bool:
    """True when ``patterns`` should beat the other strategies on ``p`` (used by ``auto``).

    That is when nodes come in few interchangeable types (at most one type per ten GPU nodes)
    and at least nine in ten GPU replicas are covered by the pattern model, all of one priority.
    """
    if _uses_pattern_unsafe_rules(p):
        return False
    gpu_nodes = [n for n in p.cluster.nodes if n.gpus and n.gpu_model]
    kinds = {(n.gpu_model, n.gpus, n.cpu_milli, n.memory_mib, n.gpu_modes) for n in gpu_nodes}
    reps = [(covered(w), w.replicas) for w in p.workloads if not _cpu_only(w)]
    total = sum(r for _, r in reps)
    few_types = bool(gpu_nodes) and len(kinds) * 10 <= len(gpu_nodes)
    return len(p.priorities) == 1 and few_types and 10 * sum(r for c, r in reps if c) >= 9 * total > 0
