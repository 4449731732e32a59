"""Which (value, replicas) a priority stage can reach at all: a knapsack over its workloads' values.

A priority stage maximises ``units * (R + 1) + replicas`` (:mod:`capplan.placement.cpsat.objective`).
Once CP-SAT has proven the units, its bound on the replica tie-break comes from the LP relaxation
and is often one or two replicas too high: the LP mixes fractions of replicas that integer counts
cannot. On benchmark small-2 the priority-10 stage places 83 GPUs with 39 replicas, and CP-SAT's
bound stays at 83 GPUs and 40 replicas for the whole limit, although 83 GPUs at that priority can
only be made up as 6 x 8 + 4 x 8 (a gang) + 6 x 0.5: every other mix of its workloads' values
(8, 2, 0.5 GPUs, a gang of 32) misses 83 exactly.

This module drops every capacity constraint and keeps only the replica counts: each workload
places between its pinned running replicas and the most the model allows it (its replicas, and
the sum of its count variables' upper bounds), a gang all or none. A dynamic programme over the
total value gives, for every reachable total, the most replicas that make it up exactly. Every
plan's (units, replicas) at the priority is then ``(u, r)`` with ``u`` reachable and ``r`` at most
the table's entry, so

    stage optimum <= max over reachable u <= U of  u * (R + 1) + table[u]

where ``U`` is any valid bound on the units. That tightens a stage bound twice: the units drop
to the largest reachable total, and the replicas to the most that reach it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from capplan.placement.cpsat.model import PlacementModel

_MAX_CELLS = 40_000_000  # table entries x knapsack items beyond which the table is not built
_NONE = -(1 << 40)  # unreachable total


@dataclass(frozen=True)
class ReplicaTable:
    """Most replicas per reachable total value of one priority (running pinned replicas included).

    Attributes
    ----------
    step
        The gcd of the workloads' replica values: every reachable total is a multiple of it.
    best
        ``best[k]``: the most replicas whose values sum to exactly ``k * step`` units (negative if
        no combination does), value-less (CPU-only) replicas included.
    per_unit
        The stage's replica scale ``R + 1``.
    """

    step: int
    best: np.ndarray
    per_unit: int

    def tighten(self, bound: int) -> int:
        """A valid bound on the stage's total value (``units * per_unit + replicas``) given ``bound``.

        Parameters
        ----------
        bound
            A valid bound on the stage's total (pinned running replicas included).

        Returns
        -------
        int
            At most ``bound``: the largest reachable total value ``u <= bound // per_unit``
            with its most replicas, or ``-1`` if no total is reachable (not even 0).
        """
        units = bound // self.per_unit
        if units < 0:
            return -1
        k = min(units // self.step, len(self.best) - 1)
        reach = np.flatnonzero(self.best[: k + 1] >= 0)
        if reach.size == 0:
            return -1
        top = int(reach[-1])
        return min(bound, top * self.step * self.per_unit + int(self.best[top]))


def replica_table(pm: PlacementModel, priority: int, per_unit: int) -> ReplicaTable | None:
    """The :class:`ReplicaTable` of ``priority`` in ``pm``; None when it would be too large to build.

    Parameters
    ----------
    pm
        The placement model (its count variables' upper bounds limit each workload).
    priority
        The priority of the stage.
    per_unit
        The stage's replica scale (``Stage.per_unit``).

    Returns
    -------
    ReplicaTable or None
        None when the table times its knapsack items would exceed a few ten million cells (large
        fleets with coprime values), or when running replicas may leave (evictions, moves).
    """
    p = pm.p
    if any(r.optional for r in pm.ix.runs):
        return None
    ranges: list[tuple[int, int, int, bool]] = []  # value, fewest, most, gang (all or none)
    free = 0
    for w in p.workloads:
        if w.priority != priority:
            continue
        pinned = len(pm.ix.running_of.get(w.name, []))
        most = min(w.replicas, pinned + sum(ub for (wn, _), ub in pm.ub.items() if wn == w.name))
        value = p.replica_value(w)
        if value == 0:
            free += most
            continue
        gang = w.is_gang and pinned == 0  # with running replicas: any count (a relaxation)
        ranges.append((value, pinned, (w.replicas if most >= w.replicas else 0) if gang else most, gang))
    return knapsack_table(ranges, free, per_unit)


def knapsack_table(ranges: list[tuple[int, int, int, bool]], free: int, per_unit: int) -> ReplicaTable | None:
    """The table of workloads given as ``(value, fewest, most, all_or_none)`` plus ``free`` value-less replicas.

    Parameters
    ----------
    ranges
        Per workload with a value: its replica value (demand units), the fewest and the most
        replicas it may have placed, and whether it is all (``most``) or none (a gang).
    free
        Replicas without value (CPU-only) that may be placed.
    per_unit
        The stage's replica scale.

    Returns
    -------
    ReplicaTable or None
        None when the table would be too large (see :func:`replica_table`) or a range is empty.
    """
    step = 0
    for value, _, most, _ in ranges:
        if most > 0:
            step = math.gcd(step, value)
    if step == 0:
        return ReplicaTable(1, np.array([free], dtype=np.int64), per_unit)
    top = sum(value * most for value, _, most, _ in ranges) // step
    items: list[tuple[int, int]] = []  # (value in steps, replicas): 0/1 knapsack items
    base_value = base_reps = 0
    for value, lo, hi, gang in ranges:
        v = value // step
        if gang:
            if hi == 0:
                continue
            if hi < 0 or lo > hi:
                return None
            items.append((v * hi, hi))
            continue
        base_value += v * lo
        base_reps += lo
        extra, chunk = hi - lo, 1
        while extra > 0:  # binary splitting: chunks 1, 2, 4, ... make up every count 0..extra
            take = min(chunk, extra)
            items.append((v * take, take))
            extra -= take
            chunk *= 2
    if (top + 1) * max(1, len(items)) > _MAX_CELLS:
        return None
    best = np.full(top + 1, _NONE, dtype=np.int64)
    best[base_value] = base_reps + free
    for wt, reps in items:
        if wt == 0 or wt > top:
            continue
        best[wt:] = np.maximum(best[wt:], best[:-wt] + reps)  # the right side is computed first: 0/1
    best[best < 0] = -1
    return ReplicaTable(step, best, per_unit)
