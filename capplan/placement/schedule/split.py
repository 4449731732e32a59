"""Run what the pooled relaxation runs: try to build such a schedule by a rack split.

The neighbourhood search changes a few racks and hours at a time; where the optimum needs the long
gangs of several racks rearranged together (seeds 1 and 2 of the scheduling benchmark: the search
stalls with 4 x 8-GPU gangs left out), it does not get there. When the pooled relaxation (the cluster
as one node) finds a solution doing more work than the schedule in hand, its jobs (on seed 2 every
job; on seed 1 those of its optimum, 3,900 GPU-h at priority 0) may run on the real cluster too:
:func:`capplan.placement.cpsat.schedule_split.split_schedule` tries to build such a schedule, which is
then optimal at every work level the relaxation proved, the search only lowering the wait.
"""

from __future__ import annotations

from collections.abc import Sequence

from capplan.model.problem import Problem
from capplan.placement.cpsat.schedule_jobs import Busy, NodeCap, TimeSolution
from capplan.placement.cpsat.schedule_split import rack_parts, split_schedule
from capplan.placement.schedule.jobs import Jobs
from capplan.placement.schedule.result import work_units
from capplan.placement.schedule.timeline import Item


def pooled_gains(jobs: Jobs, relaxed: TimeSolution | None, items: list[Item]) -> bool:
    """Whether the pooled relaxation's solution does more work than the schedule ``items``, comparing the
    priorities highest first (its jobs are then worth running by a split)."""
    if relaxed is None:
        return False
    reached = {name: value for name, value, _, _ in relaxed.stages}
    done = work_units(items)
    for q in sorted({jb.priority for jb in jobs.jobs}, reverse=True):
        have, could = done.get(q, 0), reached.get(f"priority {q}", -1)
        if could != have:
            return could > have
    return False


def split_all(p: Problem, jobs: Jobs, inputs: tuple[list[NodeCap], list[int], list[Busy]], time_limit: float,
              seed: int, workers: int, present: Sequence[int | None] | None = None) -> list[Item] | None:
    """A schedule running every job with GPU demand (``present``: only the jobs with a start there, e.g. the
    pooled relaxation's; guaranteed ones always, at their release), by a split of the
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
    force = [j for j, jb in enumerate(jobs.jobs)
             if jb.guaranteed or (jb.units and (present is None or present[j] is not None))]
    on_time = [j for j, jb in enumerate(jobs.jobs) if jb.guaranteed]
    sol = split_schedule(jobs.jobs, busy, caps, budgets, jobs.horizon, jobs.step, parts[0], parts[1], force,
                         on_time, time_limit=time_limit, seed=seed, workers=workers)
    if sol is None:
        return None
    try:
        return jobs.decode(sol)
    except AssertionError:  # a GPU colouring that does not fit: not expected, but never trusted blindly
        return None
