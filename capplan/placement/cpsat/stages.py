"""The lexicographic CP-SAT stages of the ``cpsat`` strategy: one stage per objective level, each
searched within its share of the time, proven or cut by the clock, then fixed at its value.

Used by :func:`capplan.placement.cpsat.solve.plan_cpsat`. A priority stage searches its demand units
first, then its replicas with the GPU replicas pinned (the replica table bounds that search:
:mod:`capplan.placement.cpsat.tiebreak`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from ortools.sat.python import cp_model

from capplan.model.units import units_to_gpus
from capplan.placement.core.options import PlanOptions
from capplan.placement.cpsat.constraints import placed_count
from capplan.placement.cpsat.model import PlacementModel
from capplan.placement.cpsat.objective import Stage, fix_at_ceiling
from capplan.placement.cpsat.result import Run, StageResult
from capplan.placement.cpsat.solver import make_solver
from capplan.placement.cpsat.tiebreak import ReplicaTable, replica_table

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

PRESOLVE_MAX_VARS = 15_000
# Model build time per candidate (workload, node) pair, a conservative figure from this machine
# (512 nodes x 240 workloads = 123k pairs: about 37 s to build, constrain, stage and hint).
_TIE_BREAK_SECONDS = 0.5  # a tie-breaking stage after every priority is proven: this + TIE_BREAK_PROVEN_SHARE
TIE_BREAK_SHARE = 0.25  # the most of the run's limit one tie-breaking stage gets
TIE_BREAK_PROVEN_SHARE = 0.02  # ... once every priority is proven (plus _TIE_BREAK_SECONDS)
_TIE_BREAK_GRACE = 1.0  # the replica search after a priority's units are proven gets at least this (or 20%)
_WEIGHT = {"guaranteed": 1.0, "moves": 0.5, "held": 0.5, "shape": 0.5}  # share of the remaining time; priorities 2.0


class _Progress(cp_model.CpSolverSolutionCallback):
    """Forwards each improving solution to ``options.progress``; keeps the stage's bounds.

    A priority stage is searched on its demand units first (``Stage.units``); its value and bound
    are reported in the stage's own terms, ``units * per_unit + replicas``, the bound tightened by
    the stage's :class:`~capplan.placement.cpsat.tiebreak.ReplicaTable`. The search stops as soon
    as the incumbent meets that bound.
    """

    def __init__(
        self, stage: Stage, t0: float, fn: Any, solver: cp_model.CpSolver, best: int | None,
        table: ReplicaTable | None = None,
    ) -> None:
        super().__init__()
        self.stage, self.t0, self.fn, self.solver = stage, t0, fn, solver
        self.best = best
        self.table = table
        self.bound = float("inf")

    def on_solution_callback(self) -> None:
        value = int(self.value(self.stage.expr))
        self.best = value if self.best is None else max(self.best, value)
        bound = stage_bound(self.stage, self.table, self.best_objective_bound)
        if self.fn is not None:
            self.fn(stage_event(self.stage, self.t0, value, bound))
        self.check(self.best_objective_bound)

    def check(self, raw: float) -> None:
        """Record CP-SAT's bound ``raw`` (of the searched objective); stop when the incumbent meets it."""
        st = self.stage
        bound = stage_bound(st, self.table, raw)
        if st.maximize and self.best is not None and bound < self.best:
            return  # below a known solution: not a bound yet (see _record_stage)
        self.bound = min(self.bound, bound)
        if st.maximize and st.priority is not None and self.best is not None and self.best >= self.bound:
            self.solver.stop_search()


def searched(st: Stage) -> Any:
    """The objective CP-SAT searches for stage ``st``: a priority's units first, else its expression."""
    return st.units if st.units is not None else st.expr


def stage_bound(st: Stage, table: ReplicaTable | None, raw: float) -> float:
    """CP-SAT's bound ``raw`` on :func:`searched` as a bound on ``st.expr`` (tightened by ``table``).

    Searching the units, a bound of ``u`` units allows at most ``u * step * per_unit + per_unit - 1``
    (every replica); the replica table then lowers it to what the priority's values can make up.
    """
    if not st.maximize or not math.isfinite(raw):
        return raw
    bound = int(raw + 1e-6)
    if st.units is not None:
        bound = bound * st.step * st.per_unit + st.per_unit - 1
    if table is not None:
        bound = table.tighten(bound + st.constant) - st.constant
    return float(bound)


def stage_event(st: Stage, t0: float, value: float, bound: float) -> dict[str, Any]:
    """A stage's progress in user units: GPUs placed at its priority, or guaranteed replicas placed.

    A priority stage's internal value is ``units * per_unit + replicas`` (plus the pinned running
    replicas' ``constant``); only the GPUs are shown. Tie-break stages report their name only.
    """
    name = "cpsat" if st.priority is not None else f"cpsat {st.name}"
    ev: dict[str, Any] = {"stage": name, "elapsed": round(time.perf_counter() - t0, 3)}
    finite = math.isfinite(bound) and bound >= value
    if st.priority is not None:
        units = (round(value) + st.constant) // st.per_unit
        ev.update(priority=st.priority, objective=units_to_gpus(units))
        if finite:
            cap = (int(bound + 1e-6) + st.constant) // st.per_unit
            ev["bound"] = units_to_gpus(cap)
            ev["gap"] = round((cap - units) / cap, 6) if cap > 0 else 0.0
    elif st.name == "guaranteed":
        ev["guaranteed"] = round(value)
        if finite:
            ev["guaranteed_total"] = int(bound + 1e-6)
    return ev


def complete_hint(
    pm: PlacementModel, stages: list[Stage], options: PlanOptions, budget: float
) -> tuple[list[int], list[int]] | None:
    """Complete the (partial) greedy hint to a full solution; its values per stage. None if infeasible."""
    solver = make_solver(max(0.05, budget), options.seed, 1, fix_to_hint=True)
    pm.m.clear_objective()  # type: ignore[no-untyped-call]
    status = solver.solve(pm.m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        log.info("cpsat: the greedy hint does not complete (%s)", solver.status_name(status))
        return None
    return list(solver.response_proto.solution), [int(solver.value(st.expr)) for st in stages]


def _set_hint(pm: PlacementModel, solution: list[int]) -> None:
    pm.m.clear_hints()  # type: ignore[no-untyped-call]
    hint = pm.m.proto.solution_hint
    hint.vars.extend(range(len(solution)))
    hint.values.extend(solution)


def _better(st: Stage, a: int, b: int) -> bool:
    return a > b if st.maximize else a < b


def solve_stages(
    pm: PlacementModel,
    stages: list[Stage],
    options: PlanOptions,
    t0: float,
    deadline: float,
    greedy: tuple[list[int], list[int]] | None,
) -> Run:
    """Solve the stages in order; the incumbent (greedy completed, then each stage's best) always
    satisfies the stages fixed so far, so a stage that finds nothing keeps the incumbent's value."""
    run = Run()
    inc_vals: list[int] = []
    if greedy is not None:
        run.solution, inc_vals = greedy[0], greedy[1]
    for k, st in enumerate(stages):
        left = deadline - time.perf_counter()
        if left <= 0.05:
            break
        inc_vals = _hint_incumbent(pm, stages, k, run, greedy, inc_vals)
        if run.solution is not None and st.maximize and st.ceiling is not None and inc_vals[k] >= st.ceiling:
            _fix_reached_ceiling(pm, st, run, inc_vals[k], t0)
            continue
        budget = _stage_budget(stages, k, run, options, left)
        best = inc_vals[k] if run.solution is not None else None
        if st.priority is not None:
            run.tables[st.name] = replica_table(pm, st.priority, st.per_unit)
        solver, status, cb, ts = _search_stage(pm, st, options, t0, budget, best, run.tables.get(st.name))
        found = _record_stage(pm, stages, k, run, inc_vals, t0, solver, status, cb, ts)
        if found is None:
            break
        inc_vals = found
        res = run.results[-1]
        if res.units_proven and res.status != "optimal" and math.isfinite(res.bound):
            spent = time.perf_counter() - ts
            more = min(deadline - time.perf_counter(), max(budget - spent, min(_TIE_BREAK_GRACE, 0.2 * budget)))
            if more > 0.05:
                inc_vals = _search_replicas(pm, stages, k, run, inc_vals, options, more)
    return run


class _Reach(cp_model.CpSolverSolutionCallback):
    """Stops a replica search once the incumbent reaches ``target`` replicas (the table's bound)."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target

    def on_solution_callback(self) -> None:
        if self.objective_value >= self.target - 1e-6:
            self.stop_search()


def _search_replicas(
    pm: PlacementModel, stages: list[Stage], k: int, run: Run, inc_vals: list[int], options: PlanOptions,
    budget: float,
) -> list[int]:
    """Priority stage ``k`` has its units proven but not its replica tie-break: search the replicas alone.

    The stage's objective ``units * (R + 1) + replicas`` weighs a replica millions of times less
    than a unit; with the units already fixed (the stage's ``expr >= value``, and its units proven)
    CP-SAT finds more replicas much sooner when it maximises the count itself (small-2: the 39th
    replica in about 2 s, where the combined objective was still at 37 after 5 s). Stops as soon
    as the stage's bound (the replica table's) is met; updates the stage's result and fixes it.
    """
    st = stages[k]
    res = run.results[-1]
    q = st.priority
    assert q is not None and run.solution is not None
    reps = sum((placed_count(pm, w) for w in pm.p.workloads if w.priority == q), 0)
    units_part = res.value - res.value % st.per_unit  # the expr: units * per_unit + replicas (not pinned ones)
    target = int(res.bound + 1e-6) - units_part
    pm.m.maximize(reps)
    _set_hint(pm, run.solution)
    pinned = sum(1 for r in pm.ix.runs if not r.optional and r.w.priority == q)  # constants of ``reps``
    ts = time.perf_counter()
    # First the replicas without GPUs alone, every GPU replica where it is: the units search ignores
    # them, and CP-SAT adds them back one by one slowly in the full model (small-2: 31 -> 36 of 39 in 2 s).
    goal = target + pinned
    pinned_gpu = pm.m.clone()
    for (wn, _), v in pm.c.items():
        if pm.p.workload(wn).has_gpu_demand:
            pinned_gpu.add(v == run.solution[v.index])
    best: cp_model.CpSolver | None = None  # the solver holding the best solution found (same variables)
    solver = _solver(pm, options, min(budget / 4, 0.5))
    status = solver.solve(pinned_gpu, _Reach(goal))
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    if found and int(solver.value(st.expr)) > res.value:
        best = solver
    proof = False  # an optimum counts only in the full model
    if not (found and solver.objective_value >= goal - 1e-6):
        if best is not None:  # the full search starts from it
            _set_hint(pm, list(best.response_proto.solution))
        solver = _solver(pm, options, max(0.05, budget - (time.perf_counter() - ts)))
        status = solver.solve(pm.m, _Reach(goal))
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            proof = status == cp_model.OPTIMAL
            if int(solver.value(st.expr)) >= (res.value if best is None else int(best.value(st.expr))):
                best = solver
    res.seconds = round(res.seconds + time.perf_counter() - ts, 4)
    if best is not None and int(best.value(st.expr)) > res.value:
        run.solution = list(best.response_proto.solution)
        inc_vals = [int(best.value(s.expr)) for s in stages]
        res.value = int(best.value(st.expr))
        pm.m.add(st.expr >= res.value)
    if proof or res.value >= res.bound:
        res.status, res.bound = "optimal", float(res.value)  # no more replicas with these units
    return inc_vals


def _hint_incumbent(
    pm: PlacementModel,
    stages: list[Stage],
    k: int,
    run: Run,
    greedy: tuple[list[int], list[int]] | None,
    inc_vals: list[int],
) -> list[int]:
    """Hint stage ``k`` with the incumbent, switched back to the completed greedy solution while that
    meets the fixed stages and is better here; the incumbent's values per stage."""
    st = stages[k]
    g_ok = greedy is not None and all(
        not _better(s, r.value, gv) for s, r, gv in zip(stages[:k], run.results, greedy[1], strict=False)
    )
    if greedy is not None and g_ok and _better(st, greedy[1][k], inc_vals[k]):
        run.solution, inc_vals = greedy[0], greedy[1]
    if run.solution is not None:
        _set_hint(pm, run.solution)
    return inc_vals


def _fix_reached_ceiling(pm: PlacementModel, st: Stage, run: Run, value: int, t0: float) -> None:
    """The incumbent already reaches the stage's a-priori maximum: optimal without a solve."""
    run.results.append(StageResult(st.name, "optimal", value, float(value), 0.0, st.priority is not None))
    pm.m.add(st.expr >= value)
    fix_at_ceiling(pm, st)
    if st.priority is not None:
        run.priorities_done_s = round(time.perf_counter() - t0, 3)


def _stage_budget(stages: list[Stage], k: int, run: Run, options: PlanOptions, left: float) -> float:
    """Stage ``k``'s share of the ``left`` seconds, by the weights of the stages still to solve."""
    st = stages[k]
    weights = [_WEIGHT.get(s.name, 2.0) for s in stages[k:]]
    budget = max(0.05, left * weights[0] / sum(weights))
    if st.priority is None and st.name != "guaranteed":
        budget = min(budget, TIE_BREAK_SHARE * options.time_limit)  # tie-breakers never take most of the time
        if all(r.units_proven for r, s in zip(run.results, stages, strict=False) if s.priority is not None):
            # Every priority is proven: the plan is optimal whatever a tie-breaker finds, so a
            # tie-breaker (topology, fragmentation) gets a short look, not a proof at any cost.
            budget = min(budget, _TIE_BREAK_SECONDS + TIE_BREAK_PROVEN_SHARE * options.time_limit)
    return budget


def _search_stage(
    pm: PlacementModel, st: Stage, options: PlanOptions, t0: float, budget: float, best: int | None,
    table: ReplicaTable | None = None,
) -> tuple[cp_model.CpSolver, Any, _Progress, float]:
    """One CP-SAT search of stage ``st`` within ``budget`` s: the solver, its status, the progress
    callback (its bounds) and the search's ``time.perf_counter()`` start."""
    if st.maximize:
        pm.m.maximize(searched(st))
    else:
        pm.m.minimize(st.expr)
    solver = _solver(pm, options, budget)
    cb = _Progress(st, t0, options.progress, solver, best, table)
    solver.best_bound_callback = cb.check
    ts = time.perf_counter()
    status = solver.solve(pm.m, cb)
    return solver, status, cb, ts


def _solver(pm: PlacementModel, options: PlanOptions, budget: float) -> cp_model.CpSolver:
    # On large models presolve takes many seconds and may drop the hint; search directly.
    return make_solver(budget, options.seed, options.workers, presolve=len(pm.m.proto.variables) <= PRESOLVE_MAX_VARS)


def _record_stage(
    pm: PlacementModel,
    stages: list[Stage],
    k: int,
    run: Run,
    inc_vals: list[int],
    t0: float,
    solver: cp_model.CpSolver,
    status: Any,
    cb: _Progress,
    ts: float,
) -> list[int] | None:
    """Keep stage ``k``'s result (the better of CP-SAT's solution and the incumbent, and a bound only
    where it is one) and fix the stage at its value; the incumbent's values per stage, None when
    the stage found nothing and there is no incumbent (the stages stop)."""
    st = stages[k]
    name = solver.status_name(status).lower()
    secs = round(time.perf_counter() - ts, 4)
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    got = int(solver.value(st.expr)) if found else 0
    table = run.tables.get(st.name)
    if found and (run.solution is None or not _better(st, inc_vals[k], got)):
        run.solution = list(solver.response_proto.solution)
        inc_vals = [int(solver.value(s.expr)) for s in stages]
    elif found:
        name = "unknown"  # CP-SAT's best is worse than the hinted incumbent: keep the incumbent
    elif run.solution is None:
        log.info("cpsat stage %s: %s after %.2fs and no incumbent", st.name, name, secs)
        run.results.append(StageResult(st.name, name, 0, stage_bound(st, table, solver.best_objective_bound), secs))
        return None
    else:
        name = "unknown"  # no better solution found in time: keep the incumbent's value
    value = inc_vals[k]
    bound = stage_bound(st, table, solver.best_objective_bound)
    if status == cp_model.UNKNOWN:
        # Cut off before a solution of its own (a tiny budget on a busy machine): the response's bound may
        # be a default (0), not a bound. Keep only bounds CP-SAT reported while searching.
        bound = cb.bound if st.maximize else -math.inf
    tol = 1e-6 * max(1.0, abs(value))  # CP-SAT reports large objectives with float rounding
    if status == cp_model.INFEASIBLE or (bound < value - tol if st.maximize else bound > value + tol):
        # Not a bound: CP-SAT reports one on the wrong side of a known solution when it stops
        # before computing any (e.g. a stage cut off at once on a slow machine), and a stage
        # "infeasible" under an incumbent that meets it would be a modelling error. Claim nothing.
        bound = math.inf if st.maximize else -math.inf
    # (exact comparisons: a priority stage's bound is an integer here, and a float tolerance on values of
    # millions would hide the replica tie-break)
    if st.units is not None and name == "optimal" and value < bound:
        name = "feasible"  # CP-SAT proved the units; the replica tie-break is searched next
    elif st.units is not None and value >= bound:
        name = "optimal"  # the incumbent meets the stage's bound (the replica table's)
    units_proven = st.priority is not None and (
        name == "optimal" or (math.isfinite(bound) and int(bound + 1e-6) // st.per_unit <= value // st.per_unit)
    )
    run.results.append(StageResult(st.name, name, value, bound, secs, units_proven))
    pm.m.add(st.expr >= value if st.maximize else st.expr <= value)
    if st.maximize and st.priority is not None and st.ceiling is not None and value >= st.ceiling:
        fix_at_ceiling(pm, st)
    if st.priority is not None:
        run.priorities_done_s = round(time.perf_counter() - t0, 3)
    return inc_vals
