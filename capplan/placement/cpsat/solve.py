"""The ``cpsat`` strategy: greedy hint, lexicographic CP-SAT stages, decode, validate.

:func:`plan_cpsat` is anytime: it starts from the greedy plan (the first valid plan, usually in
milliseconds), improves it stage by stage within ``options.time_limit``, and returns the greedy
plan instead whenever CP-SAT's result is not lexicographically at least as good or does not pass
the independent validator. So the result is never worse than greedy and never invalid.
"""

from __future__ import annotations

import time

from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Problem
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.progress import plan_event
from capplan.placement.core.subproblem import lex_key
from capplan.placement.core.summary import trivial_bound
from capplan.placement.cpsat.aggregate import break_node_symmetry, greedy_hint, sort_plan_nodes
from capplan.placement.cpsat.constraints import add_all
from capplan.placement.cpsat.index import build_index
from capplan.placement.cpsat.model import PlacementModel
from capplan.placement.cpsat.objective import build_stages
from capplan.placement.cpsat.repair import regions
from capplan.placement.cpsat.result import bounds, from_solution, greedy_as_cpsat, repaired
from capplan.placement.cpsat.stages import PRESOLVE_MAX_VARS, complete_hint, solve_stages
from capplan.placement.greedy import plan_greedy

# Shares of the run's deadline (the one home of each budget), all cut when the solve starts:
FINAL_SHARE = 0.9  # the model's stages end here without region repair (the bound, reasons and summary follow)
REPAIRABLE_STAGES_SHARE = 0.3  # the stages' end when region repair follows them
SMALL_STAGES_SHARE = 0.6  # the stages' end on a model small enough for CP-SAT to prove itself
REPAIR_SHARE = 0.95  # region repair after the model's stages ends here
MODEL_MIN_SHARE = 0.1  # less than this left after greedy (and under 0.3 s): greedy's plan, no model
LP_CHECK_SHARE = 0.02  # one short LP bound after a repair improvement, on small models
_BUILD_SECONDS_PER_PAIR = 2e-4


def plan_cpsat(problem: Problem, options: PlanOptions, repair_racks: bool = True) -> Plan:
    """Plan ``problem`` with the exact CP-SAT model (see ``docs/placement-model.md``).

    Parameters
    ----------
    problem
        The placement problem.
    options
        ``time_limit`` (whole solve), ``seed``, ``workers``, ``allow_preemption``,
        ``allow_migration`` and an optional ``progress`` callback.
    repair_racks
        When a priority may stay unproven, the stages get the first 30% of the limit and region
        repair (:mod:`capplan.placement.cpsat.repair`) runs until 90% if one does. False for the small
        solves of repair and LNS themselves, which also skip the tie-breaking stages (topology,
        fragmentation) and the LP bounds: their callers compare placements only.

    Returns
    -------
    Plan
        Status ``optimal`` when every priority stage was proven optimal, ``feasible`` otherwise,
        ``infeasible`` when a guaranteed workload is left out; objective and CP-SAT bound per
        priority; ``metrics.cpsat`` holds per-stage statistics.
    """
    t0 = time.perf_counter()
    clock = options.clock()
    options = options.within(clock)
    tl = clock.remaining()
    final = clock.share(FINAL_SHARE).end
    repairable = repair_racks and not problem.running and len(regions(problem)) >= 2
    deadline = clock.share(REPAIRABLE_STAGES_SHARE if repairable else FINAL_SHARE).end
    small_end, repair_end = clock.share(SMALL_STAGES_SHARE).end, clock.share(REPAIR_SHARE).end
    greedy = plan_greedy(problem, options)
    if options.progress:
        options.progress(plan_event("greedy", t0, greedy))
    if repairable and deadline - time.perf_counter() < max(0.3, MODEL_MIN_SHARE * tl):
        # too short a limit to share between the stages and region repair: the stages get it all (a 1 s limit
        # on a two-rack fleet used to end in greedy's plan, even an `infeasible` one CP-SAT solves in 0.1 s)
        repairable, deadline = False, final
    if deadline - time.perf_counter() < max(0.3, MODEL_MIN_SHARE * tl):
        return greedy_as_cpsat(greedy, t0, {"fallback": "greedy", "reason": "no time left after greedy"})
    ix = build_index(problem, options)
    pairs = sum(len(c) for c in ix.cands.values())
    if pairs * _BUILD_SECONDS_PER_PAIR > 0.6 * (final - time.perf_counter()):
        return _without_model(problem, greedy, options, pairs, t0, final, repairable)
    pm = PlacementModel(ix)
    add_all(pm)
    groups = break_node_symmetry(pm)
    stages = build_stages(pm)
    if not repair_racks:  # a rack's small solve: only the placement stages count (see repair.lex_key)
        stages = [st for st in stages if st.priority is not None or st.name in ("guaranteed", "held")]
    for var, value in greedy_hint(pm, sort_plan_nodes(pm, greedy, groups)).items():
        pm.m.add_hint(var, value)
    if repairable:  # on large models the build takes much of the 30%: the stages get a quarter of what is left
        deadline = max(deadline, time.perf_counter() + 0.25 * (final - time.perf_counter()))
    if repairable and len(pm.m.proto.variables) <= PRESOLVE_MAX_VARS:
        # A small model: CP-SAT proves its stages itself in a few seconds (small-2's last priority needs
        # 1-4 s on a busy machine, more than 30% of a 10 s limit leaves it); repair gets the rest.
        deadline = max(deadline, small_end)
    completed = complete_hint(pm, stages, options, (deadline - time.perf_counter()) / 4)
    run = solve_stages(pm, stages, options, t0, deadline, completed)
    stats: dict[str, object] = {
        "stages": [r.__dict__ for r in run.results],
        "hint_complete": completed is not None,
        "priorities_done_s": run.priorities_done_s,
        "variables": len(pm.m.proto.variables),
        "constraints": len(pm.m.proto.constraints),
    }
    plan = from_solution(problem, pm, stages, run, options, t0, stats, lp_bounds=repair_racks)
    if plan is None or lex_key(problem, list(plan.assignments)) < lex_key(problem, list(greedy.assignments)):
        stats["fallback"] = "greedy"
        plan = greedy_as_cpsat(greedy, t0, stats)
    if repairable and plan.status != "optimal":  # also from the greedy plan when CP-SAT found nothing better
        # On small models a short LP bound after each improvement lets repair stop once it proves the
        # plan optimal; on large ones the bound's LPs would take repair's time (and the final bound's).
        small = len(pm.m.proto.variables) <= PRESOLVE_MAX_VARS
        # The LP bounds were computed for the plan before repair and are reused after it (Run.lp_bounds):
        # what follows repair (bound, reasons, validation) is quick, so repair runs until REPAIR_SHARE.
        plan = repaired(problem, plan, options, t0, repair_end, _solve_sub,
                        lambda got: bounds(pm, stages, run, got, deadline=clock.end),
                        (lambda got: bounds(pm, stages, run, got, deadline=clock.within(LP_CHECK_SHARE * tl).end))
                        if small else None)
    return plan


def _without_model(problem: Problem, greedy: Plan, options: PlanOptions, pairs: int, t0: float, final: float,
                   repairable: bool) -> Plan:
    """The model alone would take most of the limit: greedy's plan, region-repaired when that applies
    (repair's small models still fit)."""
    stats: dict[str, object] = {"fallback": "greedy",
                                "reason": f"a model of {pairs} (workload, node) pairs would not be built in time"}
    early = greedy_as_cpsat(greedy, t0, stats)
    if repairable and early.status != "optimal":
        early = repaired(problem, early, options, t0, final, _solve_sub, lambda _: (trivial_bound(problem), False))
    return early


def _solve_sub(sub: Problem, opts: PlanOptions) -> list[Assignment]:
    """A rack's (or node pair's) small exact solve for :mod:`capplan.placement.cpsat.repair`."""
    return list(plan_cpsat(sub, opts, repair_racks=False).assignments)
