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

The objective is solved in stages, each fixing the previous one's value: guaranteed jobs that
start at their release, the work (demand x time) of each priority, the demand-weighted wait, then
the tie-breaks: more replicas run, and the unweighted wait (replica-seconds; CPU-only pods count
only there). A minimising stage whose incumbent already has its a-priori least value is not solved.
The jobs and solution types are in :mod:`capplan.placement.schedule.timemodel.data`; the relaxations
that bound the stages (pooled, energy) in :mod:`capplan.placement.schedule.timemodel.relax`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model, cp_model_helper

from capplan.placement.schedule.timemodel.data import Busy, Job, NodeCap, Place, TimeSolution
from capplan.placement.schedule.timemodel.gpu import GpuLevel

log = logging.getLogger(__name__)

#: Share of each stage's wall-clock budget given as CP-SAT deterministic time (see :meth:`TimeModel.solve`).
DETERMINISTIC_SHARE = 0.2
#: Deterministic budget of a guaranteed or work stage relative to a tie-break stage (wait, replicas).
STAGE_WEIGHT = 2.0
#: Above this many optional intervals the stages skip CP-SAT's presolve.
PRESOLVE_MAX_INTERVALS = 1000


def _one_worker(budget: float, seed: int) -> cp_model.CpSolver:
    """A one-worker solver stopping at ``budget`` s of wall time or its deterministic-clock share, seeded."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = max(0.05, budget)
    prm.max_deterministic_time = max(0.05, budget) * DETERMINISTIC_SHARE
    prm.num_workers = 1
    prm.random_seed = seed
    return solver


@dataclass(frozen=True)
class _Use:
    """An interval on a node: replica count (variable or 1), its largest value, use per replica."""

    iv: cp_model.IntervalVar
    cnt: cp_model.LinearExprT
    most: int
    per: tuple[int, int, int]  # GPUs, milli-CPU, MiB


class TimeModel:
    """The CP-SAT model over jobs, built once and solved in stages."""

    def __init__(self, jobs: list[Job], busy: list[Busy], nodes: list[NodeCap], budgets: list[int],
                 horizon: int, step: int, with_wait: bool = True, exact_power: bool = True,
                 last_level: bool = True) -> None:
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
        per_node: dict[int, list[_Use]] = {}
        tenancy: dict[int, list[tuple[cp_model.IntervalVar, str, bool]]] = {}
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
                per_node.setdefault(n, []).append(_Use(iv, cnt, most, (jb.gpus, jb.cpu, jb.mem)))
                tenancy.setdefault(n, []).append((iv, jb.tenant, jb.isolated))
            m.add(sum(cs.values()) == jb.replicas * self.x[j])
            self.c.append(cs)
            self.pres.append(ps)
            hi = jb.latest + jb.duration if jb.duration is not None else horizon
            self.gpu.add_job(j, jb, start, jb.earliest, hi, cs, self.x[j])
        self._groups(jobs)
        self._one_model(jobs)
        self._symmetry(jobs)
        self._resources(per_node, busy, nodes, budgets, tenancy)
        self._isolation(tenancy)
        self.gpu.constrain()
        self.intervals += self.gpu.intervals

    def _groups(self, jobs: list[Job]) -> None:
        by_group: dict[int, list[int]] = {}
        for j, jb in enumerate(jobs):
            if jb.group >= 0:
                by_group.setdefault(jb.group, []).append(j)
        for g, js in by_group.items():
            doms = sorted({d for j in js for d in jobs[j].domains})
            y = {d: self.m.new_bool_var(f"y{g}_{d}") for d in doms}
            self.m.add_at_most_one(y.values())
            for j in js:
                for n, d in zip(jobs[j].nodes, jobs[j].domains, strict=True):
                    if n in self.pres[j]:
                        self.m.add_implication(self.pres[j][n], y[d])

    def _one_model(self, jobs: list[Job]) -> None:
        """A gang that must not span GPU models picks one model for all its replicas."""
        for j, jb in enumerate(jobs):
            if len(set(jb.models)) < 2:
                continue
            y = {m: self.m.new_bool_var(f"model{j}_{m}") for m in sorted(set(jb.models))}
            self.m.add_at_most_one(y.values())
            for n, m in zip(jb.nodes, jb.models, strict=True):
                if n in self.pres[j]:
                    self.m.add_implication(self.pres[j][n], y[m])

    def _symmetry(self, jobs: list[Job]) -> None:
        prev: dict[int, int] = {}
        chain: dict[int, list[int]] = {}  # job -> the run of identical jobs it ends (ordered by start)
        for j, jb in enumerate(jobs):
            if jb.replicas == 1 and jb.workload in prev:
                i = prev[jb.workload]
                if jobs[i].nodes == jb.nodes and jobs[i].earliest == jb.earliest:
                    self.m.add_implication(self.x[j], self.x[i])
                    self.m.add(self.k[i] <= self.k[j]).only_enforce_if(self.x[j])
                    chain[j] = [*chain.pop(i, [i]), j]
            prev[jb.workload] = j
        self.chains = list(chain.values())

    def _isolation(self, tenancy: dict[int, list[tuple[cp_model.IntervalVar, str, bool]]]) -> None:
        """Node isolation: an isolated job's interval on a node overlaps no interval of another tenant there."""
        for uses in tenancy.values():
            for a, (iv, tenant, isolated) in enumerate(uses):
                if not isolated:
                    continue
                for b, (other, who, _) in enumerate(uses):
                    if who != tenant and (b > a or not uses[b][2]):
                        self.m.add_no_overlap([iv, other])

    def _resources(self, per_node: dict[int, list[_Use]], busy: list[Busy], nodes: list[NodeCap],
                   budgets: list[int], tenancy: dict[int, list[tuple[cp_model.IntervalVar, str, bool]]]) -> None:
        m = self.m
        fixed: dict[int, list[_Use]] = {}
        for b in busy:
            if b.end <= b.start:
                continue
            iv = m.new_fixed_size_interval_var(b.start, b.end - b.start, f"busy{b.node}_{len(fixed.get(b.node, []))}")
            fixed.setdefault(b.node, []).append(_Use(iv, 1, 1, (b.gpus, b.cpu, b.mem)))
            self.gpu.add_busy(b, iv)
            if b.isolated or any(t != b.tenant and isolated for _, t, isolated in tenancy.get(b.node, [])):
                tenancy.setdefault(b.node, []).append((iv, b.tenant, b.isolated))
        power: list[list[tuple[cp_model.IntervalVar, cp_model.LinearExprT, int]]] = [[] for _ in budgets]
        for n in sorted(set(per_node) | set(fixed)):
            cap = nodes[n]
            both = per_node.get(n, []) + fixed.get(n, [])
            for r, limit in ((0, cap.gpus), (1, cap.cpu), (2, cap.mem)):
                used = [u for u in both if u.per[r]]
                if sum(u.most * u.per[r] for u in used) <= limit:
                    continue  # never binding
                m.add_cumulative([u.iv for u in used], [u.cnt * u.per[r] for u in used], limit)
            if cap.tdp:
                for d in cap.power:
                    power[d].extend((u.iv, u.cnt * (u.per[0] * cap.tdp), u.most * u.per[0] * cap.tdp)
                                    for u in both if u.per[0])
        # A MIG slice or share makes its GPU draw its TDP; several on one GPU draw it once: exactly (pieces of
        # each GPU's busy time, gpu.GpuLevel.power_uses) on the nodes under a budget that could bind
        # if each slice drew a TDP, else each free one a full TDP (stricter: the model is then inexact).
        load = [sum(e[2] for e in entries) for entries in power]
        uses = self.gpu.partial_uses()
        for n, count in uses.items():
            for d in nodes[n].power:
                load[d] += count * nodes[n].tdp
        tight = {n for n in uses if nodes[n].tdp and any(load[d] > budgets[d] for d in nodes[n].power)}
        partial: set[int] = set()
        for n, iv, stricter in self.gpu.power_uses(tight if self.exact_power else set()):
            cap = nodes[n]
            for d in cap.power if cap.tdp else ():
                power[d].append((iv, cap.tdp, cap.tdp))
                if stricter:
                    partial.add(d)
        for d, entries in enumerate(power):
            if sum(e[2] for e in entries) > budgets[d]:
                m.add_cumulative([e[0] for e in entries], [e[1] for e in entries], budgets[d])
                if d in partial:
                    self.exact = False

    # ----------------------------------------------------------------- stages
    def stage_exprs(self) -> list[tuple[str, cp_model.LinearExprT, int, bool]]:
        """(name, expression, scale, maximise) per stage; each expression is divided by ``scale``,
        the gcd of its coefficients.

        A start ``k`` matters only when its job is present. Rather than a product ``k * x``, the
        service work and the wait use ``k`` for every job and subtract what an absent job at its
        earliest start would add: the expression equals the true value when absent jobs sit at
        their earliest start, which an optimum of the expression may always choose, so optima
        and bounds are those of the true objective (and the LP relaxation stays tight).
        """
        jobs, x, k, step, h = self.jobs, self.x, self.k, self.step, self.horizon
        out: list[tuple[str, cp_model.LinearExprT, int, bool]] = []
        if any(jb.guaranteed for jb in jobs):
            terms: list[tuple[int, cp_model.IntVar]] = []
            for j, jb in enumerate(jobs):
                if jb.guaranteed:
                    on = self.on[j] = self.m.new_bool_var(f"on{j}")
                    self.m.add_implication(on, x[j])
                    self.m.add(k[j] == jb.earliest // step).only_enforce_if(on)
                    terms.append((jb.replicas, on))
            out.append(("guaranteed", *_reduced(terms), True))
            self.ceilings["guaranteed"] = sum(jb.replicas for jb in jobs if jb.guaranteed)
        for q in sorted({jb.priority for jb in jobs}, reverse=True):
            terms, const, most = [], 0, 0
            for j, jb in enumerate(jobs):
                if jb.priority != q or not jb.units:
                    continue
                w = jb.units * jb.replicas
                if jb.duration is not None:
                    terms.append((w * jb.duration, x[j]))
                    most += w * jb.duration
                else:  # w * (h - step*k) when present, 0 when absent at its earliest start
                    terms += [(-w * step, k[j]), (w * (h - jb.earliest), x[j])]
                    const += w * jb.earliest
                    most += w * (h - jb.earliest)
            self.ceilings[f"priority {q}"] = most
            if terms:
                out.append((f"priority {q}", *_reduced(terms, const), True))
        replicas = [(jb.replicas, x[j]) for j, jb in enumerate(jobs)]
        if not self.with_wait:
            return out
        # the last tie-break, as for a plan: more replicas run (CPU-only pods have no GPU demand)
        tail = [("replicas", *_reduced(replicas), True)] if replicas else []
        self.ceilings["replicas"] = sum(jb.replicas for jb in jobs)
        terms, const = [], 0
        for j, jb in enumerate(jobs):
            if jb.units:  # w * (step*k - release) when present, 0 when absent at its earliest start
                w = jb.units * jb.replicas
                terms += [(w * step, k[j]), (w * (jb.earliest - jb.release), x[j])]
                const -= w * jb.earliest
        if terms:
            out.append(("wait", *_reduced(terms, const), False))
            self.floors["wait"] = 0
        # then the unweighted wait, replicas x (step*k - release) when present (0 when absent at its earliest
        # start, as above): the one level where a job without GPU demand counts; never below 0 (k >= earliest)
        terms, const = [], 0
        for j, jb in enumerate(jobs if self.last_level else ()):
            terms += [(jb.replicas * step, k[j]), (jb.replicas * (jb.earliest - jb.release), x[j])]
            const -= jb.replicas * jb.earliest
        if terms:
            tail.append(("replica wait", *_reduced(terms, const), False))
            self.floors["replica wait"] = 0
        return out + tail

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

    def _complete(self, budget: float, seed: int) -> list[int] | None:
        """Complete the current (partial) hint to a full assignment of every variable, or None."""
        self.m.clear_objective()  # type: ignore[no-untyped-call]
        solver = _one_worker(budget, seed)
        solver.parameters.fix_variables_to_their_hinted_value = True
        if self.gpu.intervals:
            _light(solver.parameters)
        status = solver.solve(self.m)
        self.solves += 1
        self.deterministic += solver.response_proto.deterministic_time
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            log.info("schedule cpsat: the hint does not complete (%s)", solver.status_name(status))
            return None
        return list(solver.response_proto.solution)

    def _full_hint(self, values: list[int]) -> None:
        self.m.clear_hints()  # type: ignore[no-untyped-call]
        hint = self.m.proto.solution_hint
        hint.vars.extend(range(len(values)))
        hint.values.extend(values)

    def solve(self, hint: tuple[list[int | None], list[dict[int, int]], list[dict[int, list[Place]]]] | None,
              time_limit: float, seed: int, workers: int, done: frozenset[str] = frozenset()) -> TimeSolution | None:
        """Solve the stages within ``time_limit``; None when no solution was found at all.

        A hint (list scheduling's schedule) is first completed to a full solution, which every
        stage is hinted with until it finds a better one; a stage that finds nothing in its time
        keeps the incumbent's value, so later stages still start from a solution. Stages named in
        ``done`` are known not to improve on the hint (e.g. a neighbourhood of a schedule already at
        that level's bound): they keep the hint's value without a search.
        """
        deadline = time.perf_counter() + time_limit
        self.deterministic = 0.0
        self.solves = 0
        stages = self.stage_exprs()
        full: list[int] | None = None
        if hint is not None:
            self.hint(*hint)
            full = self._complete(0.2 * time_limit, seed)
        results: list[tuple[str, int, float, str]] = []
        clock = time_limit * DETERMINISTIC_SHARE  # the stages' deterministic budget, shared by weight
        weights = [_stage_weight(name) for name, *_ in stages]
        for i, (name, expr, scale, maximize) in enumerate(stages):
            left = deadline - time.perf_counter()
            if left <= 0.05:
                break
            if full is not None:
                self._full_hint(full)
                reached = _value(expr, full)
                if maximize and (name in done or (name in self.ceilings and reached * scale >= self.ceilings[name])):
                    # the incumbent already reaches the stage's a-priori most (or is known to be at its best):
                    # optimal without a search
                    results.append((name, reached * scale, float(reached * scale), "optimal"))
                    self.m.add(expr >= reached)
                    continue
                if not maximize and name in self.floors and reached * scale <= self.floors[name]:
                    results.append((name, reached * scale, float(reached * scale), "optimal"))
                    self.m.add(expr <= reached)
                    continue
            if maximize:
                self.m.maximize(expr)
            else:
                self.m.minimize(expr)
            solver = cp_model.CpSolver()
            prm = solver.parameters
            share = weights[i] / sum(weights[i:]) if weights[i] else 1.0
            budget = left * min(1.0, share * (1.5 if i < len(stages) - 1 else 1.0))
            prm.max_time_in_seconds = budget
            # Stop on CP-SAT's deterministic clock first, so that the same seed gives the same schedule
            # unless the machine is so loaded that the wall-clock limit comes first; that clock's budget
            # derives from the time limit alone, not from the wall time the earlier stages took.
            # A stage skipped at its a-priori most leaves its share to the later ones.
            prm.max_deterministic_time = max(0.01, clock * share)
            prm.num_workers = max(1, workers)
            prm.random_seed = seed
            # Presolve spends seconds on cumulative constraints over thousands of optional intervals
            # (measured: 13 s of a 15 s stage with 10,000 intervals) and then finds nothing; search directly.
            prm.cp_model_presolve = self.intervals <= PRESOLVE_MAX_INTERVALS
            if self.gpu.intervals:
                _light(prm)
                # OR-Tools 9.15 crashed (segmentation fault, 2 of 2 runs of small-mig seed 1 with 2 workers, at a
                # neighbourhood of some 30 s into the search) on these models with several workers; one is safe
                prm.num_workers = 1
            status = solver.solve(self.m)
            self.solves += 1
            self.deterministic += solver.response_proto.deterministic_time
            clock -= solver.response_proto.deterministic_time
            log.info("stage %s: %s, wall %.2f s, deterministic %.2f", name, solver.status_name(status),
                     solver.wall_time, solver.response_proto.deterministic_time)
            found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
            incumbent = _value(expr, full) if full is not None else None
            if found and (incumbent is None or not _better(incumbent, round(solver.objective_value), maximize)):
                full = list(solver.response_proto.solution)
                value, state = round(solver.objective_value), "optimal" if status == cp_model.OPTIMAL else "feasible"
            elif incumbent is not None:
                value, state = incumbent, "feasible"
            else:
                break
            bound = solver.best_objective_bound if found or status == cp_model.UNKNOWN else math.nan
            if not math.isfinite(bound) or (bound < value if maximize else bound > value):
                bound = math.inf if maximize else -math.inf  # no bound computed: claim nothing
            results.append((name, value * scale, bound * scale, state))
            self.m.add(expr >= value if maximize else expr <= value)
        if full is None or not results:
            return None
        solved = {r[0] for r in results}
        for name, expr, scale, maximize in stages:
            if name not in solved:  # no time left for it: the incumbent's value, nothing proven
                results.append((name, _value(expr, full) * scale, math.inf if maximize else -math.inf, "feasible"))
        starts, counts, places = self._read(full)
        return TimeSolution(starts=starts, counts=counts, stages=results, deterministic=self.deterministic,
                            places=places, exact=self.exact)

    def _read(self, full: list[int]) -> tuple[list[int | None], list[dict[int, int]], list[dict[int, list[Place]]]]:
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


def _light(prm: object) -> None:
    """Solver settings for a model with per-GPU variables: no symmetry detection (it took the whole budget,
    5 s of 5 s, on a 30-job neighbourhood of 16 nodes; the model breaks GPU symmetry itself) and a light
    presolve rather than none (without presolve OR-Tools 9.15 crashed, segmentation fault, on such
    neighbourhoods; a full presolve took 7 s where the light one and the search took 2 s)."""
    prm.symmetry_level = 0  # type: ignore[attr-defined]
    prm.cp_model_presolve = True  # type: ignore[attr-defined]
    prm.cp_model_probing_level = 0  # type: ignore[attr-defined]
    prm.max_presolve_iterations = 1  # type: ignore[attr-defined]


def _stage_weight(name: str) -> float:
    """Share of the deterministic budget a stage gets, relative to the others: the work levels twice the
    tie-breaks (wait, replicas). The last tie-break (the unweighted wait) gets none of its own: only what the
    others leave (wall time and deterministic time), so it takes nothing from them."""
    if name == "replica wait":
        return 0.0
    return 1.0 if name in ("wait", "replicas") else STAGE_WEIGHT


def _better(a: int, b: int, maximize: bool) -> bool:
    return a > b if maximize else a < b


def _value(expr: cp_model.LinearExprT, full: list[int]) -> int:
    """The value of a linear expression under a full assignment of the model's variables."""
    if not isinstance(expr, cp_model.LinearExpr):
        return int(expr)
    flat = cp_model_helper.FlatIntExpr(expr)
    return int(sum(full[v.index] * c for v, c in zip(flat.vars, flat.coeffs, strict=True)) + flat.offset)


def _reduced(terms: list[tuple[int, cp_model.IntVar]], const: int = 0) -> tuple[cp_model.LinearExprT, int]:
    """``sum(a * v) + const`` divided by the gcd of all its coefficients (and the gcd)."""
    g = abs(const)
    for a, _ in terms:
        g = math.gcd(g, abs(a))
    g = g or 1
    expr = cp_model.LinearExpr.weighted_sum([v for _, v in terms], [a // g for a, _ in terms])
    return expr + const // g, g
