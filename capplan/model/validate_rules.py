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
from capplan.model.problem import Node, Problem, Taint, Toleration, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU, gib_to_mib
from capplan.model.validate_quota import check_plan_quotas, check_quota_spans


def _smallest_fitting(model: GpuModel, mem_mib: int) -> MigProfile | None:
    fitting = [p for p in model.profiles if "+" not in p.name and gib_to_mib(p.memory_gib) >= mem_mib]
    return min(fitting, key=lambda p: (p.memory_gib, p.compute_slices, p.memory_slices), default=None)


def replica_value(p: Problem, w: Workload) -> int:
    """A placed replica's value in demand units, from the workload and the catalog alone.

    Recomputed here, apart from the planners: whole GPUs count ``gpus``, a share its fraction, a
    named profile the smallest compute fraction it has on an allowed model, ``mig: auto`` the
    smallest compute fraction of any profile (``+me`` variants aside) with enough memory on an
    allowed model.
    """
    if w.gpus is not None:
        return w.gpus * UNITS_PER_GPU
    if w.gpu_fraction is not None:
        return round(w.gpu_fraction * MILLI) * (UNITS_PER_GPU // MILLI)
    if w.mig is None:
        return 0
    allowed = {p.catalog.get(m).name for m in w.gpu_models} if w.gpu_models is not None else None
    need = gib_to_mib(w.gpu_memory_gib) if w.gpu_memory_gib else 0
    best: int | None = None
    for model in p.catalog.models:
        if (allowed is not None and model.name not in allowed) or not model.compute_slices:
            continue
        for prof in model.profiles:
            ok = (prof.name == w.mig) if w.mig != "auto" else "+" not in prof.name
            if ok and gib_to_mib(prof.memory_gib) >= need:
                units = prof.compute_slices * UNITS_PER_GPU // model.compute_slices
                best = units if best is None else min(best, units)
    return best or 0


def check_shape(p: Problem, w: Workload, a: Assignment, node: Node) -> tuple[list[str], int, int]:
    """Check one assignment's shape; return (violations, demand units, GPU memory MiB)."""
    v: list[str] = []
    who = f"{w.name}[{a.replica}] on {node.name}"
    model = p.catalog.get(node.gpu_model) if node.gpu_model else None
    need_mem = gib_to_mib(w.gpu_memory_gib) if w.gpu_memory_gib else 0
    if len(set(a.gpus)) != len(a.gpus) or any(g < 0 or g >= node.gpus for g in a.gpus):
        v.append(f"{who}: GPU indices {list(a.gpus)} are repeated or outside 0..{node.gpus - 1}")
        return v, 0, 0
    if w.gpus is None and w.mig is None and w.gpu_fraction is None:
        if a.gpus or a.mig or a.fraction is not None:
            v.append(f"{who}: a CPU-only replica must not hold GPUs")
        return v, 0, 0
    if model is None:
        v.append(f"{who}: the node has no GPUs")
        return v, 0, 0
    allowed = None if w.gpu_models is None else {p.catalog.get(m).name for m in w.gpu_models}
    if allowed is not None and model.name not in allowed:
        v.append(f"{who}: GPU model {model.name} is not among the allowed {sorted(allowed)}")
    model_mem = gib_to_mib(model.memory_gib) if model.memory_gib else None
    if w.gpus is not None:
        if len(a.gpus) != w.gpus or a.mig is not None or a.fraction is not None:
            v.append(f"{who}: needs exactly {w.gpus} whole GPUs, got {list(a.gpus)}")
        if need_mem and (model_mem is None or model_mem < need_mem):
            v.append(f"{who}: {model.name} has less than the {w.gpu_memory_gib} GiB GPU memory needed")
        return v, w.gpus * UNITS_PER_GPU, 0
    if w.gpu_fraction is not None:
        milli = round(w.gpu_fraction * MILLI)
        if len(a.gpus) != 1 or a.mig is not None or a.fraction is None or round(a.fraction * MILLI) != milli:
            v.append(f"{who}: needs a {w.gpu_fraction} share of one GPU")
        return v, milli * (UNITS_PER_GPU // MILLI), need_mem
    if len(a.gpus) != 1 or a.mig is None or a.fraction is not None:
        v.append(f"{who}: needs one MIG instance on one GPU")
        return v, 0, 0
    prof = next((x for x in model.profiles if x.name == a.mig.profile), None)
    if prof is None:
        v.append(f"{who}: {model.name} has no profile {a.mig.profile!r}")
        return v, 0, 0
    expected = _smallest_fitting(model, need_mem) if w.mig == "auto" else prof if prof.name == w.mig else None
    if expected is None or expected.name != prof.name:
        v.append(f"{who}: profile {prof.name} is not the one the workload asks for ({w.mig})")
    if gib_to_mib(prof.memory_gib) < need_mem:
        v.append(f"{who}: {prof.name} has less than {w.gpu_memory_gib} GiB")
    return v, prof.compute_slices * (UNITS_PER_GPU // model.compute_slices), 0


def _check_gpu(node: Node, model: GpuModel, g: int,
               items: list[tuple[Assignment, Workload, int]], kept: frozenset[Assignment] | None = None,
               changeable: bool = False) -> list[str]:
    """The rules of one GPU; ``kept``: the running replicas, an isolation break among them alone is reality;
    ``changeable``: the preset mode is today's, which the plan may change (``reconfigure: allowed``)."""
    v: list[str] = []
    where = f"GPU {g} of {node.name}"
    kinds = {"whole" if w.gpus is not None else "mig" if w.mig is not None else "fraction" for _, w, _ in items}
    if len(kinds) > 1:
        return [f"{where}: mixes {sorted(kinds)} use"]
    kind = kinds.pop()
    fixed = None if changeable and node.mig_strategy != "single" else node.mode_of(g)
    if fixed is not None and {"whole": "whole", "mig": "mig", "fraction": "shared"}[kind] != fixed.mode:
        v.append(f"{where}: is preset to mode {fixed.mode}, cannot host {kind} use")
    if kind == "whole" and len(items) > 1:
        v.append(f"{where}: whole GPU used by {len(items)} replicas")
    elif kind == "fraction":
        total = sum(round((a.fraction or 0) * MILLI) for a, _, _ in items)
        if total > MILLI:
            v.append(f"{where}: time-sliced shares sum to {total / MILLI:.3f} > 1")
        mem = sum(m for _, _, m in items)
        cap = gib_to_mib(model.memory_gib) if model.memory_gib else None
        if mem and (cap is None or mem > cap):
            v.append(f"{where}: shares need {mem} MiB of GPU memory, the GPU has {cap}")
    elif kind == "mig":
        used = 0
        counts: dict[str, int] = defaultdict(int)
        compute = 0
        for a, _, _ in items:
            if a.mig is None:
                continue  # a MIG request without a slot: reported by check_shape
            prof = next((x for x in model.profiles if x.name == a.mig.profile), None)
            if prof is None:
                continue  # reported by check_shape
            if a.mig.start not in prof.starts:
                v.append(f"{where}: {prof.name} may not start at {a.mig.start} (allowed {list(prof.starts)})")
            mask = ((1 << prof.memory_slices) - 1) << a.mig.start
            if used & mask:
                v.append(f"{where}: MIG instance {prof.name}@{a.mig.start} overlaps another")
            used |= mask
            counts[prof.name] += 1
            compute += prof.compute_slices
            if fixed is not None and fixed.layout is not None and a.mig not in fixed.layout:
                v.append(f"{where}: {prof.name}@{a.mig.start} is not in the GPU's preset MIG layout")
        for name, c in counts.items():
            prof = next(x for x in model.profiles if x.name == name)
            if c > prof.max_count:
                v.append(f"{where}: {c} x {name}, at most {prof.max_count} allowed")
        if model.homogeneous and len(counts) > 1:
            v.append(f"{where}: {model.name} runs one partition mode per GPU, got {sorted(counts)}")
        if compute > model.compute_slices:
            v.append(f"{where}: {compute} compute slices used, the GPU has {model.compute_slices}")
    tenants = {w.tenant for _, w, _ in items}
    if len(tenants) > 1 and any(w.isolation == "tenant" for _, w, _ in items) and not all(
            kept is not None and a in kept for a, _, _ in items):
        v.append(f"{where}: tenant isolation violated, tenants {sorted(tenants)} share it")
    return v


class _Shapes:
    """Per-plan caches for :func:`check_shape`: the outcome of a shape check depends only on the workload,
    request (GPUs, MIG, share, GPU memory, allowed models), the node's GPU model, and the assignment's
    GPU count, MIG profile and share (GPU indices are checked per assignment), so a
    clean outcome is computed once per such key (violations are always recomputed with their text)."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.memo: dict[tuple[object, ...], tuple[int, int]] = {}
        self.models: dict[str, GpuModel] = {}
        self.requests: dict[str, tuple[object, ...]] = {}  # workload name -> what its shape checks depend on

    def model(self, name: str) -> GpuModel:
        m = self.models.get(name)
        if m is None:
            m = self.models[name] = self.p.catalog.get(name)
        return m

    def check(self, w: Workload, a: Assignment, node: Node) -> tuple[list[str], int, int]:
        """Same result as :func:`check_shape`."""
        gs = a.gpus
        n = len(gs)
        ok_idx = 0 <= gs[0] < node.gpus if n == 1 else len(set(gs)) == n and all(0 <= g < node.gpus for g in gs)
        if not ok_idx:
            return check_shape(self.p, w, a, node)
        wkey = self.requests.get(w.name)
        if wkey is None:
            wkey = self.requests[w.name] = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib,
                                            None if w.gpu_models is None else tuple(w.gpu_models))
        mig = a.mig
        key = (wkey, node.gpu_model, n, None if mig is None else mig.profile, mig is None, a.fraction)
        hit = self.memo.get(key)
        if hit is not None:
            return [], hit[0], hit[1]
        v, units, mem = check_shape(self.p, w, a, node)
        if not v:
            self.memo[key] = (units, mem)
        return v, units, mem


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
    shapes = _Shapes(p)
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
    v.extend(_gpus_and_nodes(p, nodes, shapes, per_gpu.items(), per_node.items(), kept))
    v.extend(_check_mig_strategy(p, per_node))
    v.extend(_check_power(p, set(per_gpu)))
    return v


def _gpus_and_nodes(p: Problem, nodes: dict[str, Node], shapes: _Shapes,
                    per_gpu: Iterable[tuple[tuple[str, int], list[tuple[Assignment, Workload, int]]]],
                    per_node: Iterable[tuple[str, list[tuple[Assignment, Workload]]]],
                    kept: frozenset[Assignment]) -> list[str]:
    """The rules of each GPU (:func:`_check_gpu`) and node (CPU, memory, node isolation) over their replicas;
    the violations ordered by GPU, then by node."""
    v: list[str] = []
    gpu_v: list[tuple[tuple[str, int], list[str]]] = []
    for (nname, g), items in per_gpu:
        node = nodes[nname]
        if len(items) == 1 and items[0][1].gpus is not None and not node.gpu_modes:
            continue  # one replica alone on a whole GPU of a node without preset modes: nothing to check
        assert node.gpu_model is not None
        gv = _check_gpu(node, shapes.model(node.gpu_model), g, items, kept, p.reconfigure == "allowed")
        if gv:
            gpu_v.append(((nname, g), gv))
    for _, gv in sorted(gpu_v):
        v.extend(gv)
    node_v: list[tuple[str, list[str]]] = []
    for nname, nitems in per_node:
        node = nodes[nname]
        cpu = sum(w.cpu_milli for _, w in nitems)
        mem = sum(w.memory_mib for _, w in nitems)
        nv: list[str] = []
        if cpu > node.cpu_milli:
            nv.append(f"node {nname}: CPU {cpu / MILLI:g} cores requested, {node.cpu_milli / MILLI:g} available")
        if mem > node.memory_mib:
            nv.append(f"node {nname}: memory {mem} MiB requested, {node.memory_mib} MiB available")
        if any(w.isolation == "node" for _, w in nitems) and not all(a in kept for a, _ in nitems):
            tenants = {w.tenant for _, w in nitems}
            if len(tenants) > 1:
                nv.append(f"node {nname}: node isolation violated, tenants {sorted(tenants)} share it")
        if nv:
            node_v.append((nname, nv))
    for _, nv in sorted(node_v):
        v.extend(nv)
    return v


_WHOLE, _MIG, _FRACTION = 0, 1, 2  # a replica's kind of GPU use, as _check_gpu names it


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
    break a rule are checked replica by replica (:func:`_gpus_and_nodes`), the others pass."""
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
    shapes = _Shapes(p)
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
    v.extend(_gpus_and_nodes(p, nodes, shapes, per_gpu.items(), per_node.items(), kept))
    v.extend(_check_mig_strategy(p, per_node_mig))
    if any(d.power_w is not None for d in cl.domains):  # the busy GPUs, only for power budgets
        v.extend(_check_power(p, {(node_of[k // width].name, k % width) for k in gkeys.tolist()}))
    return v


def _check_mig_strategy(p: Problem, per_node: dict[str, list[tuple[Assignment, Workload]]]) -> list[str]:
    """MIG requests match the node's device-plugin strategy; a ``single`` node is all-MIG of one profile or no MIG."""
    v: list[str] = []
    for node in p.cluster.nodes:
        items = per_node.get(node.name, [])
        mig = [(a, w) for a, w in items if a.mig is not None]
        for a, w in mig:
            if w.mig_strategy != node.mig_strategy:
                v.append(f"{w.name}[{a.replica}] on {node.name}: a {w.mig_strategy}-strategy MIG request cannot use "
                         f"the MIG devices of a {node.mig_strategy}-strategy node")
        if node.mig_strategy != "single":
            continue
        preset = {m.gpu: m for m in node.gpu_modes if m.mode == "mig"}
        enabled = set(preset) | {g for a, _ in mig for g in a.gpus}
        if not enabled:
            continue
        profiles = {s.profile for m in preset.values() for s in (m.layout or ())} | {
            a.mig.profile for a, _ in mig if a.mig is not None}
        if len(profiles) > 1:
            v.append(f"node {node.name}: single MIG strategy, but profiles {sorted(profiles)} are used")
        if len(enabled) != node.gpus:
            v.append(f"node {node.name}: single MIG strategy, but GPUs {sorted(set(range(node.gpus)) - enabled)} "
                     "are not MIG-enabled while others are")
        used = {g for a, _ in mig for g in a.gpus}
        empty = sorted(g for g in enabled if g not in used and not (preset.get(g) and preset[g].layout))
        if empty:
            v.append(f"node {node.name}: single MIG strategy, but MIG-enabled GPUs {empty} have no instance")
    return v


def _check_power(p: Problem, busy: set[tuple[str, int]]) -> list[str]:
    budgets = {(d.level, d.name): d.power_w for d in p.cluster.domains if d.power_w is not None}
    if not budgets:
        return []
    draw: dict[tuple[str, str], int] = defaultdict(int)
    levels = p.cluster.levels
    unknown: set[str] = set()
    busy_per_node: dict[str, int] = defaultdict(int)
    for nname, _ in busy:  # the work scales with the busy GPUs, never with the GPUs declared
        busy_per_node[nname] += 1
    nodes = {n.name: n for n in p.cluster.nodes}
    for nname, count in sorted(busy_per_node.items()):
        n = nodes[nname]
        assert n.gpu_model is not None
        tdp = p.catalog.get(n.gpu_model).tdp_w
        for lvl, dom in zip(levels[:-1], n.path, strict=True):
            if (lvl, dom) in budgets:
                if tdp is None:
                    unknown.add(dom)
                draw[(lvl, dom)] += count * (tdp or 0)
    v = [f"{lvl} {dom}: GPUs draw {draw[(lvl, dom)] / 1000:g} kW, budget {budgets[(lvl, dom)] / 1000:g} kW"
         for (lvl, dom) in sorted(draw) if draw[(lvl, dom)] > (budgets[(lvl, dom)] or 0)]
    v.extend(f"{dom}: has a power budget but hosts GPUs of unknown TDP" for dom in sorted(unknown))
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
    "gpu": (check_shape, _check_gpu),
    "mig": (check_shape, _check_gpu, _check_mig_strategy),
    "fraction": (check_shape, _check_gpu),
    "isolation": (_check_gpu, check_assignments),
    "power": (_check_power,),
    "topology": (check_groups,),
    "one_model": (check_groups,),
    "gang": (check_groups,),
}
