"""The one highspy adapter: LPs and MIPs from arrays, options and a deadline, status and solution.

Every direct HiGHS call of capplan goes through this module:

- :class:`HighsSolver` holds a :class:`~capplan.lp.program.LinearProgram` and is changed in
  place between solves: the reservation engine's decomposition masters
  (:mod:`capplan.reserve.benders`, :mod:`capplan.reserve.lshaped`) and scenario LPs
  (:mod:`capplan.reserve.recourse`);
- :class:`ColumnLP` is a packing LP grown column by column and re-solved from the last basis
  (milliseconds, where a fresh solve costs a full simplex run): the column generation of the
  placement bound (:mod:`capplan.placement.core.bound`) and of the pattern master
  (:mod:`capplan.placement.patterns.master`). SciPy's optimizer would cost about a second to
  import, more than many solves.

PuLP's own HiGHS interface, used by the extensive form in :mod:`capplan.reserve.milp`, is PuLP's
business. The adapter lives in ``placement/core`` because that is the lowest layer that solves LPs;
``reserve/`` imports it (and :mod:`capplan.lp.program`) and nothing else of ``placement/``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

from capplan.lp.program import INF, Arr, Idx, LinearProgram

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


@dataclass(frozen=True)
class LPResult:
    """One solve of a :class:`ColumnLP`.

    Attributes
    ----------
    status
        ``optimal``, ``time_limit`` or ``failed`` (any other HiGHS status).
    value
        Objective value (``-inf`` unless optimal, or a feasible point was found before a time limit).
    x
        Column values (zeros when there is no solution).
    duals
        Row duals, ``>= 0`` for ``<=`` rows of a maximisation (zeros unless optimal).
    """

    status: str
    value: float
    x: Arr
    duals: Arr


class ColumnLP:
    """``maximise c x`` s.t. ``A x <= rhs``, ``0 <= x <= upper``: rows fixed, columns appended.

    Parameters
    ----------
    rhs
        The right-hand sides, one per row.
    seed
        HiGHS's random seed (deterministic solves for a seed).
    """

    def __init__(self, rhs: Arr, seed: int = 0) -> None:
        with quiet_stdout():
            h: Any = highspy.Highs()  # type: ignore[no-untyped-call]
        h.setOptionValue("output_flag", False)
        h.setOptionValue("random_seed", int(seed))
        h.setOptionValue("threads", 1)
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        n = len(rhs)
        h.addRows(n, np.full(n, -INF), np.asarray(rhs, dtype=float), 0, np.zeros(n, dtype=np.int32),
                  np.zeros(0, dtype=np.int32), np.zeros(0))
        self._h = h
        self.rows = n
        self.cols = 0

    def add_columns(self, cost: Arr, upper: Arr, starts: npt.NDArray[np.int32], index: npt.NDArray[np.int32],
                    value: Arr) -> None:
        """Append columns given column-wise (CSC: column ``j`` has rows ``index[starts[j]:starts[j + 1]]``;
        ``starts`` has one entry per new column)."""
        k = len(cost)
        if k == 0:
            return
        self._h.addCols(k, np.asarray(cost, dtype=float), np.zeros(k), np.asarray(upper, dtype=float),
                        len(index), np.asarray(starts, dtype=np.int32), np.asarray(index, dtype=np.int32),
                        np.asarray(value, dtype=float))
        self.cols += k

    def add_entries(self, cost: Arr, rows: list[int], cols: list[int], values: list[float]) -> None:
        """Append ``len(cost)`` columns (upper bound infinite) from their entries: ``cols`` numbers
        the new columns from 0."""
        k = len(cost)
        order = np.argsort(np.asarray(cols, dtype=np.int64), kind="stable")
        c = np.asarray(cols, dtype=np.int64)[order]
        starts = np.searchsorted(c, np.arange(k)).astype(np.int32)
        self.add_columns(np.asarray(cost, dtype=float), np.full(k, INF), starts,
                         np.asarray(rows, dtype=np.int32)[order], np.asarray(values, dtype=float)[order])

    def set_upper(self, cols: npt.NDArray[np.int32], upper: Arr) -> None:
        """Change the upper bounds of columns ``cols``."""
        self._h.changeColsBounds(len(cols), np.asarray(cols, dtype=np.int32), np.zeros(len(cols)),
                                 np.asarray(upper, dtype=float))

    def set_rhs(self, rhs: Arr) -> None:
        """Change every right-hand side."""
        n = self.rows
        self._h.changeRowsBounds(n, np.arange(n, dtype=np.int32), np.full(n, -INF), np.asarray(rhs, dtype=float))

    def solve(self, time_limit: float) -> LPResult:
        """Solve the LP (warm-started from the last basis) within ``time_limit`` seconds."""
        h = self._h
        h.setOptionValue("time_limit", max(1e-3, float(time_limit)))
        # Primal simplex: appended columns leave the last basis primal feasible, so it restarts from there.
        h.setOptionValue("simplex_strategy", 4)
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kOptimal:
            sol = h.getSolution()
            x = np.asarray(sol.col_value, dtype=float)
            duals = np.maximum(0.0, np.asarray(sol.row_dual, dtype=float))  # >= 0 in HiGHS for a maximisation
            return LPResult("optimal", float(h.getInfo().objective_function_value), x, duals)
        name = "time_limit" if status == highspy.HighsModelStatus.kTimeLimit else "failed"
        return LPResult(name, -INF, np.zeros(self.cols), np.zeros(self.rows))

    def solve_integer(self, time_limit: float, rel_gap: float, start: Arr | None = None) -> LPResult:
        """Solve with every column integer, within ``time_limit`` s, from the feasible point ``start``.

        The columns stay integer afterwards (call this last). ``value`` is ``-inf`` when no feasible
        point was found in time; ``status`` is ``optimal`` only when the MIP gap was closed.
        """
        h = self._h
        n = self.cols
        h.changeColsIntegrality(n, np.arange(n, dtype=np.int32),
                                np.full(n, int(highspy.HighsVarType.kInteger), dtype=np.uint8))
        h.setOptionValue("time_limit", max(1e-3, float(time_limit)))
        h.setOptionValue("mip_rel_gap", float(rel_gap))
        h.setOptionValue("simplex_strategy", 1)  # dual simplex for the MIP's relaxations
        if start is not None:
            sol = highspy.HighsSolution()
            sol.col_value = np.asarray(start, dtype=float).tolist()
            sol.value_valid = True
            h.setSolution(sol)
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        if info.primal_solution_status != _FEASIBLE_SOLUTION:
            return LPResult("failed", -INF, np.zeros(n), np.zeros(self.rows))
        x = np.asarray(h.getSolution().col_value, dtype=float)
        name = "optimal" if status == highspy.HighsModelStatus.kOptimal else "time_limit"
        return LPResult(name, float(info.objective_function_value), x, np.zeros(self.rows))
