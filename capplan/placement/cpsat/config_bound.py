"""A per-GPU configuration LP bound: MIG geometry and tenant isolation in the relaxation.

The capacity LP of :mod:`capplan.placement.cpsat.bound` lets every busy GPU carry 7000 demand units and
eight memory slices in any mix. On fleets with many MIG GPUs and tenant isolation that is far too
generous: two 3g.40gb instances fill an H100's memory with one compute slice unused, and only
instances of the same tenant (or of tenants without isolation) may fill such a GPU. This LP
describes every GPU by a *configuration* instead (Gilmore-Gomory style, all configurations
enumerated up front because they are few):

* a MIG GPU: one maximal multiset of instances (:func:`capplan.placement.cpsat.layouts.enumerate_multisets`)
  and a *label*: a tenant whose isolated workloads use it (only that tenant may), or ``*``
  (any tenant's workloads without tenant isolation);
* a shared GPU: a label, carrying at most 1000 milli-GPU and the GPU's memory of shares;
* a whole GPU.

Every plan maps each busy GPU to one configuration (the multiset of its instances is contained
in a maximal one; its label is its single tenant, else ``*``), so the LP optimum bounds every
plan. Node CPU and memory, GPU counts per preset class and power budgets are kept; gangs and
topology are relaxed. Problems with running replicas are not handled (None).
"""

from __future__ import annotations

from collections import defaultdict

from capplan.model.plan import MigSlot
from capplan.model.problem import Workload
from capplan.model.units import MILLI
from capplan.placement.cpsat.bound import Lp, solve_stage
from capplan.placement.cpsat.constraints import power_budgets
from capplan.placement.cpsat.index import Index
from capplan.placement.cpsat.layouts import enumerate_multisets

ANY = "*"


def config_bound(ix: Index, fixed: list[tuple[int | None, int]], target: int | None,
                 time_limit: float | None = None) -> float | None:
    """Configuration-LP bound of stage ``target`` given the values of the ``fixed`` stages.

    Parameters and return value as :func:`capplan.placement.cpsat.bound.stage_bounds`; None when the
    problem has running replicas or the LP fails or runs out of time.
    """
    p = ix.p
    if ix.runs:
        return None
    lp = Lp()
    c: dict[tuple[str, int], int] = {}
    for w in p.workloads:
        for i in ix.cands[w.name]:
            c[(w.name, i)] = lp.var(float(w.replicas))
    for w in p.workloads:
        lp.le({c[(w.name, i)]: 1.0 for i in ix.cands[w.name]}, float(w.replicas))
    iso = {w.tenant for w in p.workloads if w.isolation == "tenant"}
    on_node: dict[int, list[tuple[Workload, int]]] = defaultdict(list)
    for (wn, i), v in c.items():
        on_node[i].append((p.workload(wn), v))
    busy: dict[int, dict[int, float]] = {}
    for ni in ix.nodes:
        if ni.model is not None:
            busy[ni.index] = _node(lp, ix, ni.index, on_node[ni.index], iso)
        else:  # a CPU-only node still has only its CPU and memory (CPU-only pods on it)
            mine = on_node[ni.index]
            lp.le({v: float(w.cpu_milli) for w, v in mine if w.cpu_milli}, float(ni.node.cpu_milli))
            lp.le({v: float(w.memory_mib) for w, v in mine if w.memory_mib}, float(ni.node.memory_mib))
    for budget, members in power_budgets(ix):
        terms: dict[int, float] = {}
        for ni, t in members:
            for v, k in busy[ni.index].items():
                terms[v] = terms.get(v, 0.0) + k * t
        lp.le(terms, float(budget))
    return solve_stage(lp, ix, c, fixed, target, time_limit)


def _node(lp: Lp, ix: Index, i: int, mine: list[tuple[Workload, int]], iso: set[str]) -> dict[int, float]:
    """Configuration variables and coverage rows of node ``i``; returns its busy-GPU terms."""
    ni = ix.nodes[i]
    model = ni.model
    assert model is not None
    dem = {w.name: ix.cands[w.name][i] for w, _ in mine}
    lp.le({v: float(w.cpu_milli) for w, v in mine if w.cpu_milli}, float(ni.node.cpu_milli))
    lp.le({v: float(w.memory_mib) for w, v in mine if w.memory_mib}, float(ni.node.memory_mib))
    free, fixed_whole, fixed_shared = len(ni.unfixed), len(ni.whole_fixed), len(ni.shared_fixed)
    busy: dict[int, float] = {}
    on_free: list[int] = []  # configuration variables drawing on the node's unfixed GPUs

    def gpus(ub: int, pool: list[int] | None) -> int:
        v = lp.var(float(ub))
        busy[v] = 1.0
        if pool is not None:
            pool.append(v)
        return v

    # whole GPUs, from unfixed and preset-whole GPUs
    wh_u, wh_f = gpus(free, on_free), gpus(fixed_whole, None)
    lp.le({v: float(dem[w.name].gpus) for w, v in mine if dem[w.name].kind == "whole"} | {wh_u: -1.0, wh_f: -1.0},
          0.0)
    # replicas of a MIG or shared workload are served by labels: its tenant's GPUs and/or "*"
    labels = [*sorted(iso), ANY]
    flow: dict[tuple[str, str], int] = {}
    for w, v in mine:
        if dem[w.name].kind not in ("mig", "fraction"):
            continue
        mine_labels = [w.tenant] if w.isolation == "tenant" else [w.tenant, ANY] if w.tenant in iso else [ANY]
        terms = {v: 1.0}
        for lab in mine_labels:
            flow[(w.name, lab)] = f = lp.var(float(w.replicas))
            terms[f] = -1.0
        lp.le(terms, 0.0)
    # shared GPUs per label: milli-GPU and GPU memory of the shares they carry
    on_shared: list[int] = []
    for lab in labels:
        users = [(w, dem[w.name]) for w, _ in mine if dem[w.name].kind == "fraction" and (w.name, lab) in flow]
        if not users:
            continue
        s_u, s_f = gpus(free, on_free), gpus(fixed_shared, on_shared)
        lp.le({flow[(w.name, lab)]: float(d.fraction_milli) for w, d in users} | {s_u: -MILLI, s_f: -MILLI}, 0.0)
        if ni.gpu_mem_mib:
            mem = {flow[(w.name, lab)]: float(d.memory_mib) for w, d in users if d.memory_mib}
            lp.le(mem | {s_u: -float(ni.gpu_mem_mib), s_f: -float(ni.gpu_mem_mib)}, 0.0)
    # MIG GPUs: one variable per (GPU class, maximal multiset, label)
    profiles = ix.mig_profiles.get(ni.node.gpu_model or "", ())
    mig_users = [(w, dem[w.name]) for w, _ in mine if dem[w.name].kind == "mig"]
    pools: list[tuple[list[int], int]] = [(on_free, free), (on_shared, fixed_shared)]
    if profiles and mig_users:
        pos = {pr.name: k for k, pr in enumerate(profiles)}
        classes: list[tuple[list[int], frozenset[MigSlot] | None, int]] = [(on_free, None, free)]
        classes.append(([], None, len(ni.mig_any)))
        classes += [([], lay, len(gs)) for lay, gs in ni.mig_layout.items()]
        supply: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
        for pool, allowed, count in classes:
            if count == 0:
                continue
            for layout in enumerate_multisets(model, profiles, (), allowed):
                for lab in labels:
                    y = gpus(count, pool)
                    for name, k in pos.items():
                        if layout[k]:
                            supply[(name, lab)][y] = -float(layout[k])
            if pool is not on_free:
                pools.append((pool, count))
        for lab in labels:
            for name in pos:
                names = [w.name for w, d in mig_users
                         if d.profile is not None and d.profile.name == name and (w.name, lab) in flow]
                if names:
                    lp.le({flow[(wn, lab)]: 1.0 for wn in names} | supply.get((name, lab), {}), 0.0)
    for pool, count in pools:
        lp.le({v: 1.0 for v in pool}, float(count))
    return busy
