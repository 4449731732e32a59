"""The facts a plan report shows, as plain JSON-ready data (drawn by the HTML page and the text view).

Everything the page needs is computed here, once, in Python: per-GPU occupancy with idle and
stranded parts, per-priority placed vs bound, utilisation by GPU model, power per domain, the
unplaced workloads with the nodes that came closest, and the cost of allocated, idle and stranded
capacity (per hour, per month and per tenant).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from capplan.io.report.closest import closest_nodes
from capplan.io.report.horizon import horizon_cost, work_per_priority
from capplan.io.report.occupancy import STRANDED_TEXT, GpuView, gpu_views
from capplan.io.report.prices import HOURS_PER_MONTH, Prices, catalog_prices, unpriced_gpus
from capplan.io.report.schedule import Timeline
from capplan.model.errors import InputError
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Node, Problem
from capplan.model.units import UNITS_PER_GPU
from capplan.model.validate import check_assignments, check_plan
from capplan.placement.core.reconfig import reconfigured
from capplan.placement.core.state import ClusterState
from capplan.placement.core.summary import describe_demand, eligible_units, gap_text, node_types, placed_units

_MODE = {"free": 0, "whole": 1, "mig": 2, "shared": 3}


def check_matches(p: Problem, plan: Plan, timeline: Timeline | None) -> None:
    """Raise :class:`InputError` when the plan (or schedule) does not belong to the scenario.

    A plan goes through the independent validator. A schedule's assignments must name known
    workloads, replicas, nodes and GPUs, and what runs at t = 0 must obey every resource rule.
    """
    if timeline is None:
        violations = check_plan(p, plan)
    else:
        violations = _check_timed(p, timeline)
        violations += check_assignments(p, timeline.active_at(0))
    if violations:
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise InputError("PLAN", f"does not fit the scenario: {violations[0]}{more}; "
                                 "check both files with `capplan validate`")


def _check_timed(p: Problem, tl: Timeline) -> list[str]:
    out = []
    nodes = {n.name: n for n in p.cluster.nodes}
    for x in tl.timed:
        a = x.assignment
        if a.workload not in p.workload_index or a.replica >= p.workload(a.workload).replicas:
            out.append(f"assignment for unknown replica {a.workload}[{a.replica}]")
        elif a.node not in nodes:
            out.append(f"{a.workload}[{a.replica}]: unknown node {a.node!r}")
        elif any(g >= nodes[a.node].gpus for g in a.gpus) or p.demand_on(p.workload(a.workload),
                                                                          nodes[a.node]) is None:
            out.append(f"{a.workload}[{a.replica}] cannot run on {a.node} as assigned")
    return out


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def build_report(p: Problem, plan: Plan, prices: Prices | None = None, timeline: Timeline | None = None,
                 title: str | None = None, compare: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report's data for plan ``plan`` of problem ``p`` (assumed to match; see :func:`check_matches`).

    Parameters
    ----------
    p
        The scenario's problem.
    plan
        The plan; for a schedule, the plan of what runs at t = 0 (see :func:`read_result`).
    prices
        Price per GPU-hour by model; the catalog's prices when None.
    timeline
        The schedule's timeline, when the report is about a schedule.
    title
        Page title; the cluster's name by default.
    compare
        Two schedules side by side (:func:`capplan.io.report.compare.compare_schedules`), drawn beside the timeline.

    Returns
    -------
    dict
        JSON-ready data (see ``docs/report.md`` for what each part means).
    """
    prices = prices or catalog_prices(p.catalog)
    assignments = list(plan.assignments)
    state = ClusterState.with_assignments(p, assignments)
    views = gpu_views(p, assignments, state)
    changed = set(reconfigured(p, assignments))  # GPUs whose preset mode or MIG layout the plan changes
    cl = p.cluster
    tenants = sorted({w.tenant for w in p.workloads})
    t_index = {t: k for k, t in enumerate(tenants)}
    models = sorted({n.gpu_model for n in cl.nodes if n.gpus and n.gpu_model}, key=str)
    m_index = {m: k for k, m in enumerate(models)}
    # In a schedule every timed replica is drawn (Gantt); the cluster map shows t = 0.
    drawn: list[Assignment] = assignments if timeline is None else [x.assignment for x in timeline.timed]
    key_to_row = {a.key: k for k, a in enumerate(drawn)}
    lanes = _time_lanes(p, timeline) if timeline is not None else {}
    placed_count: dict[str, int] = defaultdict(int)
    for a in drawn:
        placed_count[a.workload] += 1
    data: dict[str, Any] = {
        "title": title or cl.name,
        "cluster": cl.name,
        "levels": list(cl.levels),
        "plan": {"status": plan.status, "strategy": plan.strategy, "gap": plan.gap, "gap_text": gap_text(plan),
                 "solve_seconds": plan.solve_seconds, "kind": "schedule" if timeline else "plan"},
        "tenants": tenants,
        "models": [{"name": m, "price": prices.of(m), "tdp_w": p.catalog.get(m).tdp_w,
                    "slices": p.catalog.get(m).memory_slices or 8} for m in models],
        "workloads": [{"name": w.name, "tenant": t_index[w.tenant], "priority": w.priority, "kind": w.kind,
                       "sla": w.sla, "demand": describe_demand(p, w), "replicas": w.replicas,
                       "placed": placed_count[w.name]} for w in p.workloads],
        "nodes": [{"name": n.name, "model": m_index.get(n.gpu_model or "", -1) if n.gpus else -1,
                   "gpus": n.gpus, "path": list(n.path), "cpu": n.cpu_milli / 1000,
                   "memory_gib": round(n.memory_mib / 1024, 1)} for n in cl.nodes],
        "assignments": [_assignment_row(p, a, timeline, k, lanes) for k, a in enumerate(drawn)],
        "cells": [[_cell(v, key_to_row, assignments, _preset(n, v.gpu), (n.name, v.gpu) in changed) for v in row]
                  for n, row in zip(cl.nodes, views, strict=True)],
        "reconfigured": {"gpus": len(changed), "nodes": sorted({x for x, _ in changed})},
        "stranded_reasons": STRANDED_TEXT,
        "tree": _tree(p),
        "currency": prices.currency,
        "hours_per_month": HOURS_PER_MONTH,
    }
    running = {a.key: a.node for a in p.running}  # drawn rows of replicas that stay where they run
    data["running_rows"] = [k for k, a in enumerate(drawn) if running.get(a.key) == a.node]
    data["priorities"] = _priorities(p, plan, drawn, timeline)
    data["utilisation"] = _utilisation(p, views, models)
    data["power"] = _power(p, views)
    data["unplaced"] = _unplaced(p, plan, state)
    data["cost"] = _cost(p, views, prices, assignments, tenants)
    data["cost"]["unpriced_gpus"], _ = unpriced_gpus(p, prices)
    data["totals"] = _totals(views)
    data["goodput"] = [r.model_dump(mode="json") for r in plan.goodput]
    for r in plan.goodput:  # spare nodes are marked on the map and in the text view
        for name in r.spare_nodes:
            data["nodes"][cl.node_index[name]]["spare_for"] = r.workload
    if timeline is not None:
        data["schedule"] = {"horizon_s": timeline.horizon_s, "workloads": list(timeline.workloads)}
        data["cost"]["horizon"] = horizon_cost(p, timeline, prices, tenants)
        work = work_per_priority(p, timeline)
        for row in data["priorities"]:
            row.update(work[row["priority"]])
    if compare is not None:
        data["compare"] = compare
    return data


def _assignment_row(p: Problem, a: Assignment, tl: Timeline | None, k: int,
                    lanes: dict[int, tuple[float, float]]) -> list[Any]:
    """[workload, replica, node, gpus, profile, MIG start, fraction] (+ [start_s, end_s, y0, y1] in a schedule)."""
    row: list[Any] = [p.workload_index[a.workload], a.replica, p.cluster.node_index[a.node], list(a.gpus),
                      a.mig.profile if a.mig else "", a.mig.start if a.mig else -1, a.fraction or 0]
    if tl is not None:
        x = tl.timed[k]
        y0, y1 = lanes.get(k, (0.0, 1.0))
        row += [x.start_s, x.end_s, _r(y0), _r(y1)]
    return row


def _time_lanes(p: Problem, tl: Timeline) -> dict[int, tuple[float, float]]:
    """Where each timed replica sits inside its GPU's lane of the timeline: (y0, y1) in [0, 1].

    MIG instances sit at their memory slices; time-sliced shares are stacked first-fit over time.
    """
    out: dict[int, tuple[float, float]] = {}
    shares: dict[tuple[str, int], list[int]] = defaultdict(list)
    for k, x in enumerate(tl.timed):
        a = x.assignment
        if a.mig is not None:
            model = p.gpu_model(p.cluster.nodes[p.cluster.node_index[a.node]])
            if model is not None and model.memory_slices:
                size = model.profile(a.mig.profile).memory_slices
                out[k] = (a.mig.start / model.memory_slices, (a.mig.start + size) / model.memory_slices)
        elif a.fraction is not None and a.gpus:
            shares[(a.node, a.gpus[0])].append(k)
    for ks in shares.values():
        active: list[tuple[int, float, float]] = []  # (end_s, y0, y1)
        for k in sorted(ks, key=lambda k: (tl.timed[k].start_s, k)):
            x = tl.timed[k]
            active = [y for y in active if y[0] > x.start_s]
            f = x.assignment.fraction or 0.0
            y = 0.0
            for _, b0, b1 in sorted(active, key=lambda t: t[1]):
                if y + f <= b0 + 1e-9:
                    break
                y = max(y, b1)
            out[k] = (y, min(1.0, y + f))
            active.append((x.end_s, y, y + f))
    return out


def _cell(v: GpuView, key_to_row: dict[tuple[str, int], int], assignments: list[Assignment],
          preset: str, changed: bool = False) -> list[Any]:
    """One GPU: [mode, [[row, x0, x1, y0, y1]...], idle rects, stranded rects, reason, preset mode, reconfigured]."""
    used = [[key_to_row[assignments[k].key], *(_r(c) for c in rect)] for k, rect in v.used]
    return [_MODE[v.mode], used, [[_r(c) for c in r] for r in v.idle],
            [[_r(c) for c in r] for r in v.stranded], v.reason, preset, int(changed)]


def _preset(n: Node, g: int) -> str:
    m = n.mode_of(g)
    return m.mode if m is not None else ""


def _tree(p: Problem) -> list[dict[str, Any]]:
    """Domains nested by level, each with its nodes (indices) or child domains, in scenario order."""
    cl = p.cluster
    budgets = {(d.level, d.name): d.power_w for d in cl.domains}
    roots: list[dict[str, Any]] = []
    by_key: dict[tuple[str, ...], dict[str, Any]] = {}
    for i, n in enumerate(cl.nodes):
        parent: list[dict[str, Any]] = roots
        for depth, (lvl, dom) in enumerate(zip(cl.levels[:-1], n.path, strict=True)):
            key = tuple(n.path[: depth + 1])
            node = by_key.get(key)
            if node is None:
                node = {"name": dom, "level": lvl, "power_w": budgets.get((lvl, dom)), "children": [], "nodes": []}
                by_key[key] = node
                parent.append(node)
            parent = node["children"]
        if n.path:
            by_key[tuple(n.path)]["nodes"].append(i)
        else:
            roots.append({"name": "", "level": "", "power_w": None, "children": [], "nodes": [i]})
    return _merge_flat(roots)


def _merge_flat(roots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Clusters without levels above ``node``: one unnamed group holding every node."""
    flat = [r for r in roots if not r["name"]]
    if not flat:
        return roots
    return [{"name": "", "level": "", "power_w": None, "children": [],
             "nodes": [i for r in flat for i in r["nodes"]]}]


def _priorities(p: Problem, plan: Plan, drawn: list[Assignment], tl: Timeline | None) -> list[dict[str, Any]]:
    placed: dict[int, int] = defaultdict(int)
    for a in drawn:
        placed[p.workload(a.workload).priority] += 1
    units = placed_units(p, drawn)  # the plan's objective: a replica's value is its workload's, as the bound's
    types = node_types(p)
    out = []
    for k, q in enumerate(p.priorities):
        ws = [w for w in p.workloads if w.priority == q]
        demand = sum(eligible_units(p, w, types) for w in ws) / UNITS_PER_GPU
        row = {"priority": q, "replicas": sum(w.replicas for w in ws), "placed_replicas": placed[q],
               "demand_gpus": _r(demand), "placed_gpus": _r(units.get(q, 0) / UNITS_PER_GPU),
               "bound_gpus": _r(plan.bound[k]) if tl is None and k < len(plan.bound) else None,
               "guaranteed": any(w.sla == "guaranteed" for w in ws)}
        out.append(row)
    return out


def _utilisation(p: Problem, views: list[list[GpuView]], models: list[str]) -> list[dict[str, Any]]:
    agg: dict[str, list[float]] = {m: [0, 0.0, 0.0, 0.0] for m in models}
    for n, row in zip(p.cluster.nodes, views, strict=True):
        if not n.gpus or not n.gpu_model:
            continue
        a = agg[n.gpu_model]
        for v in row:
            a[0] += 1
            a[1] += v.alloc
            a[2] += v.idle_share
            a[3] += v.stranded_share
    return [{"model": m, "gpus": int(a[0]), "allocated": _r(a[1]), "idle": _r(a[2]), "stranded": _r(a[3])}
            for m, a in agg.items()]


def _power(p: Problem, views: list[list[GpuView]]) -> list[dict[str, Any]]:
    """GPU power draw (TDP of every GPU in use) per domain of the level above nodes, and any budgeted one."""
    cl = p.cluster
    if len(cl.levels) < 2:
        return []
    rack_level = cl.levels[-2]
    budgets = {(d.level, d.name): d.power_w for d in cl.domains}
    draw: dict[tuple[str, str], int] = defaultdict(int)
    order: list[tuple[str, str]] = []
    for n, row in zip(cl.nodes, views, strict=True):
        tdp = (p.catalog.get(n.gpu_model).tdp_w or 0) if n.gpus and n.gpu_model else 0
        busy = sum(1 for v in row if v.used)
        for lvl, dom in zip(cl.levels[:-1], n.path, strict=True):
            if lvl == rack_level or budgets.get((lvl, dom)) is not None:
                if (lvl, dom) not in draw:
                    order.append((lvl, dom))
                draw[(lvl, dom)] += busy * tdp
    return [{"level": lvl, "name": dom, "draw_w": draw[(lvl, dom)], "budget_w": budgets.get((lvl, dom))}
            for lvl, dom in order]


def _unplaced(p: Problem, plan: Plan, st: ClusterState) -> list[dict[str, Any]]:
    out = []
    for u in plan.unplaced:
        w = p.workload(u.workload)
        out.append({"workload": p.workload_index[u.workload], "replicas": list(u.replicas), "reason": u.reason,
                    "closest": [[i, text] for i, text in closest_nodes(st, w)]})
    return out


def _cost(p: Problem, views: list[list[GpuView]], prices: Prices, assignments: list[Assignment],
          tenants: list[str]) -> dict[str, Any]:
    """Cost per hour of allocated, idle and stranded GPU capacity, and showback per tenant."""
    alloc = idle = stranded = 0.0
    unpriced: set[str] = set()
    per_tenant: dict[str, list[float]] = {t: [0.0, 0.0] for t in tenants}  # GPU-equivalents, cost/h
    nodes = p.cluster.nodes
    for n, row in zip(nodes, views, strict=True):
        if not n.gpus or not n.gpu_model:
            continue
        price = prices.of(n.gpu_model)
        if price is None:
            unpriced.add(n.gpu_model)
            price = 0.0
        for v in row:
            alloc += v.alloc * price
            idle += v.idle_share * price
            stranded += v.stranded_share * price
            for k, rect in v.used:
                a = assignments[k]
                share = _share_of(p, a, rect)
                t = per_tenant[p.workload(a.workload).tenant]
                t[0] += share
                t[1] += share * price
    total = alloc + idle + stranded
    return {
        "per_hour": {"allocated": _r(alloc, 2), "idle": _r(idle, 2), "stranded": _r(stranded, 2),
                     "total": _r(total, 2)},
        "per_month": {k: _r(v * HOURS_PER_MONTH, 0) for k, v in
                      (("allocated", alloc), ("idle", idle), ("stranded", stranded), ("total", total))},
        "tenants": [{"tenant": t, "gpus": _r(v[0], 3), "per_hour": _r(v[1], 2),
                     "per_month": _r(v[1] * HOURS_PER_MONTH, 0),
                     "share": _r(v[1] / total, 4) if total else 0.0}
                    for t, v in per_tenant.items()],
        "unpriced_models": sorted(unpriced),
    }


def _share_of(p: Problem, a: Assignment, rect: tuple[float, float, float, float]) -> float:
    """GPU share one assignment holds on one GPU (compute share for MIG)."""
    if a.mig is not None:
        model = p.gpu_model(p.cluster.nodes[p.cluster.node_index[a.node]])
        assert model is not None
        return model.profile(a.mig.profile).compute_slices / model.compute_slices
    if a.fraction is not None:
        return a.fraction
    return 1.0


def _totals(views: list[list[GpuView]]) -> dict[str, float]:
    gpus = sum(len(r) for r in views)
    return {"gpus": gpus,
            "allocated": _r(sum(v.alloc for r in views for v in r), 3),
            "idle": _r(sum(v.idle_share for r in views for v in r), 3),
            "stranded": _r(sum(v.stranded_share for r in views for v in r), 3)}
