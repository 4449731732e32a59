"""Objective, bound, metrics and the assembly of a :class:`~capplan.model.plan.Plan` from assignments.

Shared by every planner so that all of them report the same quantities the same way.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from capplan.model.plan import (
    Assignment,
    Eviction,
    Migration,
    Plan,
    Status,
    Unplaced,
    lexicographic_gap,
    priority_gaps,
)
from capplan.model.problem import Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU, units_to_gpus
from capplan.placement.core.domaincap import full_value, joint_cap, replica_caps

#: How the reason of a replica a planner did not reach before its time limit starts (greedy, heuristic).
NOT_TRIED_PREFIX = "not tried: the time limit ran out"


def placed_units(p: Problem, assignments: Iterable[Assignment]) -> dict[int, int]:
    """Placed value per priority, in demand units (:meth:`~capplan.model.problem.Problem.replica_value`).

    A replica's value depends on its workload only, never on the node, GPU model or slice it got.
    """
    out: dict[int, int] = defaultdict(int)
    for name, k in Counter(a.workload for a in assignments).items():  # replicas per workload first
        w = p.workload(name)
        out[w.priority] += k * p.replica_value(w)
    return out


def _per_node(assignments: Iterable[Assignment]) -> Counter[tuple[str, str]]:
    """Replicas per (workload, node): at fleet scale many replicas share both."""
    return Counter((a.workload, a.node) for a in assignments)


def held_units(p: Problem, assignments: Iterable[Assignment]) -> int:
    """GPU capacity the assignments hold, in demand units (the tie-break after the priorities).

    A replica holds its GPUs, its share, or its MIG profile's compute fraction on the GPU it got
    (``2g.12gb`` on an A30 holds half a GPU even when the workload is worth 1/7).
    """
    return _held(p, _per_node(assignments))


def _held(p: Problem, pairs: Counter[tuple[str, str]]) -> int:
    total = 0
    nodes = p.cluster.nodes
    for (name, at), k in pairs.items():
        d = p.demand_on(p.workload(name), nodes[p.cluster.node_index[at]])
        total += k * d.units if d is not None else 0
    return total


def cpu_pods_on_gpu_nodes(p: Problem, assignments: Iterable[Assignment]) -> int:
    """CPU-only replicas placed on GPU nodes (they take CPU and memory that GPU work needs)."""
    return _cpu_pods(p, _per_node(assignments))


def _cpu_pods(p: Problem, pairs: Counter[tuple[str, str]]) -> int:
    nodes = p.cluster.nodes
    return sum(k for (name, at), k in pairs.items() if not p.workload(name).has_gpu_demand
               and nodes[p.cluster.node_index[at]].gpus > 0)


def capacity_key(p: Problem, assignments: Iterable[Assignment]) -> tuple[int, int]:
    """The order after the priorities, smaller is better: GPU units held, CPU-only replicas on GPU nodes."""
    ass = list(assignments)
    return (held_units(p, ass), cpu_pods_on_gpu_nodes(p, ass))


def eligible_units(p: Problem, w: Workload, types: list[tuple[str | None, int]] | None = None) -> int:
    """Most value ``w`` can contribute: replicas times one replica's value (0 if no node type can host it)."""
    for model, gpus in types if types is not None else node_types(p):
        d = p.model_demand(w, model)
        if d is not None and (d.kind != "whole" or d.gpus <= gpus):
            return w.replicas * p.replica_value(w)
    return 0


def node_types(p: Problem) -> list[tuple[str | None, int]]:
    """Distinct (GPU model, most GPUs on one node of that model) pairs of the cluster."""
    most: dict[str | None, int] = {}
    for n in p.cluster.nodes:
        m = n.gpu_model if n.gpus else None
        most[m] = max(most.get(m, 0), n.gpus)
    return list(most.items())


def trivial_bound(p: Problem) -> dict[int, int]:
    """Per-priority upper bound: hostable demand (a gang no domain holds: none,
    :func:`~capplan.placement.core.domaincap.replica_caps`), capped by the GPUs the power budgets let be busy
    and by what GPUs preset to a MIG layout can hold of the priority
    (:func:`~capplan.placement.core.domaincap.joint_cap`)."""
    out: dict[int, int] = defaultdict(int)
    types = node_types(p)
    caps = replica_caps(p)
    for w in p.workloads:
        units = eligible_units(p, w, types)
        out[w.priority] += units if w.name not in caps else units // w.replicas * caps[w.name]
    return {q: min(v, joint_cap(p, (q,))) for q, v in out.items()}


def chained_bound(p: Problem, got: dict[int, int], bound: dict[int, int], guaranteed_met: bool) -> dict[int, int]:
    """``bound`` (per priority, demand units) tightened by what a plan placing ``got`` proves.

    A plan at least as good in the plan order places as much at every priority whose higher priorities are all
    at their bounds (no plan places more than a bound, so it must tie there), and at least as much at the first
    priority below its bound; below that nothing is known. So each priority gets at most what it and those
    floored priorities above it can place together (:func:`~capplan.placement.core.domaincap.joint_cap`: the busy
    GPUs the fleet can hold, preset MIG layouts, and the GPUs isolation wastes when the guaranteed work and the
    floored priorities placed in full must all be placed) less what they place (a priority that this cap brings down to
    ``got`` is at its bound and floors the next).
    Nothing changes unless the plan places every guaranteed replica (guaranteed work comes first in the order).
    """
    if not guaranteed_met:
        return bound
    out = dict(bound)
    above: list[int] = []  # the floored priorities
    full = full_value(p)
    floors = True  # whether q's placed units still floor the lexicographically better plans
    for q in p.priorities:
        forced = [x for x in above if got.get(x, 0) >= full.get(x, 0)]  # every better plan places all of these
        free = joint_cap(p, (*above, q), forced, guaranteed=True) - sum(got.get(x, 0) for x in above)
        out[q] = min(out.get(q, 0), max(got.get(q, 0), free))
        if floors:
            above.append(q)
            floors = got.get(q, 0) >= out[q]
    return out




def metrics(p: Problem, assignments: list[Assignment], placed: dict[int, int] | None = None) -> dict[str, object]:
    """Utilisation metrics of a set of assignments (``placed``: their :func:`placed_units`, when known)."""
    total_gpus = p.cluster.gpus_total
    units = sum((placed if placed is not None else placed_units(p, assignments)).values())
    pairs = _per_node(assignments)
    held = _held(p, pairs)
    busy = {(a.node, g) for a in assignments for g in a.gpus}
    cpu_total = sum(n.cpu_milli for n in p.cluster.nodes)
    per_work: Counter[str] = Counter()
    for (name, _), k in pairs.items():
        per_work[name] += k
    cpu_used = sum(k * p.workload(name).cpu_milli for name, k in per_work.items())
    per_prio: dict[int, int] = defaultdict(int)
    for name, k in per_work.items():
        per_prio[p.workload(name).priority] += k
    return {
        "gpus_total": total_gpus,
        "gpus_allocated": units_to_gpus(held),
        "allocation_pct": round(100 * held / (total_gpus * UNITS_PER_GPU), 4) if total_gpus else 0.0,
        "value_placed": units_to_gpus(units),
        "gpus_touched": len(busy),
        "gpus_idle": total_gpus - len(busy),
        "replicas_total": sum(w.replicas for w in p.workloads),
        "replicas_placed": len(assignments),
        "replicas_placed_per_priority": [per_prio[q] for q in p.priorities],
        "cpu_allocation_pct": round(100 * cpu_used / cpu_total, 4) if cpu_total else 0.0,
        "cpu_replicas_on_gpu_nodes": _cpu_pods(p, pairs),
    }


def make_plan(p: Problem, strategy: str, assignments: list[Assignment], unplaced: list[Unplaced], *,
              bound: dict[int, int] | None = None, seconds: float = 0.0, seed: int = 0,
              evictions: Iterable[Eviction] = (), migrations: Iterable[Migration] = (),
              proven_optimal: bool = False, extra_metrics: dict[str, object] | None = None) -> Plan:
    """Assemble a plan: objective per priority, bound, gap, status and metrics."""
    got = placed_units(p, assignments)
    bnd = bound if bound is not None else trivial_bound(p)
    obj = [got[q] for q in p.priorities]
    placed = {a.key for a in assignments}
    guaranteed_missing = any(w.sla == "guaranteed" and any((w.name, r) not in placed for r in range(w.replicas))
                             for w in p.workloads)
    bnd = chained_bound(p, got, bnd, not guaranteed_missing)
    cap = p.cluster.gpus_total * UNITS_PER_GPU  # no priority can place more than every GPU: always valid
    bvec = [max(min(bnd.get(q, 0), cap), got[q]) for q in p.priorities]
    # Plans compare by guaranteed replicas, then per priority GPU demand and then replicas placed. Demand at
    # the bound proves the order only when no replica is left out: else a plan with as much demand and more
    # replicas (a CPU-only pod, two 1-GPU replicas for one 2-GPU replica) may exist.
    everything = len(placed) == sum(w.replicas for w in p.workloads)
    status: Status
    if guaranteed_missing:
        status = "infeasible"
    elif proven_optimal or (obj == bvec and everything):
        status = "optimal"
    else:
        status = "feasible"
    m = metrics(p, assignments, got)
    m["cut_by_time_limit"] = any(u.reason.startswith(NOT_TRIED_PREFIX) for u in unplaced)
    if extra_metrics:
        m.update(extra_metrics)
    if status == "optimal":
        m["cut_by_time_limit"] = False  # nothing left to find: the limit cut nothing
    return Plan(status=status, strategy=strategy, objective=tuple(units_to_gpus(x) for x in obj),
                bound=tuple(units_to_gpus(x) for x in bvec), priorities=p.priorities,
                gap=lexicographic_gap(obj, bvec), gaps=priority_gaps(obj, bvec), solve_seconds=round(seconds, 4),
                seed=seed,
                assignments=tuple(sorted(assignments, key=lambda a: (p.workload_index[a.workload], a.replica))),
                unplaced=tuple(sorted(unplaced, key=lambda u: p.workload_index[u.workload])),
                evictions=tuple(evictions), migrations=tuple(migrations), metrics=m)


def plan_gaps(plan: Plan) -> tuple[float, ...]:
    """The plan's ``gaps``; for a plan written before they existed, recomputed from objective and bound."""
    if plan.gaps:
        return plan.gaps
    if not plan.bound or len(plan.bound) != len(plan.objective):
        return ()
    return priority_gaps(plan.objective, plan.bound)


def gap_text(plan: Plan) -> str:
    """The headline's gap: ``gap 4.89%``, the worst priority when it is worse than the first gap says
    (``worst: priority 10 at 61.00%``), and whether the time limit cut the search."""
    out = f"gap {plan.gap:.2%}"
    gaps = plan_gaps(plan)
    if gaps and len(gaps) == len(plan.priorities):
        k = max(range(len(gaps)), key=lambda j: (gaps[j], -j))
        if gaps[k] > plan.gap:
            out += f" (worst: priority {plan.priorities[k]} at {gaps[k]:.2%})"
    if plan.metrics.get("cut_by_time_limit"):
        out += ", cut by the time limit"
    return out


def summary_text(p: Problem, plan: Plan, more_hint: str = "the plan's `unplaced`") -> str:
    """A readable multi-line summary (placed / unplaced per priority, utilisation).

    Unplaced work is grouped by cause, the ten largest causes shown, then a count of the rest
    and ``more_hint``, where to read them all (the plan file).
    """
    lines = [f"capplan {plan.strategy}: status {plan.status}, {plan.solve_seconds:.2f}s, {gap_text(plan)}"]
    placed = {a.key for a in plan.assignments}
    gaps = plan_gaps(plan)
    for k, (q, obj, bnd) in enumerate(zip(plan.priorities, plan.objective, plan.bound, strict=True)):
        ws = [w for w in p.workloads if w.priority == q]
        n_total = sum(w.replicas for w in ws)
        n_placed = sum(1 for w in ws for r in range(w.replicas) if (w.name, r) in placed)
        gap = f", gap {gaps[k]:.2%}" if len(gaps) == len(plan.priorities) else ""
        lines.append(f"  priority {q:>6}: {n_placed}/{n_total} replicas placed, "
                     f"value {obj:g} GPUs (bound {bnd:g}{gap})")
    m = plan.metrics
    lines.append(f"  GPUs: {m.get('gpus_allocated', 0):g} of {m.get('gpus_total', 0)} allocated "
                 f"({m.get('allocation_pct', 0):.2f}%), CPU {m.get('cpu_allocation_pct', 0):.1f}% allocated")
    if plan.metrics.get("warning"):
        lines.append(f"  warning: {plan.metrics['warning']}")
    lines.extend(change_lines(p, plan))
    lines.extend(goodput_lines(plan))
    if plan.unplaced:
        causes = group_unplaced((u.workload, len(u.replicas), u.reason) for u in plan.unplaced)
        n = sum(c.replicas for c in causes)
        lines.append(f"  unplaced: {n} replica{'s' if n != 1 else ''} of {len(plan.unplaced)} workload"
                     f"{'s' if len(plan.unplaced) != 1 else ''}, by cause:")
        lines.extend(f"    {line}" for line in causes_text(causes, more_hint=more_hint))
    lines.extend(_moves_lines(plan))
    return "\n".join(lines)


#: Evictions and migrations listed one by one in the summary; the rest are counted (all are in the plan).
SHOWN_MOVES = 10


def _moves_lines(plan: Plan) -> list[str]:
    """The evictions and migrations: a count (replicas, nodes) when there are many, the first few one by one."""
    lines: list[str] = []
    for kind, items in (("evict", plan.evictions), ("migrate", plan.migrations)):
        if len(items) > SHOWN_MOVES:
            nodes = {e.node for e in plan.evictions} if kind == "evict" else {m.from_node for m in plan.migrations}
            field = "evictions" if kind == "evict" else "migrations"
            lines.append(f"  {kind}: {len(items)} running replicas on {len(nodes)} nodes; the first {SHOWN_MOVES} "
                         f"(all of them in the plan's `{field}`):")
        for x in items[:SHOWN_MOVES]:
            if isinstance(x, Eviction):
                lines.append(f"  evict {x.workload}[{x.replica}] on {x.node}: {x.reason}")
            else:
                lines.append(f"  migrate {x.workload}[{x.replica}] {x.from_node} -> {x.to_node}: {x.reason}")
    return lines


def change_lines(p: Problem, plan: Plan) -> list[str]:
    """``reconfigured: N GPUs ...``: the GPUs whose preset mode or MIG layout the plan changes, and the nodes to drain.

    Said whenever a GPU changes, and with ``reconfigure: allowed`` also when none does.
    """
    n = int(plan.metrics.get("gpus_reconfigured", 0) or 0)
    if not n and p.reconfigure != "allowed":
        return []
    if not n:
        return ["  reconfigured: 0 GPUs (every preset mode and MIG layout is kept)"]
    drain = list(plan.metrics.get("nodes_to_drain", []))
    shown = ", ".join(drain[:8]) + (f" and {len(drain) - 8} more" if len(drain) > 8 else "")
    return [f"  reconfigured: {n} GPU{'s change' if n != 1 else ' changes'} mode or MIG layout; drain "
            f"{len(drain)} node{'s' if len(drain) != 1 else ''} before applying: {shown}"]


def goodput_lines(plan: Plan) -> list[str]:
    """One line per goodput row: u, u per provisioned GPU, spare nodes, interval, rate, GPU-hours lost."""
    out = []
    wanted = plan.metrics.get("spares_wanted") or {}
    for r in plan.goodput:
        spares = f" + {r.spares} spare{'s' if r.spares != 1 else ''} [{', '.join(r.spare_nodes)}]" if r.spares else ""
        short = f" (asked for {wanted[r.workload]}; no more fit)" if r.workload in wanted else ""
        out.append(f"  goodput {r.workload}: {r.goodput:.2%} ({r.goodput_per_provisioned_gpu:.2%} per provisioned "
                   f"GPU), {r.nodes} nodes{spares}{short}, checkpoint every {r.checkpoint_interval_s / 3600:.2f} h, "
                   f"{r.failure_rate_per_hour:.4g} interruptions/h, {r.lost_gpu_hours_per_day:.1f} GPU-h lost/day")
    return out


def describe_demand(p: Problem, w: Workload) -> str:
    """Short text of one replica's demand, e.g. ``8 GPUs`` or ``3g.40gb MIG slice``."""
    if w.gpus is not None:
        what = f"{w.gpus} GPU{'s' if w.gpus > 1 else ''}"
    elif w.mig is not None:
        what = f"a {w.mig} MIG slice" if w.mig != "auto" else f"a MIG slice with {w.gpu_memory_gib:g} GiB"
    elif w.gpu_fraction is not None:
        what = f"a {w.gpu_fraction:g} GPU share"
    else:
        what = f"{w.cpu:g} cores"
    models = f" of {'/'.join(w.gpu_models)}" if w.gpu_models else ""
    return what + models + ("" if w.gpu_fraction is None else f" ({round(w.gpu_fraction * MILLI)} milli)")


@dataclass(frozen=True)
class Cause:
    """Unplaced replicas that share one cause (a family and its diagnosis, numbers aside)."""

    #: The constraint family the reason starts with (``host CPU``, ``GPU room``, ...).
    family: str
    #: The diagnosis of the first workload of the group, without its demand and holders.
    reason: str
    #: Unplaced replicas and workloads in the group.
    replicas: int
    workloads: int
    #: The group's workload names, in plan order.
    names: tuple[str, ...]


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _diagnosis(reason: str) -> tuple[str, str]:
    """``(family, diagnosis)`` of a reason: the text after the family label without the ``needs ...;``
    demand and the ``; held by ...`` holders, which differ from one workload to the next."""
    family, _, rest = reason.partition(": ")
    if not rest:
        return "", reason
    if rest.startswith("needs ") and "; " in rest:
        rest = rest.split("; ", 1)[1]
    return family, rest.split("; held by ", 1)[0]


def group_unplaced(rows: Iterable[tuple[str, int, str]]) -> list[Cause]:
    """Group ``(workload, replicas, reason)`` rows by cause, the largest group (by replicas) first.

    Two reasons share a cause when they name the same family and the same diagnosis once the
    numbers are set aside (582 or 547 nodes short of CPU is one cause).
    """
    groups: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for name, n, reason in rows:
        family, diagnosis = _diagnosis(reason)
        groups.setdefault((family, _NUMBER.sub("#", diagnosis)), []).append((name, n, diagnosis))
    out = [Cause(family=fam, reason=members[0][2], replicas=sum(m[1] for m in members), workloads=len(members),
                 names=tuple(m[0] for m in members)) for (fam, _), members in groups.items()]
    return sorted(out, key=lambda c: (-c.replicas, -c.workloads, c.family, c.reason))


def causes_text(causes: list[Cause], top: int = 10, more_hint: str = "the plan's `unplaced`") -> list[str]:
    """One line per cause (the ``top`` largest), then ``... N more, see <more_hint>``."""
    lines = []
    for c in causes[:top]:
        shown = ", ".join(c.names[:3]) + (f" and {c.workloads - 3} more" if c.workloads > 3 else "")
        label = f"{c.family}: {c.reason}" if c.family else c.reason
        lines.append(f"{c.replicas} replica{'s' if c.replicas != 1 else ''} ({c.workloads} workload"
                     f"{'s' if c.workloads != 1 else ''}): {label}; e.g. {shown}")
    rest = causes[top:]
    if rest:
        lines.append(f"... {len(rest)} more cause{'s' if len(rest) != 1 else ''} "
                     f"({sum(c.replicas for c in rest)} replicas), see {more_hint}")
    return lines
