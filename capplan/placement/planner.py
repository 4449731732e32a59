"""One planner interface, many strategies.

:func:`solve` is the entry point: it picks a strategy by name from the strategy table
(:mod:`capplan.placement.strategies`, or by problem size with ``"auto"``), runs it, and passes the
result through the independent validator before returning it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from capplan.model.errors import InputError, suggest
from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.model.validate import assert_valid
from capplan.placement.core.options import PlanOptions

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

MIN_SOLVE_SECONDS = 0.05
"""The least time a strategy is given, however little of the limit is left (it then returns its fastest plan)."""


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
        and the validation of its plan: the strategy gets the limit less the validator's expected
        share (:mod:`capplan.placement.core.budget`) and less the time its module takes to import.

    Raises
    ------
    InputError
        Unknown strategy name, or a setting out of range.
    PlanValidationError
        The strategy produced an invalid plan (a bug; never returned).
    """
    start = time.perf_counter()
    from capplan.placement.core.budget import VALIDATE_COST, reserve
    from capplan.placement.strategies import STRATEGIES, choose_strategy, loaded

    opts = replace(options or PlanOptions(), **kw)
    name = choose_strategy(p) if strategy == "auto" else strategy
    if name not in STRATEGIES:
        raise InputError("strategy", f"unknown strategy {name!r}{suggest(name, STRATEGIES)}; "
                                     f"choose from {', '.join(sorted(STRATEGIES))} or auto")
    fn = loaded(STRATEGIES[name])  # the import counts against the limit, outside the strategy's clock
    keep = reserve(p, opts.time_limit, VALIDATE_COST)
    left = opts.time_limit - (time.perf_counter() - start) - keep
    log.info("strategy %s ready at %.2f s; it gets %.2f s (%.2f s kept for the validator)", name,
             time.perf_counter() - start, max(MIN_SOLVE_SECONDS, left), keep)
    t0 = time.perf_counter()
    plan = fn(p, replace(opts, time_limit=max(MIN_SOLVE_SECONDS, left)))
    log.info("strategy %s returned at %.2f s", name, time.perf_counter() - start)
    if not plan.solve_seconds:
        plan = plan.model_copy(update={"solve_seconds": round(time.perf_counter() - t0, 4)})
    return assert_valid(p, plan)
