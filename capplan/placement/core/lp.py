"""The placement engine's one HiGHS adapter: a packing LP grown column by column, warm-started.

Column generation (the pattern master of :mod:`capplan.placement.patterns.master`, the bound of
:mod:`capplan.placement.core.bound`) solves the same LP again and again with a few more columns:
:class:`ColumnLP` keeps one HiGHS instance, appends the new columns and re-solves from the last
basis (milliseconds, where a fresh solve of the whole LP costs a full simplex run), and can solve
the same columns as an integer program with a starting solution. It talks to ``highspy``
directly: importing SciPy's optimizer (about a second, more under load) would cost more than
many solves.

The model is ``maximise c x`` subject to ``A x <= b`` and ``0 <= x <= u``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]
INF = float("inf")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence C-level stdout while HiGHS prints its banner (once per process, on the first instance)."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (an embedded interpreter)
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
        with _quiet():
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
        if info.primal_solution_status != 2:  # 2: a feasible point
            return LPResult("failed", -INF, np.zeros(n), np.zeros(self.rows))
        x = np.asarray(h.getSolution().col_value, dtype=float)
        name = "optimal" if status == highspy.HighsModelStatus.kOptimal else "time_limit"
        return LPResult(name, float(info.objective_function_value), x, np.zeros(self.rows))
