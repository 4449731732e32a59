"""Reading the reservation MILP back, without PuLP: solved values into arrays, and the model as arrays.

:mod:`capplan.reserve.milp` (the only PuLP module) builds and solves the model; these functions take
what it reads from PuLP (a value per variable, plain tuples per column and row) and assemble the
:class:`~capplan.reserve.solver.RawSolution` and the :class:`~capplan.lp.program.LinearProgram`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from capplan.lp.program import LinearProgram
from capplan.reserve.problem import Problem
from capplan.reserve.solver import RawSolution

Arr = npt.NDArray[np.float64]
Value = Callable[[Any], float]


class ModelVariables(Protocol):
    """The variable tables of a built model, keyed like :class:`RawSolution`'s fields (read only)."""

    @property
    def p(self) -> Problem: ...

    @property
    def shape(self) -> tuple[int, int, int, int, int]: ...

    @property
    def buy(self) -> Mapping[tuple[int, int, int], Any]: ...

    @property
    def com(self) -> Mapping[tuple[int, int], Any]: ...

    @property
    def gang(self) -> Mapping[tuple[int, int, int, int], Any]: ...

    @property
    def a(self) -> Mapping[tuple[int, int, int, int], Any]: ...

    @property
    def r(self) -> Mapping[tuple[int, int, int, int], Any]: ...

    @property
    def sh(self) -> Mapping[tuple[int, int, int], Any]: ...

    @property
    def ex(self) -> Mapping[tuple[int, int, int], Any]: ...

    @property
    def lo(self) -> Mapping[tuple[int, int, int], Any]: ...

    @property
    def bl(self) -> Mapping[tuple[int, int, int], Any]: ...

    @property
    def z(self) -> Mapping[tuple[int, int], Any]: ...


def _fill(shape: tuple[int, ...], table: Mapping[Any, Any], val: Value) -> Arr:
    out = np.zeros(shape)
    for key, v in table.items():
        out[key] = val(v)
    return out


def _counts(table: Mapping[Any, Any], val: Value) -> dict[Any, int]:
    return {k: round(val(v)) for k, v in table.items() if round(val(v))}


def read_solution(m: ModelVariables, val: Value, *, status: str, objective: float, runtime_s: float,
                  size: tuple[int, int, int], backend: str) -> RawSolution:
    """The :class:`RawSolution` of a solved model: ``val`` gives each variable's value (0 when there is none).

    ``size`` is (variables, constraints, integer variables).
    """
    W, C, M, R, T = m.shape
    pr = m.p
    return RawSolution(
        status=status,
        objective=objective,
        runtime_s=runtime_s,
        variables=size[0],
        constraints=size[1],
        integers=size[2],
        backend=backend,
        buys={k: round(val(v)) * pr.purchases[k[0]].lot_size for k, v in m.buy.items() if round(val(v))},
        commits=_counts(m.com, val),
        gangs=_counts(m.gang, val),
        alloc=_fill((W, C, M, T), m.a, val),
        rec=_fill((W, C, R, T), m.r, val),
        short=_fill((W, C, T), m.sh, val),
        excess=_fill((W, C, T), m.ex, val),
        lost=_fill((W, C, T), m.lo, val),
        backlog=_fill((W, C, T), m.bl, val),
        missed={k: val(v) > 0.5 for k, v in m.z.items()},
    )


Column = tuple[str, float | None, float | None, bool]
"""(name, lower bound or None, upper bound or None, integer)."""
Row = tuple[str, float, float, Iterable[tuple[str, float]]]
"""(name, lower, upper, (column name, coefficient) pairs)."""


def program(columns: list[Column], objective: Iterable[tuple[str, float]], rows: Iterable[Row]) -> LinearProgram:
    """The model as arrays (objective, bounds, integrality, rows in CSR form), names kept."""
    inf = float("inf")
    names = tuple(c[0] for c in columns)
    col: dict[Hashable, int] = {n: i for i, n in enumerate(names)}
    cost = np.zeros(len(names))
    for name, c in objective:
        cost[col[name]] += c
    lower = np.array([-inf if lo is None else lo for _, lo, _, _ in columns], dtype=float)
    upper = np.array([inf if up is None else up for _, _, up, _ in columns], dtype=float)
    integer = np.array([i for *_, i in columns], dtype=bool)
    rnames: list[str] = []
    rlo: list[float] = []
    rup: list[float] = []
    starts, index, value = [0], [], []
    for name, lo, up, items in rows:
        rnames.append(name)
        rlo.append(lo)
        rup.append(up)
        for v, c in items:
            index.append(col[v])
            value.append(c)
        starts.append(len(index))
    return LinearProgram(
        cost, lower, upper, np.array(rlo), np.array(rup), np.array(starts, dtype=np.int32),
        np.array(index, dtype=np.int32), np.array(value, dtype=float), integer, names, tuple(rnames),
    )
