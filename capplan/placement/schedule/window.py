"""Large-neighbourhood search over time windows and domains, past the full time model's reach.

Start from a schedule (list scheduling's), then repeatedly free the jobs of one neighbourhood —
every job running in a time window (on a random part of the nodes, with the jobs that could run
there but do not), every job on the nodes of one domain (a rack), or a job that does not run with
every job running, during its run, on the least loaded nodes of one of its domains (room for it:
those jobs must move, to the least loaded other nodes, or give way) — keep everything else fixed (as busy
intervals on its nodes), and re-solve the freed jobs with the CP-SAT time model
(:class:`capplan.placement.schedule.timemodel.model.TimeModel`), hinted with their current starts and
nodes. Every level of the objective is a sum over jobs, so the neighbourhood's staged
objective improves exactly when the whole schedule's does; a result is kept when the whole
schedule's lexicographic key (:func:`capplan.placement.schedule.result.lex_key`) improves.

The search runs on CP-SAT's deterministic clock (each neighbourhood gets a fixed deterministic
budget; neighbourhoods are drawn from a seeded generator), so a seed gives the same schedule
unless the wall-clock limit, a safety net, comes first on a loaded machine. Windows widen after a
neighbourhood is solved to optimality and narrow after one is not.

Plans have their own neighbourhood search over nodes (:mod:`capplan.placement.core.subproblem`
builds those sub-problems); a schedule's neighbourhood is a set of jobs in time, whose fixed part
is a set of intervals rather than a running state, so it is built here on the time model's jobs.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import replace

from capplan.model.problem import Problem
from capplan.placement.schedule.jobs import Jobs, job_busy
from capplan.placement.schedule.result import lex_key
from capplan.placement.schedule.timeline import Item
from capplan.placement.schedule.timemodel.data import Busy, Job, NodeCap, TimeSolution
from capplan.placement.schedule.timemodel.model import TimeModel
from capplan.placement.schedule.timemodel.stages import DETERMINISTIC_SHARE

#: Most jobs freed in one neighbourhood.
MAX_FREE = 30
#: Random (start, domain) pairs a room-making neighbourhood compares (:meth:`WindowSearch._make_room`).
ROOM_TRIES = 8
#: Most nodes a neighbourhood's freed jobs may use (a random part of the window's or the domain's).
MAX_NODES = 16
#: Most nodes when the cluster has nodes modelled GPU by GPU (MIG slices, shares): each brings a literal per
#: GPU and freed job, and CP-SAT's presolve of a 16-node neighbourhood took most of its 3 s.
MAX_GPU_NODES = 8
#: Wall-clock seconds per neighbourhood (its deterministic budget is :data:`DETERMINISTIC_SHARE` of it).
PER_NEIGHBOURHOOD = 3.0
#: Share of the search's clock, at its end, in which neighbourhoods also solve the wait and the replica count
#: (before it, the work levels only: a neighbourhood is kept when it raises the work, and the tie-break stages,
#: which took most of each neighbourhood's time, are left to this last part and to the compaction after).
WAIT_SHARE = 0.2
#: What a CP-SAT call costs besides its deterministic time (loading the model, presolve, which CP-SAT's
#: deterministic clock hardly counts): seconds per call, and seconds per call and 1,000 variables and
#: constraints. Measured on the benchmark's 200-workload fleets (one worker, CPU seconds; a least-squares fit
#: over 86 neighbourhoods: seconds ~ 0.044 x calls + 0.137 x calls x size / 1000 + 5.4 x deterministic time).
#: A neighbourhood is charged its deterministic time plus these, converted by :data:`DETERMINISTIC_SHARE`, on
#: the search's deterministic clock, so that the clock, not the wall clock, ends the search on a quiet machine.
SOLVE_SECONDS = 0.044
SOLVE_SECONDS_PER_KSIZE = 0.137
#: The search's deterministic clock is this share of its time limit times :data:`DETERMINISTIC_SHARE` (the
#: charge above predicts a neighbourhood's wall time within about 30%; the margin keeps the deterministic clock
#: first on a quiet machine).
CLOCK_MARGIN = 0.9


class WindowSearch:
    """The search state: the current job starts and node counts, and their decoded schedule."""

    def __init__(self, p: Problem, jobs: Jobs, items: list[Item], horizon: int, step: int,
                 inputs: tuple[list[NodeCap], list[int], list[Busy]], seed: int,
                 bound: Mapping[int, int] | None = None) -> None:
        self.p, self.jobs, self.horizon, self.step = p, jobs, horizon, step
        self.bound = dict(bound or {})  # per priority, the whole schedule's work bound (units x seconds)
        self.guaranteed = sum(jb.replicas for jb in jobs.jobs if jb.guaranteed)
        self.caps, self.budgets, self.running = inputs
        self.rng = random.Random(seed)
        self.starts, self.counts, self.places = jobs.hint(items)
        self.items = items
        self.key = lex_key(p, items, step)
        cl = p.cluster
        self.level = cl.levels[-2] if len(cl.levels) > 1 else None
        self.domains: dict[str, list[int]] = {}
        if self.level is not None:
            for i, n in enumerate(cl.nodes):
                self.domains.setdefault(cl.domain_of(n, self.level), []).append(i)
        self.width = max(step, horizon // 8)
        self.max_nodes = MAX_GPU_NODES if any(c.per_gpu for c in self.caps) else MAX_NODES
        self.tried = 0
        self.kept = 0
        self.kind = ""  # the kind of the last neighbourhood
        self.wait = True  # solve the wait and replica-count stages too (else the work levels only)
        self.solves = 0  # CP-SAT calls so far

    def _end(self, j: int) -> int:
        jb, s = self.jobs.jobs[j], self.starts[j]
        assert s is not None
        return s + jb.duration if jb.duration is not None else self.horizon

    def neighbourhood(self) -> tuple[list[int], set[int]]:
        """Freed jobs and the nodes they may use. Kinds in turn: a time window, a domain, and (while some
        job does not run) room for such a job (:meth:`_make_room`)."""
        jobs, rng = self.jobs.jobs, self.rng
        missing = [j for j, s in enumerate(self.starts) if s is None]
        kinds = ["window"] + (["domain"] if len(self.domains) > 1 else []) + (["missing"] if missing else [])
        kind = kinds[self.tried % len(kinds)]
        self.kind = kind
        lo, hi = 0, self.horizon
        everything = set(range(len(self.caps)))
        first: list[int] = []
        if kind == "domain":
            nodes = set(self.domains[rng.choice(sorted(self.domains))])
        elif kind == "missing":
            return self._make_room(rng.choice(missing))
        else:
            lo = rng.randrange(0, max(1, self.horizon - self.width // 2), self.step)
            hi = lo + self.width
            nodes = everything
        if len(nodes) > self.max_nodes:
            nodes = set(rng.sample(sorted(nodes), self.max_nodes))
        cand: list[int] = []
        for j, jb in enumerate(jobs):
            s = self.starts[j]
            if j in first:
                continue
            if s is not None:
                if s < hi and self._end(j) > lo and set(self.counts[j]) <= nodes:
                    cand.append(j)
            elif jb.earliest < hi and jb.latest + (jb.duration or 0) > lo and nodes.intersection(jb.nodes):
                cand.append(j)
        if len(cand) + len(first) > MAX_FREE:
            cand = sorted(rng.sample(cand, MAX_FREE - len(first)))
        return sorted(first + cand), nodes

    def _load(self, lo: int, hi: int) -> dict[int, list[tuple[int, int]]]:
        """Per node, the scheduled jobs running there within ``[lo, hi)``: (GPU-seconds of overlap, job)."""
        out: dict[int, list[tuple[int, int]]] = {}
        for i, jb in enumerate(self.jobs.jobs):
            s = self.starts[i]
            if s is None or s >= hi or self._end(i) <= lo:
                continue
            overlap = min(hi, self._end(i)) - max(lo, s)
            for n, c in self.counts[i].items():
                out.setdefault(n, []).append((max(1, jb.gpus) * c * overlap, i))
        return out

    def _make_room(self, j: int) -> tuple[list[int], set[int]]:
        """Room for a job that does not run: of :data:`ROOM_TRIES` random starts in its window, each on one of
        its domains, the one whose least loaded nodes (as many as the job needs) carry the least work during
        its run. Every job running on the domain's nodes during that time is freed, least loaded nodes first
        (those jobs must move or give way); the other nodes (up to the neighbourhood's node limit) are the least loaded
        ones, where freed jobs may go."""
        jobs, rng = self.jobs.jobs, self.rng
        jb = jobs[j]
        groups = [list(jb.nodes)]
        if jb.domains:
            by: dict[str, list[int]] = {}
            for n, d in zip(jb.nodes, jb.domains, strict=True):
                by.setdefault(d, []).append(n)
            groups = [by[d] for d in sorted(by)]
        best: tuple[int, list[int], dict[int, list[tuple[int, int]]], dict[int, int]] | None = None
        for _ in range(ROOM_TRIES):
            lo = rng.randrange(jb.earliest, jb.latest + 1, self.step)
            hi = lo + jb.duration if jb.duration is not None else self.horizon
            load = self._load(lo, hi)
            weight = {n: sum(x for x, _ in load.get(n, [])) for n in range(len(self.caps))}
            mine = sorted(rng.choice(groups), key=lambda n: (weight[n], rng.random()))
            per = max(1, self.caps[mine[0]].gpus // jb.gpus) if jb.gpus else jb.replicas
            cost = sum(weight[n] for n in mine[:-(-jb.replicas // per)])
            if best is None or cost < best[0]:
                best = (cost, mine[:self.max_nodes], load, weight)
        assert best is not None
        _, mine, load, weight = best
        rest = sorted(set(range(len(self.caps))) - set(mine), key=lambda n: (weight[n], rng.random()))
        nodes = set(mine) | set(rest[:max(0, self.max_nodes - len(mine))])
        free = [j]
        for n in mine:
            for _, i in sorted(load.get(n, [])):
                if i not in free and set(self.counts[i]) <= nodes and len(free) < MAX_FREE:
                    free.append(i)
        return sorted(free), nodes

    def sub_jobs(self, free: list[int], nodes: set[int]) -> list[Job] | None:
        """The freed jobs restricted to ``nodes`` (and to the domain or model their fixed siblings hold)."""
        fixed_dom: dict[int, str] = {}
        free_set = set(free)
        for j, jb in enumerate(self.jobs.jobs):
            if j not in free_set and self.starts[j] is not None and jb.group >= 0 and jb.domains:
                n = next(iter(self.counts[j]))
                fixed_dom[jb.group] = jb.domains[jb.nodes.index(n)]
        out = []
        for j in free:
            jb = self.jobs.jobs[j]
            keep = [k for k, n in enumerate(jb.nodes) if n in nodes
                    and (jb.group not in fixed_dom or jb.domains[k] == fixed_dom[jb.group])]
            if not keep and self.starts[j] is not None:
                return None
            out.append(replace(jb, nodes=tuple(jb.nodes[k] for k in keep),
                               domains=tuple(jb.domains[k] for k in keep) if jb.domains else (),
                               models=tuple(jb.models[k] for k in keep) if jb.models else (),
                               mig=tuple(jb.mig[k] for k in keep) if jb.mig else ()))
        return out

    def busy(self, free: set[int], nodes: set[int]) -> list[Busy]:
        """Fixed jobs on ``nodes`` and on nodes sharing a power budget with them, as busy intervals."""
        power = {d for n in nodes for d in self.caps[n].power}
        near = {i for i, c in enumerate(self.caps) if i in nodes or power.intersection(c.power)}
        out = [b for b in self.running if b.node in near]
        for j, jb in enumerate(self.jobs.jobs):
            s = self.starts[j]
            if j in free or s is None:
                continue
            for n, c in self.counts[j].items():
                if n in near:
                    per_gpu = self.caps[n].per_gpu and bool(jb.gpus or jb.partial)
                    out += job_busy(jb, n, c, s, self._end(j), self.places[j].get(n, []) if per_gpu else None)
        return out

    def done(self) -> frozenset[str]:
        """The stages no neighbourhood can improve: every guaranteed job already on time, and each priority
        whose work in the whole schedule is at its bound (every level is a sum over jobs)."""
        out = {"guaranteed"} if self.key[0] >= self.guaranteed else set()
        for i, q in enumerate(self.p.priorities):
            if q in self.bound and self.key[1 + i] >= self.bound[q]:
                out.add(f"priority {q}")
        return frozenset(out)

    def work_done(self) -> bool:
        """Every work level at its bound: only the wait and the replica count are left to improve."""
        return all(f"priority {q}" in self.done() for q in self.p.priorities)

    def step_once(self, budget: float, seed: int, workers: int) -> tuple[bool, float, bool]:
        """Solve one neighbourhood; (kept, its charge on the search's deterministic clock, proven optimal).

        The charge is CP-SAT's deterministic time plus the fixed cost of each CP-SAT call
        (:data:`SOLVE_SECONDS`, :data:`SOLVE_SECONDS_PER_KSIZE`) converted by :data:`DETERMINISTIC_SHARE`."""
        self.tried += 1
        free, nodes = self.neighbourhood()
        sub = self.sub_jobs(free, nodes) if free else None
        if not sub:
            return False, 0.0, True
        # no unweighted-wait stage per neighbourhood (its wall time and unproven ends cost neighbourhoods; the
        # key still counts it, and the search's result is compacted)
        tm = TimeModel([jb for jb in sub if jb.nodes], self.busy(set(free), nodes), self.caps, self.budgets,
                       self.horizon, self.step, with_wait=self.wait, last_level=False)
        live = [j for j, jb in zip(free, sub, strict=True) if jb.nodes]
        hint = ([self.starts[j] for j in live], [self.counts[j] for j in live], [self.places[j] for j in live])
        sol = tm.solve(hint, budget, seed, workers, self.done())
        self.solves += tm.solves
        size = len(tm.m.proto.constraints) + len(tm.m.proto.variables)
        fixed = tm.solves * (SOLVE_SECONDS + SOLVE_SECONDS_PER_KSIZE * size / 1000)
        charge = tm.deterministic + DETERMINISTIC_SHARE * fixed
        if sol is None:
            return False, charge, False
        starts, counts, places = list(self.starts), list(self.counts), list(self.places)
        for j, s, c, pl in zip(live, sol.starts, sol.counts, sol.places, strict=True):
            starts[j], counts[j], places[j] = s, c, pl
        try:
            items = self.jobs.decode(TimeSolution(starts=starts, counts=counts, places=places))
        except AssertionError:
            return False, charge, sol.proven()
        key = lex_key(self.p, items, self.step)
        if key > self.key:
            self.starts, self.counts, self.places, self.items, self.key = starts, counts, places, items, key
            self.kept += 1
            return True, charge, sol.proven()
        return False, charge, sol.proven()


def improve(p: Problem, jobs: Jobs, items: list[Item], horizon: int, step: int, time_limit: float, seed: int,
            workers: int, inputs: tuple[list[NodeCap], list[int], list[Busy]],
            bound: Mapping[int, int] | None = None) -> tuple[list[Item], dict[str, object]]:
    """Improve the schedule ``items`` by neighbourhood search for ``time_limit`` seconds; the best schedule
    and metrics (neighbourhoods tried and kept, CP-SAT calls).

    The search stops when its deterministic clock (:data:`CLOCK_MARGIN` x ``time_limit`` x
    :data:`DETERMINISTIC_SHARE`, charged per neighbourhood as :meth:`WindowSearch.step_once` says) is
    spent, or when the next neighbourhood would not fit the wall-clock limit. Neighbourhoods solve the
    work levels only until the last :data:`WAIT_SHARE` of either clock (or until every work level is at
    its ``bound``, per priority in units x seconds), then every stage; levels at their bound are not searched.
    """
    t0 = time.perf_counter()
    search = WindowSearch(p, jobs, items, horizon, step, inputs, seed, bound)
    spent = 0.0
    # Several CP-SAT workers are not deterministic anyway: there the wall clock alone ends the search (on a quiet
    # machine the deterministic clock, fitted on one worker, ended it at 55-60% of its time with two).
    clock = CLOCK_MARGIN * time_limit * DETERMINISTIC_SHARE if workers <= 1 else math.inf
    last = 0.0  # wall seconds of the previous neighbourhood: the next one must fit too
    while spent < clock and time.perf_counter() - t0 + 1.5 * last < time_limit - 0.2:  # the next may take longer
        budget = min(PER_NEIGHBOURHOOD, max(0.2, (clock - spent) / DETERMINISTIC_SHARE))
        search.wait = (spent >= (1 - WAIT_SHARE) * clock or search.work_done()
                       or time.perf_counter() - t0 >= (1 - WAIT_SHARE) * time_limit)  # a loaded machine
        began = time.perf_counter()
        _, used, proven = search.step_once(budget, seed + search.tried, workers)
        last = time.perf_counter() - began
        spent += used
        if proven:
            search.width = min(horizon, search.width * 5 // 4)
        else:
            search.width = max(step, search.width * 4 // 5)
    return search.items, {"lns_tried": search.tried, "lns_kept": search.kept, "lns_solves": search.solves}
