"""Time budgets around a solve: what validating and writing a plan will cost on this machine, now.

A time limit covers the whole command (parse, solve, validate, write), so the solve gets what is
left after the other steps' share. Their cost grows with the number of replicas and with how busy
the machine is; :func:`speed` times a fixed pure-Python loop (dictionary and tuple work, like the
validator's and the JSON writer's) to measure the second factor at the moment of the solve.
"""

from __future__ import annotations

import time

from capplan.model.problem import Problem

# Seconds per replica, in units of one :func:`speed` loop, measured on the 2-core development machine
# (100k-GPU fleet and Alibaba default trace, under load 2-12): the independent validator 0.002-0.0065,
# the JSON writer 0.00025-0.00045; the figures below keep a margin above the highest.
VALIDATE_PER_REPLICA = 0.008
WRITE_PER_REPLICA = 0.002  # the JSON text, its atomic write and the summary on stderr
SUMMARY_PER_REPLICA = 0.002  # a strategy's plan assembly (objective, metrics, reasons for unplaced replicas)
PATTERNS_PER_REPLICA = 0.005  # the ``patterns`` model: shapes, node types, a first LP, the integer master
_CAP = 0.5  # never give more than half of the limit to the steps around the solve


def speed() -> float:
    """Seconds one fixed pure-Python loop takes now (about 2-5 ms on an idle core; more under load).

    The best of three runs, so one preemption does not count.
    """
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        d: dict[tuple[int, str], int] = {}
        for i in range(20_000):
            d[(i, "x")] = i
        s = 0
        for v in d.values():
            s += v
        best = min(best, time.perf_counter() - t)
    return best


def replicas(p: Problem) -> int:
    """Replicas of ``p`` (running ones included): what validation and writing scale with."""
    return sum(w.replicas for w in p.workloads)


def reserve(p: Problem, time_limit: float, per_replica: float, loop_seconds: float | None = None) -> float:
    """Seconds to keep out of ``time_limit`` for a step costing ``per_replica`` speed loops per replica.

    Parameters
    ----------
    p
        The problem (its replica count sets the size).
    time_limit
        The limit the reserve is taken from; the reserve is at most half of it.
    per_replica
        The step's cost per replica in :func:`speed` loops (:data:`VALIDATE_PER_REPLICA`, ...).
    loop_seconds
        A :func:`speed` measurement to reuse; measured when None.
    """
    loop = speed() if loop_seconds is None else loop_seconds
    return min(_CAP * time_limit, per_replica * replicas(p) * loop)
