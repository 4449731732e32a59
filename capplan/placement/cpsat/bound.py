"""An LP upper bound per priority stage: a capacity relaxation solved with HiGHS (:mod:`capplan.lp.highs`).

CP-SAT's own bound on large models can stay at the trivial value for a long time. This
relaxation keeps only what bounds the demand: replica counts, node CPU and memory, demand units
per node (each busy GPU carries at most 7000 units), GPUs per node, power budgets (TDP per busy
GPU) and the values already fixed for the earlier stages. Every plan the full model allows is a
point of this LP, so its optimum is a valid upper bound for the stage.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from capplan.lp.highs import ColumnLP
from capplan.model.problem import Workload
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.cpsat.constraints import SLOT_SHARE, power_budgets, slot_share
from capplan.placement.cpsat.index import Index


class Lp:
    """A small LP in row form: variables with upper bounds, rows ``sum coef * x <= rhs``."""

    def __init__(self) -> None:
        self.ub: list[float] = []
        self.rows: list[tuple[dict[int, float], float]] = []  # sum coef * x <= rhs

    def var(self, ub: float) -> int:
        self.ub.append(ub)
        return len(self.ub) - 1

    def le(self, terms: dict[int, float], rhs: float) -> None:
        if terms:
            self.rows.append((terms, rhs))


def stage_bounds(ix: Index, fixed: list[tuple[int | None, int]], target: int | None,
                 time_limit: float | None = None) -> float | None:
    """LP bound of the stage ``target`` (a priority, or None for guaranteed) given fixed stages.

    Parameters
    ----------
    ix
        The prepared problem.
    fixed
        ``(priority or None for guaranteed, value)`` of the stages fixed so far, values as in
        :mod:`capplan.placement.cpsat.objective` (running pinned replicas included).
    target
        The stage to bound.
    time_limit
        Seconds for HiGHS; None for no limit.

    Returns
    -------
    float or None
        The bound in the stage's units (including pinned running replicas), or None if the LP
        failed or ran out of time.
    """
    p = ix.p
    if any(r.optional for r in ix.runs):
        return None  # running replicas that may leave would need their own variables; skip the bound
    lp = Lp()
    c: dict[tuple[str, int], int] = {}
    for w in p.workloads:
        for i in ix.cands[w.name]:
            c[(w.name, i)] = lp.var(float(w.replicas))
    busy = {ni.index: lp.var(float(ni.node.gpus)) for ni in ix.nodes if ni.model is not None}
    # running replicas are counted as placed where they are (an upper estimate when they may leave)
    run_units: dict[int, int] = {}
    run_slots: dict[int, int] = {}
    run_cpu: dict[int, tuple[int, int]] = {}
    for r in ix.runs:
        run_units[r.node] = run_units.get(r.node, 0) + r.demand.units
        model = ix.nodes[r.node].model
        if model is not None and model.memory_slices:
            run_slots[r.node] = run_slots.get(r.node, 0) + slot_share(r.demand, model.memory_slices)
        cpu, mem = run_cpu.get(r.node, (0, 0))
        run_cpu[r.node] = (cpu + r.w.cpu_milli, mem + r.w.memory_mib)
    running = {w.name: len(ix.running_of.get(w.name, [])) for w in p.workloads}
    for w in p.workloads:
        lp.le({c[(w.name, i)]: 1.0 for i in ix.cands[w.name]}, float(w.replicas - running[w.name]))
    on_node: dict[int, list[tuple[Workload, int]]] = defaultdict(list)
    for (wn, n), v in c.items():
        on_node[n].append((p.workload(wn), v))
    for ni in ix.nodes:
        i = ni.index
        mine = on_node[i]
        cpu0, mem0 = run_cpu.get(i, (0, 0))
        lp.le({v: float(w.cpu_milli) for w, v in mine if w.cpu_milli}, float(ni.node.cpu_milli - cpu0))
        lp.le({v: float(w.memory_mib) for w, v in mine if w.memory_mib}, float(ni.node.memory_mib - mem0))
        if i in busy:
            terms = {v: float(ix.cands[w.name][i].units) for w, v in mine if ix.cands[w.name][i].units}
            terms[busy[i]] = -float(UNITS_PER_GPU)
            lp.le(terms, -float(run_units.get(i, 0)))
            if ni.model is not None and ni.model.memory_slices:
                ms = ni.model.memory_slices
                terms = {
                    v: float(slot_share(ix.cands[w.name][i], ms))
                    for w, v in mine
                    if slot_share(ix.cands[w.name][i], ms)
                }
                terms[busy[i]] = -float(SLOT_SHARE)
                lp.le(terms, -float(run_slots.get(i, 0)))
    for budget, members in power_budgets(ix):
        lp.le({busy[ni.index]: float(t) for ni, t in members}, float(budget))
    return solve_stage(lp, ix, c, fixed, target, time_limit)


def solve_stage(lp: Lp, ix: Index, c: dict[tuple[str, int], int], fixed: list[tuple[int | None, int]],
                target: int | None, time_limit: float | None) -> float | None:
    """Add the fixed stages' rows to ``lp`` and maximise stage ``target``; its bound or None.

    A priority stage's value counts ``units * scale + 1`` per replica, with ``scale`` the number
    of replicas plus one (millions and more); rows and objective are divided by ``scale`` so that
    HiGHS sees coefficients near the demand units (the unscaled rows made it take minutes on
    512-node problems), and the optimum is scaled back and padded up.
    """
    for prio, value in fixed:
        terms, const, scale = stage_terms(ix, c, prio)
        lp.le({k: -v / scale for k, v in terms.items()}, (const - value) / scale)
    obj, const, scale = stage_terms(ix, c, target)
    if not obj:
        return const
    opt = solve_lp(lp, {k: v / scale for k, v in obj.items()}, time_limit)
    if opt is None:
        return None
    best = opt * scale + const
    return best + 1e-6 * max(1.0, abs(best))


def solve_lp(lp: Lp, obj: dict[int, float], time_limit: float | None = None) -> float | None:
    """Maximise ``obj`` over ``lp`` with HiGHS; the optimum, or None (infeasible, failed, out of time)."""
    n = len(lp.ub)
    rows, cols, vals, rhs = [], [], [], []
    for row, (terms, b) in enumerate(lp.rows):
        for k, v in terms.items():
            rows.append(row)
            cols.append(k)
            vals.append(v)
        rhs.append(b)
    cost = np.zeros(n)
    for k, v in obj.items():
        cost[k] = v
    col = ColumnLP(np.array(rhs, dtype=float))
    col.add_entries(cost, rows, cols, vals)
    col.set_upper(np.arange(n, dtype=np.int32), np.array(lp.ub, dtype=float))
    res = col.solve(float("inf") if time_limit is None else max(0.01, time_limit))
    if res.status != "optimal":
        return None
    return res.value


def stage_terms(ix: Index, c: dict[tuple[str, int], int],
                prio: int | None) -> tuple[dict[int, float], float, float]:
    """LP terms (variable of ``c[(workload, node)]`` -> coefficient), constant and scale of a stage's value.

    As in :mod:`capplan.placement.cpsat.objective`: the guaranteed stage counts replicas (scale 1); a
    priority stage counts ``units * scale + 1`` per replica; running replicas add to the constant.
    """
    p = ix.p
    ws = [w for w in p.workloads if (w.sla == "guaranteed" if prio is None else w.priority == prio)]
    scale = 1 if prio is None else sum(w.replicas for w in ws) + 1
    terms: dict[int, float] = {}
    const = 0.0
    for w in ws:
        coef = 1 if prio is None else p.replica_value(w) * scale + 1
        for i in ix.cands[w.name]:
            terms[c[(w.name, i)]] = float(coef)
        for _ in ix.running_of.get(w.name, []):
            const += coef
    return terms, const, float(scale)
