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

from capplan.model.errors import InputError, suggest
from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.model.validate import assert_valid, check_plan
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.progress import Heartbeat
from capplan.placement.core.reality import planning_problem
from capplan.placement.core.reconfig import plan_reconfiguring
from capplan.placement.core.spares import plan_with_spares

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

MIN_SOLVE_SECONDS = 0.05
"""The least time a strategy is given, however little of the limit is left (it then returns its fastest plan)."""


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
    from capplan.placement.strategies import STRATEGIES, choose_strategy, loaded

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
    beat = Heartbeat(opts.progress, name) if opts.progress else None
    try:
        with beat or contextlib.nullcontext():
            run = replace(opts.within(mine), progress=beat or opts.progress)
            # the strategy, holding spare nodes for gangs (core/spares.py), counting reconfigured GPUs
            # (core/reconfig.py)
            plan = plan_reconfiguring(q, lambda x, o: plan_with_spares(x, fn, o), run)
        problems = check_plan(p, plan)
    except (InputError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:  # a strategy bug must not cost the user the plan: fall back below
        problems = [f"{type(exc).__name__}: {exc}"]
        log.exception("strategy %s failed", name)
    log.info("strategy %s returned with %.2f s left", name, deadline.remaining())
    if problems:
        rest = opts.within(deadline.at_least(MIN_SOLVE_SECONDS))
        plan = assert_valid(p, _fallback(q, name, rest, problems, t0))  # checked once more: never emit a bad plan
    if breaks:
        plan = plan.model_copy(update={"metrics": {**plan.metrics, "running_breaks": [b.message for b in breaks]}})
    if not plan.solve_seconds:
        plan = plan.model_copy(update={"solve_seconds": round(time.perf_counter() - t0, 4)})
    return plan


def _fallback(p: Problem, name: str, opts: PlanOptions, problems: list[str], t0: float) -> Plan:
    """The greedy plan, marked as a fallback, when strategy ``name`` failed or produced an invalid plan."""
    from capplan.placement.greedy import plan_greedy

    warning = (f"strategy {name} did not produce a valid plan ({'; '.join(problems[:3])}); "
               "this is the greedy plan instead (please report this as a bug)")
    log.warning(warning)
    plan = plan_reconfiguring(p, lambda x, o: plan_with_spares(x, plan_greedy, o), replace(opts, progress=None))
    metrics = {**plan.metrics, "fallback_from": name, "warning": warning}
    return plan.model_copy(update={"metrics": metrics, "solve_seconds": round(time.perf_counter() - t0, 4)})
