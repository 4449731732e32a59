"""The one time budget of a command or a solve: a :class:`Deadline`, built once and handed down.

A deadline is a wall-clock end (``time.perf_counter()`` seconds) and a nominal budget (seconds of the
user's limit it stands for). Each step asks it for what is left (:meth:`Deadline.remaining`), whether
the time is up (:meth:`Deadline.expired`), or cuts a child for a sub-step (:meth:`Deadline.share`: a
fraction of what remains, never past the parent's end). The nominal budget does not depend on how busy
the machine is, so deterministic solver budgets derive from it (:meth:`Deadline.deterministic`) and
give the same result for a seed at any load; the wall-clock end is the safety net that keeps the limit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from capplan.model.errors import InputError


def _check(seconds: float, field: str) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise InputError(field, f"must be a finite positive number of seconds, got {seconds!r}")
    return float(seconds)


@dataclass(frozen=True, slots=True)
class Deadline:
    """A wall-clock end and the nominal seconds it stands for; immutable (children are new objects).

    Attributes
    ----------
    end
        ``time.perf_counter()`` value at which the time is up.
    budget
        Nominal seconds: the user's limit, or a child's fraction of its parent's budget. Independent
        of the machine's load; :meth:`deterministic` derives solver budgets from it.
    """

    end: float
    budget: float

    @classmethod
    def start(cls, seconds: float, field: str = "time_limit") -> Deadline:
        """A deadline ``seconds`` from now (finite and positive, else :class:`InputError` on ``field``)."""
        s = _check(seconds, field)
        return cls(time.perf_counter() + s, s)

    @classmethod
    def coerce(cls, limit: Deadline | float, field: str = "time_limit") -> Deadline:
        """``limit`` itself when it is a deadline, else a deadline of ``limit`` seconds from now."""
        return limit if isinstance(limit, Deadline) else cls.start(limit, field)

    def remaining(self) -> float:
        """Wall seconds left (0.0 once expired)."""
        return max(0.0, self.end - time.perf_counter())

    def expired(self) -> bool:
        """Whether the wall-clock end has passed."""
        return time.perf_counter() >= self.end

    def share(self, f: float) -> Deadline:
        """A child with the fraction ``f`` (0..1] of what remains, never past this deadline's end.

        Its nominal budget is ``f`` times this one's, so budgets cut the same way on any machine.
        """
        if not 0 < f <= 1:
            raise ValueError(f"a share is a fraction in (0, 1], got {f}")
        return Deadline(min(self.end, time.perf_counter() + f * self.remaining()), f * self.budget)

    def within(self, seconds: float) -> Deadline:
        """A child ending at most ``seconds`` from now (and never past this deadline)."""
        now = time.perf_counter()
        return Deadline(min(self.end, now + max(0.0, seconds)), min(self.budget, max(0.0, seconds)))

    def less(self, seconds: float) -> Deadline:
        """A child ending ``seconds`` earlier: the time a later step (validate, write) keeps for itself."""
        keep = max(0.0, seconds)
        return Deadline(self.end - keep, max(0.0, self.budget - keep))

    def at_least(self, seconds: float) -> Deadline:
        """This deadline, or one ``seconds`` from now if less is left: the least time a step is given
        (it then returns its fastest result; the overrun is bounded by ``seconds``)."""
        now = time.perf_counter()
        if self.end - now >= seconds:
            return self
        return Deadline(now + seconds, max(self.budget, seconds))

    def deterministic(self, rate: float) -> float:
        """A deterministic-clock budget of ``rate`` units per nominal second (load-independent)."""
        return rate * self.budget
