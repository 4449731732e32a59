"""Run a given set of jobs by splitting the cluster into parts (racks): a construction, not a bound.

When a bound counts every job's work (the relaxations find room for all of it), the question is
whether the real cluster has room too. The full time model with every such job forced present is a
feasibility problem, but at 200 workloads on 32 nodes CP-SAT found nothing in 12 minutes (seed 2 of
the scheduling benchmark, docs/benchmarks-schedule.md). Split it in two phases instead:

1. the *pooled model by part* (:func:`capplan.placement.schedule.timemodel.relax.pooled`: each part one
   node with its GPUs pooled, a power-capped part at the GPUs its budget runs, a gang that needs a rack
   in one part; CPU and memory left to phase 2) with every forced job present, and no part given more
   than :data:`BALANCE` times an even share of the jobs while that leaves room: which part each job
   uses, and when;
2. per part, the full time model over the part's nodes with the jobs phase 1 put there, every one
   present, each in its own time window (phase 1 keeps each gang in one part, so the parts need not
   agree on anything: a gang larger than a part makes the split fail).

Phase 1 ignores node boundaries, so phase 2 may fail where another split would succeed; a failure
proves nothing. A success is a schedule of the full model (every part's constraints hold, parts share
no node, and a power budget spans one part) in which every forced job runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import replace

from ortools.sat.python import cp_model

from capplan.model.problem import Problem
from capplan.placement.schedule.jobs import Jobs
from capplan.placement.schedule.result import work_units
from capplan.placement.schedule.timeline import Item
from capplan.placement.schedule.timemodel.data import Busy, Job, NodeCap, TimeSolution
from capplan.placement.schedule.timemodel.model import TimeModel
from capplan.placement.schedule.timemodel.relax import pooled
from capplan.placement.schedule.timemodel.stages import DETERMINISTIC_SHARE

log = logging.getLogger(__name__)

_UNBOUNDED = 1 << 50
#: Most jobs phase 1 puts in one part, as a multiple of an even share.
BALANCE = 1.25
#: Wall share of the time limit one phase-1 try may use, and the most tries (phase 1, then phase 2).
PHASE1_SHARE = 0.4
PHASE1_TRIES = 4
#: Deterministic seconds per phase-1 try. CP-SAT's deterministic clock runs slowly on this model: on the
#: benchmark's 200 workloads it found a split after 0.04-0.15 deterministic s (3-7 s of CPU), and seeds
#: that had found none by 0.3 rarely did later (docs/benchmarks-schedule.md).
PHASE1_DETERMINISTIC = 0.2


def _feasible(m: cp_model.CpModel, budget: float, seed: int, workers: int,
              deterministic: float | None = None) -> tuple[bool | None, list[int]]:
    """Solve ``m`` (no objective) within ``budget`` wall seconds and ``deterministic`` seconds of CP-SAT's
    deterministic clock (default: its usual share of the budget): (True, solution), (False, []) when
    proven infeasible, (None, []) when nothing was found in time."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = max(0.05, budget)
    prm.max_deterministic_time = max(0.01, budget * DETERMINISTIC_SHARE if deterministic is None else deterministic)
    prm.num_workers = max(1, workers)
    prm.random_seed = seed
    status = solver.solve(m)
    log.info("split: %s, wall %.2f s, deterministic %.2f", solver.status_name(status), solver.wall_time,
             solver.response_proto.deterministic_time)
    if status == cp_model.INFEASIBLE:
        return False, []
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, []
    return True, list(solver.response_proto.solution)


def _force(tm: TimeModel, force: Collection[int], on_time: Collection[int]) -> None:
    for j in force:
        tm.m.add(tm.x[j] == 1)
    for j in on_time:
        tm.m.add(tm.k[j] == tm.jobs[j].earliest // tm.step)


def _phase1(sub: list[Job], busy: list[Busy], nodes: list[NodeCap], horizon: int, step: int, part: list[int],
            part_gpus: list[int], on_time: list[int], balance: bool) -> TimeModel:
    """The pooled model by part with every job of ``sub`` present (GPUs only: pooled CPU and memory
    cumulatives made it about twice as slow on the benchmark; phase 2 keeps every node's CPU and memory)."""
    loose = [replace(c, cpu=_UNBOUNDED, mem=_UNBOUNDED) for c in nodes]
    relaxed = pooled(sub, busy, loose, horizon, step, part=part, gpus=part_gpus)
    _force(relaxed, range(len(sub)), on_time)
    for ps in relaxed.pres:  # a gang in one part, so that phase 2 never has to agree on it across parts
        if len(ps) > 1:
            relaxed.m.add_at_most_one(ps.values())
    size = max(part, default=-1) + 1
    most = -(-int(BALANCE * len(sub)) // max(1, size))
    for g in range(size) if balance else ():  # the part with most of the jobs is the hard one in phase 2
        lits = [ps[g] for ps in relaxed.pres if g in ps]
        if len(lits) > most:
            relaxed.m.add(sum(lits) <= most)
    return relaxed


def _phase2(sub: list[Job], chosen: list[int], p_counts: list[dict[int, int]],
            busy: list[Busy], nodes: list[NodeCap], budgets: list[int], horizon: int, step: int, part: list[int],
            on_time: set[int], deadline: float, seed: int, workers: int, out: TimeSolution) -> bool | None:
    """Phase 2 part by part into ``out`` (indexed like the caller's jobs): True when every part has a
    schedule, False when one part proved to have none, None when time ran out."""
    size = max(part, default=-1) + 1
    members: list[list[int]] = [[] for _ in range(size)]
    for i, cs in enumerate(p_counts):
        for g in cs:
            members[g].append(i)
    order = sorted(range(size), key=lambda g: len(members[g]))  # small parts first: the rest flows to the large
    for done, g in enumerate(order):
        mine = members[g]
        if not mine:
            continue
        local: list[Job] = []
        for i in mine:
            jb = sub[i]
            keep = [k for k, n in enumerate(jb.nodes) if part[n] == g]
            local.append(replace(jb, nodes=tuple(jb.nodes[k] for k in keep),
                                 domains=tuple(jb.domains[k] for k in keep) if jb.domains else (),
                                 models=tuple(jb.models[k] for k in keep) if jb.models else (),
                                 mig=tuple(jb.mig[k] for k in keep) if jb.mig else ()))
        tm = TimeModel(local, busy, nodes, budgets, horizon, step, with_wait=False)
        _force(tm, range(len(local)), [k for k, i in enumerate(mine) if chosen[i] in on_time])
        weight = len(mine) / sum(len(members[h]) for h in order[done:])
        ok, full = _feasible(tm.m, (deadline - time.perf_counter()) * weight, seed, workers)
        if not ok:
            return ok
        out.exact = out.exact and tm.exact
        s, c, pl = tm.read(full)
        for k, i in enumerate(mine):
            j = chosen[i]
            out.starts[j] = s[k]
            out.counts[j] = {**out.counts[j], **c[k]}
            out.places[j] = {**out.places[j], **pl[k]}
    return True


def split_schedule(jobs: Sequence[Job], busy: list[Busy], nodes: list[NodeCap], budgets: list[int], horizon: int,
                   step: int, part: list[int], part_gpus: list[int], force: Collection[int],
                   on_time: Collection[int] = (), time_limit: float = 60.0, seed: int = 0,
                   workers: int = 1, tries: int = PHASE1_TRIES) -> TimeSolution | None:
    """A schedule of the full time model in which every job of ``force`` runs, or None if none was found.

    ``part[n]``: the part of node ``n`` (parts must not share a power budget); ``part_gpus[g]``: the most
    GPUs part ``g`` runs at once (its budget's cap). Jobs of ``on_time`` (a subset of ``force``) start
    at their earliest start. Jobs outside ``force`` are left out. Up to ``tries`` times (seeds ``seed``,
    ``seed + 1``, ...), phase 1 then phase 2; a phase-1 try stops at :data:`PHASE1_DETERMINISTIC` s of
    CP-SAT's deterministic clock, phase 2 at :data:`DETERMINISTIC_SHARE` of its wall budget, so a seed
    gives the same result unless the wall clock (``time_limit`` for everything) stops a phase first.
    No stage values or bounds: it proves nothing when it fails.
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    chosen = sorted(set(force))
    sub = [jobs[j] for j in chosen]
    where = {j: i for i, j in enumerate(chosen)}
    mine = [where[j] for j in on_time if j in where]
    balance = True
    relaxed = _phase1(sub, busy, nodes, horizon, step, part, part_gpus, mine, balance)
    for tried in range(tries):
        if time.perf_counter() > deadline - 0.1:
            break
        # heavy-tailed: a seed either finds a split soon or wanders; restart with the next seed
        ok, full = _feasible(relaxed.m, min(deadline - time.perf_counter(), PHASE1_SHARE * time_limit),
                             seed + tried, workers, PHASE1_DETERMINISTIC)
        if ok is False:  # no room with every job: only the balance could be at fault
            if not balance:
                return None
            balance = False
            relaxed = _phase1(sub, busy, nodes, horizon, step, part, part_gpus, mine, balance)
            continue
        if not ok:
            continue
        _, p_counts, _ = relaxed.read(full)
        out = TimeSolution(starts=[None] * len(jobs), counts=[{} for _ in jobs], places=[{} for _ in jobs])
        if _phase2(sub, chosen, p_counts, busy, nodes, budgets, horizon, step, part, set(on_time),
                   deadline, seed, workers, out):
            return out
    return None


def rack_parts(nodes: list[NodeCap], budgets: list[int], domain_of: list[str]) -> tuple[list[int], list[int]] | None:
    """Parts for :func:`split_schedule`, one per domain (``domain_of[n]``, e.g. the rack of node ``n``), and
    their GPU caps: every GPU, less what each power budget forbids (``budget // smallest TDP`` GPUs at once
    under it); None when a power budget spans domains. The caps only guide phase 1: phase 2 keeps the
    budgets themselves."""
    names = sorted(set(domain_of))
    index = {d: i for i, d in enumerate(names)}
    part = [index[d] for d in domain_of]
    owner: dict[int, int] = {}
    under: dict[int, list[int]] = {}
    for n, cap in enumerate(nodes):
        for b in cap.power:
            if owner.setdefault(b, part[n]) != part[n]:
                return None
            under.setdefault(b, []).append(n)
    gpus = [sum(c.gpus for c, g in zip(nodes, part, strict=True) if g == i) for i in range(len(names))]
    for b, members in under.items():
        total = sum(nodes[n].gpus for n in members)
        tdps = [nodes[n].tdp for n in members if nodes[n].tdp]
        if tdps:
            gpus[owner[b]] -= max(0, total - budgets[b] // min(tdps))
    return part, gpus



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
