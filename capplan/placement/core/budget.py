"""Time budgets around a solve: what validating and writing a plan will cost on this machine, now.

A time limit covers the whole command (parse, solve, validate, write), so the solve gets what is
left after the other steps' share. Their cost grows with the number of replicas and with how busy
the machine is; :func:`speed` times a fixed pure-Python loop (dictionary and tuple work, like the
validator's and the JSON writer's) to measure the second factor at the moment of the solve.
"""

from __future__ import annotations

import time

from capplan.model.problem import Problem

# Seconds per unit of :func:`size`, in units of one :func:`speed` loop, measured on the 2-core
# development machine under load 12-14 (100k-GPU fleet: 200k replicas, 9k workloads; Alibaba default
# trace: 8k replicas, 8k workloads): the independent validator 0.0006-0.0013, the JSON writer with the
# summary 0.0002-0.0004, a strategy's plan assembly 0.0005-0.001. The figures keep a margin above the
# highest measured per step, since the loop and the step are timed at different moments of a noisy machine.
# The validator's figure was raised from 0.0015 when shape e of benchmarks/shapes.py (a third of its GPUs with
# preset MIG layouts, which the validator checks replica by replica) measured 0.003 at 15k GPUs: `auto` at a
# 10 s limit took 11.6 s idle and 13 s beside two busy loops (allowed: 12 s).
VALIDATE_COST = 0.004
WRITE_COST = 0.0005  # the JSON text, its atomic write and the summary on stderr
SUMMARY_COST = 0.001  # a strategy's plan assembly (objective, metrics, reasons for unplaced replicas)
_CAP = 0.25  # never give more than a quarter of the limit to one step around the solve
_FRESH = 5.0  # seconds a speed measurement is reused
_last: list[float] = []  # (time measured, loop seconds) of the last measurement
_MOST_SLOWDOWN = 8.0  # the most wall seconds per CPU second :func:`speed` believes (a stall is not a load)


def speed() -> float:
    """Seconds one fixed pure-Python loop takes now, on this machine as loaded now (about 2-5 ms on an idle
    core; more under load).

    The best of five runs (one preemption does not count), times the wall seconds per CPU second this process
    got over the five: a short loop often runs within one time slice, so its best run measures the core's
    speed, not the share of it the process gets on a busy machine (where a step's wall time is its CPU time
    times that ratio). Reused for a few seconds.
    """
    now = time.perf_counter()
    if _last and now - _last[0] < _FRESH:
        return _last[1]
    best = float("inf")
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(5):
        t = time.perf_counter()
        d: dict[tuple[int, str], int] = {}
        for i in range(20_000):
            d[(i, "x")] = i
        s = 0
        for v in d.values():
            s += v
        best = min(best, time.perf_counter() - t)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    share = min(_MOST_SLOWDOWN, max(1.0, wall / cpu)) if cpu > 0 else 1.0
    _last[:] = [time.perf_counter(), best * share]
    return best * share


def size(p: Problem) -> int:
    """What validation, assembly and writing scale with: replicas (running ones included) plus five
    per workload (per-workload work: demand resolution, reasons, ordering)."""
    return sum(w.replicas for w in p.workloads) + 5 * len(p.workloads)


def reserve(p: Problem, time_limit: float, cost: float, loop_seconds: float | None = None) -> float:
    """Seconds to keep out of ``time_limit`` for a step costing ``cost`` speed loops per :func:`size` unit.

    Parameters
    ----------
    p
        The problem (:func:`size`).
    time_limit
        The limit the reserve is taken from; the reserve is at most a quarter of it.
    cost
        The step's cost per :func:`size` unit in :func:`speed` loops (:data:`VALIDATE_COST`, ...).
    loop_seconds
        A :func:`speed` measurement to reuse; measured when None.
    """
    loop = speed() if loop_seconds is None else loop_seconds
    return min(_CAP * time_limit, cost * size(p) * loop)


def slowdown(wall_start: float, cpu_start: float, most: float = 8.0) -> float:
    """Wall seconds per CPU second this process has had since ``wall_start`` (``time.perf_counter()``) and
    ``cpu_start`` (``time.process_time()``): 1.0 on a free core, more when other processes share it.

    For a fixed step after the solve (a report, charts) whose cost is known in CPU seconds: what it will take
    on this machine now. Between 1 and ``most``; 1.0 until a tenth of a second of CPU has been spent (too
    little to tell).
    """
    cpu = time.process_time() - cpu_start
    if cpu < 0.1:
        return 1.0
    return min(most, max(1.0, (time.perf_counter() - wall_start) / cpu))
