"""No false ``infeasible``: before a plan says a guaranteed workload cannot be met, check it.

A plan is ``infeasible`` when a guaranteed replica is left out. A strategy that does not prove this (a
heuristic that places by priority, a decomposition that split the fleet) may leave one out that fits:
:func:`confirm_infeasible` then plans the guaranteed work alone (every running replica kept where it is),
greedily; if that places every guaranteed replica, those placements are kept and the rest of the work is
placed around them greedily (neither step evicts or moves a running replica). Otherwise, when the problem is
small enough to model, the exact strategy (CP-SAT, with the run's preemption and migration settings) plans the
whole problem. A plan found so replaces
the strategy's when it places every guaranteed replica and is lexicographically better (guaranteed replicas
come first in the plan order). ``metrics.guaranteed_check`` records what was checked.

The strategies are passed in (this module imports none of them).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import replace

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Problem
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.options import PlanOptions, Strategy
from capplan.placement.core.subproblem import lex_key, restrict
from capplan.placement.core.summary import make_plan

log = logging.getLogger(__name__)

#: The exact check models the guaranteed work only up to this size (as ``auto`` picks CP-SAT).
EXACT_REPLICAS, EXACT_NODES = 5000, 1000
#: The least time each check gets, however little of the limit is left (small problems take far less).
MIN_CHECK_SECONDS = 0.3


def guaranteed_only(p: Problem) -> tuple[Problem, dict[tuple[str, int], tuple[str, int]]]:
    """``p`` with only its guaranteed replicas to place; every running replica stays as running state.

    Returns the sub-problem and the map from its replica keys to ``p``'s.
    """
    running_of: dict[str, list[Assignment]] = defaultdict(list)
    for a in p.running:
        running_of[a.workload].append(a)
    free: dict[str, list[int]] = {}
    for w in p.workloads:
        if w.sla == "guaranteed":
            taken = {a.replica for a in running_of.get(w.name, [])}
            free[w.name] = [r for r in range(w.replicas) if r not in taken]
    return restrict(p, list(p.cluster.nodes), free, running_of, lambda d: d.power_w)


def _placed_all(p: Problem, plan: Plan) -> bool:
    placed = {a.key for a in plan.assignments}
    return not plan.evictions and not plan.migrations and all(
        (w.name, r) in placed for w in p.workloads if w.sla == "guaranteed" for r in range(w.replicas))


def confirm_infeasible(p: Problem, plan: Plan, options: PlanOptions, deadline: Deadline,
                       greedy: Strategy, exact: Strategy | None) -> Plan:
    """``plan``, or a better one when ``plan`` leaves out a guaranteed replica that fits (see the module).

    Its ``strategy`` names the one that produced it.

    Parameters
    ----------
    p, plan
        The problem and a strategy's plan of it.
    options
        The run's settings (the guaranteed work alone is placed without preemption or migration).
    deadline
        The end the checks work to (each gets at least :data:`MIN_CHECK_SECONDS`).
    greedy, exact
        The greedy strategy, and the exact one (None: greedy only).
    """
    if plan.status != "infeasible":
        return plan
    tried: list[str] = []
    sub, back = guaranteed_only(p)
    opts = replace(options, allow_preemption=False, allow_migration=False, progress=None)
    found = greedy(sub, opts.within(deadline.at_least(MIN_CHECK_SECONDS)))
    tried.append("greedy, the guaranteed work first")
    if _placed_all(sub, found):
        running = {a.key for a in sub.running}
        fixed = [a.model_copy(update={"replica": back[a.key][1]}) for a in found.assignments if a.key not in running]
        # the rest around them moves nothing either: the guaranteed replicas placed here are not running (a move
        # of one could not be told as a migration), and a plan that places every guaranteed replica comes first
        around = greedy(p.replace(running=(*p.running, *fixed)), opts.within(deadline.at_least(MIN_CHECK_SECONDS)))
        bound = {q: round(b * UNITS_PER_GPU) for q, b in zip(p.priorities, plan.bound, strict=True)}
        note = f"{plan.strategy} left a guaranteed replica out; greedy placed the guaranteed work first"
        better = make_plan(p, "greedy", list(around.assignments), list(around.unplaced), bound=bound,
                           seconds=plan.solve_seconds, seed=plan.seed,
                           extra_metrics={"guaranteed_check": note})
        if lex_key(p, better.assignments) > lex_key(p, plan.assignments):
            log.info("%s", note)
            return better
    if exact is not None and sum(w.replicas for w in p.workloads) <= EXACT_REPLICAS \
            and len(p.cluster.nodes) <= EXACT_NODES and plan.strategy != "cpsat":
        tried.append("cpsat")
        found = exact(p, replace(options, progress=None).within(deadline.at_least(MIN_CHECK_SECONDS)))
        if found.status != "infeasible" and lex_key(p, found.assignments) > lex_key(p, plan.assignments):
            note = f"{plan.strategy} left a guaranteed replica out; cpsat placed every guaranteed replica"
            log.info("%s", note)
            return found.model_copy(update={"metrics": {**found.metrics, "guaranteed_check": note}})
    checked = f"no plan placing every guaranteed replica found ({'; '.join(tried)})"
    return plan.model_copy(update={"metrics": {**plan.metrics, "guaranteed_check": checked}})
