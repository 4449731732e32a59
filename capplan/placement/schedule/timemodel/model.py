"""The CP-SAT time model of ``capplan schedule`` (GPUs, MIG slices, shares, CPU, memory, power, topology).

A *job* is a gang (all its replicas start together) or one replica of an independent workload.
Each job has a presence literal ``x``, a start ``k`` on the step grid and, per candidate node, a
replica count ``c`` with an optional interval (present when ``c >= 1``) of the job's duration, or
up to the horizon for a service. Per node, cumulative constraints bound the GPUs, CPU and memory
in use at every instant; per power domain, the GPUs' TDP. A required topology level picks one
domain per workload. Identical jobs of one workload are ordered (symmetry breaking). GPU indices
are chosen afterwards: whole GPUs of one node are interchangeable, and intervals taken in order
of start can always be given free GPUs when the count fits at every instant. Nodes that may host
MIG slices or GPU shares are modelled GPU by GPU instead (:mod:`capplan.placement.schedule.timemodel.gpu`):
MIG geometry on the memory-slice axis over time, shares per GPU, whole GPUs by index there.

The model is built in steps, one module each: the data (:mod:`~capplan.placement.schedule.timemodel.data`:
jobs, node capacities, running replicas, the solution), the variables (this module), the constraint
families (:mod:`~capplan.placement.schedule.timemodel.families`, a keyed table), the objective's stages
and their solve (:mod:`~capplan.placement.schedule.timemodel.stages`: guaranteed jobs on time, the work
of each priority, the demand-weighted wait, then the tie-breaks), and the read-back (:meth:`TimeModel.read`).
The relaxations that bound the stages (pooled, energy) are in :mod:`capplan.placement.schedule.timemodel.relax`.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from capplan.placement.core.quota import QuotaBook
from capplan.placement.schedule.timemodel.data import Busy, Job, NodeCap, Place, TimeSolution
from capplan.placement.schedule.timemodel.families import FAMILIES, Inputs, Use
from capplan.placement.schedule.timemodel.gpu import GpuLevel
from capplan.placement.schedule.timemodel.stages import Hint, Stage, complete, solve_stages, stage_exprs


class TimeModel:
    """The CP-SAT model over jobs, built once and solved in stages."""

    def __init__(self, jobs: list[Job], busy: list[Busy], nodes: list[NodeCap], budgets: list[int],
                 horizon: int, step: int, with_wait: bool = True, exact_power: bool = True,
                 last_level: bool = True, quota: QuotaBook | None = None) -> None:
        self.jobs, self.horizon, self.step = jobs, horizon, step
        self.exact_power = exact_power  # False: a slice or share draws a full TDP of its own (stricter, smaller)
        self.with_wait = with_wait
        self.last_level = last_level  # False: no unweighted-wait stage (a neighbourhood search leaves it to compaction)
        self.deterministic = 0.0
        self.solves = 0  # CP-SAT calls of the last :meth:`solve` (each has a fixed cost: loading, presolve)
        m = self.m = cp_model.CpModel()
        self.x = [m.new_bool_var(f"x{j}") for j in range(len(jobs))]
        self.k = [m.new_int_var(jb.earliest // step, jb.latest // step, f"k{j}") for j, jb in enumerate(jobs)]
        self.c: list[dict[int, cp_model.IntVar]] = []
        self.intervals = 0
        self.ceilings: dict[str, int] = {}  # stage -> its a-priori most (unscaled)
        self.on: dict[int, cp_model.IntVar] = {}  # guaranteed job -> "starts at its release" (stage_exprs)
        self.floors: dict[str, int] = {}  # minimising stage -> its a-priori least (unscaled)
        self.pres: list[dict[int, cp_model.IntVar]] = []
        self.exact = True  # False once a constraint is stricter than the rules (see _resources)
        self.gpu = GpuLevel(m, nodes, busy, horizon)
        self.chains: list[list[int]] = []  # runs of identical jobs ordered by start (families.add_symmetry)
        inp = Inputs(busy, nodes, budgets, quota=quota)
        per_node, tenancy = inp.per_node, inp.tenancy
        for j, jb in enumerate(jobs):
            k = self.k[j]
            cs: dict[int, cp_model.IntVar] = {}
            ps: dict[int, cp_model.IntVar] = {}
            start = step * k
            for n in jb.nodes:
                cap = nodes[n]
                most = jb.replicas
                if jb.gpus:
                    most = min(most, cap.gpus // jb.gpus)
                if jb.cpu:
                    most = min(most, cap.cpu // jb.cpu)
                if jb.mem:
                    most = min(most, cap.mem // jb.mem)
                if most <= 0:
                    continue
                p = m.new_bool_var(f"p{j}_{n}")
                if jb.replicas == 1:
                    cnt: cp_model.IntVar = p
                else:
                    cnt = m.new_int_var(0, most, f"c{j}_{n}")
                    m.add(cnt >= p)
                    m.add(cnt <= most * p)
                if jb.duration is not None:
                    iv = m.new_optional_fixed_size_interval_var(start, jb.duration, p, f"i{j}_{n}")
                else:
                    iv = m.new_optional_interval_var(start, horizon - start, horizon, p, f"i{j}_{n}")
                cs[n], ps[n] = cnt, p
                self.intervals += 1
                per_node.setdefault(n, []).append(Use(iv, cnt, most, (jb.gpus, jb.cpu, jb.mem)))
                if jb.charges:
                    inp.charged.append((iv, cnt, most, jb.charges[jb.nodes.index(n)], p))
                tenancy.setdefault(n, []).append((iv, jb.tenant, jb.isolated))
            m.add(sum(cs.values()) == jb.replicas * self.x[j])
            self.c.append(cs)
            self.pres.append(ps)
            hi = jb.latest + jb.duration if jb.duration is not None else horizon
            self.gpu.add_job(j, jb, start, jb.earliest, hi, cs, self.x[j])
        for family in FAMILIES.values():
            family(self, inp)
        self.intervals += self.gpu.intervals

    def stage_exprs(self) -> list[Stage]:
        """The objective's stages (:func:`~capplan.placement.schedule.timemodel.stages.stage_exprs`)."""
        return stage_exprs(self)

    def complete(self, budget: float, seed: int) -> list[int] | None:
        """Complete the current (partial) hint to a full assignment of every variable, or None."""
        return complete(self, budget, seed)

    def solve(self, hint: Hint | None, time_limit: float, seed: int, workers: int,
              done: frozenset[str] = frozenset()) -> TimeSolution | None:
        """Solve the stages within ``time_limit`` (:func:`~capplan.placement.schedule.timemodel.stages.solve_stages`);
        None when no solution was found at all."""
        return solve_stages(self, hint, time_limit, seed, workers, done)

    def hint(self, starts: list[int | None], counts: list[dict[int, int]],
             places: list[dict[int, list[Place]]] | None = None) -> None:
        """Hint a full solution (e.g. list scheduling's); ``places``: GPUs and slice starts on per-GPU nodes.

        Identical jobs of one workload are ordered by start in the model (symmetry breaking), so their
        hints are put in that order first (a search's schedule may hold them in any order)."""
        m = self.m
        m.clear_hints()  # type: ignore[no-untyped-call]
        starts, counts = list(starts), list(counts)
        places = list(places) if places is not None else None
        for run in self.chains:
            order = sorted(run, key=lambda j: (starts[j] is None, starts[j] or 0, j))
            moved = [(starts[j], counts[j], places[j] if places is not None else {}) for j in order]
            for j, (s, cs, pl) in zip(run, moved, strict=True):
                starts[j], counts[j] = s, cs
                if places is not None:
                    places[j] = pl
        relabel: dict[int, dict[int, int]] = {}
        for j, (s, cs) in enumerate(zip(starts, counts, strict=True)):
            if places is not None and s is not None:
                self.gpu.hint(j, self.jobs[j], places[j], relabel)
            m.add_hint(self.x[j], s is not None)
            m.add_hint(self.k[j], (s if s is not None else self.jobs[j].earliest) // self.step)
            if j in self.on:  # else completing the hint may leave it off, and the guaranteed stage runs for nothing
                m.add_hint(self.on[j], s is not None and s // self.step == self.jobs[j].earliest // self.step)
            for n, v in self.c[j].items():
                m.add_hint(v, cs.get(n, 0))
                if v is not self.pres[j][n]:
                    m.add_hint(self.pres[j][n], cs.get(n, 0) > 0)
        if places is not None:
            self.gpu.hint_power()

    def read(self, full: list[int]) -> tuple[list[int | None], list[dict[int, int]], list[dict[int, list[Place]]]]:
        starts: list[int | None] = []
        counts: list[dict[int, int]] = []
        places: list[dict[int, list[Place]]] = []
        for j in range(len(self.jobs)):
            if full[self.x[j].index]:
                starts.append(full[self.k[j].index] * self.step)
                counts.append({n: full[v.index] for n, v in self.c[j].items() if full[v.index]})
                places.append(self.gpu.read(j, self.jobs[j], full))
            else:
                starts.append(None)
                counts.append({})
                places.append({})
        return starts, counts, places
