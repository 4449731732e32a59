"""Why a workload is not (fully) placed: relaxed CP-SAT re-solves, not string guesses.

Two questions are asked of the model, in order:

1. *Can it ever fit?* The workload alone on the empty cluster, all of its replicas forced. If that
   is infeasible, each constraint family is relaxed in turn; the families whose removal makes it
   feasible are the blockers, and a second solve (all-or-nothing relaxed) says by how much:
   "needs 4 x 8 GPUs in one rack; at most 2 fit in one rack".
2. *Who is in the way?* With everything else on the cluster too (running replicas free to move, except
   those whose running state breaks a rule: they stay, as in the plan),
   the workload is forced in and the displacement of the others from their planned counts is
   minimised, lower priorities first. The answer names the workloads that would have to give
   way: "would fit if 3 replicas of notebooks (priority 1, preemptible, running) were preempted".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from capplan.model.families import FAMILIES
from capplan.model.plan import Plan
from capplan.model.problem import Problem, Workload
from capplan.model.units import units_to_gpus
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.reality import planning_problem
from capplan.placement.core.summary import describe_demand
from capplan.placement.cpsat.constraints import FAMILIES as COMPONENTS
from capplan.placement.cpsat.constraints import FAMILY_OF, add_all, placed_count
from capplan.placement.cpsat.index import build_index
from capplan.placement.cpsat.model import PlacementModel
from capplan.placement.cpsat.solver import make_solver

_RELAXABLE = ("models", "topology", "isolation", "power", "node", "mig", "fraction", "gpu")
# The relaxable components of the placement model, labelled by the constraint family each keeps
# (capplan.model.families; "node" keeps two, host CPU and memory).
_LABEL = {f: FAMILIES[FAMILY_OF[f][0]].label for f in _RELAXABLE if f != "node"} | {"node": "host CPU/memory"}
_TEXT = {f: FAMILIES[FAMILY_OF[f][0]].structural for f in _RELAXABLE if f != "node"} | {
    "node": "host CPU or memory of the eligible nodes is too small"}


@dataclass(frozen=True)
class Explanation:
    """The answer for one workload."""

    workload: str
    replicas: int
    placed: int
    blocking: tuple[str, ...]
    message: str
    competitors: tuple[tuple[str, int], ...] = ()  # (workload, replicas that would give way)


def _solver(options: PlanOptions, limit: float) -> cp_model.CpSolver:
    return make_solver(max(0.1, limit), options.seed, options.workers)


def _alone(
    p: Problem,
    w: Workload,
    options: PlanOptions,
    skip: frozenset[str],
    limit: float,
    relax_gang: bool = False,
) -> int:
    """Most replicas of ``w`` alone on the empty cluster with families ``skip`` relaxed (-1: unknown)."""
    q = p.replace(workloads=(w,), running=())
    pm = PlacementModel(build_index(q, options))
    add_all(pm, skip | ({"counts"} if relax_gang else frozenset()))
    count = placed_count(pm, w)
    if relax_gang:
        pm.m.add(count <= w.replicas)
        pm.m.maximize(count)
    else:
        pm.m.add(count == w.replicas)
    s = _solver(options, limit)
    st = s.solve(pm.m)
    if st == cp_model.INFEASIBLE:
        return 0
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return -1
    return int(s.value(count)) if relax_gang else w.replicas


def _structural(p: Problem, w: Workload, options: PlanOptions, limit: float) -> Explanation | None:
    if _alone(p, w, options, frozenset(), limit) != 0:
        return None
    what = describe_demand(p, w)
    blockers = tuple(f for f in _RELAXABLE if _alone(p, w, options, frozenset({f}), limit) > 0)
    room = _alone(p, w, options, frozenset(), limit, relax_gang=True)
    lvl = w.topology.required
    need = f"{w.replicas} x {what} ({units_to_gpus(w.replicas * p.replica_value(w)):g} GPUs)"
    if "topology" in blockers and lvl:
        msg = f"topology: needs {need} in one {lvl}; at most {max(room, 0)} fit in any one {lvl}"
    elif blockers:
        text = "; ".join(f"{_LABEL[f]}: " + _TEXT[f].format(lvl=lvl, what=w.mig or what) for f in blockers)
        msg = f"{text}; needs {need}, at most {max(room, 0)} fit even on the empty cluster"
    else:
        msg = (
            f"several constraints together: needs {need} at once; at most {max(room, 0)} fit even on the "
            "empty cluster"
        )
    return Explanation(w.name, w.replicas, 0, blockers, msg)


def _competition(p: Problem, w: Workload, plan: Plan, options: PlanOptions, limit: float) -> Explanation:
    """Force ``w`` in; keep every other workload's planned replicas as far as possible.

    A replica's value is fixed by its workload, so the only way another workload gives way is
    with fewer replicas placed; the lowest priorities are asked first. The answer names those
    workloads with the GPUs (of value) they would give up.
    """
    count: dict[str, int] = {}
    for a in plan.assignments:
        count[a.workload] = count.get(a.workload, 0) + 1
    # Running replicas are free to move, except those of workloads whose running state breaks a rule (running
    # state is reality, core/reality.py): they stay where they run, as in the plan.
    q, breaks = planning_problem(p)
    pinned = {n for b in breaks if b.rule != "taint" for n in b.workloads}
    q = q.replace(running=tuple(a for a in p.running if a.workload in pinned))
    pm = PlacementModel(build_index(q, options))
    add_all(pm)
    pm.m.add(placed_count(pm, w) == w.replicas)
    ranks = {prio: k + 1 for k, prio in enumerate(sorted(p.priorities))}
    gaps: dict[str, Any] = {}
    for v in p.workloads:
        if v.name == w.name or not count.get(v.name):
            continue
        dn = pm.m.new_int_var(0, count[v.name], f"give_replicas[{v.name}]")
        pm.m.add(placed_count(pm, v) + dn >= count[v.name])
        gaps[v.name] = dn
    # Lower priorities give way first (weight by rank); within one, the fewest GPUs of value.
    pm.m.minimize(sum((ranks[p.workload(n).priority] * (p.replica_value(p.workload(n)) + 1) * dn
                       for n, dn in gaps.items()), 0))
    s = _solver(options, limit)
    st = s.solve(pm.m)
    placed = count.get(w.name, 0)
    what = describe_demand(p, w)
    need = f"{w.replicas} x {what} ({units_to_gpus(w.replicas * p.replica_value(w)):g} GPUs)"
    if st == cp_model.INFEASIBLE and pinned:
        return Explanation(w.name, w.replicas, placed, ("capacity",),
                           f"capacity: needs {need}; no arrangement places it while the running replicas of "
                           f"{', '.join(sorted(pinned))} stay where they run against a rule (running state; "
                           "they take the room it could use)")
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Explanation(w.name, w.replicas, placed, (),
                           f"capacity: needs {need}; no arrangement with it placed was found within {limit:g} s")
    give = tuple((n, int(s.value(dn))) for n, dn in gaps.items() if s.value(dn))
    running = {a.workload for a in p.running}
    parts = []
    for n, k in give:
        v = p.workload(n)
        tags = [f"priority {v.priority}"] + (["preemptible"] if v.preemptible else []) + (
            ["running"] if n in running else [])
        verb = "preempted" if v.preemptible else "left out"
        gpus = units_to_gpus(k * p.replica_value(v))
        parts.append(f"{k} replica{'s' if k > 1 else ''} of {n} ({', '.join(tags)}; {gpus:g} GPUs) were {verb}")
    if not parts:
        msg = (f"capacity: needs {need}; it fits without displacing anything, so the plan was not optimal "
               "here (raise --time-limit)")
    else:
        higher = [n for n, _ in give if p.workload(n).priority >= w.priority]
        why = ("; the planner keeps them because they have equal or higher priority" if higher
               else "; enable --allow-preemption / --allow-migration for running ones")
        msg = f"capacity: needs {need}; would fit if " + " and ".join(parts) + why
    return Explanation(w.name, w.replicas, placed, ("capacity",), msg, give)


def explain_workload(p: Problem, name: str, plan: Plan, options: PlanOptions | None = None) -> Explanation:
    """Explain why workload ``name`` is not fully placed (or say that it is).

    Parameters
    ----------
    p
        The problem.
    name
        The workload.
    plan
        The plan to explain (the caller plans it, normally with ``cpsat``).
    options
        Time limit of the re-solves, seed and workers.
    """
    opts = options or PlanOptions(time_limit=30)
    w = p.workload(name)
    placed = sum(1 for a in plan.assignments if a.workload == name)
    if placed == w.replicas:
        return Explanation(name, w.replicas, placed, (), f"placed: all {w.replicas} replicas")
    limit = max(1.0, opts.time_limit / 4)
    return _structural(p, w, opts, limit / len(COMPONENTS)) or _competition(p, w, plan, opts, limit)
