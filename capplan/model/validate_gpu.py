"""The validator's rules for one assignment, one GPU and one node: request shapes, GPU use (whole, MIG slices
and geometry, shares and GPU memory), tenants, and CPU and memory per node; the MIG strategy of a node's device
plugin and the power budgets of the busy GPUs.

Part of the independent validator (see :mod:`capplan.model.validate`): its own bookkeeping, no planner code.
:mod:`capplan.model.validate_rules` applies them to a set of assignments (replica by replica, or after its
array screen on large plans) and adds the rules across nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import Assignment
from capplan.model.problem import Node, Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU, gib_to_mib


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


def check_gpu(node: Node, model: GpuModel, g: int,
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


class Shapes:
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


def gpus_and_nodes(p: Problem, nodes: dict[str, Node], shapes: Shapes,
                    per_gpu: Iterable[tuple[tuple[str, int], list[tuple[Assignment, Workload, int]]]],
                    per_node: Iterable[tuple[str, list[tuple[Assignment, Workload]]]],
                    kept: frozenset[Assignment]) -> list[str]:
    """The rules of each GPU (:func:`check_gpu`) and node (CPU, memory, node isolation) over their replicas;
    the violations ordered by GPU, then by node."""
    v: list[str] = []
    gpu_v: list[tuple[tuple[str, int], list[str]]] = []
    for (nname, g), items in per_gpu:
        node = nodes[nname]
        if len(items) == 1 and items[0][1].gpus is not None and not node.gpu_modes:
            continue  # one replica alone on a whole GPU of a node without preset modes: nothing to check
        assert node.gpu_model is not None
        gv = check_gpu(node, shapes.model(node.gpu_model), g, items, kept, p.reconfigure == "allowed")
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


def check_mig_strategy(p: Problem, per_node: dict[str, list[tuple[Assignment, Workload]]]) -> list[str]:
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


def check_power(p: Problem, busy: set[tuple[str, int]]) -> list[str]:
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
