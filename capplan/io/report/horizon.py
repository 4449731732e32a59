"""A schedule's cost and work over its whole horizon (not the t = 0 snapshot).

Cost is GPU-hours x price: each scheduled replica holds its GPU share (whole GPUs, a MIG
profile's compute fraction, a time-sliced share) on its node's GPU model from ``start_s`` to
``end_s``; the capacity's cost is every GPU for the whole horizon. Per priority, the work done is
the replicas' value (the schedule's objective unit: GPU-hours) beside the schedule's bound.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from capplan.io.report.prices import Prices
from capplan.io.report.schedule import Timeline
from capplan.model.plan import Assignment
from capplan.model.problem import Problem
from capplan.model.units import UNITS_PER_GPU


def held_share(p: Problem, a: Assignment) -> float:
    """GPUs one assignment holds on its node (compute share for MIG, the share for time-slicing)."""
    if a.mig is not None:
        model = p.gpu_model(p.cluster.nodes[p.cluster.node_index[a.node]])
        assert model is not None
        return model.profile(a.mig.profile).compute_slices / model.compute_slices
    if a.fraction is not None:
        return a.fraction
    return float(len(a.gpus)) if a.gpus else 0.0


def horizon_cost(p: Problem, tl: Timeline, prices: Prices, tenants: list[str]) -> dict[str, Any]:
    """Cost of the horizon: allocated (GPU-hours held x price), capacity, unallocated; per tenant."""
    hours = tl.horizon_s / 3600
    nodes = p.cluster.nodes
    capacity = sum(n.gpus * (prices.of(n.gpu_model) or 0.0) for n in nodes if n.gpus and n.gpu_model) * hours
    per_tenant: dict[str, list[float]] = {t: [0.0, 0.0] for t in tenants}  # GPU-hours, cost
    allocated = gpu_hours = 0.0
    for x in tl.timed:
        a = x.assignment
        node = nodes[p.cluster.node_index[a.node]]
        held = held_share(p, a) * (min(x.end_s, tl.horizon_s) - x.start_s) / 3600
        price = prices.of(node.gpu_model) if node.gpu_model else None
        cost = held * (price or 0.0)
        gpu_hours += held
        allocated += cost
        t = per_tenant[p.workload(a.workload).tenant]
        t[0] += held
        t[1] += cost
    return {"hours": round(hours, 4), "gpu_hours": round(gpu_hours, 3), "allocated": round(allocated, 2),
            "capacity": round(capacity, 2), "unallocated": round(max(0.0, capacity - allocated), 2),
            "tenants": [{"tenant": t, "gpu_hours": round(v[0], 3), "cost": round(v[1], 2),
                         "share": round(v[1] / allocated, 4) if allocated else 0.0} for t, v in per_tenant.items()]}


def work_per_priority(p: Problem, tl: Timeline) -> dict[int, dict[str, float | None]]:
    """Per priority: the work done over the horizon (value-weighted GPU-hours) and the schedule's bound."""
    done: dict[int, float] = defaultdict(float)
    for x in tl.timed:
        w = p.workload(x.assignment.workload)
        done[w.priority] += p.replica_value(w) / UNITS_PER_GPU * (min(x.end_s, tl.horizon_s) - x.start_s) / 3600
    bound = dict(zip(tl.priorities, tl.bound, strict=True))
    return {q: {"gpu_hours": round(done.get(q, 0.0), 3),
                "bound_gpu_hours": round(bound[q], 3) if q in bound else None} for q in p.priorities}
