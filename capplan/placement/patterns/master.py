"""Master problem: choose how many nodes of each type get each pattern (column generation + MIP).

LP: maximise the placed GPUs ``sum_j value_j x_j`` subject to ``sum_{j of type t} x_j <= nodes_t``
and ``sum_j copies_{s,j} x_j <= replicas_s``, ``x >= 0``. Columns (patterns) are added by
:class:`~capplan.placement.patterns.pricing.Pricer` with the profits ``value_s - dual_s`` until none
improves or time runs out; then the same model with integer ``x`` over the generated columns
is solved by HiGHS with a time limit (the LP value bounds it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import csr_matrix

from capplan.placement.patterns.pricing import Pattern, Pricer, homogeneous
from capplan.placement.patterns.shapes import NodeType, Shape

log = logging.getLogger(__name__)


@dataclass
class MasterResult:
    """Chosen pattern counts and statistics."""

    use: list[tuple[Pattern, int]]
    lp_value: float
    mip_value: float
    columns: int
    iterations: int
    converged: bool


class _Columns:
    """The master's columns with their sparse entries kept incrementally."""

    def __init__(self, nt: int, ns: int) -> None:
        self.nt, self.ns = nt, ns
        self.cols: list[Pattern] = []
        self.seen: set[tuple[int, tuple[tuple[int, tuple[int, ...]], ...]]] = set()
        self.rows: list[int] = []
        self.idx: list[int] = []
        self.vals: list[float] = []

    def add(self, pat: Pattern) -> bool:
        """Add ``pat`` unless it is already a column."""
        key = (pat.type, pat.items)
        if key in self.seen:
            return False
        self.seen.add(key)
        j = len(self.cols)
        self.cols.append(pat)
        for r, v in [(pat.type, 1)] + [(self.nt + s, k) for s, k in pat.counts().items()]:
            self.rows.append(r)
            self.idx.append(j)
            self.vals.append(float(v))
        return True

    def matrix(self) -> csr_matrix:
        """Constraint matrix (type rows, then shape rows)."""
        return csr_matrix((self.vals, (self.rows, self.idx)), shape=(self.nt + self.ns, len(self.cols)))

    def values(self) -> np.ndarray:
        """Placed GPUs per column."""
        return np.array([p.value for p in self.cols])


def _lp(cols: _Columns, rhs: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """LP value, row duals (>= 0) and solution of the master over ``cols``."""
    res = linprog(-cols.values(), A_ub=cols.matrix(), b_ub=rhs, bounds=(0, None), method="highs")
    if res.status != 0:
        raise RuntimeError(f"master LP failed: {res.message}")
    return -float(res.fun), -np.asarray(res.ineqlin.marginals), np.asarray(res.x)


def solve_master(types: list[NodeType], shapes: list[Shape], pricer: Pricer, deadline: float,
                 mip_seconds: float, seed: int = 0) -> MasterResult:
    """Column generation until ``deadline``, then the integer master over the generated columns."""
    nt, ns = len(types), len(shapes)
    rhs = np.array([len(t.nodes) for t in types] + [len(s.replicas) for s in shapes], dtype=float)
    value = np.array([s.value for s in shapes])
    cols = _Columns(nt, ns)
    for pat in homogeneous(types, shapes):
        cols.add(pat)
    duals = np.zeros(nt + ns)
    lp_x = np.zeros(0)
    lp_value, it, converged = 0.0, 0, False
    if cols.cols:
        lp_value, duals, lp_x = _lp(cols, rhs)
    while time.perf_counter() < deadline:
        it += 1
        pricer.start()
        profit = value - duals[nt:]
        added = 0
        for t in range(nt):
            found = pricer.price(t, profit)
            if found is not None and sum(profit[s] for s, _ in found.items) - duals[t] > 1e-6:
                added += cols.add(found)
        if not cols.cols:
            return MasterResult([], 0.0, 0.0, 0, it, True)
        if added == 0:
            converged = True
            break
        lp_value, duals, lp_x = _lp(cols, rhs)
        log.debug("column generation: iteration %d, %d columns, LP %.2f", it, len(cols.cols), lp_value)
    if not cols.cols:
        return MasterResult([], 0.0, 0.0, 0, it, True)
    c = -cols.values()
    ub = np.array([len(types[p.type].nodes) for p in cols.cols], dtype=float)
    out = milp(c, constraints=LinearConstraint(cols.matrix(), -np.inf, rhs), integrality=np.ones(len(c)),
               bounds=Bounds(0, ub), options={"time_limit": max(0.05, mip_seconds), "mip_rel_gap": 1e-4,
                                              "disp": False})
    # The LP solution rounded down is feasible (the matrix is >= 0): the plan when the MIP, cut short,
    # has no solution or a worse one (HiGHS may stop at a poor first incumbent).
    x = np.zeros(len(c), dtype=int)
    x[:lp_x.size] = np.floor(lp_x + 1e-9).astype(int)
    if out.x is not None:
        xm = np.round(out.x).astype(int)
        if float(-c @ xm) >= float(-c @ x):
            x = xm
    use = [(cols.cols[j], int(x[j])) for j in np.flatnonzero(x > 0)]
    return MasterResult(use, lp_value, float(-c @ x), len(c), it, converged)
