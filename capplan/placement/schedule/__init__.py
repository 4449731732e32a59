"""Scheduling in time: place workloads on nodes, GPUs and slices, and give each a start.

:func:`schedule` is the one entry point. ``heuristic`` is list scheduling (priority order,
earliest feasible start, backfill) on the placement core's occupancy state; ``cpsat`` solves the
time model hinted by it and keeps the better schedule (past the full model's reach, a neighbourhood
search over time windows and domains improves list scheduling's schedule); ``auto`` picks ``cpsat``
whenever the model covers the problem (the strategy table, :mod:`capplan.placement.schedule.strategies`:
every entry answers ``supports(problem)``, and ``auto`` runs the first that does). Every schedule
passes the independent validator
(:func:`capplan.model.validate_schedule.assert_valid_schedule`) before it is returned.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from pydantic import ValidationError

from capplan.model.errors import InputError, suggest
from capplan.model.interruptions import expected_duration, expected_goodput, with_expected_durations
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.timing import DEFAULT_HORIZON_S, DEFAULT_STEP_S, ScheduleSpec, describe_seconds, parse_seconds
from capplan.model.validate_schedule import assert_valid_schedule
from capplan.placement.core.options import PlanOptions
from capplan.placement.schedule.strategies import (
    SCHEDULE_TABLE,
    SWEEP_FROM_REPLICAS,
    choose_schedule_strategy,
)

ScheduleStrategy = Literal["auto", "cpsat", "heuristic"]
SCHEDULE_STRATEGIES = ("auto", *SCHEDULE_TABLE)
#: ``optimal``: the best schedule the strategy finds; ``kueue``: Kueue's admission simulated
#: (:mod:`capplan.placement.schedule.kueue`).
SCHEDULE_POLICIES = ("optimal", "kueue")
__all__ = ["SCHEDULE_POLICIES", "SCHEDULE_STRATEGIES", "SWEEP_FROM_REPLICAS", "choose_schedule_strategy", "schedule"]
#: The least time a strategy is given, however little of the limit is left (it then returns its fastest schedule).
MIN_SCHEDULE_SECONDS = 0.05


def _spec(p: Problem, horizon: int | str | None, step: int | str | None) -> ScheduleSpec:
    base = p.schedule
    try:
        h = parse_seconds(horizon) if horizon is not None else base.horizon if base else DEFAULT_HORIZON_S
        s = parse_seconds(step) if step is not None else base.step if base else DEFAULT_STEP_S
    except ValueError as exc:
        raise InputError("horizon" if horizon is not None else "step", str(exc)) from None
    if h <= 0:
        raise InputError("horizon", "must be positive, e.g. 24h or 7d")
    try:
        return ScheduleSpec(horizon=h, step=s)
    except ValidationError as exc:  # its message, without pydantic's heading and link
        msg = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise InputError("horizon" if horizon is not None else "step" if step is not None else "schedule",
                         msg) from None


def schedule(problem: Problem, strategy: str = "auto", options: PlanOptions | None = None, *,
             horizon: int | str | None = None, step: int | str | None = None, policy: str = "optimal",
             **kw: Any) -> Schedule:
    """Schedule ``problem`` over a horizon and return a validated :class:`Schedule`.

    Parameters
    ----------
    problem
        The problem; workloads may carry ``duration``, ``release`` and ``deadline``, running
        replicas ``ends_in``.
    strategy
        ``auto`` (the first table entry that supports the problem), ``cpsat`` or ``heuristic``.
    options
        The run's settings, the same validated object as :func:`~capplan.placement.solve`'s
        (``time_limit``, ``seed``, ``workers``, ``deadline``); keyword arguments override its fields
        (``schedule(p, time_limit=30, seed=1)``). ``time_limit`` covers the strategy and the validation
        of its schedule; a ``deadline`` handed in (a command's) also covers writing it.
    horizon, step
        Override the scenario's ``schedule: {horizon, step}`` (seconds or ``90s``/``15m``/``2h``/``3d``).
        Without either, 7 days and 1 minute.
    policy
        ``optimal`` (the default) optimises; ``kueue`` simulates Kueue's admission (queueing strategies,
        quotas, topology) instead, and ``strategy`` is not used.

    Returns
    -------
    Schedule
        Timed assignments, workload rows, what does not run and why, objective, bound and gap.

    Raises
    ------
    InputError
        An unknown strategy, a bad horizon or step, or a setting out of range.
    """
    from capplan.placement.core.budget import VALIDATE_COST, WRITE_COST, reserve

    opts = replace(options or PlanOptions(), **kw)
    handed = opts.deadline is not None
    deadline = opts.clock()  # the one deadline of this run
    if strategy != "auto" and strategy not in SCHEDULE_TABLE:
        raise InputError("strategy", f"unknown schedule strategy {strategy!r}{suggest(strategy, SCHEDULE_TABLE)}; "
                                     f"use one of {list(SCHEDULE_STRATEGIES)}")
    if policy not in SCHEDULE_POLICIES:
        raise InputError("policy", f"unknown policy {policy!r}{suggest(policy, SCHEDULE_POLICIES)}; "
                                   f"use one of {list(SCHEDULE_POLICIES)}")
    spec = _spec(problem, horizon, step)
    timed = with_expected_durations(problem)  # gangs with checkpoint run for duration / goodput
    if policy == "kueue":
        from capplan.placement.schedule.kueue import schedule_kueue

        simulated = schedule_kueue(timed, spec.horizon, spec.step, opts.seed)
        return assert_valid_schedule(problem, expected_ends(problem, simulated))
    chosen = choose_schedule_strategy(timed) if strategy == "auto" else strategy
    keep = reserve(problem, deadline.budget, VALIDATE_COST) + (
        reserve(problem, deadline.budget, WRITE_COST) if handed else 0.0)
    run = opts.within(deadline.less(keep).at_least(MIN_SCHEDULE_SECONDS))
    return assert_valid_schedule(problem, expected_ends(problem, SCHEDULE_TABLE[chosen].run(timed, spec, run)))


def expected_ends(p: Problem, s: Schedule) -> Schedule:
    """``s`` with ``expected_end_s`` on the rows of gangs with ``checkpoint`` and a reason on a missed deadline."""
    rows = []
    for w, row in zip(p.workloads, s.workloads, strict=True):
        u = expected_goodput(p, w) if w.duration is not None else None
        if u is None:
            rows.append(row)
            continue
        wall = expected_duration(p, w)
        why = row.reason
        if not row.deadline_met and w.deadline is not None:
            why = (f"expected run time {describe_seconds(wall or 0)} (duration {describe_seconds(w.duration or 0)} "
                   f"/ goodput {u:.2%} under interruptions)" + (f"; {why}" if why else ""))
        rows.append(row.model_copy(update={"expected_end_s": row.end_s, "reason": why}))
    return s.model_copy(update={"workloads": tuple(rows)})
