"""The independent plan validator.

It checks every rule of the problem from scratch, with its own simple bookkeeping and without
any planner code, so a planner bug cannot hide behind shared logic. Every planner's result goes
through :func:`assert_valid` before it is returned; a violation raises
:class:`~capplan.model.errors.PlanValidationError` and the plan is never emitted.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.errors import PlanValidationError
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Node, Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU, gib_to_mib, units_to_gpus

_TOL = 1e-6


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


def _shape(p: Problem, w: Workload, a: Assignment, node: Node) -> tuple[list[str], int, int]:
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
               items: list[tuple[Assignment, Workload, int]]) -> list[str]:
    v: list[str] = []
    where = f"GPU {g} of {node.name}"
    kinds = {"whole" if w.gpus is not None else "mig" if w.mig is not None else "fraction" for _, w, _ in items}
    if len(kinds) > 1:
        return [f"{where}: mixes {sorted(kinds)} use"]
    kind = kinds.pop()
    fixed = node.mode_of(g)
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
            assert a.mig is not None
            prof = next((x for x in model.profiles if x.name == a.mig.profile), None)
            if prof is None:
                continue  # reported by _shape
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
    if len(tenants) > 1 and any(w.isolation == "tenant" for _, w, _ in items):
        v.append(f"{where}: tenant isolation violated, tenants {sorted(tenants)} share it")
    return v


class _Shapes:
    """Per-plan caches for :func:`_shape`: the outcome of a shape check depends only on the workload,
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
        """Same result as :func:`_shape`."""
        gs = a.gpus
        n = len(gs)
        ok_idx = 0 <= gs[0] < node.gpus if n == 1 else len(set(gs)) == n and all(0 <= g < node.gpus for g in gs)
        if not ok_idx:
            return _shape(self.p, w, a, node)
        wkey = self.requests.get(w.name)
        if wkey is None:
            wkey = self.requests[w.name] = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib,
                                            None if w.gpu_models is None else tuple(w.gpu_models))
        mig = a.mig
        key = (wkey, node.gpu_model, n, None if mig is None else mig.profile, mig is None, a.fraction)
        hit = self.memo.get(key)
        if hit is not None:
            return [], hit[0], hit[1]
        v, units, mem = _shape(self.p, w, a, node)
        if not v:
            self.memo[key] = (units, mem)
        return v, units, mem


def check_assignments(p: Problem, assignments: Iterable[Assignment]) -> list[str]:
    """Check resource rules of a set of assignments (shapes, GPUs, MIG, CPU, memory, isolation, power)."""
    v: list[str] = []
    cl = p.cluster
    given = list(assignments)
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
    gpu_v: list[tuple[tuple[str, int], list[str]]] = []
    for (nname, g), items in per_gpu.items():
        node = nodes[nname]
        if len(items) == 1 and items[0][1].gpus is not None and not node.gpu_modes:
            continue  # one replica alone on a whole GPU of a node without preset modes: nothing to check
        assert node.gpu_model is not None
        gv = _check_gpu(node, shapes.model(node.gpu_model), g, items)
        if gv:
            gpu_v.append(((nname, g), gv))
    for _, gv in sorted(gpu_v):
        v.extend(gv)
    node_v: list[tuple[str, list[str]]] = []
    for nname, nitems in per_node.items():
        node = nodes[nname]
        cpu = sum(w.cpu_milli for _, w in nitems)
        mem = sum(w.memory_mib for _, w in nitems)
        nv: list[str] = []
        if cpu > node.cpu_milli:
            nv.append(f"node {nname}: CPU {cpu / MILLI:g} cores requested, {node.cpu_milli / MILLI:g} available")
        if mem > node.memory_mib:
            nv.append(f"node {nname}: memory {mem} MiB requested, {node.memory_mib} MiB available")
        if any(w.isolation == "node" for _, w in nitems):
            tenants = {w.tenant for _, w in nitems}
            if len(tenants) > 1:
                nv.append(f"node {nname}: node isolation violated, tenants {sorted(tenants)} share it")
        if nv:
            node_v.append((nname, nv))
    for _, nv in sorted(node_v):
        v.extend(nv)
    v.extend(_check_mig_strategy(p, per_node))
    v.extend(_check_power(p, set(per_gpu)))
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


class _Keyed(Protocol):
    @property
    def workload(self) -> str: ...

    @property
    def replica(self) -> int: ...


A = TypeVar("A", bound=_Keyed)


def check_coverage(p: Problem, assigned: Sequence[A], listed: Sequence[tuple[str, Sequence[int]]],
                   words: tuple[str, str], v: list[str]) -> dict[tuple[str, int], A]:
    """Every replica is assigned once or listed as left out once; violations go to ``v``.

    Returns the assignments of known replicas by key. ``words`` name the two outcomes in messages
    (``("placed", "unplaced")`` for a plan, ``("scheduled", "unscheduled")`` for a schedule).
    """
    works = {w.name: w for w in p.workloads}
    placed: dict[tuple[str, int], A] = {}
    for a in assigned:
        w = works.get(a.workload)
        if w is None or a.replica >= w.replicas:
            v.append(f"assignment for unknown replica {a.workload}[{a.replica}]")
            continue
        if (a.workload, a.replica) in placed:
            v.append(f"{a.workload}[{a.replica}] is assigned twice")
        placed[(a.workload, a.replica)] = a
    left: set[tuple[str, int]] = set()
    for name, replicas in listed:
        for r in replicas:
            if name not in works or r >= works[name].replicas:
                v.append(f"{words[1]} entry for unknown replica {name}[{r}]")
            elif (name, r) in placed or (name, r) in left:
                v.append(f"{name}[{r}] is listed more than once")
            left.add((name, r))
    for w in p.workloads:
        missing = [r for r in range(w.replicas) if (w.name, r) not in placed and (w.name, r) not in left]
        if missing:
            v.append(f"{w.name}: replicas {missing} are neither {words[0]} nor listed {words[1]}")
    return placed


def check_plan(p: Problem, plan: Plan) -> list[str]:
    """Check every rule of ``p`` on ``plan``; return the violations (empty when valid)."""
    v: list[str] = []
    placed = check_coverage(p, plan.assignments, [(u.workload, u.replicas) for u in plan.unplaced],
                            ("placed", "unplaced"), v)
    v.extend(check_assignments(p, plan.assignments))
    v.extend(_check_groups(p, placed))
    v.extend(_check_running(p, plan, placed))
    v.extend(_check_summary(p, plan, placed))
    v.extend(_check_numbers(plan))
    return v


def _check_numbers(plan: Plan) -> list[str]:
    """The plan's own numbers: finite objective, bound, gap and time; a gap in 0..1."""
    v = [f"{name} {list(values)} holds a value that is not a finite number"
         for name, values in (("objective", plan.objective), ("bound", plan.bound))
         if not all(math.isfinite(x) for x in values)]
    if not math.isfinite(plan.gap) or not 0 <= plan.gap <= 1:
        v.append(f"gap {plan.gap} is not a finite number in 0..1")
    if not math.isfinite(plan.solve_seconds) or plan.solve_seconds < 0:
        v.append(f"solve_seconds {plan.solve_seconds} is not a finite number >= 0")
    return v


def _check_groups(p: Problem, placed: dict[tuple[str, int], Assignment]) -> list[str]:
    v: list[str] = []
    nodes = {n.name: n for n in p.cluster.nodes}
    for w in p.workloads:
        mine = [placed[(w.name, r)] for r in range(w.replicas) if (w.name, r) in placed]
        if w.is_gang and 0 < len(mine) < w.replicas:
            v.append(f"{w.name}: gang placed partially ({len(mine)} of {w.replicas} replicas)")
        gpu_kind = w.gpus is not None or w.mig is not None or w.gpu_fraction is not None
        if w.kind == "training" and not w.mixed_models and gpu_kind:
            models = {nodes[a.node].gpu_model for a in mine if a.node in nodes}
            if len(models) > 1:
                v.append(f"{w.name}: gang spans GPU models {sorted(str(m) for m in models)}; "
                         "set mixed_models: true to allow it")
        lvl = w.topology.required
        if lvl and mine and all(a.node in nodes for a in mine):
            doms = {p.cluster.domain_of(nodes[a.node], lvl) for a in mine}
            if len(doms) > 1:
                v.append(f"{w.name}: must sit inside one {lvl}, spans {sorted(doms)}")
    return v


def _check_running(p: Problem, plan: Plan, placed: dict[tuple[str, int], Assignment]) -> list[str]:
    v: list[str] = []
    running = {a.key: a for a in p.running}
    evicted = {(e.workload, e.replica): e for e in plan.evictions}
    migrated = {(m.workload, m.replica): m for m in plan.migrations}
    prio = {w.name: w.priority for w in p.workloads}
    newcomer: dict[str, int] = {}  # per node, the highest priority of a replica placed there that was not running
    if evicted:
        for x in plan.assignments:
            if x.workload in prio and x.key not in running:
                newcomer[x.node] = max(newcomer.get(x.node, prio[x.workload]), prio[x.workload])
    for key, e in evicted.items():
        w = p.workload(e.workload) if e.workload in prio else None
        if key not in running or w is None:
            v.append(f"eviction of {e.workload}[{e.replica}], which is not running")
            continue
        if not w.preemptible:
            v.append(f"{w.name} is not preemptible but replica {e.replica} is evicted")
        if key in placed:
            v.append(f"{w.name}[{e.replica}] is evicted and placed at once; list it as a migration")
        if newcomer.get(e.node, w.priority) <= w.priority:
            v.append(f"{w.name}[{e.replica}] is evicted without a higher-priority replica taking its node")
    for key, m in migrated.items():
        if key not in running or m.workload not in prio:
            v.append(f"migration of {m.workload}[{m.replica}], which is not running")
            continue
        if not p.workload(m.workload).migratable:
            v.append(f"{m.workload} is not migratable but replica {m.replica} moves")
        a = placed.get(key)
        if a is None or a.node != m.to_node or running[key].node != m.from_node:
            v.append(f"{m.workload}[{m.replica}]: migration does not match its assignments")
    for key, r in running.items():
        if key in evicted or key in migrated:
            continue
        if placed.get(key) != r:
            v.append(f"running replica {r.workload}[{r.replica}] moved or stopped without an eviction/migration")
    return v


def _check_summary(p: Problem, plan: Plan, placed: dict[tuple[str, int], Assignment]) -> list[str]:
    v: list[str] = []
    works = {w.name: w for w in p.workloads}
    missing_guaranteed = sorted({w.name for w in p.workloads if w.sla == "guaranteed"
                                 and any((w.name, r) not in placed for r in range(w.replicas))})
    if missing_guaranteed and plan.status != "infeasible":
        v.append(f"status is {plan.status} but guaranteed workloads {missing_guaranteed} are not placed")
    if not missing_guaranteed and plan.status == "infeasible":
        v.append("status is infeasible although every guaranteed workload is placed")
    if tuple(plan.priorities) != p.priorities:
        v.append(f"priorities {list(plan.priorities)} differ from the problem's {list(p.priorities)}")
        return v
    units: dict[int, int] = defaultdict(int)
    nodes = {n.name: n for n in p.cluster.nodes}
    value: dict[str, int] = {}  # per workload: the value is fixed by the workload
    for a in placed.values():
        w, node = works.get(a.workload), nodes.get(a.node)
        if w is not None and node is not None:
            if w.name not in value:
                value[w.name] = replica_value(p, w)
            units[w.priority] += value[w.name]
    expected = [units_to_gpus(units[q]) for q in p.priorities]
    v.extend(check_claims(plan.objective, plan.bound, expected))
    return v


def check_claims(objective: Sequence[float], bound: Sequence[float], expected: Sequence[float]) -> list[str]:
    """The claimed per-priority ``objective`` equals the recomputed ``expected``, and the claimed
    ``bound`` is not below it in the lexicographic (priority) order; empty when both hold."""
    v: list[str] = []
    if len(objective) != len(expected) or any(abs(x - y) > _TOL for x, y in zip(objective, expected, strict=False)):
        v.append(f"objective {list(objective)} differs from the recomputed {list(expected)}")
    if bound:
        if len(bound) != len(expected):
            v.append("bound and objective have different lengths")
        else:
            for b, o in zip(bound, expected, strict=True):
                if b + _TOL < o:
                    v.append(f"bound {list(bound)} is below the objective {list(expected)}")
                    break
                if b > o + _TOL:
                    break
    return v


def assert_valid(p: Problem, plan: Plan) -> Plan:
    """Return ``plan`` if it passes :func:`check_plan`, else raise :class:`PlanValidationError`."""
    violations = check_plan(p, plan)
    if violations:
        raise PlanValidationError(violations)
    return plan
