"""The large-neighbourhood search loop: re-solve part of a plan exactly, keep it when it is better.

Both neighbourhood searches of capplan run this loop: the ``lns`` strategy (random neighbourhoods
around the heuristic plan, :mod:`capplan.placement.lns`) and CP-SAT's region repair (racks and node
pairs with stranded room, :mod:`capplan.placement.cpsat.repair`). They differ only in how the next
neighbourhood is picked (a :class:`Neighbourhoods`) and in the sub-solver; the sub-problem and the
lexicographic comparison are those of :mod:`capplan.placement.core.subproblem`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.placement.core.subproblem import lex_key, neighbourhood

Offer = list[tuple[Workload, list[int]]]
SubSolver = Callable[[Problem, float], "SubResult"]
"""Solves a sub-problem within the given seconds."""


@dataclass(frozen=True)
class SubResult:
    """A sub-problem's solution: its assignments (in the sub-problem's keys) and whether it is proven optimal."""

    assignments: Sequence[Assignment]
    proven: bool = False


@dataclass(frozen=True)
class Pick:
    """One neighbourhood: the nodes to re-solve, the unplaced replicas offered, and whether it is the whole problem."""

    nodes: set[str]
    offer: Offer
    whole: bool = False


class Neighbourhoods(Protocol):
    """Chooses the next neighbourhood of the current plan (None: nothing left to try)."""

    def next(self, current: list[Assignment]) -> Pick | None:
        """The next neighbourhood to re-solve."""

    def improved(self, pick: Pick, current: list[Assignment]) -> None:
        """Told after ``pick`` improved the plan to ``current``."""


@dataclass
class SearchStats:
    """What one search did: neighbourhoods picked and solved, improvements, seconds."""

    steps: int = 0
    solved: int = 0
    improved: int = 0
    seconds: float = 0.0


def missing_replicas(p: Problem, assignments: Sequence[Assignment]) -> Offer:
    """(workload, replica indices) not placed by ``assignments``, in problem order."""
    placed = {a.key for a in assignments}
    out = [(w, [r for r in range(w.replicas) if (w.name, r) not in placed]) for w in p.workloads]
    return [(w, rs) for w, rs in out if rs]


def search(p: Problem, assignments: Sequence[Assignment], hoods: Neighbourhoods, solve: SubSolver,
           deadline: float, *, margin: float = 0.0, stop: Callable[[list[Assignment]], bool] | None = None,
           on_step: Callable[[list[Assignment], SearchStats, bool], None] | None = None,
           ) -> tuple[list[Assignment], SearchStats]:
    """Improve ``assignments`` neighbourhood by neighbourhood until ``deadline - margin``.

    Parameters
    ----------
    p
        The problem.
    assignments
        A valid plan's assignments (the start).
    hoods
        Picks each neighbourhood; the search ends when it has none left.
    solve
        The exact sub-solver, given the sub-problem and the seconds left.
    deadline
        A :func:`time.perf_counter` value.
    margin
        Seconds before ``deadline`` at which no new neighbourhood is started (nor one when less time is left
        than the longest step so far took).
    stop
        Asked after each improvement: True ends the search (e.g. the plan meets its bound).
    on_step
        Called after each pick with the current plan, the statistics and whether the step improved it.

    Returns
    -------
    tuple
        The best assignments found and the statistics.

    Notes
    -----
    A neighbourhood's new arrangement is kept when its lexicographic key (:func:`lex_key`) beats that of
    the arrangement it replaces, and the whole plan's key improves with it. The search also ends when the
    neighbourhood was the whole problem and the sub-solver proved it optimal.
    """
    t0 = time.perf_counter()
    stats = SearchStats()
    current = list(assignments)
    best = lex_key(p, current)
    longest = 0.0  # the longest step so far: none is started with less time left (its overrun is bounded)
    while (start := time.perf_counter()) + longest < deadline - margin:
        pick = hoods.next(current)
        if pick is None:
            break
        stats.steps += 1
        sub, back = neighbourhood(p, current, pick.nodes, pick.offer)
        if not sub.workloads:
            continue
        left = deadline - time.perf_counter()
        if left < 0.05:
            break
        got = solve(sub, left)
        stats.solved += 1
        better = _merge(p, current, best, pick, sub, back, got)
        longest = max(longest, time.perf_counter() - start)
        if better is None:
            if on_step is not None:
                on_step(current, stats, False)
            if pick.whole and got.proven:
                break  # the whole problem was the neighbourhood and it is proven: no step can improve
            continue
        current, best = better
        stats.improved += 1
        hoods.improved(pick, current)
        if on_step is not None:
            on_step(current, stats, True)
        if stop is not None and stop(current):
            break
    stats.seconds = round(time.perf_counter() - t0, 3)
    return current, stats


def _merge(p: Problem, current: list[Assignment], best: tuple[int, ...], pick: Pick, sub: Problem,
           back: dict[tuple[str, int], tuple[str, int]], got: SubResult
           ) -> tuple[list[Assignment], tuple[int, ...]] | None:
    """The plan with the neighbourhood's new arrangement and its key, when that beats the old one (else None)."""
    fwd = {v: k for k, v in back.items()}
    now = [a.model_copy(update={"replica": fwd[a.key][1]}) for a in current
           if a.node in pick.nodes and a.key in fwd]
    if lex_key(sub, list(got.assignments)) <= lex_key(sub, now):
        return None
    moved = {back[a.key] for a in got.assignments}
    keep = [a for a in current if a.node not in pick.nodes and a.key not in moved]
    cand = keep + [a.model_copy(update={"replica": back[a.key][1]}) for a in got.assignments]
    key = lex_key(p, cand)
    return (cand, key) if key > best else None
