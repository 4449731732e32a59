"""A packing plan for GPU shares, learned online from the share sizes seen so far.

GPU-sharing pods ask a fraction of one GPU (``milli`` < 1000). Which shares end up together on a
GPU decides how much of it stays unusable: an 810 share leaves 190 milli that only a share of at
most 190 fills, two 470 shares leave 60, a 470 beside a 320 leaves 210 (and the 320 would have
left 30 beside a 650). :class:`SharePlan` counts the share sizes that arrived so far and solves the
cutting-stock LP of that mix:

    minimise  sum_P x_P   subject to  sum_P a[s, P] x_P >= count[s]  for every planned size s,

over the *maximal patterns* P (multisets of planned sizes with a sum of at most 1000 milli to
which no planned size can be added; ``a[s, P]`` is how often size s occurs in P). The patterns
with ``x_P > 0`` are the GPU contents an optimal packing of this mix uses. A placement of a share
``s`` on a GPU with ``h`` milli free is **planned** when some used pattern holds ``s`` and a
sub-multiset ``Q`` of its other items with ``1000 - sum(Q) == h``: the GPU can still end up as a
used pattern. ``planned(s)`` is a boolean table over the free milli ``h`` (0..1000) of a GPU;
``h == 1000`` is a fully free GPU (opening a new pattern).

Only sizes seen at least ``min_count`` times and making at least ``min_share`` of the shares
seen are planned (rare sizes keep tables of all False: the caller decides for them without the
plan), which keeps the LP small (11-13 sizes, 80-180 patterns on the Alibaba traces: a few ms).
The plan is re-solved when the number of shares seen reaches ``first``, then each time it
doubles, so a run of thousands of shares solves about ten LPs. Nothing but the sizes of the
shares that already arrived is used: no future arrivals.
"""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import numpy.typing as npt

from capplan.lp.highs import HighsSolver
from capplan.lp.program import LinearProgram

MILLI = 1000
BoolArr = npt.NDArray[np.bool_]
IntArr = npt.NDArray[np.int64]


def maximal_patterns(sizes: list[int], cap: int = MILLI) -> IntArr:
    """Multisets of ``sizes`` with sum <= ``cap`` to which no size can be added.

    One row per multiset: how often each size occurs, sizes in decreasing order (``sorted(set(sizes),
    reverse=True)``). Built as arrays, not tuples: a re-plan runs inside a pod's decision and
    should not feed the garbage collector thousands of tracked objects.
    """
    desc = sorted(set(sizes), reverse=True)
    if not desc:
        return np.zeros((0, 0), dtype=np.int64)
    smallest = desc[-1]
    rows: list[IntArr] = []
    cur = np.zeros(len(desc), dtype=np.int64)

    def rec(i: int, left: int) -> None:
        if left < smallest:  # nothing fits any more: maximal
            rows.append(cur.copy())
            return
        for j in range(i, len(desc)):  # non-increasing order: each multiset once (the smallest always fits)
            if desc[j] <= left:
                cur[j] += 1
                rec(j, left - desc[j])
                cur[j] -= 1

    rec(0, cap)
    return np.array(rows, dtype=np.int64).reshape(len(rows), len(desc))


def solve_patterns(count: dict[int, float]) -> list[tuple[tuple[int, ...], float]]:
    """The patterns (non-increasing tuples) of an optimal fractional packing of ``count`` (size -> items)
    with their bin counts."""
    desc = sorted(count, reverse=True)
    pats = maximal_patterns(desc)
    if not len(pats):
        return []
    rows_t = pats.T  # one LP row per size, one column per pattern
    nz = rows_t != 0
    starts = np.concatenate([[0], np.cumsum(nz.sum(axis=1))]).astype(np.int32)
    n = len(pats)
    lp = LinearProgram(cost=np.ones(n), lower=np.zeros(n), upper=np.full(n, np.inf),
                       row_lower=np.array([float(count[s]) for s in desc]), row_upper=np.full(len(desc), np.inf),
                       starts=starts, index=np.nonzero(nz)[1].astype(np.int32), value=rows_t[nz].astype(np.float64))
    solver = HighsSolver(lp)
    solver.configure(time_limit=1.0, threads=1, gap=0.0)
    if solver.run() != "optimal":
        return []
    x = solver.col_values()
    return [(tuple(s for s, k in zip(desc, pats[j].tolist(), strict=True) for _ in range(k)), float(x[j]))
            for j in np.flatnonzero(x > 1e-9)]


def planned_holes(patterns: list[tuple[int, ...]]) -> dict[int, BoolArr]:
    """Per size s, the free milli h (index 0..1000) of GPUs on which placing s follows a pattern."""
    out: dict[int, BoolArr] = {}
    for p in patterns:
        mult = Counter(p)
        items = sorted(mult)
        for taken in product(*(range(mult[s] + 1) for s in items)):
            free = MILLI - sum(k * s for k, s in zip(taken, items, strict=True))
            for k, s in zip(taken, items, strict=True):
                if k < mult[s]:
                    out.setdefault(s, np.zeros(MILLI + 1, dtype=bool))[free] = True
    return out


class SharePlan:
    """Share sizes seen so far and the planned placements of their optimal fractional packing.

    Parameters
    ----------
    first
        Shares seen before the first plan; the plan is re-solved each time the count doubles.
    min_share
        Smallest fraction of the shares seen for a size to be planned.
    min_count
        Smallest number of shares seen for a size to be planned.
    prior
        Shares counted as seen before the first arrival (size -> count), e.g. the typical pods' shares
        scaled to a number of pods; they do not count towards the re-planning schedule.
    """

    def __init__(self, first: int = 16, min_share: float = 0.01, min_count: int = 2,
                 prior: dict[int, int] | None = None) -> None:
        self.prior: Counter[int] = Counter(prior or {})
        self.seen: Counter[int] = Counter()
        self.total = 0
        self.next = first
        self.min_share = min_share
        self.min_count = min_count
        self.tables: dict[int, BoolArr] = {}
        self.patterns: list[tuple[tuple[int, ...], float]] = []
        self._none = np.zeros(MILLI + 1, dtype=bool)

    def add(self, milli: int) -> set[int] | None:
        """Count one arriving share; re-plan on schedule: then return the sizes whose table changed."""
        self.seen[milli] += 1
        self.total += 1
        if self.total < self.next:
            return None
        while self.next <= self.total:
            self.next *= 2
        return self.replan()

    def replan(self) -> set[int]:
        """Solve the packing LP of the sizes seen; return the sizes whose table changed."""
        both = self.seen + self.prior
        floor = max(self.min_count, self.min_share * both.total())
        count = {s: float(n) for s, n in both.items() if n >= floor}
        self.patterns = solve_patterns(count)
        tables = planned_holes([p for p, _ in self.patterns])
        changed = {s for s in set(tables) | set(self.tables)
                   if not np.array_equal(tables.get(s, self._none), self.tables.get(s, self._none))}
        self.tables = tables
        return changed

    def planned(self, milli: int) -> BoolArr:
        """Free milli (0..1000) of the GPUs where a ``milli`` share follows the plan (all False if unplanned)."""
        return self.tables.get(milli, self._none)
