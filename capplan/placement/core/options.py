"""Settings shared by every placement strategy (:class:`PlanOptions`) and the strategy signature."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
