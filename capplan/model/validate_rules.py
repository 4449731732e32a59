"""The validator's rules for what runs at one instant: shapes, GPUs and MIG geometry, CPU and memory,
isolation, MIG strategy, rack power, and the per-workload group rules (gangs, models, topology).

Part of the independent validator (see :mod:`capplan.model.validate`): its own bookkeeping, no
planner code. :mod:`capplan.model.validate` checks plans with it and
:mod:`capplan.model.validate_schedule` checks schedules with it at every start time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable

import numpy as np

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Taint, Toleration, Workload
from capplan.model.units import MILLI, gib_to_mib
from capplan.model.validate_gpu import (
    Shapes,
    check_gpu,
    check_mig_strategy,
    check_power,
    check_shape,
    gpus_and_nodes,
)
from capplan.model.validate_quota import check_plan_quotas, check_quota_spans

#: From this many assignments on, :func:`check_assignments` screens GPUs and nodes with arrays (:func:`_bulk`).
BULK_ASSIGNMENTS = 2000


def check_assignments(p: Problem, assignments: Iterable[Assignment]) -> list[str]:
    """Check resource rules of a set of assignments (shapes, GPUs, MIG, CPU, memory, isolation, power).

    Each assignment's shape is checked on its own; the rules of a GPU and of a node read all of their replicas.
    From :data:`BULK_ASSIGNMENTS` assignments on, sums per GPU and node (shares, GPU memory, MIG slots and
    compute slices, CPU, memory) and the tenants and kinds of use there are taken over arrays first, and only the
    GPUs and nodes that may break a rule (a preset mode, more than one kind or tenant, more than one replica on a
    whole GPU, a sum over capacity, a MIG slot out of place) are checked replica by replica, by the same code as
    below that size: the same violations, in the same order (tests/model/test_validate_bulk.py holds the two to
    it). The screen is written for the validator, apart from the planners' bookkeeping.
    """
    given = list(assignments)
    return _bulk(p, given) if len(given) >= BULK_ASSIGNMENTS else _plain(p, given)


def _plain(p: Problem, given: list[Assignment]) -> list[str]:
    """:func:`check_assignments`, every GPU and node of the assignments checked replica by replica."""
    v: list[str] = []
    cl = p.cluster
    nodes = {a.node: cl.nodes[cl.node_index[a.node]] for a in given if a.node in cl.node_index}
    works = {a.workload: p.workload(a.workload) for a in given if a.workload in p.workload_index}
    shapes = Shapes(p)
    per_gpu: dict[tuple[str, int], list[tuple[Assignment, Workload, int]]] = defaultdict(list)
    per_node: dict[str, list[tuple[Assignment, Workload]]] = defaultdict(list)
    for a in given:
        w, node = works.get(a.workload), nodes.get(a.node)
        if w is None or node is None:
            v.append(f"{a.workload}[{a.replica}]: unknown workload or node {a.node!r}")
            continue
        sv, _, mem = shapes.check(w, a, node)
        if sv:
            v.extend(sv)
        per_node[node.name].append((a, w))
        nname = node.name
        for g in a.gpus:
            if 0 <= g < node.gpus:
                per_gpu[(nname, g)].append((a, w, mem))
    # a rule broken only by running replicas where they run is the cluster as it is: accepted (it binds newcomers)
    kept = frozenset(p.running)
    v.extend(gpus_and_nodes(p, nodes, shapes, per_gpu.items(), per_node.items(), kept))
    v.extend(check_mig_strategy(p, per_node))
    v.extend(check_power(p, set(per_gpu)))
    return v


_WHOLE, _MIG, _FRACTION = 0, 1, 2  # a replica's kind of GPU use, as check_gpu names it


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``keys`` grouped: the stable order that sorts them, each group's first position in it, its key."""
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]) if ks.size else np.zeros(0, dtype=np.int64)
    return order, starts, ks[starts]


def _reduce(op: np.ufunc, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``op`` over each group of the sorted ``values`` (groups starting at ``starts``)."""
    return np.asarray(op.reduceat(values, starts)) if starts.size else np.zeros(0, dtype=np.int64)


def _slices_clean(profiles: list[tuple[GpuModel, MigProfile]], slots: np.ndarray, gkeys: np.ndarray,
                  starts: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per GPU (``gkeys``; its entries from ``starts``, ``count`` of them, with their ``slots``: profile id and
    start): every replica has a slot of a known profile at an allowed start, the slots do not overlap, no profile
    is used more often than it may be, the compute slices fit, a homogeneous model runs one profile. Only a
    GPU of MIG use passing all of these is clean (tenants and presets aside)."""
    if not profiles or not gkeys.size:
        return np.zeros(gkeys.size, dtype=bool)
    prof_of = np.array([[p.memory_slices, p.compute_slices, sum(1 << x for x in p.starts if x < 62), p.max_count,
                         m.compute_slices, m.homogeneous] for m, p in profiles], dtype=np.int64)
    pid, start = slots[:, 0], slots[:, 1]
    known = pid >= 0
    info = prof_of[np.where(known, pid, 0)]
    allowed = known & (start < 62) & (((info[:, 2] >> np.minimum(start, 61)) & 1) == 1)
    width = np.where(allowed, info[:, 0], 0)
    mask = ((np.int64(1) << width) - 1) << np.where(allowed, start, 0)
    ok = _reduce(np.minimum, allowed.astype(np.int64), starts) == 1
    # no overlap: the bits of the union are the bits of the slots
    ok &= np.bitwise_count(_reduce(np.bitwise_or, mask, starts)) == _reduce(np.add, width, starts)
    ok &= _reduce(np.add, np.where(allowed, info[:, 1], 0), starts) <= _reduce(np.maximum, info[:, 4], starts)
    homogeneous = _reduce(np.maximum, info[:, 5], starts) == 1
    ok &= ~homogeneous | (_reduce(np.minimum, pid, starts) == _reduce(np.maximum, pid, starts))
    # uses of each profile on each GPU
    gpu = np.repeat(np.arange(gkeys.size, dtype=np.int64), count)
    _, first, pairs = _groups(gpu * len(profiles) + np.where(known, pid, 0))
    uses = np.diff(np.r_[first, gpu.size])
    over = uses > prof_of[pairs % len(profiles), 3]
    ok[np.unique(pairs[over] // len(profiles))] = False
    return np.asarray(ok)


def _bulk(p: Problem, given: list[Assignment]) -> list[str]:
    """:func:`check_assignments` with the per-GPU and per-node sums over arrays; the GPUs and nodes that may
    break a rule are checked replica by replica (:func:`gpus_and_nodes`), the others pass."""
    v: list[str] = []
    cl = p.cluster
    nodes = {n: cl.nodes[cl.node_index[n]] for n in {a.node for a in given} if n in cl.node_index}
    works = {n: p.workload(n) for n in {a.workload for a in given} if n in p.workload_index}
    node_ids = {n: k for k, n in enumerate(nodes)}
    node_of = list(nodes.values())
    width = max((n.gpus for n in node_of), default=0) + 1
    tenant_ids: dict[str, int] = {}
    # per workload: kind of GPU use, tenant id, tenant isolation, node isolation, CPU, memory
    work_ids = {name: k for k, name in enumerate(works)}
    facts = np.array([((_WHOLE if w.gpus is not None else _MIG if w.mig is not None else _FRACTION),
                       tenant_ids.setdefault(w.tenant, len(tenant_ids)), w.isolation == "tenant",
                       w.isolation == "node", w.cpu_milli, w.memory_mib) for w in works.values()],
                     dtype=np.int64).reshape(len(works), 6)
    shapes = Shapes(p)
    rows: list[tuple[Assignment, Workload, int]] = []  # the known assignments, with their GPU memory
    row_node: list[int] = []
    row_work: list[int] = []
    row_milli: list[int] = []
    row_slot: list[tuple[int, int]] = []  # MIG profile id (-1: none or unknown) and start
    profile_ids: dict[tuple[str | None, str], int] = {}
    profiles: list[tuple[GpuModel, MigProfile]] = []
    for name in sorted({n.gpu_model for n in node_of if n.gpu_model}):
        model = shapes.model(name)
        for prof in model.profiles:
            profile_ids[(name, prof.name)] = len(profiles)
            profiles.append((model, prof))
    ent_gpu: list[int] = []  # per (assignment, GPU) entry: node id * width + GPU index, and the assignment's row
    ent_row: list[int] = []
    per_node_mig: dict[str, list[tuple[Assignment, Workload]]] = defaultdict(list)
    for a in given:
        w, node = works.get(a.workload), nodes.get(a.node)
        if w is None or node is None:
            v.append(f"{a.workload}[{a.replica}]: unknown workload or node {a.node!r}")
            continue
        sv, _, mem = shapes.check(w, a, node)
        if sv:
            v.extend(sv)
        k = len(rows)
        rows.append((a, w, mem))
        nid = node_ids[a.node]
        row_node.append(nid)
        row_work.append(work_ids[a.workload])
        row_milli.append(round((a.fraction or 0) * MILLI))
        if a.mig is not None:
            per_node_mig[a.node].append((a, w))
            row_slot.append((profile_ids.get((node.gpu_model, a.mig.profile), -1), a.mig.start))
        else:
            row_slot.append((-1, 0))
        base, count = nid * width, node.gpus
        for g in a.gpus:
            if 0 <= g < count:
                ent_gpu.append(base + g)
                ent_row.append(k)
    kept = frozenset(p.running)
    kind, tenant, t_iso, n_iso, cpu, memory = facts[np.array(row_work, dtype=np.int64)].T
    milli = np.array(row_milli, dtype=np.int64)
    gmem = np.array([m for _, _, m in rows], dtype=np.int64)
    # GPUs: clean unless MIG, a preset mode, mixed kinds, tenants mixed under isolation, a whole GPU shared, or
    # shares or GPU memory over the GPU's
    order, starts, gkeys = _groups(np.array(ent_gpu, dtype=np.int64))
    r = np.array(ent_row, dtype=np.int64)[order]
    count = np.diff(np.r_[starts, r.size])
    kmin, kmax = _reduce(np.minimum, kind[r], starts), _reduce(np.maximum, kind[r], starts)
    tmin, tmax = _reduce(np.minimum, tenant[r], starts), _reduce(np.maximum, tenant[r], starts)
    iso, shares, used = (_reduce(np.add, x[r], starts) for x in (t_iso, milli, gmem))
    cap = np.array([gib_to_mib(m.memory_gib) if (m := shapes.model(n.gpu_model) if n.gpu_model else None)
                    and m.memory_gib else -1 for n in node_of], dtype=np.int64)[gkeys // width]
    preset = np.array([k * width + m.gpu for k, n in enumerate(node_of) for m in n.gpu_modes], dtype=np.int64)
    clean = (kmin == kmax) & ((tmin == tmax) | (iso == 0)) & ~np.isin(gkeys, preset)
    fits = np.where(kmin == _WHOLE, count == 1, (shares <= MILLI) & ((used == 0) | ((cap >= 0) & (used <= cap))))
    mig = kmin == _MIG
    if mig.any():
        fits = np.where(mig, _slices_clean(profiles, np.array(row_slot, dtype=np.int64).reshape(-1, 2)[r], gkeys,
                                           starts, count), fits)
    clean &= fits
    per_gpu = {(node_of[key // width].name, key % width): [rows[x] for x in r[starts[j]:starts[j] + count[j]].tolist()]
               for j in np.flatnonzero(~clean).tolist() for key in (int(gkeys[j]),)}
    # nodes: clean unless CPU or memory over the node's, or more than one tenant under node isolation
    order, starts, nkeys = _groups(np.array(row_node, dtype=np.int64))
    ncpu, nmem, niso = (_reduce(np.add, x[order], starts) for x in (cpu, memory, n_iso))
    nt_min, nt_max = _reduce(np.minimum, tenant[order], starts), _reduce(np.maximum, tenant[order], starts)
    fine = ((ncpu <= np.array([n.cpu_milli for n in node_of], dtype=np.int64)[nkeys])
            & (nmem <= np.array([n.memory_mib for n in node_of], dtype=np.int64)[nkeys])
            & ((niso == 0) | (nt_min == nt_max)))
    ends = np.r_[starts[1:], order.size]
    per_node = {node_of[int(nkeys[j])].name: [rows[x][:2] for x in order[starts[j]:ends[j]].tolist()]
                for j in np.flatnonzero(~fine).tolist()}
    v.extend(gpus_and_nodes(p, nodes, shapes, per_gpu.items(), per_node.items(), kept))
    v.extend(check_mig_strategy(p, per_node_mig))
    if any(d.power_w is not None for d in cl.domains):  # the busy GPUs, only for power budgets
        v.extend(check_power(p, {(node_of[k // width].name, k % width) for k in gkeys.tolist()}))
    return v


def _tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    """Kubernetes' matching, written out again: a toleration with an effect must name the taint's effect,
    with a key the taint's key; ``Exists`` takes any value, ``Equal`` (or no operator) the same value."""
    for t in tolerations:
        effect_ok = t.effect in ("", taint.effect)
        key_ok = t.key in ("", taint.key)
        value_ok = t.operator == "Exists" or (t.operator == "Equal" and t.value == taint.value)
        if effect_ok and key_ok and value_ok:
            return True
    return False


def check_taints(p: Problem, assignments: Iterable[Assignment]) -> list[str]:
    """A replica on a node with a ``NoSchedule`` or ``NoExecute`` taint it does not tolerate is a violation,
    unless it is that replica's running assignment (running state is reality: the rule binds new placements)."""
    v: list[str] = []
    running = set(p.running)
    nodes = {n.name: n for n in p.cluster.nodes if n.taints}
    if not nodes:  # no node is tainted: nothing to tolerate
        return v
    works = {w.name: w for w in p.workloads}
    for a in assignments:
        node, w = nodes.get(a.node), works.get(a.workload)
        if node is None or w is None or a in running:
            continue
        bad = [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute") and not _tolerated(t, w.tolerations)]
        if bad:
            v.append(f"{w.name}[{a.replica}] on {node.name}: taint {bad[0]} is not tolerated")
    return v


def running_breaks(p: Problem, w: Workload) -> tuple[bool, bool]:
    """Whether ``w``'s running replicas alone span GPU models (a gang without ``mixed_models``) and required domains.

    Reality: such a workload's rule binds no plan that keeps every one of its running replicas where it runs.
    """
    nodes = {n.name: n for n in p.cluster.nodes}
    mine = [nodes[a.node] for a in p.running if a.workload == w.name and a.node in nodes]
    gpu_kind = w.gpus is not None or w.mig is not None or w.gpu_fraction is not None
    models = w.kind == "training" and not w.mixed_models and gpu_kind and len({n.gpu_model for n in mine}) > 1
    lvl = w.topology.required
    doms = bool(lvl) and len({p.cluster.domain_of(n, lvl) for n in mine if lvl}) > 1
    return models, doms


def check_groups(p: Problem, placed: dict[tuple[str, int], Assignment],
                 names: Collection[str] | None = None) -> list[str]:
    """Gangs whole, one GPU model per gang unless mixed, required topology: rules over a workload's replicas
    (of the workloads ``names`` only, when given: a rule reads one workload's replicas).

    A workload whose running replicas already break the models or the topology rule, and whose running
    replicas all stay where they run in ``placed``, is exempt from that rule (reality is accepted); so is a
    gang with only some replicas running when exactly those are placed, where they run.
    """
    v: list[str] = []
    nodes = {n.name: n for n in p.cluster.nodes}
    by_w: dict[str, list[Assignment]] = defaultdict(list)
    for a in p.running:
        by_w[a.workload].append(a)
    of: dict[str, list[Assignment]] = defaultdict(list)
    for (name, _), a in placed.items():
        if names is None or name in names:
            of[name].append(a)
    for w in p.workloads if names is None else [p.workload(n) for n in names]:
        mine = of.get(w.name, [])
        run = by_w.get(w.name, [])
        models_ok = topo_ok = False
        if run and all(placed.get(a.key) == a for a in run):
            models_ok, topo_ok = running_breaks(p, w)
        partial_now = bool(run) and len(run) < w.replicas and {a.key for a in mine} == {a.key for a in run} and all(
            placed.get(a.key) == a for a in run)  # a gang partly running as it runs: reality, accepted
        if w.is_gang and 0 < len(mine) < w.replicas and not partial_now:
            v.append(f"{w.name}: gang placed partially ({len(mine)} of {w.replicas} replicas)")
        gpu_kind = w.gpus is not None or w.mig is not None or w.gpu_fraction is not None
        if w.kind == "training" and not w.mixed_models and gpu_kind and not models_ok:
            models = {nodes[a.node].gpu_model for a in mine if a.node in nodes}
            if len(models) > 1:
                v.append(f"{w.name}: gang spans GPU models {sorted(str(m) for m in models)}; "
                         "set mixed_models: true to allow it")
        lvl = w.topology.required
        if lvl and mine and not topo_ok and all(a.node in nodes for a in mine):
            doms = {p.cluster.domain_of(nodes[a.node], lvl) for a in mine}
            if len(doms) > 1:
                v.append(f"{w.name}: must sit inside one {lvl}, spans {sorted(doms)}")
    return v


#: The rule of each constraint family (:data:`capplan.model.families.FAMILIES`) in the independent validator.
RULES: dict[str, tuple[Callable[..., list[str]] | Callable[..., tuple[list[str], int, int]], ...]] = {
    "model": (check_shape,),
    "taint": (check_taints,),
    "quota": (check_plan_quotas, check_quota_spans),
    "cpu": (check_assignments,),
    "memory": (check_assignments,),
    "gpu": (check_shape, check_gpu),
    "mig": (check_shape, check_gpu, check_mig_strategy),
    "fraction": (check_shape, check_gpu),
    "isolation": (check_gpu, check_assignments),
    "power": (check_power,),
    "topology": (check_groups,),
    "one_model": (check_groups,),
    "gang": (check_groups,),
}
