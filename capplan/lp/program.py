"""Linear programs as arrays, the input of :class:`capplan.lp.highs.HighsSolver`.

:class:`LinearProgram` is an LP/MIP in row-wise (CSR) arrays; :class:`ProgramBuilder` grows one row
and column at a time. Plain data: no solver is imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Arr = npt.NDArray[np.float64]
Idx = npt.NDArray[np.int32]
INF = float("inf")


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
