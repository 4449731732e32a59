"""Settings shared by every placement strategy (:class:`PlanOptions`) and the strategy signature."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from capplan.model.deadline import Deadline
from capplan.model.errors import InputError

if TYPE_CHECKING:
    from capplan.model.plan import Plan
    from capplan.model.problem import Problem

SEED_MAX = 2**31 - 1


@dataclass(frozen=True)
class PlanOptions:
    """Settings shared by all strategies; checked when built.

    Attributes
    ----------
    time_limit
        Wall-clock limit in seconds for the whole solve (finite and positive).
    seed
        Random seed in ``0..2**31-1``; the same seed gives the same plan.
    allow_preemption, allow_migration
        Whether running replicas may be evicted (preemptible, for higher priority) or moved
        (migratable). By default nothing running moves.
    workers
        Parallel search workers (CP-SAT) or processes (at least 1).
    progress
        Optional callback receiving progress dicts (elapsed, objective, bound, gap).
    deadline
        The run's :class:`~capplan.model.deadline.Deadline` when a caller started one (a command,
        :func:`~capplan.placement.solve` for its strategy); None: :meth:`clock` starts one of
        ``time_limit`` seconds. Strategies cut their budgets from :meth:`clock`, never from ``time_limit``.

    Raises
    ------
    InputError
        A setting out of range, naming the option and its valid range.
    """

    time_limit: float = 60.0
    seed: int = 0
    allow_preemption: bool = False
    allow_migration: bool = False
    workers: int = 1
    progress: Callable[[dict[str, Any]], None] | None = None
    deadline: Deadline | None = None

    def clock(self) -> Deadline:
        """The run's deadline: :attr:`deadline`, or one of ``time_limit`` seconds from now."""
        return self.deadline if self.deadline is not None else Deadline.start(self.time_limit)

    def within(self, deadline: Deadline) -> PlanOptions:
        """These options for a sub-run ending at ``deadline`` (``time_limit`` follows its wall time)."""
        return replace(self, deadline=deadline, time_limit=max(1e-3, deadline.remaining()))

    def __post_init__(self) -> None:
        if isinstance(self.time_limit, bool) or not isinstance(self.time_limit, (int, float)) \
                or not math.isfinite(self.time_limit) or self.time_limit <= 0:
            raise InputError("time_limit", f"must be a finite positive number of seconds, got {self.time_limit!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= SEED_MAX:
            raise InputError("seed", f"must be an integer in 0..{SEED_MAX}, got {self.seed!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise InputError("workers", f"must be an integer >= 1, got {self.workers!r}")


Strategy = Callable[["Problem", PlanOptions], "Plan"]
"""A placement strategy: a problem and settings in, a plan (not yet validated) out."""
