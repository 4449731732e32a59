"""The one highspy adapter: an LP/MIP from arrays, options and a deadline, status and solution.

Every direct HiGHS call of the reservation engine goes through :class:`HighsSolver` (the
decomposition's master in :mod:`capplan.reserve.benders` and :mod:`capplan.reserve.lshaped`,
the scenario LPs in :mod:`capplan.reserve.recourse`). PuLP's own HiGHS interface, used by the
extensive form in :mod:`capplan.reserve.milp`, is PuLP's business.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]
Idx = npt.NDArray[np.int32]
INF = float("inf")

#: what :meth:`HighsSolver.run` reports, from HiGHS's model status
_STATUS = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnbounded: "unbounded",
    highspy.HighsModelStatus.kUnboundedOrInfeasible: "infeasible_or_unbounded",
    highspy.HighsModelStatus.kTimeLimit: "time_limit",
    highspy.HighsModelStatus.kInterrupt: "interrupted",
}
_FEASIBLE_SOLUTION = 2  # HiGHS's primal_solution_status for a feasible point


@dataclass(frozen=True)
class LinearProgram:
    """``min cost x`` s.t. ``row_lower <= A x <= row_upper``, ``lower <= x <= upper``.

    ``A`` is given row by row (CSR): row ``r`` has the entries ``index[starts[r]:starts[r + 1]]``
    with ``value[...]``, so ``len(starts) == rows + 1``. ``integer`` marks integer columns (none
    when omitted); names are optional and only help when reading HiGHS's own messages.
    """

    cost: Arr
    lower: Arr
    upper: Arr
    row_lower: Arr
    row_upper: Arr
    starts: Idx
    index: Idx
    value: Arr
    integer: npt.NDArray[np.bool_] | None = None
    col_names: Sequence[str] = ()
    row_names: Sequence[str] = ()

    @property
    def num_cols(self) -> int:
        """Number of columns."""
        return len(self.cost)

    @property
    def num_rows(self) -> int:
        """Number of rows."""
        return len(self.row_lower)

    @property
    def integer_cols(self) -> Idx:
        """Indices of the integer columns."""
        if self.integer is None:
            return np.zeros(0, dtype=np.int32)
        return np.flatnonzero(self.integer).astype(np.int32)


class ProgramBuilder:
    """Columns and rows appended one at a time, then frozen into a :class:`LinearProgram`.

    Parameters
    ----------
    start
        A program to extend (its columns and rows come first, names kept).
    """

    def __init__(self, start: LinearProgram | None = None) -> None:
        self.cost: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.col_names: list[str] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self.row_names: list[str] = []
        self.starts: list[int] = [0]
        self.index: list[int] = []
        self.value: list[float] = []
        if start is not None:
            self.cost, self.lower, self.upper = list(start.cost), list(start.lower), list(start.upper)
            self.col_names = list(start.col_names) or [""] * start.num_cols
            self.row_lower, self.row_upper = list(start.row_lower), list(start.row_upper)
            self.row_names = list(start.row_names) or [""] * start.num_rows
            self.starts, self.index, self.value = list(start.starts), list(start.index), list(start.value)

    @property
    def num_cols(self) -> int:
        """Columns so far (the index of the next column)."""
        return len(self.cost)

    def add_col(self, cost: float, lower: float = 0.0, upper: float = INF, name: str = "") -> int:
        """Append a column; return its index."""
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        self.col_names.append(name)
        return len(self.cost) - 1

    def add_row(self, entries: Sequence[tuple[int, float]], lower: float, upper: float, name: str = "") -> int:
        """Append the row ``lower <= sum(value * x[column]) <= upper``; return its index."""
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        self.row_names.append(name)
        self.index += [j for j, _ in entries]
        self.value += [v for _, v in entries]
        self.starts.append(len(self.index))
        return len(self.row_lower) - 1

    def program(self) -> LinearProgram:
        """The columns and rows as arrays (names only when some were given)."""
        named = any(self.col_names) or any(self.row_names)
        return LinearProgram(
            cost=np.array(self.cost, dtype=float),
            lower=np.array(self.lower, dtype=float),
            upper=np.array(self.upper, dtype=float),
            row_lower=np.array(self.row_lower, dtype=float),
            row_upper=np.array(self.row_upper, dtype=float),
            starts=np.array(self.starts, dtype=np.int32),
            index=np.array(self.index, dtype=np.int32),
            value=np.array(self.value, dtype=float),
            col_names=tuple(self.col_names) if named else (),
            row_names=tuple(self.row_names) if named else (),
        )


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence C-level stdout (HiGHS prints a banner when its first model is created)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (embedded interpreters)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _highs_lp(lp: LinearProgram) -> Any:
    out = highspy.HighsLp()
    out.num_col_, out.num_row_ = lp.num_cols, lp.num_rows
    out.col_cost_, out.col_lower_, out.col_upper_ = lp.cost, lp.lower, lp.upper
    out.row_lower_, out.row_upper_ = lp.row_lower, lp.row_upper
    out.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    out.a_matrix_.start_, out.a_matrix_.index_, out.a_matrix_.value_ = lp.starts, lp.index, lp.value
    if lp.integer is not None and lp.integer.any():
        kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
        out.integrality_ = [kinds[int(b)] for b in lp.integer]
    if lp.col_names:
        out.col_names_ = list(lp.col_names)
    if lp.row_names:
        out.row_names_ = list(lp.row_names)
    return out


class HighsSolver:
    """One HiGHS instance holding a :class:`LinearProgram`, changed in place between solves.

    Parameters
    ----------
    lp
        The model.
    presolve
        HiGHS presolve on or off (off keeps the simplex basis between warm-started solves).
    interruptible
        Install the callbacks that stop a solve at :attr:`deadline` (a ``time.perf_counter``
        value), for solves whose own time limit HiGHS does not always honour in time.
    """

    def __init__(self, lp: LinearProgram, presolve: bool = True, interruptible: bool = False) -> None:
        self._h: Any
        with quiet_stdout():
            self._h = highspy.Highs()  # type: ignore[no-untyped-call]
        self._h.setOptionValue("output_flag", False)
        if not presolve:
            self._h.setOptionValue("presolve", "off")
        self._h.passModel(_highs_lp(lp))
        #: wall-clock deadline (``time.perf_counter``) after which a solve is interrupted
        self.deadline = INF
        if interruptible:
            self._h.cbMipInterrupt += self._interrupt
            self._h.cbSimplexInterrupt += self._interrupt

    def _interrupt(self, e: Any) -> None:
        if time.perf_counter() > self.deadline:
            e.interrupt()

    @staticmethod
    def reset_threads() -> None:
        """Let the next solve set its own thread count (HiGHS keeps one scheduler per process)."""
        highspy.Highs.resetThreadScheduler(True)

    # ------------------------------------------------------------------------- options
    def set_presolve(self, on: bool) -> None:
        """Switch HiGHS presolve on or off for the next solves."""
        self._h.setOptionValue("presolve", "on" if on else "off")

    def configure(self, time_limit: float, threads: int, gap: float, seed: int = 0) -> None:
        """Time limit (s), threads, relative MIP gap and random seed of the next solves."""
        h = self._h
        h.setOptionValue("time_limit", time_limit)
        h.setOptionValue("threads", threads)
        h.setOptionValue("mip_rel_gap", gap)
        h.setOptionValue("random_seed", seed)

    # ------------------------------------------------------------------------- solve
    def run(self) -> str:
        """Solve; return ``optimal``, ``infeasible``, ``time_limit``, ``interrupted``, ... or ``other``."""
        self._h.run()
        return _STATUS.get(self._h.getModelStatus(), "other")

    def status_text(self) -> str:
        """HiGHS's own words for the last model status."""
        return str(self._h.modelStatusToString(self._h.getModelStatus()))

    def has_solution(self) -> bool:
        """True when the last solve left a feasible point."""
        return bool(self._h.getInfo().primal_solution_status == _FEASIBLE_SOLUTION)

    def solution(self) -> tuple[Arr, Arr]:
        """Column values and row duals of the last solve."""
        sol = self._h.getSolution()
        return np.asarray(sol.col_value), np.asarray(sol.row_dual)

    def col_values(self) -> Arr:
        """Column values of the last solve (a copy)."""
        return np.array(self._h.getSolution().col_value)

    def objective(self) -> float:
        """Objective value of the last solve."""
        return float(self._h.getInfo().objective_function_value)

    def mip_bound(self) -> float:
        """Best dual (lower) bound of the last MIP solve."""
        return float(self._h.getInfo().mip_dual_bound)

    # ------------------------------------------------------------------------- changes
    def col_bounds(self, cols: Idx) -> tuple[Arr, Arr]:
        """Current lower and upper bounds of ``cols`` (copies)."""
        lp = self._h.getLp()
        return np.asarray(lp.col_lower_)[cols].copy(), np.asarray(lp.col_upper_)[cols].copy()

    def set_col_bounds(self, cols: Idx, lower: Arr, upper: Arr) -> None:
        """Change the bounds of columns ``cols``."""
        self._h.changeColsBounds(len(cols), cols, lower, upper)

    def set_row_bounds(self, rows: Idx, lower: Arr, upper: Arr) -> None:
        """Change the bounds of rows ``rows``."""
        self._h.changeRowsBounds(len(rows), rows, lower, upper)

    def set_integer(self, cols: Idx, on: bool) -> None:
        """Make columns ``cols`` integer (``on``) or continuous."""
        kind = highspy.HighsVarType.kInteger if on else highspy.HighsVarType.kContinuous
        self._h.changeColsIntegrality(len(cols), cols, np.full(len(cols), int(kind), dtype=np.uint8))

    def add_rows(self, lower: Arr, upper: Arr, starts: Idx, index: Idx, value: Arr) -> None:
        """Append rows given in CSR form (``starts`` has one entry per new row)."""
        self._h.addRows(len(lower), lower, upper, len(index), starts, index, value)
