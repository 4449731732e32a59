"""Decomposition: split the fleet and its workloads into independent sub-problems, solve them in
parallel, merge, and repair what is left with the greedy placer.

Splits (``how``):

* ``domain``: groups of top-level topology domains (blocks) of about equal GPU count;
* ``model``: one part per GPU model;
* ``random``: nodes and workloads dealt randomly to ``parts`` parts, as in POP (Narayanan et al.,
  SOSP 2021).

A workload goes to one part as a whole when it is a gang or has a required topology level;
other workloads' replicas are dealt in proportion to the parts' GPUs. Power budgets shared by
parts are divided in proportion to their GPUs, so merged sub-plans never exceed a budget.
Parts run through an :class:`~capplan.placement.core.executor.Executor` (local processes, serial or Ray).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace
from itertools import groupby
from typing import Literal

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.problem import Node, Problem
from capplan.placement.core.executor import Executor, SerialExecutor, make_executor
from capplan.placement.core.options import PlanOptions, Strategy
from capplan.placement.core.subproblem import power_by_gpu_share, restrict
from capplan.placement.core.summary import make_plan

# Shares of the run's deadline: the parts (in parallel, or one after another within the same end), then the
# repair of the merged plan, then the LP bound (of what is left after the repair).
PARTS_SHARE = 0.6
BOUND_SHARE = 0.2

How = Literal["domain", "model", "random"]
Key = tuple[str, int]


def _node_parts(p: Problem, how: How, parts: int, rng: np.random.Generator) -> list[int]:
    cl = p.cluster
    if how == "model":
        models = sorted({n.gpu_model or "" for n in cl.nodes})
        return [models.index(n.gpu_model or "") for n in cl.nodes]
    if how == "domain" and len(cl.levels) > 1:
        gpus: dict[str, int] = defaultdict(int)
        for n in cl.nodes:
            gpus[n.path[0]] += n.gpus
        load = [0] * parts
        where: dict[str, int] = {}
        for dom in sorted(gpus, key=lambda d: (-gpus[d], d)):
            k = int(np.argmin(load))
            where[dom], load[k] = k, load[k] + gpus[dom]
        return [where[n.path[0]] for n in cl.nodes]
    return [int(x) for x in rng.integers(0, parts, size=len(cl.nodes))]


def split(p: Problem, how: How = "domain", parts: int = 2,
          seed: int = 0) -> list[tuple[Problem, dict[Key, Key]]]:
    """Split ``p`` into sub-problems, each with the map from its replica keys to the original ones."""
    rng = np.random.default_rng(seed)
    cl = p.cluster
    of_node = _node_parts(p, how, max(1, parts), rng)
    k = max(of_node, default=0) + 1
    cap = np.zeros(k)
    for n, q in zip(cl.nodes, of_node, strict=True):
        cap[q] += n.gpus
    run_part: dict[str, list[tuple[int, Assignment]]] = defaultdict(list)
    for a in p.running:
        run_part[a.workload].append((of_node[cl.node_index[a.node]], a))
    reps: list[dict[str, list[int]]] = [defaultdict(list) for _ in range(k)]
    fixed: list[dict[str, list[Assignment]]] = [defaultdict(list) for _ in range(k)]
    load = np.zeros(k)
    for w in sorted(p.workloads, key=lambda x: -p.demand_units(x) * x.replicas):
        taken = {a.replica for _, a in run_part.get(w.name, [])}
        for q, a in run_part.get(w.name, []):
            fixed[q][w.name].append(a)
        free = [r for r in range(w.replicas) if r not in taken]
        ok = [q for q in range(k) if any(of_node[i] == q and p.can_host(w, n) is not None
                                         for i, n in enumerate(cl.nodes))] or list(range(k))
        if not free:
            continue
        units = p.demand_units(w)
        if run_part.get(w.name) or w.is_gang or w.topology.required:
            q = run_part[w.name][0][0] if run_part.get(w.name) else max(ok, key=lambda x: cap[x] - load[x])
            reps[q][w.name] += free
            load[q] += units * len(free) / 7000
        elif how == "random":
            for r in free:
                q = ok[int(rng.integers(len(ok)))]
                reps[q][w.name].append(r)
                load[q] += units / 7000
        else:
            share = np.array([cap[q] for q in ok], dtype=float)
            share = share / share.sum() if share.sum() else np.full(len(ok), 1 / len(ok))
            counts = np.floor(share * len(free)).astype(int)
            for j in np.argsort(-(share * len(free) - counts))[: len(free) - counts.sum()]:
                counts[j] += 1
            pos = 0
            for q, c in zip(ok, counts.tolist(), strict=True):
                reps[q][w.name] += free[pos:pos + c]
                pos += c
                load[q] += units * c / 7000
    return [_part(p, [n for n, q in zip(cl.nodes, of_node, strict=True) if q == part], reps[part], fixed[part])
            for part in range(k) if any(q == part for q in of_node)]


def _part(p: Problem, nodes: list[Node], reps: dict[str, list[int]], fixed: dict[str, list[Assignment]]
          ) -> tuple[Problem, dict[Key, Key]]:
    return restrict(p, nodes, reps, fixed, power_by_gpu_share(p, {n.name for n in nodes}))


def _solve_part(args: tuple[Problem, Strategy, PlanOptions]) -> list[Assignment]:
    """Solve one part (module level so that process pools and Ray can ship it).

    The part's plan is not validated on its own: the merged plan is, by :func:`~capplan.placement.planner.solve`.
    """
    sub, part, opts = args
    return list(part(sub, opts).assignments) if sub.workloads else []


def repair(p: Problem, assignments: list[Assignment], deadline: Deadline) -> tuple[list[Assignment], list[Unplaced]]:
    """Place the replicas missing from ``assignments`` by greedy's pass (:class:`~capplan.placement.levels.PriorityPass`
    in the plain greedy order, the merged parts' replicas as placed), within ``deadline``.

    Workloads not reached when the time is up are left unplaced as not tried, and the reasons of the rest take the
    array form on large fleets or once the time is up (the exact reasons of 130 workload shapes took 19 s on a
    10k-GPU fleet), as greedy gives them.
    """
    from capplan.placement.core.budget import SUMMARY_COST, reserve
    from capplan.placement.core.state import ClusterState
    from capplan.placement.greedy import FAST_REASONS_NODES, GreedyPlacer, unplaced_reasons, workload_order
    from capplan.placement.levels import PriorityPass

    st = ClusterState.with_assignments(p, list(assignments))
    # the pass stops early enough for the reasons to fit after it (their expected cost)
    clock = deadline.less(reserve(p, deadline.budget, SUMMARY_COST))
    placer = GreedyPlacer(p, st, clock)
    placed: dict[str, list[Assignment]] = defaultdict(list)
    for a in assignments:
        placed[a.workload].append(a)
    out = list(assignments)
    run = PriorityPass(p, placer, clock, out, placed, None, other_ways=False)
    for _, ws in groupby(workload_order(p), key=lambda w: w.priority):
        run.level(list(ws))
    for h in run.repair.held.values():  # gangs the pass placed whole (movable while it ran)
        out += [st.assignment(h.w, r, pl) for r, pl in zip(h.replicas, h.placements, strict=True)]
    fast = bool(run.late) or len(p.cluster.nodes) > FAST_REASONS_NODES
    unplaced = unplaced_reasons(p, st, out, run.missing_of, fast, deadline) + run.late
    unplaced.sort(key=lambda u: p.workload_index[u.workload])
    return out, unplaced


def plan_decompose(p: Problem, options: PlanOptions, how: How = "domain", parts: int | None = None,
                   part: Strategy | None = None, executor: Executor | None = None) -> Plan:
    """Split ``p`` (see :func:`split`), solve the parts with ``part`` in parallel, merge, repair.

    Parameters
    ----------
    part
        The strategy that plans each part (a picklable callable; default the ``heuristic`` strategy).
    how, parts
        The split; ``parts`` defaults to ``options.workers`` (at least 2).
    executor
        Where parts run; default local processes when ``options.workers > 1``, else serial.
    """
    from capplan.placement.core.bound import upper_bound

    if part is None:
        from capplan.placement.heuristics.run import plan_heuristic

        part = plan_heuristic
    t0 = time.perf_counter()
    k = parts or max(2, options.workers)
    pieces = split(p, how, k, options.seed)
    ex = executor or (make_executor("local", options.workers) if options.workers > 1 else SerialExecutor())
    clock = options.clock()
    sub_opts = replace(options.within(clock.share(PARTS_SHARE).at_least(0.2)), progress=None, workers=1)
    if not isinstance(ex, SerialExecutor):  # a deadline is a point on this process's clock: elsewhere each part
        sub_opts = replace(sub_opts, deadline=None)  # starts its own from time_limit (another machine, with Ray)
    merged: list[Assignment] = []
    for (_, back), got in zip(pieces, ex.map(_solve_part, [(sub, part, sub_opts) for sub, _ in pieces]),
                              strict=True):
        merged += [a.model_copy(update={"replica": back[a.key][1]}) for a in got]
    before = len(merged)
    merged, unplaced = repair(p, merged, clock.share(1 - BOUND_SHARE))  # the bound gets the rest
    bound = upper_bound(p, time_limit=max(0.2, clock.share(BOUND_SHARE).remaining()))
    plan = make_plan(p, "decompose", merged, unplaced, bound=bound.per_priority, seconds=time.perf_counter() - t0,
                     seed=options.seed, extra_metrics={"parts": len(pieces), "split": how,
                                                       "repaired_replicas": len(merged) - before})
    if options.progress:
        options.progress({"stage": "decompose", "elapsed": round(time.perf_counter() - t0, 3),
                          "objective": list(plan.objective), "bound": list(plan.bound), "gap": plan.gap})
    return plan
