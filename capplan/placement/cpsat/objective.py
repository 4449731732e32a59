"""The objective as a sequence of lexicographic stages.

capplan's objective is a strict order, so it is solved *lexicographically*: one CP-SAT solve
per stage, each fixing the optimum (or the best value found) of the previous ones:

1. ``guaranteed``: replicas of guaranteed workloads placed (the SLA, as high as it can be);
2. one stage per priority, highest first: placed value, ties broken by replicas placed. A
   replica's value is fixed by its workload (:meth:`capplan.model.problem.Problem.replica_value`),
   never by where it lands. Within a stage the two are combined exactly:
   ``units * (R + 1) + replicas`` where ``R`` is the number of replicas of that priority, so one
   more demand unit always outweighs any number of replicas;
3. ``moves``: fewest evictions plus migration cost;
4. ``held``: least capacity held: GPU units held (a MIG replica holds its profile's compute
   fraction on the GPU it got), then CPU-only replicas on GPU nodes;
5. ``shape``: fewest preferred-topology domains spanned, then least fragmentation (nodes and
   GPUs touched), combined with a weight larger than the whole fragmentation range.

Weights across priorities would overflow 64-bit integers on large clusters (7000 units per GPU
to the power of the number of priorities), which is why the stages are separate solves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from capplan.placement.cpsat.constraints import busy_gpus, placed_count, placed_new
from capplan.placement.cpsat.model import PlacementModel


@dataclass
class Stage:
    """One lexicographic level: an integer expression to maximise or minimise."""

    name: str
    expr: Any
    maximize: bool
    priority: int | None = None
    per_unit: int = 1  # expression value per demand unit (priority stages: R + 1)
    constant: int = 0  # contribution of pinned running replicas (not in ``expr``)
    ceiling: int | None = None  # a-priori maximum of ``expr`` (every replica placed at its best)
    units: Any = None  # a priority stage: its demand units divided by ``step`` (searched first; see solve.py)
    step: int = 1  # gcd of the replica values of the priority (``expr = units * step * per_unit + replicas``)


def _priority_stage(pm: PlacementModel, q: int) -> Stage:
    ws = [w for w in pm.p.workloads if w.priority == q]
    scale = sum(w.replicas for w in ws) + 1
    terms: list[Any] = []
    units: list[tuple[int, Any]] = []  # (value, count) of new and optional kept replicas
    const = 0
    value = pm.p.replica_value
    for (wn, _), v in pm.c.items():
        w = pm.p.workload(wn)
        if w.priority == q:
            terms.append((value(w) * scale + 1) * v)
            units.append((value(w), v))
    for w in ws:
        for r in pm.ix.running_of.get(w.name, []):
            coef = value(w) * scale + 1
            k = pm.run_keep(r)
            if isinstance(k, int):
                const += coef * k
            else:
                terms.append(coef * k)
                units.append((value(w), k))
    step = 0
    for val, _ in units:
        step = math.gcd(step, val)
    units_expr = sum(((val // step) * v for val, v in units if val), 0) if step else None
    best = 0
    for w in ws:
        if any(wn == w.name for (wn, _) in pm.c) or pm.ix.running_of.get(w.name):
            best += w.replicas * (value(w) * scale + 1)
    return Stage(f"priority {q}", sum(terms, 0), True, q, scale, const, ceiling=best - const,
                 units=units_expr, step=max(step, 1))


def build_stages(pm: PlacementModel) -> list[Stage]:
    """The stages for ``pm`` in lexicographic order (empty ones left out)."""
    out: list[Stage] = []
    guaranteed = [w for w in pm.p.workloads if w.sla == "guaranteed"]
    if guaranteed:
        total = sum(w.replicas for w in guaranteed)
        out.append(Stage("guaranteed", sum((placed_count(pm, w) for w in guaranteed), 0), True, ceiling=total))
    out.extend(_priority_stage(pm, q) for q in pm.p.priorities)
    if pm.keep:
        moves = sum((v for v in pm.ev.values()), 0) + sum(
            (pm.p.workload(k[0]).migration_cost * v for k, v in pm.mv.items()), 0
        )
        out.append(Stage("moves", moves, False))
    out.append(Stage("held", held_expr(pm), False))
    out.append(Stage("shape", _shape(pm), False))
    return out


def held_expr(pm: PlacementModel) -> Any:
    """GPU units held by every replica (new and kept), then CPU-only replicas on GPU nodes.

    Combined as ``held * (C + 1) + cpu_on_gpu`` with ``C`` the number of CPU-only replicas, so
    one held unit less always outweighs any placement of the CPU-only pods.
    """
    nodes = pm.p.cluster.nodes
    cpu_reps = sum(w.replicas for w in pm.p.workloads if not w.has_gpu_demand)
    held: list[Any] = []
    cpu_on_gpu: list[Any] = []
    for (wn, n), v in pm.c.items():
        w = pm.p.workload(wn)
        if w.has_gpu_demand:
            held.append(pm.demand(w, n).units * v)
        elif nodes[n].gpus:
            cpu_on_gpu.append(v)
    for r in pm.ix.runs:
        k = pm.run_keep(r)
        if r.demand.units:
            held.append(r.demand.units * k)
        elif nodes[r.node].gpus:
            cpu_on_gpu.append(k)
    return sum(held, 0) * (cpu_reps + 1) + sum(cpu_on_gpu, 0)


def _shape(pm: PlacementModel) -> Any:
    """Preferred-topology spans (dominant), then GPUs newly carved into MIG instances, then fragmentation.

    A GPU carved anew is one of a class without a preset layout holding instances; preset instances
    cost nothing here, so the plan uses them before it partitions another GPU (docs/placement-model.md).
    """
    cl = pm.p.cluster
    gmax = max((n.gpus for n in cl.nodes), default=0)
    touched = {}
    for (wn, i), v in pm.c.items():
        if i not in touched:
            touched[i] = pm.m.new_bool_var(f"touched[{cl.nodes[i].name}]")
        pm.m.add(v <= pm.ub[(wn, i)] * touched[i])
    frag = sum(touched.values(), 0) * (gmax + 1) + sum((busy_gpus(pm, i) for i in pm.xw), 0)
    frag_range = len(cl.nodes) * (gmax + 1) + cl.gpus_total + 1
    spans: list[Any] = []
    for w in pm.p.workloads:
        lvl = w.topology.preferred
        if not lvl or w.replicas < 2:
            continue
        doms: dict[str, Any] = {}
        for (wn, i), v in pm.c.items():
            if wn != w.name:
                continue
            d = cl.domain_of(cl.nodes[i], lvl)
            if d not in doms:
                doms[d] = pm.m.new_bool_var(f"span[{w.name},{d}]")
            pm.m.add(v <= pm.ub[(wn, i)] * doms[d])
        for r in pm.ix.running_of.get(w.name, []):
            d = cl.domain_of(cl.nodes[r.node], lvl)
            if d not in doms:
                doms[d] = pm.m.new_bool_var(f"span[{w.name},{d}]")
            pm.m.add(doms[d] >= pm.run_keep(r))
        spans.extend(doms.values())
    # GPUs given a MIG layout they do not have (no preset layout): preset instances are used first
    carved = [k.var for ks in pm.mig.values() for k in ks if k.src is None and sum(k.layout) > 0]
    carve_range = (cl.gpus_total + 1) * frag_range
    return sum(spans, 0) * carve_range + sum(carved, 0) * frag_range + frag


def fix_at_ceiling(pm: PlacementModel, st: Stage) -> None:
    """A priority stage at its ceiling places every replica: say so explicitly.

    Implied by ``expr >= ceiling``, but as per-workload equalities (on the shared count
    variables) they fix the instance counts by propagation, which lets the cluster-wide cuts
    round (see :func:`capplan.placement.cpsat.constraints.add_kind_cuts`) and prunes the search.
    """
    for w in pm.p.workloads:
        if w.priority != st.priority:
            continue
        runs = pm.ix.running_of.get(w.name, [])
        if not runs and not any(wn == w.name for wn, _ in pm.c):
            continue
        kept = sum((pm.run_keep(r) for r in runs), 0)
        if any(wn == w.name for wn, _ in pm.c):
            pm.m.add(placed_new(pm, w) + kept == w.replicas)
