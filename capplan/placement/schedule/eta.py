"""Start-time estimates under uncertain run times: the median start over sampled Kueue simulations.

Believed run times miss the true ones by a lognormal factor of spread ``sigma`` (:mod:`capplan.model.spread`).
One simulation of Kueue's admission with the believed times leans early (the pods still running are those
whose run times were under-believed) and per-pod expected values lean late (a start is the earliest of
several ends, and a sum deeper in a queue); the median start over ``samples`` simulations, each with run
times drawn from the belief (a running replica's remaining time conditioned on having run ``elapsed``), is
what the ETA benchmark measured closest to the truth (docs/benchmarks-eta.md). Seeded: the same seed gives the
same estimates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.problem import Problem
from capplan.model.spread import sample_remaining, sample_run_time
from capplan.model.timing import RunningEnd


def spread_of(spreads: Mapping[str, float], queue: str | None) -> float:
    """The spread of a workload's queue: ``spreads[queue]``, else ``spreads["*"]``, else 0."""
    return spreads.get(str(queue), spreads.get("*", 0.0)) if queue is not None else spreads.get("*", 0.0)


def sampled_problem(p: Problem, spreads: Mapping[str, float], rng: np.random.Generator) -> Problem:
    """``p`` with one draw of every run time: a workload's ``duration`` drawn around the believed one, a running
    replica's ``ends_in`` drawn given its ``elapsed`` (believed total: its workload's ``duration``; without
    ``elapsed`` or ``duration``, its remaining time is drawn as a run time of its own)."""
    workloads = []
    for w in p.workloads:
        sigma = spread_of(spreads, w.queue)
        if w.duration is not None and sigma > 0:
            w = w.model_copy(update={"duration": sample_run_time(int(w.duration), sigma, rng)})
        workloads.append(w)
    believed = {w.name: w.duration for w in p.workloads}
    ends = []
    for e in p.ends_in:
        sigma = spread_of(spreads, p.workload(e.workload).queue)
        total = believed.get(e.workload)
        if sigma <= 0:
            ends.append(e)
        elif e.elapsed is not None and total is not None:
            ends.append(RunningEnd(workload=e.workload, replica=e.replica, elapsed=e.elapsed,
                                   ends_in=sample_remaining(int(total), e.elapsed, sigma, rng)))
        else:
            ends.append(RunningEnd(workload=e.workload, replica=e.replica, elapsed=e.elapsed,
                                   ends_in=sample_run_time(e.ends_in, sigma, rng)))
    return p.replace(workloads=tuple(workloads), ends_in=tuple(ends))


def median_starts(p: Problem, horizon: int, step: int, spreads: Mapping[str, float], samples: int,
                  seed: int | Sequence[int], deadline: Deadline) -> tuple[dict[str, int | None], int]:
    """Per workload, the median start (seconds from now) over ``samples`` simulations of Kueue's admission with
    sampled run times; None when the median is past the horizon. Also how many simulations ran: they stop at
    ``deadline`` (at least one runs)."""
    from capplan.placement.schedule import schedule

    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    rng = np.random.default_rng(list(seed) if not isinstance(seed, int) else seed)
    names = [w.name for w in p.workloads]
    got: list[list[float]] = []
    for _ in range(samples):
        if got and deadline.expired():
            break
        q = sampled_problem(p, spreads, rng)
        starts: dict[str, int] = schedule(q, horizon=horizon, step=step, policy="kueue").metrics["kueue_starts"]
        got.append([float(starts[n]) if n in starts else math.inf for n in names])
    med = np.median(np.array(got), axis=0)
    return {n: round(m) if math.isfinite(m) else None for n, m in zip(names, med.tolist(), strict=True)}, len(got)
