"""Constraint families of the placement model, one named function each.

Every function takes a :class:`~capplan.placement.cpsat.model.PlacementModel` and adds the rules of one
family. :func:`add_all` adds them all; explanations re-solve with a family relaxed.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from capplan.model.problem import Demand, Workload
from capplan.model.units import MILLI
from capplan.placement.cpsat.index import Index, NodeInfo, Run, released_gpus
from capplan.placement.cpsat.model import PlacementModel
from capplan.placement.cpsat.quota import add_quota


def _sum(xs: Any) -> Any:
    return sum(xs, 0)


def add_counts(pm: PlacementModel) -> None:
    """Replica counts and gang all-or-nothing; running replicas kept, evicted or moved."""
    for w in pm.p.workloads:
        new = _sum(v for (wn, _), v in pm.c.items() if wn == w.name)
        runs = pm.ix.running_of.get(w.name, [])
        kept = _sum(pm.run_keep(r) for r in runs)
        moved = _sum(pm.mv.get(r.a.key, 0) for r in runs)
        pm.m.add(new <= len(pm.ix.new_ids(w)) + moved)
        pm.m.add(new >= moved)
        if w.is_gang:
            pm.m.add(kept + new == w.replicas * pm.gang[w.name])
        else:
            pm.m.add(kept + new <= w.replicas)


def new_whole_gpus(pm: PlacementModel, i: int) -> Any:
    """GPUs the new whole-GPU replicas on node ``i`` take."""
    return _sum(pm.demand(w, i).gpus * v for w, v in pm.on_node(i) if pm.demand(w, i).kind == "whole")


def add_gpu_exclusivity(pm: PlacementModel) -> None:
    """Each free GPU serves one mode: whole, one MIG layout or time-sharing; released GPUs rejoin."""
    for ni in pm.ix.nodes:
        i = ni.index
        if i not in pm.xw:
            continue
        rel_unfixed: Any = 0
        rel_whole: Any = 0
        for r in ni.runs:
            if r.demand.kind == "whole" and r.optional:
                uf, wf = released_gpus(ni, r)
                rel_unfixed += uf * (1 - pm.keep[r.a.key])
                rel_whole += wf * (1 - pm.keep[r.a.key])
        rel_unfixed += _sum(v for (n, _), v in pm.freed.items() if n == i)
        pm.m.add(new_whole_gpus(pm, i) <= len(ni.whole_fixed) + rel_whole + pm.xw[i])
        fresh = _sum(s.used for s in pm.slots.get(i, []) if s.kind == "fresh")
        fixed_used = _sum(s.used for s in pm.slots.get(i, []) if s.kind == "fixed")
        pm.m.add(pm.xw[i] + pm.ym[i] + fresh <= len(ni.unfixed) + rel_unfixed)
        pm.m.add(fixed_used <= len(ni.shared_fixed))
        classes = pm.mig.get(i, [])
        pm.m.add(_sum(k.var for k in classes if k.src is None) <= len(ni.mig_any) + pm.ym[i])
        for lay, gpus in ni.mig_layout.items():
            pm.m.add(_sum(k.var for k in classes if k.src == lay) <= len(gpus))


def add_mig_geometry(pm: PlacementModel) -> None:
    """MIG instances per profile fit the maximal layouts chosen for each GPU class and occupied GPU."""
    for i, classes in pm.mig.items():
        ni = pm.ix.nodes[i]
        assert ni.model is not None
        profiles = pm.ix.mig_profiles[ni.model.name]
        for pool in pm.pools(i):
            for j, prof in enumerate(profiles):
                need = _sum(v for w, pl, v in pm.mig_on_node(i) if pl == pool and pm.demand(w, i).profile == prof)
                have = _sum(k.layout[j] * k.var for k in classes if k.pool == pool and k.layout[j])
                pm.m.add(need <= have)
    for (i, g), opts in pm.occ_opts.items():  # occupied GPUs, also on nodes without new MIG work
        model = pm.ix.nodes[i].model
        assert model is not None
        o = next(x for x in pm.ix.nodes[i].occ if x.gpu == g)
        for j, prof in enumerate(pm.ix.mig_profiles[model.name]):
            need = _sum(v for w, v in pm.occ_on_gpu(i, g) if pm.demand(w, i).profile == prof)
            pm.m.add(need <= _sum(x.layout[j] * x.var for x in opts if x.layout[j]))
        dropped = _sum(x.var for x in opts if x.drop)
        for r in o.optional:
            pm.m.add(pm.keep[r.a.key] == 1 - dropped)


def add_fraction_memory(pm: PlacementModel) -> None:
    """Time-sliced shares on one GPU sum to at most 1 and fit its memory; fresh slots used in order."""
    for i, slots in pm.slots.items():
        ni = pm.ix.nodes[i]
        cap = ni.gpu_mem_mib
        for s in slots:
            runs = (s.occ.pinned + s.occ.optional) if s.occ else []
            share = _sum(pm.demand(pm.p.workload(wn), i).fraction_milli * v for wn, v in s.f.items())
            mem = _sum(pm.demand(pm.p.workload(wn), i).memory_mib * v for wn, v in s.f.items())
            share += _sum(r.demand.fraction_milli * pm.run_keep(r) for r in runs)
            mem += _sum(r.demand.memory_mib * pm.run_keep(r) for r in runs)
            pm.m.add(share <= MILLI * s.used)
            pm.m.add(mem <= cap * s.used)
            for v in s.f.values():
                pm.m.add(v <= MILLI * s.used)
            _gpu_tenancy(pm, [(pm.p.workload(wn), v, MILLI) for wn, v in s.f.items()], runs)
        fresh = [s for s in slots if s.kind == "fresh"]
        for a, b in itertools.pairwise(fresh):  # symmetry: fresh slots are interchangeable
            pm.m.add(a.used >= b.used)


def add_node_capacity(pm: PlacementModel) -> None:
    """Host CPU and memory of every node."""
    per_node: dict[int, list[tuple[Workload, Any]]] = defaultdict(list)
    for (wn, i), v in pm.c.items():
        per_node[i].append((pm.p.workload(wn), v))
    for ni in pm.ix.nodes:
        items = per_node.get(ni.index, [])
        runs = ni.runs
        cpu = _sum(w.cpu_milli * v for w, v in items) + _sum(r.w.cpu_milli * pm.run_keep(r) for r in runs)
        mem = _sum(w.memory_mib * v for w, v in items) + _sum(r.w.memory_mib * pm.run_keep(r) for r in runs)
        if items:
            pm.m.add(cpu <= ni.node.cpu_milli)
            pm.m.add(mem <= ni.node.memory_mib)


def _presence(pm: PlacementModel, items: list[tuple[Workload, Any, int]], runs: list[Run], iso: str) -> None:
    """If any user with isolation ``iso`` is present, all users share its tenant."""
    tenants = sorted({w.tenant for w, _, _ in items} | {r.w.tenant for r in runs})
    if len(tenants) < 2 or not any(w.isolation == iso for w, _, _ in items) | any(r.w.isolation == iso for r in runs):
        return
    pinned = [r for r in runs if isinstance(pm.run_keep(r), int)]
    if len({r.w.tenant for r in pinned}) > 1 and any(r.w.isolation == iso for r in pinned):
        for _, v, _ in items:  # the running state breaks isolation here: it stays, and nothing new joins it
            pm.m.add(v == 0)
        return
    pres = {t: pm.m.new_bool_var(f"tenant[{t}]") for t in tenants}
    isolated = pm.m.new_bool_var("isolated")
    for w, v, ub in items:
        pm.m.add(v <= ub * pres[w.tenant])
        if w.isolation == iso:
            pm.m.add(v <= ub * isolated)
    for r in runs:
        pm.m.add(pres[r.w.tenant] >= pm.run_keep(r))
        if r.w.isolation == iso:
            pm.m.add(isolated >= pm.run_keep(r))
    pm.m.add(_sum(pres.values()) <= 1 + (len(tenants) - 1) * (1 - isolated))


def _gpu_tenancy(pm: PlacementModel, items: list[tuple[Workload, Any, int]], runs: list[Run]) -> None:
    _presence(pm, items, runs, "tenant")


def add_isolation(pm: PlacementModel) -> None:
    """Node isolation per node; tenant isolation on occupied MIG GPUs (fresh GPUs use tenant pools)."""
    per_node: dict[int, list[tuple[Workload, Any, int]]] = defaultdict(list)
    for (wn, i), v in pm.c.items():
        per_node[i].append((pm.p.workload(wn), v, pm.ub[(wn, i)]))
    for ni in pm.ix.nodes:
        _presence(pm, per_node.get(ni.index, []), ni.runs, "node")
        for o in ni.occ:
            if o.kind == "mig":
                items = [(w, v, MILLI) for w, v in pm.occ_on_gpu(ni.index, o.gpu)]
                _gpu_tenancy(pm, items, o.pinned + o.optional)


def add_required_topology(pm: PlacementModel) -> None:
    """A workload with a required level sits inside exactly one domain of that level."""
    cl = pm.p.cluster
    for w in pm.p.workloads:
        lvl = w.topology.required
        if not lvl:
            continue
        nodes = sorted({n for (wn, n) in pm.c if wn == w.name} | {r.node for r in pm.ix.running_of.get(w.name, [])})
        doms = sorted({cl.domain_of(cl.nodes[n], lvl) for n in nodes})
        sel = {d: pm.m.new_bool_var(f"dom[{w.name},{d}]") for d in doms}
        pm.m.add_at_most_one(sel.values())
        for n in nodes:
            d = cl.domain_of(cl.nodes[n], lvl)
            if (w.name, n) in pm.c:
                pm.m.add(pm.c[(w.name, n)] <= pm.ub[(w.name, n)] * sel[d])
        for r in pm.ix.running_of.get(w.name, []):
            pm.m.add(sel[cl.domain_of(cl.nodes[r.node], lvl)] >= pm.run_keep(r))


def busy_gpus(pm: PlacementModel, i: int) -> Any:
    """GPUs of node ``i`` that are busy in the plan (an upper estimate for occupied GPUs)."""
    if i not in pm.busy:
        ni = pm.ix.nodes[i]
        whole_runs = _sum(len(r.a.gpus) * pm.run_keep(r) for r in ni.runs if r.demand.kind == "whole")
        pm.busy[i] = (
            new_whole_gpus(pm, i)
            + whole_runs
            + _sum(k.var for k in pm.mig.get(i, []))
            + _sum(s.used for s in pm.slots.get(i, []) if s.kind != "occ")
            + len(ni.occ)
            - _sum(v for (n, _), v in pm.freed.items() if n == i)
        )
    return pm.busy[i]


SLOT_SHARE = 56_000  # one GPU; divisible by 1000 (shares) and by 1, 2, 4, 8 (memory slices)


def slot_share(d: Demand, memory_slices: int) -> int:
    """Part of a GPU (of :data:`SLOT_SHARE`) a replica fills: memory slices for MIG, else its GPUs."""
    if d.kind == "mig" and d.profile is not None:
        return d.profile.memory_slices * SLOT_SHARE // memory_slices
    if d.kind == "fraction":
        return d.fraction_milli * SLOT_SHARE // MILLI
    return d.gpus * SLOT_SHARE if d.kind == "whole" else 0


def add_capacity_cuts(pm: PlacementModel) -> None:
    """Redundant cuts: busy GPUs of a node carry at most 7000 demand units each, and fit the node.

    Implied by the other families, but they tighten the LP relaxation a lot (power budgets and
    fragmented MIG or shared GPUs), which is what lets CP-SAT prove optimality.
    """
    units_per_gpu = 7000
    for ni in pm.ix.nodes:
        i = ni.index
        if i not in pm.xw:
            continue
        new_units = _sum(pm.demand(w, i).units * v for w, v in pm.on_node(i))
        whole_kept = _sum(len(r.a.gpus) * pm.run_keep(r) for r in ni.runs if r.demand.kind == "whole")
        busy = busy_gpus(pm, i)
        pm.m.add(units_per_gpu * busy >= new_units + units_per_gpu * whole_kept)
        pm.m.add(busy <= ni.node.gpus)
        if ni.model is not None and ni.model.memory_slices:  # MIG instances also fill memory slices
            full = SLOT_SHARE
            shares = _sum(slot_share(pm.demand(w, i), ni.model.memory_slices) * v for w, v in pm.on_node(i))
            pm.m.add(full * busy >= shares + full * whole_kept)


def placed_new(pm: PlacementModel, w: Workload) -> Any:
    """An integer variable equal to the new replicas of ``w`` (created once, shared by cuts)."""
    if w.name not in pm.tot:
        cs = [v for (wn, _), v in pm.c.items() if wn == w.name]
        pm.tot[w.name] = v = pm.m.new_int_var(0, pm.ix.max_new(w), f"tot[{w.name}]")
        pm.m.add(v == _sum(cs))
    return pm.tot[w.name]


def add_kind_cuts(pm: PlacementModel) -> None:
    """Redundant cluster-wide cuts: MIG-mode GPUs cover the MIG memory slices, shared GPUs the shares.

    ``SLOT_SHARE * (number of MIG GPUs) >= sum of the instances' memory shares`` summed over all
    nodes, with the count an integer variable, so that its lower bound is rounded up as soon as
    the instance counts are known (a higher priority placed in full): 8 x 3g.40gb plus
    9 x 1g.20gb need 7 GPUs, not the LP's 6.25. Same for time-sliced shares. Only without
    occupied GPUs (running MIG or shared replicas), whose instances live outside these counts.
    """
    if any(ni.occ for ni in pm.ix.nodes):
        return
    mig_gpus = [k.var for ks in pm.mig.values() for k in ks]
    slots = [s.used for ss in pm.slots.values() for s in ss]
    for kind, gpus in (("mig", mig_gpus), ("fraction", slots)):
        if not gpus:
            continue
        need: list[Any] = []
        for w in pm.p.workloads:
            keys = [(n, v) for (wn, n), v in pm.c.items() if wn == w.name]
            mine = [(n, v) for n, v in keys if pm.demand(w, n).kind == kind]
            if not mine:
                continue
            shares = [_share(pm, w, n) for n, _ in mine]
            if len(mine) == len(keys):  # every placement is of this kind: the smallest share per replica
                need.append(min(shares) * placed_new(pm, w))
            else:
                need.extend(sh * v for sh, (_, v) in zip(shares, mine, strict=True))
        count = pm.m.new_int_var(0, pm.p.cluster.gpus_total, f"{kind}_gpus")
        pm.m.add(count == _sum(gpus))
        pm.m.add(SLOT_SHARE * count >= _sum(need))


def _share(pm: PlacementModel, w: Workload, n: int) -> int:
    model = pm.ix.nodes[n].model
    return slot_share(pm.demand(w, n), model.memory_slices if model and model.memory_slices else 1)


def tdp_of(ni: NodeInfo) -> int:
    """Power of one busy GPU of node ``ni`` in watts (0 when unknown)."""
    return ni.model.tdp_w if ni.model is not None and ni.model.tdp_w else 0


def power_budgets(ix: Index) -> list[tuple[int, list[tuple[NodeInfo, int]]]]:
    """Per domain with a power budget: ``(budget // g, [(node, TDP // g), ...])``, ``g`` the gcd of the TDPs.

    Busy GPUs are integers, so dividing by the gcd of the TDPs and rounding the budget down is
    exact; it matters because presolve (which would do it) is off on large models and the LP
    bounds otherwise count a fractional GPU per domain (38.08 kW / 700 W = 54.4).
    """
    cl = ix.p.cluster
    out = []
    for d in cl.domains:
        if d.power_w is None:
            continue
        lvl = cl.levels.index(d.level)
        members = [(ni, tdp_of(ni)) for ni in ix.nodes if tdp_of(ni) and ni.node.path[lvl] == d.name]
        if members:
            g = math.gcd(*(t for _, t in members))
            out.append((d.power_w // g, [(ni, t // g) for ni, t in members]))
    return out


def add_power(pm: PlacementModel) -> None:
    """GPU power (TDP per busy GPU) of each domain with a budget."""
    for budget, members in power_budgets(pm.ix):
        pm.m.add(_sum(t * busy_gpus(pm, ni.index) for ni, t in members) <= budget)


def add_eviction_rules(pm: PlacementModel) -> None:
    """An eviction needs a strictly higher-priority new replica on the same node."""
    for r in pm.ix.runs:
        ev = pm.ev.get(r.a.key, 0)
        if isinstance(ev, int):
            continue
        higher = _sum(
            v for w, v in pm.on_node(r.node) if pm.ix.movable(w) == 0 and w.priority > r.w.priority
        )
        pm.m.add(higher >= ev)


def add_guaranteed(pm: PlacementModel) -> None:
    """Every replica of a guaranteed workload is placed (hard; used by explanations)."""
    for w in pm.p.workloads:
        if w.sla == "guaranteed":
            pm.m.add(placed_count(pm, w) == w.replicas)


def placed_count(pm: PlacementModel, w: Workload) -> Any:
    """Replicas of ``w`` placed in the plan (kept plus new)."""
    runs = pm.ix.running_of.get(w.name, [])
    return _sum(v for (wn, _), v in pm.c.items() if wn == w.name) + _sum(pm.run_keep(r) for r in runs)


def add_one_model(pm: PlacementModel) -> None:
    """A training gang's replicas (new and kept) all sit on one GPU model (unless ``mixed_models``)."""
    nodes = pm.p.cluster.nodes
    for w in pm.p.workloads:
        if not w.one_model:
            continue
        by_model: dict[str, list[Any]] = defaultdict(list)
        for (wn, n), v in pm.c.items():
            if wn == w.name:
                by_model[str(nodes[n].gpu_model)].append((v, pm.ub[(wn, n)]))
        for r in pm.ix.running_of.get(w.name, []):
            by_model[str(nodes[r.node].gpu_model)].append((pm.run_keep(r), 1))
        if len(by_model) < 2:
            continue
        pick = {m: pm.m.new_bool_var(f"model[{w.name},{m}]") for m in sorted(by_model)}
        pm.m.add_at_most_one(pick.values())
        for m, items in by_model.items():
            for v, ub in items:
                pm.m.add(v <= ub * pick[m])


FAMILIES: dict[str, Callable[[PlacementModel], None]] = {
    "counts": add_counts,
    "models": add_one_model,
    "gpu": add_gpu_exclusivity,
    "mig": add_mig_geometry,
    "fraction": add_fraction_memory,
    "node": add_node_capacity,
    "isolation": add_isolation,
    "topology": add_required_topology,
    "power": add_power,
    "eviction": add_eviction_rules,
    "cuts": add_capacity_cuts,
    "kind_cuts": add_kind_cuts,
    "quota": add_quota,
}


#: The constraint families (:data:`capplan.model.families.FAMILIES`) each component keeps; the cuts only
#: tighten the relaxation and the eviction rules bind running state, so they keep none of their own.
FAMILY_OF: dict[str, tuple[str, ...]] = {
    "counts": ("model", "taint", "gang"),  # a replica only on eligible (tolerated) nodes; a gang all or nothing
    "models": ("one_model",),
    "gpu": ("gpu",),
    "mig": ("mig",),
    "fraction": ("fraction",),
    "node": ("cpu", "memory"),
    "isolation": ("isolation",),
    "topology": ("topology",),
    "power": ("power",),
    "eviction": (),
    "cuts": (),
    "kind_cuts": (),
    "quota": ("quota",),
}


def add_all(pm: PlacementModel, skip: frozenset[str] = frozenset()) -> None:
    """Add every constraint family except those in ``skip``."""
    if skip & {"mig", "fraction", "gpu"}:
        skip = skip | {"kind_cuts"}  # implied by those families only; relaxing them relaxes the cut
    for name, fn in FAMILIES.items():
        if name not in skip:
            fn(pm)
