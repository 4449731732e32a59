"""Concrete plan -> aggregated variable values (the greedy hint), the inverse of decoding.

The model never names a replica or a physical GPU: identical replicas are counts per node,
interchangeable GPUs are counts per (class, MIG multiset, tenant pool), and shared slots are
ordered so that unused ones come last. This module maps a concrete plan (the greedy one) onto
those variables so CP-SAT starts from a known feasible point.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

from capplan.model.plan import Plan
from capplan.placement.cpsat.model import ANY, PlacementModel


def greedy_hint(pm: PlacementModel, plan: Plan) -> dict[Any, int]:
    """Variable -> value for the greedy ``plan`` (running replicas kept; auxiliaries left to CP-SAT)."""
    hint: dict[Any, int] = {}
    running = {r.a.key for r in pm.ix.runs}
    for key in pm.keep:
        hint[pm.keep[key]] = 1
    for v in pm.freed.values():
        hint[v] = 0
    for d in (pm.ev, pm.mv):
        for v in d.values():
            if not isinstance(v, int):
                hint[v] = 0
    placed: Counter[str] = Counter(a.workload for a in plan.assignments)
    for w in pm.p.workloads:
        if w.is_gang:
            hint[pm.gang[w.name]] = int(placed[w.name] == w.replicas)
    per_node: dict[int, list[Any]] = defaultdict(list)
    ni_of = pm.p.cluster.node_index
    for a in plan.assignments:
        if a.key not in running:
            per_node[ni_of[a.node]].append(a)
    counts: Counter[tuple[str, int]] = Counter((a.workload, ni_of[a.node]) for al in per_node.values() for a in al)
    for key, v in pm.c.items():
        hint[v] = counts.get(key, 0)
    for i, al in per_node.items():
        _hint_node_gpus(pm, i, al, hint)
    return hint


def _hint_node_gpus(pm: PlacementModel, i: int, al: list[Any], hint: dict[Any, int]) -> None:
    ni = pm.ix.nodes[i]
    if i not in pm.xw:
        return
    whole = sum(len(a.gpus) for a in al if a.mig is None and a.fraction is None)
    hint[pm.xw[i]] = max(0, whole - len(ni.whole_fixed))
    by_gpu: dict[int, list[Any]] = defaultdict(list)
    for a in al:
        if a.mig is not None or a.fraction is not None:
            by_gpu[a.gpus[0]].append(a)
    occ = {o.gpu: o for o in ni.occ}
    layout_of = {g: lay for lay, gs in ni.mig_layout.items() for g in gs}
    kcount: Counter[int] = Counter()  # id(MigClass var) -> count
    cm: Counter[tuple[str, str]] = Counter()
    co: Counter[tuple[str, int]] = Counter()
    src_none = 0
    fresh_used = 0
    fresh = [s for s in pm.slots.get(i, []) if s.kind == "fresh"]
    slot_of = {s.gpu: s for s in pm.slots.get(i, []) if s.gpu is not None}
    fvals: Counter[tuple[int, str]] = Counter()
    used_slots: set[int] = set()
    for g, items in sorted(by_gpu.items()):
        if items[0].fraction is not None:
            s = slot_of.get(g)
            if s is None:
                if fresh_used >= len(fresh):
                    return  # more shared GPUs than slots: leave the rest to CP-SAT
                s = fresh[fresh_used]
                fresh_used += 1
            used_slots.add(id(s))
            for a in items:
                fvals[(id(s), a.workload)] += 1
            continue
        prof = pm.ix.mig_profiles[ni.model.name] if ni.model else ()
        want = Counter(a.mig.profile for a in items)
        vec = tuple(want.get(p.name, 0) for p in prof)
        if g in occ:
            for opt in pm.occ_opts.get((i, g), []):
                if not opt.drop and all(x <= y for x, y in zip(vec, opt.layout, strict=True)):
                    hint[opt.var] = 1
                    break
            for a in items:
                co[(a.workload, g)] += 1
            continue
        iso = [a for a in items if pm.p.workload(a.workload).isolation == "tenant"]
        pool = pm.p.workload(iso[0].workload).tenant if iso else ANY
        src = layout_of.get(g)
        if src is None:
            src_none += 1
        for k in pm.mig.get(i, []):
            if k.src == src and k.pool == pool and all(x <= y for x, y in zip(vec, k.layout, strict=True)):
                kcount[id(k.var)] += 1
                break
        for a in items:
            cm[(a.workload, pool)] += 1
    for o in ni.occ:
        for opt in pm.occ_opts.get((i, o.gpu), []):
            hint.setdefault(opt.var, 0)
    for k in pm.mig.get(i, []):
        hint[k.var] = kcount.get(id(k.var), 0)
    hint[pm.ym[i]] = max(0, src_none - len(ni.mig_any)) if src_none else 0
    for (wn, n, pool), v in pm.cm.items():
        if n == i and v is not pm.c.get((wn, n)):
            hint[v] = cm.get((wn, pool), 0)
    for (wn, n, g), v in pm.co.items():
        if n == i:
            hint[v] = co.get((wn, g), 0)
    for s in pm.slots.get(i, []):
        if s.kind != "occ":
            hint[s.used] = int(id(s) in used_slots)
        for wn, v in s.f.items():
            hint[v] = fvals.get((id(s), wn), 0)


def identical_node_groups(pm: PlacementModel) -> list[list[int]]:
    """Groups of interchangeable nodes: same domains, hardware, preset modes, quota flavors, and nothing running."""
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    flavors = [(f.name, None if f.nodes is None else set(f.nodes)) for f in pm.p.flavors]
    for ni in pm.ix.nodes:
        n = ni.node
        if ni.runs:
            continue
        held = tuple(name for name, members in flavors if members is None or n.name in members)
        groups[(n.path, n.gpu_model, n.gpus, n.cpu_milli, n.memory_mib, n.gpu_modes, held)].append(ni.index)
    return [g for g in groups.values() if len(g) > 1]


def _load_key(pm: PlacementModel, i: int) -> Any:
    """A weighted load of node ``i``: distinct weight per workload, so sorted nodes break symmetry."""
    return sum((k + 1) * pm.c[(w.name, i)] for k, w in enumerate(pm.p.workloads) if (w.name, i) in pm.c)


def break_node_symmetry(pm: PlacementModel) -> list[list[int]]:
    """Order interchangeable nodes by non-increasing weighted load; returns the groups."""
    groups = identical_node_groups(pm)
    for g in groups:
        for a, b in itertools.pairwise(g):
            pm.m.add(_load_key(pm, a) >= _load_key(pm, b))
    return groups


def sort_plan_nodes(pm: PlacementModel, plan: Plan, groups: list[list[int]]) -> Plan:
    """Rename nodes of ``plan`` inside each group so that it satisfies :func:`break_node_symmetry`."""
    names = [n.name for n in pm.p.cluster.nodes]
    weight = {w.name: k + 1 for k, w in enumerate(pm.p.workloads)}
    load: Counter[str] = Counter()
    for a in plan.assignments:
        load[a.node] += weight[a.workload]
    rename: dict[str, str] = {}
    for g in groups:
        order = sorted(g, key=lambda i: (-load[names[i]], i))
        rename.update({names[old]: names[new] for new, old in zip(g, order, strict=True)})
    moved = tuple(a.model_copy(update={"node": rename.get(a.node, a.node)}) for a in plan.assignments)
    return plan.model_copy(update={"assignments": moved})
