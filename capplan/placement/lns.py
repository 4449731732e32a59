"""Large-neighbourhood search: free a few nodes and re-place their replicas exactly with CP-SAT.

Starting from the heuristic plan (or the greedy plan :func:`~capplan.placement.planner.solve` made first,
when that is better), each step picks a *neighbourhood* of nodes (a topology domain,
the nodes where an unplaced workload could go, or the most fragmented nodes) with some unplaced
workloads offered, and the search loop of :mod:`capplan.placement.core.search` re-solves it with the
``cpsat`` strategy, keeping the result when it is lexicographically better. It stops at the time limit, when the plan
meets its bound, or when CP-SAT proved a neighbourhood holding the whole problem (the first one, on
clusters of at most twice the neighbourhood size).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace

import numpy as np

from capplan.model.plan import Assignment, Plan, Unplaced, lexicographic_gap
from capplan.model.problem import Problem, Workload
from capplan.model.units import units_to_gpus
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.search import Pick, SearchStats, SubResult, missing_replicas, search
from capplan.placement.core.state import ClusterState
from capplan.placement.core.subproblem import lex_key
from capplan.placement.core.summary import make_plan, placed_units
from capplan.placement.greedy import FAST_REASONS_NODES, last_greedy_plan, unplaced_reasons

_NODES = 8  # nodes per neighbourhood
_OFFER = 40  # unplaced workloads offered per neighbourhood
# Shares of the run's deadline (the one home of each budget): the heuristic start plan, the LP bound
# after it (of what is left), and the search, which ends there so the reasons and summary fit after it.
START_SHARE = 0.3
BOUND_SHARE = 0.1
SEARCH_SHARE = 0.85
# ... and at the latest this long before the end for the wrap-up (the state rebuilt from the plan, the reasons,
# the summary): in speed loops per size unit (core/budget.py), 0.0074 measured on shape e at 15k GPUs (1.25 s,
# where the share above left 0.95 s and lns returned 0.4 s after its clock), kept with a margin.
WRAP_COST = 0.01
# With greedy's plan at hand, the heuristic start gets at most START_VS_GREEDY times the seconds greedy took
# (at least START_LEAST): a start much slower than greedy was not the better start (greedy's plan was, on the
# six benchmark shapes at 10k GPUs, where the heuristic was even cut on e), and its share is the search's time.
START_VS_GREEDY = 3.0
START_LEAST = 1.0


def _neighbourhood(p: Problem, assignments: list[Assignment], unplaced: list[tuple[Workload, list[int]]],
                   rng: np.random.Generator, step: int) -> set[str]:
    cl = p.cluster
    names = [n.name for n in cl.nodes]
    kind = step % 3
    if kind == 0 and unplaced:
        w, _ = unplaced[int(rng.integers(len(unplaced)))]
        hosts = [n.name for n in cl.nodes if p.can_host(w, n) is not None]
        if hosts:
            pick = rng.choice(len(hosts), size=min(_NODES, len(hosts)), replace=False)
            return {hosts[int(i)] for i in pick}
    if kind == 1 and len(cl.levels) > 1:
        level = cl.levels[-2]
        doms: dict[str, list[str]] = defaultdict(list)
        for n in cl.nodes:
            doms[cl.domain_of(n, level)].append(n.name)
        keys = sorted(doms)
        members = doms[keys[int(rng.integers(len(keys)))]]
        if len(members) > _NODES:
            members = [members[int(i)] for i in rng.choice(len(members), size=_NODES, replace=False)]
        return set(members)
    # Most fragmented: GPU nodes with partly used GPUs, plus a random node for diversity.
    used: dict[str, int] = defaultdict(int)
    for a in assignments:
        used[a.node] += len(a.gpus)
    frag = [n.name for n in cl.nodes if n.gpus and 0 < used[n.name] < n.gpus]
    rng.shuffle(frag)
    out = set(frag[:_NODES - 1])
    out.add(names[int(rng.integers(len(names)))])
    return out


def _proven(plan: Plan) -> bool:
    """Whether CP-SAT proved ``plan``'s placement optimal (also when a guarantee cannot be met)."""
    if plan.status == "optimal":
        return True
    stats = plan.metrics.get("cpsat", {})
    stages = stats.get("stages") or []
    return (plan.status == "infeasible" and "fallback" not in stats and list(plan.objective) == list(plan.bound)
            and any(r["name"] == "guaranteed" and r["status"] == "optimal" for r in stages))


class _RandomNeighbourhoods:
    """The LNS neighbourhoods: by turns the hosts of an unplaced workload, a topology domain and the most
    fragmented nodes (seeded), with up to ``_OFFER`` unplaced workloads offered; the whole problem first
    on clusters of at most twice the neighbourhood size."""

    def __init__(self, p: Problem, rng: np.random.Generator) -> None:
        self.p, self.rng, self.step = p, rng, 0

    def next(self, current: list[Assignment]) -> Pick:
        p, rng = self.p, self.rng
        missing = missing_replicas(p, current)
        small = self.step == 0 and len(p.cluster.nodes) <= 2 * _NODES
        nodes = ({n.name for n in p.cluster.nodes} if small
                 else _neighbourhood(p, current, missing, rng, self.step))
        offer = [missing[int(i)] for i in rng.permutation(len(missing))[:_OFFER]]
        self.step += 1
        return Pick(nodes=nodes, offer=offer,
                    whole=len(nodes) == len(p.cluster.nodes) and len(offer) == len(missing))

    def improved(self, pick: Pick, current: list[Assignment]) -> None:
        """Nothing to update: the next pick reads the current plan."""


def plan_lns(p: Problem, options: PlanOptions) -> Plan:
    """Plan ``p`` by large-neighbourhood search around the heuristic plan (see the module docstring)."""
    from capplan.placement.core.bound import upper_bound
    from capplan.placement.core.budget import reserve
    from capplan.placement.cpsat.solve import plan_cpsat
    from capplan.placement.heuristics.run import plan_heuristic

    t0 = time.perf_counter()
    clock = options.clock()
    deadline = min(clock.share(SEARCH_SHARE).end, clock.end - reserve(p, clock.budget, WRAP_COST))
    known = last_greedy_plan(p, options)  # ``solve`` made it first: improve the better of the two
    start_clock = clock.share(START_SHARE)
    if known is not None:  # the heuristic start is worth its share only when about as fast as greedy
        start_clock = start_clock.within(max(START_LEAST, START_VS_GREEDY * known.solve_seconds))
    start = plan_heuristic(p, replace(options.within(start_clock), progress=None))
    # (not one that evicts or moves running replicas: the search's plan keeps every running replica in place)
    if known is not None and not known.evictions and not known.migrations \
            and lex_key(p, known.assignments) > lex_key(p, start.assignments):
        start = known
    bound = upper_bound(p, time_limit=max(0.5, clock.share(BOUND_SHARE).remaining())).per_priority

    def units(ass: list[Assignment]) -> list[int]:
        got = placed_units(p, ass)
        return [got[q] for q in p.priorities]

    target = [max(bound.get(q, 0), b) for q, b in zip(p.priorities, units(list(start.assignments)), strict=True)]
    shown = 0.0

    def report(ass: list[Assignment], steps: int, force: bool = False) -> None:
        nonlocal shown
        now = time.perf_counter()
        if options.progress and (force or now - shown >= 1.0):
            got = units(ass)
            options.progress({"stage": "lns", "elapsed": round(now - t0, 3), "step": steps,
                              "objective": [units_to_gpus(u) for u in got],
                              "bound": [units_to_gpus(b) for b in target], "gap": lexicographic_gap(got, target)})
            shown = now

    def solve_sub(sub: Problem, left: float) -> SubResult:
        # Replicas running in the sub-problem (running ones, and gang members pinned by the rest of the plan)
        # stay where they are: an eviction or move there could not be recorded against the whole plan.
        plan = plan_cpsat(sub, replace(options.within(clock.within(left)), progress=None, workers=1,
                                       allow_preemption=False, allow_migration=False), repair_racks=False)
        return SubResult(plan.assignments, proven=_proven(plan))

    report(list(start.assignments), 0, force=True)
    assignments, stats = list(start.assignments), SearchStats()
    if units(assignments) != target:
        assignments, stats = search(p, assignments, _RandomNeighbourhoods(p, np.random.default_rng(options.seed)),
                                    solve_sub, deadline, stop=lambda ass: units(ass) == target,
                                    on_step=lambda ass, st, better: report(ass, st.steps, force=better))
    report(assignments, stats.steps, force=True)
    missed = missing_replicas(p, assignments)
    unplaced: list[Unplaced] = []
    if missed:  # reasons on the final occupancy (the start plan's may no longer hold), as greedy gives them:
        # the array form on large fleets or when the time is up (133 exact reasons took 10 s on a 10k-GPU fleet)
        st = ClusterState.with_assignments(p, assignments)
        fast = len(p.cluster.nodes) > FAST_REASONS_NODES or clock.expired()
        unplaced = unplaced_reasons(p, st, assignments, missed, fast)
    return make_plan(p, "lns", assignments, unplaced, bound=bound, seconds=time.perf_counter() - t0,
                     seed=options.seed, extra_metrics={"lns_steps": stats.steps, "lns_improvements": stats.improved,
                                                       "start_objective": list(start.objective)})
