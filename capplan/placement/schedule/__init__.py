"""Scheduling in time: place workloads on nodes, GPUs and slices, and give each a start.

:func:`schedule` is the one entry point. ``heuristic`` is list scheduling (priority order,
earliest feasible start, backfill) on the placement core's occupancy state; ``cpsat`` solves the
time model hinted by it and keeps the better schedule (past the full model's reach, a neighbourhood
search over time windows and domains improves list scheduling's schedule); ``auto`` picks ``cpsat``
whenever the model covers the problem (all but preset GPU modes, see ``exact.unsupported``). Every schedule
passes the independent validator
(:func:`capplan.model.validate_schedule.assert_valid_schedule`) before it is returned.
"""

from __future__ import annotations

import math
from typing import Literal

from capplan.model.errors import InputError
from capplan.model.interruptions import expected_duration, expected_goodput, with_expected_durations
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.timing import DEFAULT_HORIZON_S, DEFAULT_STEP_S, ScheduleSpec, describe_seconds, parse_seconds
from capplan.model.validate_schedule import assert_valid_schedule

ScheduleStrategy = Literal["auto", "cpsat", "heuristic"]
SCHEDULE_STRATEGIES = ("auto", "cpsat", "heuristic")
#: From this many replicas ``heuristic`` uses the linear time-order sweep instead of earliest-start search.
SWEEP_FROM_REPLICAS = 2000


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
    except ValueError as exc:
        raise InputError("schedule", str(exc).splitlines()[-1]) from None


def choose_schedule_strategy(p: Problem) -> str:
    """What ``auto`` runs: ``cpsat`` when the time model covers ``p`` (the full model when small, a
    neighbourhood search over time windows and domains from list scheduling's schedule when large),
    else ``heuristic``."""
    from capplan.placement.schedule.exact import unsupported

    return "cpsat" if unsupported(p) is None else "heuristic"


def schedule(problem: Problem, strategy: str = "auto", *, horizon: int | str | None = None,
             step: int | str | None = None, time_limit: float = 60.0, seed: int = 0, workers: int = 1) -> Schedule:
    """Schedule ``problem`` over a horizon and return a validated :class:`Schedule`.

    Parameters
    ----------
    problem
        The problem; workloads may carry ``duration``, ``release`` and ``deadline``, running
        replicas ``ends_in``.
    strategy
        ``auto``, ``cpsat`` or ``heuristic``.
    horizon, step
        Override the scenario's ``schedule: {horizon, step}`` (seconds or ``90s``/``15m``/``2h``/``3d``).
        Without either, 7 days and 1 minute.
    time_limit
        Wall-clock seconds for the solve (the exact model stops at this limit with its best).
    seed
        Random seed of the solver; the same seed gives the same schedule.
    workers
        CP-SAT search workers.

    Returns
    -------
    Schedule
        Timed assignments, workload rows, what does not run and why, objective, bound and gap.

    Raises
    ------
    InputError
        An unknown strategy, a bad horizon or step, or a non-positive time limit.
    """
    if strategy not in SCHEDULE_STRATEGIES:
        raise InputError("strategy", f"unknown schedule strategy {strategy!r}; use one of {list(SCHEDULE_STRATEGIES)}")
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise InputError("time_limit", f"must be a finite positive number of seconds, got {time_limit}")
    if workers < 1:
        raise InputError("workers", f"must be at least 1, got {workers}")
    spec = _spec(problem, horizon, step)
    timed = with_expected_durations(problem)  # gangs with checkpoint run for duration / goodput
    chosen = choose_schedule_strategy(timed) if strategy == "auto" else strategy
    if chosen == "cpsat":
        from capplan.placement.schedule.exact import schedule_cpsat, unsupported

        why = unsupported(timed)
        if why is None:
            result = schedule_cpsat(timed, spec.horizon, spec.step, time_limit, seed, workers)
            return assert_valid_schedule(problem, expected_ends(problem, result))
        result = _heuristic(timed, spec.horizon, spec.step, seed, time_limit)
        metrics = dict(result.metrics, cpsat_declined=why)
        return assert_valid_schedule(problem, expected_ends(problem, result.model_copy(update={"metrics": metrics})))
    return assert_valid_schedule(problem, expected_ends(problem, _heuristic(timed, spec.horizon, spec.step, seed,
                                                                            time_limit)))


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


def _heuristic(p: Problem, horizon: int, step: int, seed: int, time_limit: float) -> Schedule:
    """Earliest-start list scheduling up to :data:`SWEEP_FROM_REPLICAS` replicas, the time-order sweep above."""
    if sum(w.replicas for w in p.workloads) < SWEEP_FROM_REPLICAS:
        from capplan.placement.schedule.heuristic import schedule_heuristic

        return schedule_heuristic(p, horizon, step, seed, time_limit)
    from capplan.placement.schedule.sweep import schedule_sweep

    return schedule_sweep(p, horizon, step, seed)
