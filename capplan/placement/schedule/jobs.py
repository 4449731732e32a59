"""The jobs of the CP-SAT time model for a problem, its inputs (node capacities, power budgets, running
replicas) and the decoding of a solution into scheduled replicas.

A job is a gang or one replica of an independent workload (:class:`~capplan.placement.schedule.timemodel.data.Job`).
Whole-GPU indices are chosen afterwards by interval colouring per node, except on the nodes that may
host MIG slices or shares (:func:`partial_nodes`), which the model takes GPU by GPU and whose GPUs and
slice starts the solution names.
"""

from __future__ import annotations

from collections import defaultdict

from capplan.model.catalog import GpuModel
from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.timing import ceil_to
from capplan.placement.core.fit import gpu_mode_fits
from capplan.placement.core.fleet import kind_demands, node_kinds
from capplan.placement.core.migslots import mig_starts
from capplan.placement.core.quota import QuotaBook
from capplan.placement.core.state import MIG, SHARED, WHOLE, ClusterState, Placement
from capplan.placement.schedule.timeline import Item
from capplan.placement.schedule.timemodel.data import Busy, Job, MigSpec, NodeCap, Place, TimeSolution


def _mig_spec(model: GpuModel, d: Demand) -> MigSpec:
    assert d.profile is not None
    return MigSpec(profile=d.profile.name, size=d.profile.memory_slices, compute=d.profile.compute_slices,
                   starts=tuple(d.profile.starts), max_count=d.profile.max_count)


def _partial_kind(d: Demand) -> str:
    return {"mig": "mig", "fraction": "share"}.get(d.kind, "whole")


#: Per node with preset GPU modes (see :func:`gpu_presets`): per GPU the kinds it takes, per GPU its class, and
#: per MIG profile the starts each GPU allows.
Presets = dict[int, tuple[tuple[frozenset[str], ...], tuple[int, ...],
                          tuple[tuple[str, tuple[tuple[int, ...], ...]], ...]]]


def _takes(presets: Presets, i: int, d: Demand) -> bool:
    """Node ``i``'s preset GPU modes leave some GPU for a MIG slice or share ``d``."""
    if i not in presets:
        return True
    takes, _, starts = presets[i]
    if d.kind == "fraction":
        return any("share" in t for t in takes)
    return any(any(per) for name, per in starts if d.profile is not None and name == d.profile.name)


def _hosted(p: Problem, w: Workload, kinds: list[list[int]], presets: Presets) -> list[tuple[Demand, list[int]]]:
    """``w``'s eligible node groups (:func:`~capplan.placement.core.fleet.kind_demands`), less the nodes whose
    preset GPU modes leave no GPU for its MIG slice or share (no GPU takes that kind, or none allows a start of
    its profile)."""
    elig = kind_demands(p, w, kinds)
    if not presets or (w.mig is None and w.gpu_fraction is None):
        return elig
    out = []
    for d, group in elig:
        mine = [i for i in group if _takes(presets, i, d)]
        if mine:
            out.append((d, mine))
    return out


class Jobs:
    """The jobs of ``p`` (gangs, or single replicas) and the replicas each stands for."""

    def __init__(self, p: Problem, horizon: int, step: int) -> None:
        self.p, self.horizon, self.step = p, horizon, step
        self.jobs: list[Job] = []
        self.replicas: list[list[int]] = []
        presets = gpu_presets(p)
        self.per_gpu = partial_nodes(p, presets)
        self.takes = {i: takes for i, (takes, _, _) in presets.items()}  # nodes with preset GPU modes
        #: ClusterQueue quotas (entry ids of the jobs' and running replicas' charges); None without queues.
        self.quota: QuotaBook | None = QuotaBook(p) if p.queues else None
        running = {a.key for a in p.running}
        cl = p.cluster
        kinds = node_kinds(p)
        # per kind of eligibility (the node groups a workload may use): its nodes, their domains, models, MIG specs
        node_memo: dict[tuple[object, ...], tuple[int, ...]] = {}
        name_memo: dict[tuple[object, ...], tuple[str, ...]] = {}
        mig_memo: dict[tuple[object, ...], tuple[MigSpec, ...]] = {}
        for wi, w in enumerate(p.workloads):
            todo = [r for r in range(w.replicas) if (w.name, r) not in running]
            earliest = ceil_to(w.release, step)
            limit = min(w.deadline if w.deadline is not None else horizon, horizon)
            last = (limit - w.duration) if w.duration is not None else horizon - 1
            latest = last // step * step
            if not todo or latest < earliest:
                continue
            elig = _hosted(p, w, kinds, presets)
            sig: tuple[object, ...] = tuple(id(group) for _, group in elig)
            if presets and (w.mig is not None or w.gpu_fraction is not None):  # groups less nodes presets rule out
                sig = (*sig, "presets", w.mig, w.gpu_memory_gib, w.gpu_fraction is None)
            if self.quota is not None and w.queue is not None:  # its queue's flavors filter the nodes (below)
                sig = (*sig, "queue", w.queue, w.cpu > 0, w.memory_gib > 0)
            if sig not in node_memo:
                node_memo[sig] = tuple(sorted(i for _, group in elig for i in group))
            nodes = node_memo[sig]
            charges: tuple[tuple[tuple[int, int], ...], ...] = ()
            if self.quota is not None and w.queue is not None:  # only nodes a flavor of its queue covers
                book = self.quota
                each = {i: book.charges(w, p.can_host(w, cl.nodes[i]), i) for i in nodes}
                nodes = tuple(i for i in nodes if each[i] is not None)
                charges = tuple(each[i] or () for i in nodes)
            lvl = w.topology.required
            if lvl:
                fixed = {cl.domain_of(cl.nodes[cl.node_index[a.node]], lvl) for a in p.running
                         if a.workload == w.name}
                if fixed:
                    keep = [k for k, i in enumerate(nodes) if cl.domain_of(cl.nodes[i], lvl) in fixed]
                    nodes = tuple(nodes[k] for k in keep)
                    charges = tuple(charges[k] for k in keep) if charges else ()
                    sig = (*sig, *sorted(fixed))
            if not nodes:
                continue
            d = p.can_host(w, cl.nodes[nodes[0]])
            assert d is not None
            kind = _partial_kind(d)
            mig: tuple[MigSpec, ...] = ()
            if kind == "mig":
                per_group = []
                for dd, group in elig:
                    model = p.gpu_model(cl.nodes[group[0]])
                    assert model is not None
                    per_group.append((group, _mig_spec(model, dd)))
                key = ("mig", sig, *(spec for _, spec in per_group))
                if key not in mig_memo:
                    specs = {i: spec for group, spec in per_group for i in group}
                    mig_memo[key] = tuple(specs[i] for i in nodes)
                mig = mig_memo[key]
            domains: tuple[str, ...] = ()
            if lvl:
                if ("domains", sig, lvl) not in name_memo:
                    name_memo[("domains", sig, lvl)] = tuple(cl.domain_of(cl.nodes[i], lvl) for i in nodes)
                domains = name_memo[("domains", sig, lvl)]
            models: tuple[str, ...] = ()
            if w.one_model:
                if ("models", sig) not in name_memo:
                    name_memo[("models", sig)] = tuple(str(cl.nodes[i].gpu_model) for i in nodes)
                models = name_memo[("models", sig)]
            common = dict(workload=wi, earliest=earliest, latest=latest, duration=w.duration,
                          nodes=nodes, gpus=w.gpus or 0, cpu=w.cpu_milli, mem=w.memory_mib, units=d.units,
                          release=w.release, priority=w.priority, guaranteed=w.sla == "guaranteed",
                          domains=domains, group=wi if lvl else -1, models=models,
                          tenant=w.tenant, isolated=w.isolation == "node", kind=kind, mig=mig,
                          fraction=d.fraction_milli, gpu_mem=d.memory_mib if kind == "share" else 0,
                          tenant_isolated=w.isolation == "tenant", charges=charges)
            groups = [todo] if w.is_gang else [[r] for r in todo]
            for g in groups:
                self.jobs.append(Job(replicas=len(g), **common))  # type: ignore[arg-type]
                self.replicas.append(g)

    def hint(self, items: list[Item]) -> tuple[list[int | None], list[dict[int, int]], list[dict[int, list[Place]]]]:
        """Scheduled replicas as per-job starts, node counts and places (GPUs and slice starts per node and
        replica); identical jobs in start order."""
        by_w: dict[str, list[Item]] = defaultdict(list)
        for it in items:
            if not it.running:
                by_w[it.w.name].append(it)
        starts: list[int | None] = []
        counts: list[dict[int, int]] = []
        places: list[dict[int, list[Place]]] = []
        used: dict[int, int] = defaultdict(int)
        for jb in self.jobs:
            w = self.p.workloads[jb.workload]
            mine = sorted(by_w.get(w.name, []), key=lambda it: (it.start, it.replica))
            if w.is_gang:
                ok = len(mine) == jb.replicas and all(jb.earliest <= it.start <= jb.latest for it in mine)
                chosen = mine if ok else []
            else:
                k = used[jb.workload]
                chosen = mine[k:k + 1]
                used[jb.workload] += 1
            cs: dict[int, int] = defaultdict(int)
            ps: dict[int, list[Place]] = defaultdict(list)
            for it in chosen:
                cs[it.pl.node] += 1
                ps[it.pl.node].append((it.pl.gpus, it.pl.slot.start if it.pl.slot is not None else 0))
            valid = bool(chosen) and all(n in jb.nodes for n in cs) and jb.earliest <= chosen[0].start <= jb.latest
            starts.append(chosen[0].start if valid else None)
            counts.append(dict(cs) if valid else {})
            places.append(dict(ps) if valid else {})
        return starts, counts, places

    def size(self, caps: list[NodeCap]) -> int:
        """Optional intervals of the full model: per job and candidate node one, and on nodes modelled GPU
        by GPU one per GPU (per replica for MIG slices and shares)."""
        total = 0
        memo: dict[tuple[int, int, bool, bool], int] = {}  # the replicas of a workload share their nodes: sum once
        for jb in self.jobs:
            key = (id(jb.nodes), jb.replicas, bool(jb.gpus), jb.partial)
            if key not in memo:
                memo[key] = sum(1 + (caps[n].gpus * (jb.replicas if jb.partial else 1) if caps[n].per_gpu and (
                    jb.gpus or jb.partial) else 0) for n in jb.nodes)
            total += memo[key]
        return total

    def decode(self, sol: TimeSolution, per_gpu: set[int] | None = None) -> list[Item]:
        """The replicas of a solution: on the nodes in ``per_gpu`` (default: those hosting a MIG slice or a
        share), the GPUs and slices the solution chose; elsewhere whole-GPU indices coloured per node in
        order of start."""
        p, cl = self.p, self.p.cluster
        per_gpu = self.per_gpu if per_gpu is None else per_gpu
        ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
        # GPUs preset to other than whole use never take a whole GPU here: never free
        never = self.horizon + 1
        free_at: dict[int, list[int]] = {i: [0 if "whole" in t else never for t in self.takes[i]] if i in self.takes
                                         else [0] * n.gpus for i, n in enumerate(cl.nodes)}
        items: list[Item] = []
        for a in p.running:
            i = cl.node_index[a.node]
            w = p.workload(a.workload)
            d = p.demand_on(w, cl.nodes[i])
            assert d is not None
            end = min(ends.get(a.key, self.horizon), self.horizon)
            for g in a.gpus:
                free_at[i][g] = end
            items.append(Item(w=w, replica=a.replica, d=d,
                              pl=Placement(node=i, gpus=tuple(a.gpus), slot=a.mig,
                                           fraction_milli=round(a.fraction * 1000) if a.fraction else 0),
                              start=0, end=end, running=True))
        order = sorted((s, j) for j, s in enumerate(sol.starts) if s is not None)
        for start, j in order:
            jb = self.jobs[j]
            w = p.workloads[jb.workload]
            end = start + w.duration if w.duration is not None else self.horizon
            reps = iter(self.replicas[j])
            placed = sol.places[j] if j < len(sol.places) else {}
            for n, cnt in sorted(sol.counts[j].items()):
                d = p.can_host(w, cl.nodes[n])
                assert d is not None
                if n in per_gpu and (jb.gpus or jb.partial):
                    given = placed.get(n, [])
                    if len(given) != cnt:
                        raise AssertionError(f"job {j} has {cnt} replicas on node {n} but {len(given)} places")
                    for gpus, first in given:
                        items.append(Item(w=w, replica=next(reps), d=d, pl=_placement(n, d, gpus, first),
                                          start=start, end=end))
                    continue
                for _ in range(cnt):
                    gpus = ()
                    if jb.gpus:
                        free = [g for g, t in enumerate(free_at[n]) if t <= start][: jb.gpus]
                        if len(free) < jb.gpus:
                            raise AssertionError(f"GPU colouring failed on node {n} at {start}")
                        for g in free:
                            free_at[n][g] = end
                        gpus = tuple(free)
                    items.append(Item(w=w, replica=next(reps), d=d, pl=Placement(node=n, gpus=gpus),
                                      start=start, end=end))
        return items


def _placement(n: int, d: Demand, gpus: tuple[int, ...], first: int) -> Placement:
    if d.kind == "mig":
        assert d.profile is not None
        return Placement(node=n, gpus=gpus, slot=MigSlot(profile=d.profile.name, start=first))
    return Placement(node=n, gpus=gpus, fraction_milli=d.fraction_milli if d.kind == "fraction" else 0)


def partial_nodes(p: Problem, presets: Presets | None = None) -> set[int]:
    """Nodes a MIG slice or share may use (given preset GPU modes, :func:`gpu_presets`) or already uses:
    the time model takes them GPU by GPU."""
    out: set[int] = set()
    cl = p.cluster
    kinds = node_kinds(p)
    presets = gpu_presets(p) if presets is None else presets
    for w in p.workloads:
        if w.mig is not None or w.gpu_fraction is not None:
            for _, group in _hosted(p, w, kinds, presets):
                out.update(group)
    out.update(cl.node_index[a.node] for a in p.running if a.mig is not None or a.fraction is not None)
    return out


def gpu_presets(p: Problem) -> Presets:
    """Per node with preset GPU modes: per GPU the kinds it may host, its class (GPUs with the same preset
    share one) and, per MIG profile of the model, the starts each GPU allows.

    Asked of the placement core on an empty cluster (:func:`~capplan.placement.core.fit.gpu_mode_fits`,
    :func:`~capplan.placement.core.migslots.mig_starts`): the same rules a plan uses, with no GPU in use.
    """
    if not any(n.gpu_modes for n in p.cluster.nodes):
        return {}
    st = ClusterState(p)
    out = {}
    for i, n in enumerate(p.cluster.nodes):
        if not n.gpu_modes or not n.gpus:
            continue
        model = p.gpu_model(n)
        takes = tuple(frozenset(kind for kind, code in (("whole", WHOLE), ("mig", MIG), ("share", SHARED))
                                if gpu_mode_fits(st, i, g, code)) for g in range(n.gpus))
        keys: dict[object, int] = {}
        classes = tuple(keys.setdefault((takes[g], st.layouts.get((i, g))), len(keys)) for g in range(n.gpus))
        starts: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] = ()
        if model is not None and model.supports_mig:
            starts = tuple((prof.name, tuple(tuple(mig_starts(st, model, i, g, prof)) if "mig" in takes[g] else ()
                                             for g in range(n.gpus))) for prof in model.profiles)
        out[i] = (takes, classes, starts)
    return out


def model_inputs(p: Problem, horizon: int) -> tuple[list[NodeCap], list[int], list[Busy]]:
    """Node capacities, power budgets and the running replicas of ``p``, as the time model takes them."""
    cl = p.cluster
    budgets_idx: dict[tuple[str, str], int] = {}
    budgets: list[int] = []
    for dom in cl.domains:
        if dom.power_w is not None:
            budgets_idx[(dom.level, dom.name)] = len(budgets)
            budgets.append(dom.power_w)
    caps = []
    presets = gpu_presets(p)
    per_gpu = partial_nodes(p, presets)
    for i, n in enumerate(cl.nodes):
        model = p.gpu_model(n)
        tdp = model.tdp_w if model is not None and model.tdp_w is not None else 0
        power = tuple(budgets_idx[(lvl, dom)] for lvl, dom in zip(cl.levels[:-1], n.path, strict=True)
                      if (lvl, dom) in budgets_idx)
        mine = i in per_gpu and n.gpus > 0
        takes, classes, starts = presets.get(i, ((), (), ()))
        gpus = n.gpus if mine or not takes else sum(1 for t in takes if "whole" in t)
        caps.append(NodeCap(gpus=gpus, cpu=n.cpu_milli, mem=n.memory_mib, tdp=tdp, power=power,
                            per_gpu=mine, takes=takes if mine else (), gpu_class=classes if mine else (),
                            mig_starts=starts if mine else (),
                            slices=model.memory_slices if model is not None and model.supports_mig else 0,
                            compute=model.compute_slices if model is not None and model.supports_mig else 0,
                            gpu_mem=round(model.memory_gib * 1024) if model is not None and model.memory_gib else 0,
                            homogeneous=model is not None and model.homogeneous))
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    busy = []
    book = QuotaBook(p) if p.queues else None
    for a in p.running:
        i, w = cl.node_index[a.node], p.workload(a.workload)
        d = p.demand_on(w, cl.nodes[i])
        charges = (book.charges(w, d, i) or ()) if book is not None else ()
        model = p.gpu_model(cl.nodes[i])
        kind = _partial_kind(d) if d is not None else "whole"
        mig = _mig_spec(model, d) if d is not None and kind == "mig" and model is not None else None
        busy.append(Busy(node=i, gpus=len(a.gpus) if kind == "whole" else 0, cpu=w.cpu_milli, mem=w.memory_mib,
                         end=min(ends.get(a.key, horizon), horizon), tenant=w.tenant, isolated=w.isolation == "node",
                         gpu_ids=tuple(a.gpus) if caps[i].per_gpu else (), kind=kind, mig=mig,
                         slice_start=a.mig.start if a.mig is not None else 0,
                         fraction=d.fraction_milli if d is not None and kind == "share" else 0,
                         gpu_mem=d.memory_mib if d is not None and kind == "share" else 0,
                         tenant_isolated=w.isolation == "tenant", charges=charges))
    return caps, budgets, busy


def job_busy(jb: Job, n: int, count: int, start: int, end: int, places: list[Place] | None) -> list[Busy]:
    """Job ``jb``'s ``count`` replicas on node ``n`` from ``start`` to ``end`` as fixed uses: one per
    replica with its GPUs when ``places`` are given (a node modelled GPU by GPU), else one for all."""
    one = jb.charges[jb.nodes.index(n)] if jb.charges else ()
    common = dict(node=n, start=start, end=end, tenant=jb.tenant, isolated=jb.isolated, kind=jb.kind,
                  fraction=jb.fraction, gpu_mem=jb.gpu_mem, tenant_isolated=jb.tenant_isolated,
                  mig=jb.mig[jb.nodes.index(n)] if jb.mig else None)
    if places is None:
        total = tuple((k, a * count) for k, a in one)
        return [Busy(gpus=jb.gpus * count, cpu=jb.cpu * count, mem=jb.mem * count, charges=total, **common)]  # type: ignore[arg-type]
    return [Busy(gpus=jb.gpus, cpu=jb.cpu, mem=jb.mem, gpu_ids=gs, slice_start=first, charges=one, **common)  # type: ignore[arg-type]
            for gs, first in places]
