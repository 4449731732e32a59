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
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.timing import DEFAULT_HORIZON_S, DEFAULT_STEP_S, ScheduleSpec, parse_seconds
from capplan.model.validate_schedule import assert_valid_schedule

ScheduleStrategy = Literal["auto", "cpsat", "heuristic"]
SCHEDULE_STRATEGIES = ("auto", "cpsat", "heuristic")
#: ``optimal``: the best schedule the strategy finds; ``kueue``: Kueue's admission simulated
#: (:mod:`capplan.placement.schedule.kueue`).
SCHEDULE_POLICIES = ("optimal", "kueue")
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
             step: int | str | None = None, time_limit: float = 60.0, seed: int = 0, workers: int = 1,
             policy: str = "optimal") -> Schedule:
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
        An unknown strategy, a bad horizon or step, or a non-positive time limit.
    """
    if strategy not in SCHEDULE_STRATEGIES:
        raise InputError("strategy", f"unknown schedule strategy {strategy!r}; use one of {list(SCHEDULE_STRATEGIES)}")
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise InputError("time_limit", f"must be a finite positive number of seconds, got {time_limit}")
    if workers < 1:
        raise InputError("workers", f"must be at least 1, got {workers}")
    if policy not in SCHEDULE_POLICIES:
        raise InputError("policy", f"unknown policy {policy!r}; use one of {list(SCHEDULE_POLICIES)}")
    spec = _spec(problem, horizon, step)
    if policy == "kueue":
        from capplan.placement.schedule.kueue import schedule_kueue

        return assert_valid_schedule(problem, schedule_kueue(problem, spec.horizon, spec.step, seed))
    chosen = choose_schedule_strategy(problem) if strategy == "auto" else strategy
    if chosen == "cpsat":
        from capplan.placement.schedule.exact import schedule_cpsat, unsupported

        why = unsupported(problem)
        if why is None:
            result = schedule_cpsat(problem, spec.horizon, spec.step, time_limit, seed, workers)
            return assert_valid_schedule(problem, result)
        result = _heuristic(problem, spec.horizon, spec.step, seed, time_limit)
        metrics = dict(result.metrics, cpsat_declined=why)
        return assert_valid_schedule(problem, result.model_copy(update={"metrics": metrics}))
    return assert_valid_schedule(problem, _heuristic(problem, spec.horizon, spec.step, seed, time_limit))


def _heuristic(p: Problem, horizon: int, step: int, seed: int, time_limit: float) -> Schedule:
    """Earliest-start list scheduling up to :data:`SWEEP_FROM_REPLICAS` replicas, the time-order sweep above."""
    if sum(w.replicas for w in p.workloads) < SWEEP_FROM_REPLICAS:
        from capplan.placement.schedule.heuristic import schedule_heuristic

        return schedule_heuristic(p, horizon, step, seed, time_limit)
    from capplan.placement.schedule.sweep import schedule_sweep

    return schedule_sweep(p, horizon, step, seed)
