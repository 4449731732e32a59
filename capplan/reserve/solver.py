"""What every solve method shares: :class:`SolverSettings` in, :class:`RawSolution` out.

The extensive form (:mod:`capplan.reserve.milp`) and the decomposition
(:mod:`capplan.reserve.lshaped`) take the same settings and return the same raw numbers, which
:mod:`capplan.reserve.planner` turns into a :class:`capplan.reserve.result.Plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from capplan.model.deadline import Deadline
from capplan.model.errors import InputError, suggest

#: values below this are read back from a solver as zero
TOL = 1e-6
Arr = npt.NDArray[np.float64]


#: The least time a solve is given, however little of a deadline is left (it then returns what it has).
MIN_SOLVE_SECONDS = 0.2
#: solve methods of :class:`SolverSettings` and PuLP backends of the extensive form
METHODS = ("auto", "extensive", "decomposition")
BACKENDS = ("highs", "cbc")


@dataclass(frozen=True)
class SolverSettings:
    """Solver settings.

    ``time_limit`` wall clock (s) per solve, ``threads``, relative MIP ``gap``, ``backend``
    (``highs``/``cbc``, extensive form only) and ``method``: ``extensive`` (one MILP over all
    scenarios through PuLP), ``decomposition`` (L-shaped / Benders with HiGHS, see
    :mod:`capplan.reserve.lshaped`) or ``auto`` (see :func:`capplan.reserve.planner.choose_method`).
    ``deadline``: the command's :class:`~capplan.model.deadline.Deadline` (``capplan reserve`` starts it
    when the command starts, so that loading and writing count); every solve then gets at most what is
    left of it (:meth:`seconds`). The settings check themselves when built (:class:`InputError` naming
    the field).
    """

    time_limit: float = 60.0
    threads: int = 1
    gap: float = 1e-4
    backend: str = "highs"
    method: str = "auto"
    deadline: Deadline | None = None

    def seconds(self) -> float:
        """Seconds the next solve may take: ``time_limit``, or what is left of the deadline when that is
        less (at least :data:`MIN_SOLVE_SECONDS`)."""
        if self.deadline is None:
            return self.time_limit
        return max(MIN_SOLVE_SECONDS, min(self.time_limit, self.deadline.remaining()))

    def now(self, share: float = 1.0) -> SolverSettings:
        """These settings with ``time_limit`` set to ``share`` of :meth:`seconds` (for one solve)."""
        return replace(self, time_limit=max(MIN_SOLVE_SECONDS, share * self.seconds()))

    def __post_init__(self) -> None:
        """Check every field when the settings are built.

        Raises
        ------
        InputError
            Naming the field and the values it accepts.
        """
        t = self.time_limit
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise InputError("time_limit", f"must be a finite number of seconds > 0, got {t!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise InputError("threads", f"must be a whole number >= 1, got {self.threads!r}")
        g = self.gap
        if isinstance(g, bool) or not isinstance(g, int | float) or not 0 <= g < 1:
            raise InputError("gap", f"relative MIP gap must be in [0, 1), e.g. 1e-4; got {g!r}")
        if self.backend not in BACKENDS:
            raise InputError("backend", f"unknown backend {self.backend!r}; use {' or '.join(BACKENDS)}")
        if self.deadline is not None and not isinstance(self.deadline, Deadline):
            raise InputError("deadline", f"must be a Deadline or None, got {self.deadline!r}")
        if self.method not in METHODS:
            hint = suggest(str(self.method), METHODS)
            raise InputError("method", f"unknown method {self.method!r}{hint}; use {', '.join(METHODS)}")


@dataclass
class RawSolution:
    """Numbers read back from the solver, indexed like :class:`Problem` (no PuLP objects).

    ``buys[(option, site, order_period)]`` GPUs; ``commits[(option, start)]`` units;
    ``gangs[(class, location, model, period)]`` whole gangs (location ``len(sites)`` is the cloud);
    ``alloc[w, c, m, p]`` committed GPUs of model ``m`` used by class ``c``;
    ``rec[w, c, o, p]`` GPUs of recourse option ``o``; ``short``/``excess``/``lost``/``backlog``
    ``[w, c, p]`` in reference GPUs; ``missed[(tier, w)]`` chance-constraint indicators.
    """

    status: str
    objective: float
    runtime_s: float
    variables: int
    constraints: int
    integers: int
    backend: str
    buys: dict[tuple[int, int, int], int]
    commits: dict[tuple[int, int], int]
    gangs: dict[tuple[int, int, int, int], int]
    alloc: Arr
    rec: Arr
    short: Arr
    excess: Arr
    lost: Arr
    backlog: Arr
    missed: dict[tuple[int, int], bool]
    method: str = "extensive"
    bound: float | None = None
    gap: float | None = None
    iterations: int = 0
    #: why this method solved it when another was asked for (e.g. the extensive form's build cut by the limit)
    note: str | None = None
