"""The time model's objective, in stages solved one after the other (a lexicographic objective).

:func:`stage_exprs` builds the stages: guaranteed jobs that start at their release, the work (demand
x time) of each priority, the demand-weighted wait, then the tie-breaks: more replicas run, and the
unweighted wait (replica-seconds; CPU-only pods count only there). :func:`solve_stages` solves them in
order, each fixing the previous one's value; a stage whose incumbent already has its a-priori best
value is not solved.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model, cp_model_helper

from capplan.placement.schedule.timemodel.data import Place, TimeSolution

if TYPE_CHECKING:
    from capplan.placement.schedule.timemodel.model import TimeModel

log = logging.getLogger(__name__)

#: Share of each stage's wall-clock budget given as CP-SAT deterministic time (see :func:`solve_stages`).
DETERMINISTIC_SHARE = 0.2
#: Deterministic budget of a guaranteed or work stage relative to a tie-break stage (wait, replicas).
STAGE_WEIGHT = 2.0
#: Above this many optional intervals the stages skip CP-SAT's presolve.
PRESOLVE_MAX_INTERVALS = 1000
#: Share of the time limit for completing a hint to a full solution.
COMPLETE_SHARE = 0.2

Stage = tuple[str, cp_model.LinearExprT, int, bool]
Hint = tuple[list[int | None], list[dict[int, int]], list[dict[int, list[Place]]]]


def one_worker(budget: float, seed: int) -> cp_model.CpSolver:
    """A one-worker solver stopping at ``budget`` s of wall time or its deterministic-clock share, seeded."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = max(0.05, budget)
    prm.max_deterministic_time = max(0.05, budget) * DETERMINISTIC_SHARE
    prm.num_workers = 1
    prm.random_seed = seed
    return solver


def light(prm: object) -> None:
    """Solver settings for a model with per-GPU variables: no symmetry detection (it took the whole budget,
    5 s of 5 s, on a 30-job neighbourhood of 16 nodes; the model breaks GPU symmetry itself) and a light
    presolve rather than none (without presolve OR-Tools 9.15 crashed, segmentation fault, on such
    neighbourhoods; a full presolve took 7 s where the light one and the search took 2 s)."""
    prm.symmetry_level = 0  # type: ignore[attr-defined]
    prm.cp_model_presolve = True  # type: ignore[attr-defined]
    prm.cp_model_probing_level = 0  # type: ignore[attr-defined]
    prm.max_presolve_iterations = 1  # type: ignore[attr-defined]


def _guaranteed_stage(tm: TimeModel) -> list[Stage]:
    jobs, x, k, step = tm.jobs, tm.x, tm.k, tm.step
    if not any(jb.guaranteed for jb in jobs):
        return []
    terms: list[tuple[int, cp_model.IntVar]] = []
    for j, jb in enumerate(jobs):
        if jb.guaranteed:
            on = tm.on[j] = tm.m.new_bool_var(f"on{j}")
            tm.m.add_implication(on, x[j])
            tm.m.add(k[j] == jb.earliest // step).only_enforce_if(on)
            terms.append((jb.replicas, on))
    tm.ceilings["guaranteed"] = sum(jb.replicas for jb in jobs if jb.guaranteed)
    return [("guaranteed", *reduced(terms), True)]


def _work_stages(tm: TimeModel) -> list[Stage]:
    jobs, x, k, step, h = tm.jobs, tm.x, tm.k, tm.step, tm.horizon
    out: list[Stage] = []
    for q in sorted({jb.priority for jb in jobs}, reverse=True):
        terms: list[tuple[int, cp_model.IntVar]] = []
        const, most = 0, 0
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
        tm.ceilings[f"priority {q}"] = most
        if terms:
            out.append((f"priority {q}", *reduced(terms, const), True))
    return out


def stage_exprs(tm: TimeModel) -> list[Stage]:
    """(name, expression, scale, maximise) per stage; each expression is divided by ``scale``,
    the gcd of its coefficients.

    A start ``k`` matters only when its job is present. Rather than a product ``k * x``, the
    service work and the wait use ``k`` for every job and subtract what an absent job at its
    earliest start would add: the expression equals the true value when absent jobs sit at
    their earliest start, which an optimum of the expression may always choose, so optima
    and bounds are those of the true objective (and the LP relaxation stays tight).
    """
    jobs, x, k, step = tm.jobs, tm.x, tm.k, tm.step
    out = _guaranteed_stage(tm) + _work_stages(tm)
    replicas = [(jb.replicas, x[j]) for j, jb in enumerate(jobs)]
    if not tm.with_wait:
        return out
    # the last tie-break, as for a plan: more replicas run (CPU-only pods have no GPU demand)
    tail: list[Stage] = [("replicas", *reduced(replicas), True)] if replicas else []
    tm.ceilings["replicas"] = sum(jb.replicas for jb in jobs)
    terms: list[tuple[int, cp_model.IntVar]] = []
    const = 0
    for j, jb in enumerate(jobs):
        if jb.units:  # w * (step*k - release) when present, 0 when absent at its earliest start
            w = jb.units * jb.replicas
            terms += [(w * step, k[j]), (w * (jb.earliest - jb.release), x[j])]
            const -= w * jb.earliest
    if terms:
        out.append(("wait", *reduced(terms, const), False))
        tm.floors["wait"] = 0
    # then the unweighted wait, replicas x (step*k - release) when present (0 when absent at its earliest
    # start, as above): the one level where a job without GPU demand counts; never below 0 (k >= earliest)
    terms, const = [], 0
    for j, jb in enumerate(jobs if tm.last_level else ()):
        terms += [(jb.replicas * step, k[j]), (jb.replicas * (jb.earliest - jb.release), x[j])]
        const -= jb.replicas * jb.earliest
    if terms:
        tail.append(("replica wait", *reduced(terms, const), False))
        tm.floors["replica wait"] = 0
    return out + tail


def complete(tm: TimeModel, budget: float, seed: int) -> list[int] | None:
    """Complete the model's current (partial) hint to a full assignment of every variable, or None."""
    tm.m.clear_objective()  # type: ignore[no-untyped-call]
    solver = one_worker(budget, seed)
    solver.parameters.fix_variables_to_their_hinted_value = True
    if tm.gpu.intervals:
        light(solver.parameters)
    status = solver.solve(tm.m)
    tm.solves += 1
    tm.deterministic += solver.response_proto.deterministic_time
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        log.info("schedule cpsat: the hint does not complete (%s)", solver.status_name(status))
        return None
    return list(solver.response_proto.solution)


def full_hint(tm: TimeModel, values: list[int]) -> None:
    """Hint every variable of the model with ``values``."""
    tm.m.clear_hints()  # type: ignore[no-untyped-call]
    hint = tm.m.proto.solution_hint
    hint.vars.extend(range(len(values)))
    hint.values.extend(values)


def _at_best(tm: TimeModel, stage: Stage, full: list[int], done: frozenset[str]) -> int | None:
    """The incumbent's value of ``stage`` when it already has the stage's a-priori best (or the stage is
    known to be at its best), fixing it in the model; else None (the stage must be searched)."""
    name, expr, scale, maximize = stage
    reached = _value(expr, full)
    if maximize and (name in done or (name in tm.ceilings and reached * scale >= tm.ceilings[name])):
        tm.m.add(expr >= reached)
        return reached
    if not maximize and name in tm.floors and reached * scale <= tm.floors[name]:
        tm.m.add(expr <= reached)
        return reached
    return None


def _stage_solver(tm: TimeModel, budget: float, clock: float, seed: int, workers: int) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = budget
    # Stop on CP-SAT's deterministic clock first, so that the same seed gives the same schedule
    # unless the machine is so loaded that the wall-clock limit comes first; that clock's budget
    # derives from the time limit alone, not from the wall time the earlier stages took.
    # A stage skipped at its a-priori most leaves its share to the later ones.
    prm.max_deterministic_time = max(0.01, clock)
    prm.num_workers = max(1, workers)
    prm.random_seed = seed
    # Presolve spends seconds on cumulative constraints over thousands of optional intervals
    # (measured: 13 s of a 15 s stage with 10,000 intervals) and then finds nothing; search directly.
    prm.cp_model_presolve = tm.intervals <= PRESOLVE_MAX_INTERVALS
    if tm.gpu.intervals:
        light(prm)
        # OR-Tools 9.15 crashed (segmentation fault, 2 of 2 runs of small-mig seed 1 with 2 workers, at a
        # neighbourhood of some 30 s into the search) on these models with several workers; one is safe
        prm.num_workers = 1
    return solver


def solve_stages(tm: TimeModel, hint: Hint | None, time_limit: float, seed: int, workers: int,
                 done: frozenset[str] = frozenset()) -> TimeSolution | None:
    """Solve ``tm``'s stages within ``time_limit``; None when no solution was found at all.

    A hint (list scheduling's schedule) is first completed to a full solution, which every
    stage is hinted with until it finds a better one; a stage that finds nothing in its time
    keeps the incumbent's value, so later stages still start from a solution. Stages named in
    ``done`` are known not to improve on the hint (e.g. a neighbourhood of a schedule already at
    that level's bound): they keep the hint's value without a search.
    """
    deadline = time.perf_counter() + time_limit
    tm.deterministic = 0.0
    tm.solves = 0
    stages = stage_exprs(tm)
    full: list[int] | None = None
    if hint is not None:
        tm.hint(*hint)
        full = tm.complete(COMPLETE_SHARE * time_limit, seed)
    results: list[tuple[str, int, float, str]] = []
    clock = time_limit * DETERMINISTIC_SHARE  # the stages' deterministic budget, shared by weight
    weights = [_stage_weight(name) for name, *_ in stages]
    for i, stage in enumerate(stages):
        name, expr, scale, maximize = stage
        left = deadline - time.perf_counter()
        if left <= 0.05:
            break
        if full is not None:
            full_hint(tm, full)
            best = _at_best(tm, stage, full, done)
            if best is not None:  # optimal without a search
                results.append((name, best * scale, float(best * scale), "optimal"))
                continue
        if maximize:
            tm.m.maximize(expr)
        else:
            tm.m.minimize(expr)
        share = weights[i] / sum(weights[i:]) if weights[i] else 1.0
        budget = left * min(1.0, share * (1.5 if i < len(stages) - 1 else 1.0))
        solver = _stage_solver(tm, budget, clock * share, seed, workers)
        status = solver.solve(tm.m)
        tm.solves += 1
        tm.deterministic += solver.response_proto.deterministic_time
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
        tm.m.add(expr >= value if maximize else expr <= value)
    return _finish(tm, stages, results, full)


def _finish(tm: TimeModel, stages: list[Stage], results: list[tuple[str, int, float, str]],
            full: list[int] | None) -> TimeSolution | None:
    if full is None or not results:
        return None
    solved = {r[0] for r in results}
    for name, expr, scale, maximize in stages:
        if name not in solved:  # no time left for it: the incumbent's value, nothing proven
            results.append((name, _value(expr, full) * scale, math.inf if maximize else -math.inf, "feasible"))
    starts, counts, places = tm.read(full)
    return TimeSolution(starts=starts, counts=counts, stages=results, deterministic=tm.deterministic,
                        places=places, exact=tm.exact)


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


def reduced(terms: list[tuple[int, cp_model.IntVar]], const: int = 0) -> tuple[cp_model.LinearExprT, int]:
    """``sum(a * v) + const`` divided by the gcd of all its coefficients (and the gcd)."""
    g = abs(const)
    for a, _ in terms:
        g = math.gcd(g, abs(a))
    g = g or 1
    expr = cp_model.LinearExpr.weighted_sum([v for _, v in terms], [a // g for a, _ in terms])
    return expr + const // g, g
