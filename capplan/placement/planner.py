"""One planner interface, many strategies.

:func:`solve` is the entry point: it picks a strategy by name from the strategy table
(:mod:`capplan.placement.strategies`, or by problem size with ``"auto"``), runs it, and passes the
result through the independent validator before returning it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import replace
from typing import Any

from capplan.model.deadline import Deadline
from capplan.model.errors import InputError, PlanValidationError, suggest
from capplan.model.plan import Plan, lexicographic_gap, priority_gaps
from capplan.model.problem import Problem
from capplan.model.validate import assert_valid, check_plan, check_plan_numbers
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.progress import Heartbeat
from capplan.placement.core.reality import planning_problem
from capplan.placement.core.reconfig import plan_reconfiguring
from capplan.placement.core.spares import plan_with_spares
from capplan.placement.strategies import loaded

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

#: The least time a strategy is given, however little of the limit is left (it then returns its fastest plan).
MIN_SOLVE_SECONDS = 0.05
#: Below this many seconds left after ``auto``'s greedy plan (or less than the greedy plan took: every strategy
#: builds at least one plan of its own, which costs about as much), the strategy is not run: it could not beat it.
STRATEGY_MIN_SECONDS = 0.5
#: A strategy that used this much of its time without proving its plan optimal was cut by the time limit.
CUT_FRACTION = 0.9


#: The placement strategies that honour ClusterQueue quotas (the occupancy state's :class:`QuotaBook`).
QUOTA_STRATEGIES = ("greedy", "cpsat")


def uses_quotas(p: Problem) -> bool:
    """Whether ``p`` has ClusterQueue quotas that bind a workload."""
    return bool(p.queues) and any(w.queue is not None for w in p.workloads)


def solve(p: Problem, strategy: str = "auto", options: PlanOptions | None = None, **kw: Any) -> Plan:
    """Plan ``p`` with ``strategy`` and return a validated :class:`~capplan.model.plan.Plan`.

    Parameters
    ----------
    p
        The problem.
    strategy
        ``auto`` (by size) or a registered name (``greedy``, ``cpsat``, ``heuristic``, ``lns``,
        ``decompose``, ``patterns``, or one added with :func:`~capplan.placement.strategies.register`).
    options
        Solver settings; keyword arguments override its fields. ``time_limit`` covers the strategy
        and the validation of its plan: ``solve`` starts the one deadline of the run (unless
        ``options.deadline`` hands one in, e.g. a command's, which then also covers writing the plan),
        and the strategy gets what is left after its import, less the validator's expected share
        (:mod:`capplan.placement.core.budget`; and less writing's, for a deadline handed in).

    Raises
    ------
    InputError
        Unknown strategy name, or a setting out of range.
    PlanValidationError
        Neither the strategy nor the greedy fallback produced a valid plan (a bug; never returned).

    Notes
    -----
    A strategy that raises or returns a plan the validator rejects is a bug; rather than failing, the
    greedy plan is returned with ``metrics.fallback_from`` (the failed strategy) and ``metrics.warning``.
    """
    from capplan.placement.core.budget import VALIDATE_COST, WRITE_COST, reserve
    from capplan.placement.strategies import GREEDY_FIRST, STRATEGIES, choose_strategy

    opts = replace(options or PlanOptions(), **kw)
    handed = opts.deadline is not None
    deadline = opts.clock()  # the one deadline of this solve; every budget below is cut from it
    quotas = uses_quotas(p)
    name = choose_strategy(p) if strategy == "auto" else strategy
    if quotas and strategy == "auto" and name not in QUOTA_STRATEGIES:
        name = "greedy"
    if name not in STRATEGIES:
        raise InputError("strategy", f"unknown strategy {name!r}{suggest(name, STRATEGIES)}; "
                                     f"choose from {', '.join(sorted(STRATEGIES))} or auto")
    if quotas and name not in QUOTA_STRATEGIES:
        raise InputError("strategy", f"strategy {name} does not model ClusterQueue quotas (quotas: in the scenario); "
                                     f"use {' or '.join(QUOTA_STRATEGIES)} (auto picks one of them)")
    fn = loaded(STRATEGIES[name])  # the import counts against the limit, outside the strategy's clock
    q, breaks = planning_problem(p)  # running replicas that break a rule stay as they run (core/reality.py)
    for b in breaks:
        log.warning("running state: %s", b.message)
    # a deadline handed in also covers writing the plan out (the caller's next step)
    keep = reserve(p, deadline.budget, VALIDATE_COST) + (reserve(p, deadline.budget, WRITE_COST) if handed else 0.0)
    mine = deadline.less(keep).at_least(MIN_SOLVE_SECONDS)
    log.info("strategy %s ready with %.2f s left; it gets %.2f s (%.2f s kept for the validator%s)", name,
             deadline.remaining(), mine.remaining(), keep, " and writing" if handed else "")
    t0 = time.perf_counter()
    first, greedy_took = None, 0.0
    if name in GREEDY_FIRST:
        # a complete plan first, with the whole budget (greedy stops when done, usually in a fraction of it):
        # the strategy must beat it, and when greedy needed the time, the strategy is not run at all
        first = _greedy_first(p, q, opts, mine)
        if first is not None and first.status == "infeasible" and not quotas:
            # the plan to beat is the best the check finds: the guaranteed work placed first, or CP-SAT's plan
            first = _confirmed(p, q, first, opts, mine, STRATEGIES)
        greedy_took = time.perf_counter() - t0
        log.info("greedy plan ready with %.2f s left", mine.remaining())
    given = mine.remaining()
    t1 = time.perf_counter()
    if first is not None and (first.metrics.get("cut_by_time_limit")
                              or given < max(STRATEGY_MIN_SECONDS, greedy_took)):
        log.info("%.2f s left after the greedy plan (which took %.2f s); strategy %s is not run", given,
                 greedy_took, name)
        plan = first.model_copy(update={"metrics": {**first.metrics, "auto": {"kept": first.strategy, "over": name}}})
    else:
        ran, problems = _run(p, q, fn, name, opts, mine)
        log.info("strategy %s returned with %.2f s left", name, deadline.remaining())
        if ran is None or problems:
            rest = opts.within(deadline.at_least(MIN_SOLVE_SECONDS))
            ran = assert_valid(p, _fallback(q, name, rest, problems, t0, first))  # never emit a bad plan
        else:
            if ran.status != "optimal" and time.perf_counter() - t1 >= CUT_FRACTION * given:
                ran = ran.model_copy(update={"metrics": {**ran.metrics, "cut_by_time_limit": True}})
            if first is not None:
                ran = _not_worse(p, ran, first)
        plan = ran
    if plan.status == "infeasible" and not quotas:  # no false alarm: check before saying it (guarantee.py)
        done = first.metrics.get("guaranteed_check", "") if first is not None else ""
        if done and not done.startswith("not checked"):  # the greedy plan's check found nothing better
            plan = plan.model_copy(update={"metrics": {**plan.metrics, "guaranteed_check": done}})
        else:
            plan = _confirmed(p, q, plan, opts, deadline.less(keep), STRATEGIES)
    if breaks:
        plan = plan.model_copy(update={"metrics": {**plan.metrics, "running_breaks": [b.message for b in breaks]}})
    if not plan.solve_seconds:
        plan = plan.model_copy(update={"solve_seconds": round(time.perf_counter() - t0, 4)})
    # every plan above passed check_plan; the steps after it revise only its bound, gaps and metrics
    revised = check_plan_numbers(plan)
    if revised:
        raise PlanValidationError(revised)
    return plan


def _run(p: Problem, q: Problem, fn: Any, name: str, opts: PlanOptions, mine: Deadline
         ) -> tuple[Plan | None, list[str]]:
    """Strategy ``fn`` on the planning problem ``q`` within ``mine``, holding spare nodes for gangs
    (core/spares.py) and counting reconfigured GPUs (core/reconfig.py); the plan and its violations of ``p``."""
    beat = Heartbeat(opts.progress, name) if opts.progress else None
    try:
        with beat or contextlib.nullcontext():
            run = replace(opts.within(mine.at_least(MIN_SOLVE_SECONDS)), progress=beat or opts.progress)
            plan = plan_reconfiguring(q, lambda x, o: plan_with_spares(x, fn, o), run)
        return plan, check_plan(p, plan)
    except (InputError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:  # a strategy bug must not cost the user the plan: the caller falls back
        log.exception("strategy %s failed", name)
        return None, [f"{type(exc).__name__}: {exc}"]


def _confirmed(p: Problem, q: Problem, plan: Plan, opts: PlanOptions, end: Deadline, table: dict[str, Any]) -> Plan:
    """:func:`~capplan.placement.guarantee.confirm_infeasible` on the planning problem ``q`` with the greedy and
    exact strategies of the table, the result validated against ``p`` (a check that fails keeps the strategy's
    plan)."""
    from capplan.placement.core.budget import SUMMARY_COST, reserve
    from capplan.placement.greedy import plan_greedy
    from capplan.placement.guarantee import confirm_infeasible

    if end.remaining() < 3 * reserve(p, end.budget, SUMMARY_COST):  # two greedy passes and an assembly
        why = "not checked: the time limit left no time to place the guaranteed work alone (a longer limit checks it)"
        return plan.model_copy(update={"metrics": {**plan.metrics, "guaranteed_check": why}})
    try:
        exact = loaded(table["cpsat"]) if "cpsat" in table else None
        checked = confirm_infeasible(q, plan, opts, end, plan_greedy, exact)
    except (InputError, KeyboardInterrupt, MemoryError):
        raise
    except Exception:
        log.exception("the check of the guaranteed work failed")
        return plan
    if checked is plan:
        return plan
    problems = check_plan(p, checked)
    if problems:  # a bug in the check: keep the strategy's plan, and say so
        log.warning("the check of the guaranteed work produced a plan the validator rejects (%s); please report "
                    "this as a bug", "; ".join(problems[:3]))
        return plan
    return checked


def _greedy(q: Problem, opts: PlanOptions) -> Plan:
    """The greedy plan of the planning problem ``q``, through the wrappers every strategy runs in: spare nodes
    for gangs (core/spares.py) and reconfigured GPUs counted (core/reconfig.py)."""
    from capplan.placement.greedy import plan_greedy

    return plan_reconfiguring(q, lambda x, o: plan_with_spares(x, plan_greedy, o), replace(opts, progress=None))


def _greedy_first(p: Problem, q: Problem, opts: PlanOptions, mine: Deadline) -> Plan | None:
    """The greedy plan of ``q`` (validated against ``p``) within ``mine``; None if it fails."""
    from capplan.placement.core.budget import VALIDATE_COST, reserve

    try:  # its validation below is part of ``mine`` too
        plan = _greedy(q, opts.within(mine.less(reserve(p, mine.budget, VALIDATE_COST))))
    except (InputError, KeyboardInterrupt, MemoryError):
        raise
    except Exception:  # the strategy still runs; only the guarantee against greedy is lost
        log.exception("the greedy plan failed")
        return None
    return plan if not check_plan(p, plan) else None


def _not_worse(p: Problem, plan: Plan, greedy: Plan) -> Plan:
    """``plan``, or ``greedy`` when ``plan`` is lexicographically worse (:func:`lex_key`): ``auto`` never
    returns less than the greedy plan; ``metrics.auto`` says which one was kept."""
    from capplan.placement.core.subproblem import lex_key

    if lex_key(p, greedy.assignments) <= lex_key(p, plan.assignments):
        return plan.model_copy(update={"metrics": {**plan.metrics, "auto": {
            "kept": plan.strategy, "over": "greedy", "over_objective": list(greedy.objective)}}})
    log.info("strategy %s (objective %s) did not catch up with the greedy plan (%s); returning the greedy plan",
             plan.strategy, list(plan.objective), list(greedy.objective))
    cut = bool(plan.metrics.get("cut_by_time_limit")) or bool(greedy.metrics.get("cut_by_time_limit"))
    metrics = {**greedy.metrics, "auto": {"kept": greedy.strategy, "over": plan.strategy,
                                          "over_objective": list(plan.objective)},
               "cut_by_time_limit": cut and greedy.status != "optimal"}
    # A bound holds for the problem, not for one plan: the strategy's (an LP's) is usually the tighter one.
    bound = tuple(max(o, min(a, b)) for o, a, b in zip(greedy.objective, greedy.bound, plan.bound, strict=True)) \
        if len(plan.bound) == len(greedy.bound) else greedy.bound
    return greedy.model_copy(update={"metrics": metrics, "bound": bound, "gaps": priority_gaps(greedy.objective, bound),
                                     "gap": lexicographic_gap(greedy.objective, bound)})


def _fallback(p: Problem, name: str, opts: PlanOptions, problems: list[str], t0: float,
              first: Plan | None = None) -> Plan:
    """The greedy plan, marked as a fallback, when strategy ``name`` failed or produced an invalid plan
    (``first``: the greedy plan ``auto`` already has; ``p`` is the planning problem)."""
    warning = (f"strategy {name} did not produce a valid plan ({'; '.join(problems[:3])}); "
               "this is the greedy plan instead (please report this as a bug)")
    log.warning(warning)
    plan = first if first is not None else _greedy(p, opts)
    metrics = {**plan.metrics, "fallback_from": name, "warning": warning}
    return plan.model_copy(update={"metrics": metrics, "solve_seconds": round(time.perf_counter() - t0, 4)})

