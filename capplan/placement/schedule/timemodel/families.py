"""The constraint families of the CP-SAT time model, one named function each (the table :data:`FAMILIES`).

Each family adds its rule to a :class:`~capplan.placement.schedule.timemodel.model.TimeModel` whose
variables are built (presence ``x``, start ``k``, per-node counts ``c`` and presences, the intervals).
The keys are the constraint families of :data:`capplan.model.families.FAMILIES` that the time model
holds at every instant; MIG geometry and GPU shares are the per-GPU level's
(:class:`~capplan.placement.schedule.timemodel.gpu.GpuLevel`), added by :func:`add_gpu_level`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ortools.sat.python import cp_model

from capplan.placement.core.quota import QuotaBook
from capplan.placement.schedule.timemodel.data import Busy, NodeCap

if TYPE_CHECKING:
    from capplan.placement.schedule.timemodel.model import TimeModel

Tenancy = dict[int, list[tuple[cp_model.IntervalVar, str, bool]]]


@dataclass(frozen=True)
class Use:
    """An interval on a node: replica count (variable or 1), its largest value, use per replica."""

    iv: cp_model.IntervalVar
    cnt: cp_model.LinearExprT
    most: int
    per: tuple[int, int, int]  # GPUs, milli-CPU, MiB


@dataclass
class Inputs:
    """What the families need besides the model: fixed intervals, capacities, budgets, uses per node."""

    busy: list[Busy]
    nodes: list[NodeCap]
    budgets: list[int]
    per_node: dict[int, list[Use]] = field(default_factory=dict)
    tenancy: Tenancy = field(default_factory=dict)
    fixed: dict[int, list[Use]] = field(default_factory=dict)
    quota: QuotaBook | None = None
    #: Intervals that charge quota entries: (interval, count, most, ((entry, amount per replica), ...), presence
    #: literal of a job's interval or None for a fixed one).
    charged: list[tuple[cp_model.IntervalVar, cp_model.LinearExprT, int, tuple[tuple[int, int], ...],
                        cp_model.IntVar | None]] = field(default_factory=list)


def add_running(tm: TimeModel, inp: Inputs) -> None:
    """Running replicas as fixed intervals on their nodes (and GPUs), with their tenants."""
    for b in inp.busy:
        if b.end <= b.start:
            continue
        name = f"busy{b.node}_{len(inp.fixed.get(b.node, []))}"
        iv = tm.m.new_fixed_size_interval_var(b.start, b.end - b.start, name)
        inp.fixed.setdefault(b.node, []).append(Use(iv, 1, 1, (b.gpus, b.cpu, b.mem)))
        if b.charges:
            inp.charged.append((iv, 1, 1, b.charges, None))
        tm.gpu.add_busy(b, iv)
        if b.isolated or any(t != b.tenant and isolated for _, t, isolated in inp.tenancy.get(b.node, [])):
            inp.tenancy.setdefault(b.node, []).append((iv, b.tenant, b.isolated))


def add_topology(tm: TimeModel, inp: Inputs) -> None:
    """A workload with a required topology level (a gang, or replicas of one group) uses one domain."""
    jobs = tm.jobs
    by_group: dict[int, list[int]] = {}
    for j, jb in enumerate(jobs):
        if jb.group >= 0:
            by_group.setdefault(jb.group, []).append(j)
    for g, js in by_group.items():
        doms = sorted({d for j in js for d in jobs[j].domains})
        y = {d: tm.m.new_bool_var(f"y{g}_{d}") for d in doms}
        tm.m.add_at_most_one(y.values())
        for j in js:
            for n, d in zip(jobs[j].nodes, jobs[j].domains, strict=True):
                if n in tm.pres[j]:
                    tm.m.add_implication(tm.pres[j][n], y[d])


def add_one_model(tm: TimeModel, inp: Inputs) -> None:
    """A gang that must not span GPU models picks one model for all its replicas."""
    for j, jb in enumerate(tm.jobs):
        if len(set(jb.models)) < 2:
            continue
        y = {m: tm.m.new_bool_var(f"model{j}_{m}") for m in sorted(set(jb.models))}
        tm.m.add_at_most_one(y.values())
        for n, m in zip(jb.nodes, jb.models, strict=True):
            if n in tm.pres[j]:
                tm.m.add_implication(tm.pres[j][n], y[m])


def add_node_capacity(tm: TimeModel, inp: Inputs) -> None:
    """Per node, the GPUs, CPU and memory in use at every instant stay within its capacity."""
    for n in sorted(set(inp.per_node) | set(inp.fixed)):
        cap = inp.nodes[n]
        both = inp.per_node.get(n, []) + inp.fixed.get(n, [])
        for r, limit in ((0, cap.gpus), (1, cap.cpu), (2, cap.mem)):
            used = [u for u in both if u.per[r]]
            if sum(u.most * u.per[r] for u in used) <= limit:
                continue  # never binding
            tm.m.add_cumulative([u.iv for u in used], [u.cnt * u.per[r] for u in used], limit)


def add_power(tm: TimeModel, inp: Inputs) -> None:
    """Per power domain, the TDP of the GPUs in use at every instant stays within its budget.

    A MIG slice or share makes its GPU draw its TDP; several on one GPU draw it once: exactly (pieces of
    each GPU's busy time, :meth:`GpuLevel.power_uses`) on the nodes under a budget that could bind if each
    slice drew a TDP, else each free one a full TDP (stricter: the model is then inexact)."""
    nodes, budgets = inp.nodes, inp.budgets
    power: list[list[tuple[cp_model.IntervalVar, cp_model.LinearExprT, int]]] = [[] for _ in budgets]
    for n in sorted(set(inp.per_node) | set(inp.fixed)):
        cap = nodes[n]
        if cap.tdp:
            both = inp.per_node.get(n, []) + inp.fixed.get(n, [])
            for d in cap.power:
                power[d].extend((u.iv, u.cnt * (u.per[0] * cap.tdp), u.most * u.per[0] * cap.tdp)
                                for u in both if u.per[0])
    load = [sum(e[2] for e in entries) for entries in power]
    uses = tm.gpu.partial_uses()
    for n, count in uses.items():
        for d in nodes[n].power:
            load[d] += count * nodes[n].tdp
    tight = {n for n in uses if nodes[n].tdp and any(load[d] > budgets[d] for d in nodes[n].power)}
    partial: set[int] = set()
    for n, iv, stricter in tm.gpu.power_uses(tight if tm.exact_power else set()):
        cap = nodes[n]
        for d in cap.power if cap.tdp else ():
            power[d].append((iv, cap.tdp, cap.tdp))
            if stricter:
                partial.add(d)
    for d, entries in enumerate(power):
        if sum(e[2] for e in entries) > budgets[d]:
            tm.m.add_cumulative([e[0] for e in entries], [e[1] for e in entries], budgets[d])
            if d in partial:
                tm.exact = False


def add_quota(tm: TimeModel, inp: Inputs) -> None:
    """ClusterQueue quotas at every instant: a cumulative per quota entry (queue, flavor, resource) over the
    intervals that charge it. In a cohort each entry's capacity is what it keeps plus a share of the pool
    (a variable, the shares summing to the pool): stricter than the rule, where the draw may move between
    members over time, so the model is then inexact. An entry the fixed intervals alone may overfill keeps
    new work off (the validator faults only what starts)."""
    book = inp.quota
    if book is None or not inp.charged:
        return
    per: dict[int, list[tuple[cp_model.IntervalVar, cp_model.LinearExprT, int, cp_model.IntVar | None]]] = {}
    for iv, cnt, most, charges, lit in inp.charged:
        for k, amt in charges:
            per.setdefault(k, []).append((iv, cnt * amt, most * amt, lit))
    share: dict[int, cp_model.IntVar] = {}
    groups: dict[int, list[int]] = {}
    for k in per:
        if int(book.group[k]) >= 0:
            groups.setdefault(int(book.group[k]), []).append(k)
    for g, keys in groups.items():
        pool = int(book.pool[g])
        share.update({k: tm.m.new_int_var(0, pool, f"share{k}") for k in keys})
        tm.m.add(sum(share[k] for k in keys) <= pool)
        tm.exact = False
    for k, uses in per.items():
        fixed = sum(u[2] for u in uses if u[3] is None)
        cap = int(book.cap[k])
        limits: list[cp_model.LinearExprT] = [cap] if cap < 1 << 60 else []
        if k in share:
            limits.append(int(book.kept[k]) + share[k])
            cap = min(cap, int(book.kept[k]) + int(book.pool[int(book.group[k])]))
        if fixed > cap:
            for _, _, _, lit in uses:
                if lit is not None:
                    tm.m.add(lit == 0)
            tm.exact = False
            continue
        if sum(u[2] for u in uses) <= min(cap, int(book.cap[k])) and k not in share:
            continue  # never binding
        for limit in limits:
            tm.m.add_cumulative([u[0] for u in uses], [u[1] for u in uses], limit)


def add_isolation(tm: TimeModel, inp: Inputs) -> None:
    """Node isolation: an isolated job's interval on a node overlaps no interval of another tenant there."""
    for uses in inp.tenancy.values():
        for a, (iv, tenant, isolated) in enumerate(uses):
            if not isolated:
                continue
            for b, (other, who, _) in enumerate(uses):
                if who != tenant and (b > a or not uses[b][2]):
                    tm.m.add_no_overlap([iv, other])


def add_gpu_level(tm: TimeModel, inp: Inputs) -> None:
    """GPU by GPU on the nodes that may host MIG slices or shares: MIG geometry over time, shares' fraction
    and GPU memory, one mode per GPU at each instant, tenant isolation per GPU (:class:`GpuLevel`)."""
    tm.gpu.constrain()


def add_symmetry(tm: TimeModel, inp: Inputs) -> None:
    """Identical jobs of one workload start in order (symmetry breaking, not a rule); ``tm.chains``: the runs
    so ordered (their hints are put in that order, :meth:`TimeModel.hint`)."""
    jobs = tm.jobs
    prev: dict[int, int] = {}
    chain: dict[int, list[int]] = {}  # job -> the run of identical jobs it ends (ordered by start)
    for j, jb in enumerate(jobs):
        if jb.replicas == 1 and jb.workload in prev:
            i = prev[jb.workload]
            if jobs[i].nodes == jb.nodes and jobs[i].earliest == jb.earliest:
                tm.m.add_implication(tm.x[j], tm.x[i])
                tm.m.add(tm.k[i] <= tm.k[j]).only_enforce_if(tm.x[j])
                chain[j] = [*chain.pop(i, [i]), j]
        prev[jb.workload] = j
    tm.chains = list(chain.values())


#: The time model's steps in the order they are added (the order fixes the model's variables, hence the
#: search: keep it). Keys are constraint families of :data:`capplan.model.families.FAMILIES`, besides
#: ``symmetry`` (ordering identical jobs, not a rule) and ``running`` (the fixed intervals of running
#: replicas, which the families after it count).
FAMILIES: dict[str, Callable[[TimeModel, Inputs], None]] = {
    "topology": add_topology,
    "one_model": add_one_model,
    "symmetry": add_symmetry,
    "running": add_running,
    "capacity": add_node_capacity,
    "quota": add_quota,
    "power": add_power,
    "isolation": add_isolation,
    "gpu": add_gpu_level,
}

#: The constraint families (:data:`capplan.model.families.FAMILIES`) each step keeps. ``data`` is the jobs
#: themselves (:mod:`~capplan.placement.schedule.timemodel.data`): a job's candidate nodes are its eligible
#: ones, and a gang is one job (all replicas start together or none runs).
FAMILY_OF: dict[str, tuple[str, ...]] = {
    "data": ("model", "taint", "gang"),  # jobs only on eligible (tolerated) nodes (kind_demands)
    "topology": ("topology",),
    "one_model": ("one_model",),
    "symmetry": (),
    "running": (),
    "capacity": ("gpu", "cpu", "memory"),
    "quota": ("quota",),
    "power": ("power",),
    "isolation": ("isolation",),
    "gpu": ("gpu", "mig", "fraction", "isolation"),
}
