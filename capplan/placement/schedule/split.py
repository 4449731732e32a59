"""Every job at once: when the pooled relaxation runs all the work, try to build such a schedule by a rack split.

The neighbourhood search changes a few racks and hours at a time; where the optimum needs the long
gangs of several racks rearranged together (seed 2 of the scheduling benchmark: every job runs, while
the search stalls with a 4 x 8-GPU gang left out), it does not get there. When the pooled relaxation
(the cluster as one node) finds room for every job's work at every priority, the bound is all the
work, and :func:`capplan.placement.cpsat.schedule_split.split_schedule` may build a schedule that
reaches it: optimal at every work level, the search then only lowering the wait.
"""

from __future__ import annotations

from collections import defaultdict

from capplan.model.problem import Problem
from capplan.placement.cpsat.schedule_jobs import Busy, NodeCap, TimeSolution
from capplan.placement.cpsat.schedule_split import rack_parts, split_schedule
from capplan.placement.schedule.jobs import Jobs
from capplan.placement.schedule.timeline import Item


def all_work(jobs: Jobs) -> dict[int, int]:
    """The work (units x seconds) of every job, per priority."""
    out: dict[int, int] = defaultdict(int)
    for jb in jobs.jobs:
        out[jb.priority] += jb.units * jb.replicas * (jb.duration if jb.duration is not None
                                                      else jobs.horizon - jb.earliest)
    return out


def pooled_runs_all(jobs: Jobs, relaxed: TimeSolution | None) -> bool:
    """Whether the pooled relaxation's solution runs every job's work at every priority."""
    if relaxed is None:
        return False
    reached = {name: value for name, value, _, _ in relaxed.stages}
    return all(reached.get(f"priority {q}", -1) >= w for q, w in all_work(jobs).items() if w)


def split_all(p: Problem, jobs: Jobs, inputs: tuple[list[NodeCap], list[int], list[Busy]], time_limit: float,
              seed: int, workers: int) -> list[Item] | None:
    """A schedule running every job with GPU demand (guaranteed ones at their release), by a split of the
    cluster into the domains just above nodes (racks); None when the cluster has one such domain, a power
    budget spans them, some node is modelled GPU by GPU (MIG slices, shares: on ``small-mig`` seed 3 the
    split found nothing in its share and the search, left less time, once stopped 0.31% short of the
    optimum it reaches without it), or no schedule was found in ``time_limit`` seconds."""
    cl = p.cluster
    if len(cl.levels) < 2 or jobs.per_gpu:
        return None
    caps, budgets, busy = inputs
    domains = [cl.domain_of(n, cl.levels[-2]) for n in cl.nodes]
    parts = rack_parts(caps, budgets, domains)
    if parts is None or len(set(domains)) < 2:
        return None
    force = [j for j, jb in enumerate(jobs.jobs) if jb.units or jb.guaranteed]
    on_time = [j for j, jb in enumerate(jobs.jobs) if jb.guaranteed]
    sol = split_schedule(jobs.jobs, busy, caps, budgets, jobs.horizon, jobs.step, parts[0], parts[1], force,
                         on_time, time_limit=time_limit, seed=seed, workers=workers)
    if sol is None:
        return None
    try:
        return jobs.decode(sol)
    except AssertionError:  # a GPU colouring that does not fit: not expected, but never trusted blindly
        return None
