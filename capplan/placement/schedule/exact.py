"""The exact time model: list scheduling's schedule as a hint, CP-SAT stages, decoded and compared.

:mod:`capplan.placement.cpsat.schedule` holds the model (its relaxations in
:mod:`capplan.placement.cpsat.schedule_relax`); this module turns a problem into its jobs,
decodes a solution (whole-GPU indices by interval colouring per node, or as the model chose them on
nodes modelled GPU by GPU), keeps the better of the
CP-SAT and list-scheduling schedules, and turns the stage bounds into the schedule's bound.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from capplan.model.catalog import GpuModel
from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.schedule import Schedule
from capplan.model.timing import ceil_to
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.state import Placement
from capplan.placement.cpsat.schedule import TimeModel
from capplan.placement.cpsat.schedule_jobs import Busy, Job, MigSpec, NodeCap, Place, TimeSolution
from capplan.placement.cpsat.schedule_relax import EnergyItem, EnergyRelaxation, pooled
from capplan.placement.schedule.heuristic import Outcome, best_list_schedule, compact, diagnose
from capplan.placement.schedule.result import eligible, energy_bound, lex_key, make_schedule, node_kinds
from capplan.placement.schedule.timeline import Item

#: Share of the time limit for list scheduling in several orders (the hint).
HINT_SHARE = 0.25
#: Share of the time limit for the pooled relaxation (its stage bounds tighten the bound).
RELAXED_SHARE = 0.15
#: Share of the time limit (at most 10 s) for the energy relaxation's bound (:func:`relaxation`).
BOUND_SHARE = 0.05
#: Share of the time limit kept, at time-order-sweep scale, for the reasons and the validator after the search.
POST_SHARE = 0.35
#: Above this many optional intervals (jobs x candidate nodes), the full time model is replaced by
#: large-neighbourhood search over time windows and domains.
FULL_MODEL_INTERVALS = 3000


def unsupported(p: Problem) -> str | None:
    """Why the time model cannot take ``p`` exactly, or None.

    Declined: preset GPU modes (a GPU fixed to whole, MIG or shared use, or to a MIG layout; also
    every ``mig_strategy: single`` node that offers MIG), and a MIG workload whose slice is worth
    different shares of a GPU on the models it may use (the work and wait then depend on the node,
    which the model's linear objective does not express).
    """
    for n in p.cluster.nodes:
        if n.gpu_modes:
            return (f"node {n.name} has preset GPU modes (fixed whole/MIG/shared GPUs or MIG layouts), which the "
                    "time model does not take")
    kinds = node_kinds(p)
    for w in p.workloads:
        if w.mig is not None:
            units = sorted({d.units for d, _ in eligible(p, w, kinds)})
            if len(units) > 1:
                return (f"workload {w.name}: its MIG slice is worth {' or '.join(str(u / UNITS_PER_GPU) for u in units)}"
                        " GPUs depending on the GPU model; the time model needs one value per workload (restrict "
                        "gpu_models)")
    return None


def _mig_spec(model: GpuModel, d: Demand) -> MigSpec:
    assert d.profile is not None
    return MigSpec(profile=d.profile.name, size=d.profile.memory_slices, compute=d.profile.compute_slices,
                   starts=tuple(d.profile.starts), max_count=d.profile.max_count)


def _partial_kind(d: Demand) -> str:
    return {"mig": "mig", "fraction": "share"}.get(d.kind, "whole")


class Jobs:
    """The jobs of ``p`` (gangs, or single replicas) and the replicas each stands for."""

    def __init__(self, p: Problem, horizon: int, step: int) -> None:
        self.p, self.horizon, self.step = p, horizon, step
        self.jobs: list[Job] = []
        self.replicas: list[list[int]] = []
        self.per_gpu = partial_nodes(p)
        running = {a.key for a in p.running}
        cl = p.cluster
        kinds = node_kinds(p)
        for wi, w in enumerate(p.workloads):
            todo = [r for r in range(w.replicas) if (w.name, r) not in running]
            earliest = ceil_to(w.release, step)
            limit = min(w.deadline if w.deadline is not None else horizon, horizon)
            last = (limit - w.duration) if w.duration is not None else horizon - 1
            latest = last // step * step
            nodes = sorted(i for _, group in eligible(p, w, kinds) for i in group)
            lvl = w.topology.required
            if lvl:
                fixed = {cl.domain_of(cl.nodes[cl.node_index[a.node]], lvl) for a in p.running
                         if a.workload == w.name}
                if fixed:
                    nodes = [i for i in nodes if cl.domain_of(cl.nodes[i], lvl) in fixed]
            if not todo or latest < earliest or not nodes:
                continue
            d = p.can_host(w, cl.nodes[nodes[0]])
            assert d is not None
            kind = _partial_kind(d)
            mig: tuple[MigSpec, ...] = ()
            if kind == "mig":
                specs = {}
                for dd, group in eligible(p, w, kinds):
                    model = p.gpu_model(cl.nodes[group[0]])
                    assert model is not None
                    for i in group:
                        specs[i] = _mig_spec(model, dd)
                mig = tuple(specs[i] for i in nodes)
            common = dict(workload=wi, earliest=earliest, latest=latest, duration=w.duration,
                          nodes=tuple(nodes), gpus=w.gpus or 0, cpu=w.cpu_milli, mem=w.memory_mib, units=d.units,
                          release=w.release, priority=w.priority, guaranteed=w.sla == "guaranteed",
                          domains=tuple(cl.domain_of(cl.nodes[i], lvl) for i in nodes) if lvl else (),
                          group=wi if lvl else -1,
                          models=tuple(str(cl.nodes[i].gpu_model) for i in nodes) if w.one_model else (),
                          tenant=w.tenant, isolated=w.isolation == "node", kind=kind, mig=mig,
                          fraction=d.fraction_milli, gpu_mem=d.memory_mib if kind == "share" else 0,
                          tenant_isolated=w.isolation == "tenant")
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
        for jb in self.jobs:
            for n in jb.nodes:
                per = caps[n].gpus * (jb.replicas if jb.partial else 1) if caps[n].per_gpu and (
                    jb.gpus or jb.partial) else 0
                total += 1 + per
        return total

    def decode(self, sol: TimeSolution, per_gpu: set[int] | None = None) -> list[Item]:
        """The replicas of a solution: on the nodes in ``per_gpu`` (default: those hosting a MIG slice or a
        share), the GPUs and slices the solution chose; elsewhere whole-GPU indices coloured per node in
        order of start."""
        p, cl = self.p, self.p.cluster
        per_gpu = self.per_gpu if per_gpu is None else per_gpu
        ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
        free_at: dict[int, list[int]] = {i: [0] * n.gpus for i, n in enumerate(cl.nodes)}
        items: list[Item] = []
        for a in p.running:
            i = cl.node_index[a.node]
            w = p.workload(a.workload)
            d = p.can_host(w, cl.nodes[i])
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
                    gpus: tuple[int, ...] = ()
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


def partial_nodes(p: Problem) -> set[int]:
    """Nodes a MIG slice or share may use or already uses: the time model takes them GPU by GPU."""
    out: set[int] = set()
    cl = p.cluster
    kinds = node_kinds(p)
    for w in p.workloads:
        if w.mig is not None or w.gpu_fraction is not None:
            for _, group in eligible(p, w, kinds):
                out.update(group)
    out.update(cl.node_index[a.node] for a in p.running if a.mig is not None or a.fraction is not None)
    return out


def capacity_rate(p: Problem) -> int:
    """Most demand units the cluster can run at one instant: every GPU, less what power budgets forbid.

    Nodes are grouped by their outermost domain with a budget; such a group runs at most
    ``budget // (smallest TDP)`` GPUs at once (a GPU in use draws its TDP).
    """
    cl = p.cluster
    budgets = {(d.level, d.name): d.power_w for d in cl.domains if d.power_w is not None}
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    free = 0
    for n in cl.nodes:
        key = next(((lvl, dom) for lvl, dom in zip(cl.levels[:-1], n.path, strict=False)
                    if (lvl, dom) in budgets), None)
        model = p.gpu_model(n)
        if key is None or model is None or not model.tdp_w:
            free += n.gpus
        else:
            groups[key] += [model.tdp_w] * n.gpus
    for key, tdps in groups.items():
        budget = budgets[key]
        assert budget is not None
        free += min(len(tdps), budget // min(tdps))
    return free * UNITS_PER_GPU


def relaxation(p: Problem, horizon: int, step: int, points: int | None = None) -> EnergyRelaxation:
    """The energy relaxation of ``p``: a gang is one item, every other replica one item."""
    running = {a.key for a in p.running}
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    cl = p.cluster
    items: list[EnergyItem] = []
    kinds = node_kinds(p)
    for w in p.workloads:
        todo = [r for r in range(w.replicas) if (w.name, r) not in running]
        rates = [d.units for d, _ in eligible(p, w, kinds)]
        if not todo or not rates:
            continue
        earliest = ceil_to(w.release, step)
        limit = min(w.deadline if w.deadline is not None else horizon, horizon)
        last = (limit - w.duration) if w.duration is not None else horizon - 1
        latest = last // step * step
        if latest < earliest:
            continue
        most = max(rates) * (w.duration if w.duration is not None else horizon - earliest)
        for g in [todo] if w.is_gang else [[r] for r in todo]:
            items.append(EnergyItem(priority=w.priority, earliest=earliest, latest=latest, duration=w.duration,
                                    rate=min(rates) * len(g), work=most * len(g)))
    fixed = []
    for a in p.running:
        d = p.can_host(p.workload(a.workload), cl.nodes[cl.node_index[a.node]])
        if d is not None and d.units:
            fixed.append((d.units, min(ends.get(a.key, horizon), horizon)))
    if points is None:  # windows from at most this many starts and ends: about 5e6 item-window terms
        points = max(24, min(300, int((5e6 / max(1, len(items))) ** 0.5)))
    return EnergyRelaxation(items, fixed, capacity_rate(p), horizon, points)


def combined_bound(p: Problem, horizon: int, step: int, *sols: TimeSolution | None,
                   relax: EnergyRelaxation | None = None, relax_time: float = 0.0, seed: int = 0) -> dict[int, int]:
    """Per-priority bound: the energy bound, tightened level by level by the CP-SAT stage bounds that hold.

    A stage's bound holds given the earlier stages at least at the values that model reached. So
    a level's stage bound is used only while every higher level's bound, as finally chosen, is at
    least that model's value there (then every schedule that reaches the chosen bounds above is one
    the stage covered). A model with a guaranteed stage conditions on every guaranteed job on
    time; its stages are used only when that stage is proven and met.
    """
    running = {a.key for a in p.running}
    needed = sum(1 for w in p.workloads if w.sla == "guaranteed" for r in range(w.replicas)
                 if (w.name, r) not in running)
    fixed = _running_work(p, horizon)
    usable: list[dict[str, tuple[int, float]]] = []
    for sol in sols:
        if sol is None:
            continue
        stages = {name: (value, bound) for name, value, bound, _ in sol.stages}
        g = next((x for x in sol.stages if x[0] == "guaranteed"), None)
        if g is not None and (g[3] != "optimal" or g[1] < needed):
            continue
        usable.append(stages)
    caps: dict[int, int] = {}
    out = energy_bound(p, horizon, step)
    for i, q in enumerate(p.priorities):
        for stages in usable:
            key = f"priority {q}"
            if key not in stages or not math.isfinite(stages[key][1]):
                continue
            if all(out[h] >= stages[f"priority {h}"][0] + fixed[h] for h in p.priorities[:i]
                   if f"priority {h}" in stages):
                caps[q] = min(caps.get(q, out[q]), int(stages[key][1] + 1e-6) + fixed[q])
        if relax is not None and relax_time > 0:
            floors = {h: max(0, out[h] - fixed[h]) for h in p.priorities[:i]}
            got = relax.level(q, floors, relax_time / len(p.priorities), seed)
            if got is not None:
                caps[q] = min(caps.get(q, out[q]), got + fixed[q])
        out = energy_bound(p, horizon, step, caps)
    return out


def _running_work(p: Problem, horizon: int) -> dict[int, int]:
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    out: dict[int, int] = defaultdict(int)
    cl = p.cluster
    for a in p.running:
        w = p.workload(a.workload)
        d = p.can_host(w, cl.nodes[cl.node_index[a.node]])
        if d is not None:
            out[w.priority] += d.units * min(ends.get(a.key, horizon), horizon)
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
    per_gpu = partial_nodes(p)
    for i, n in enumerate(cl.nodes):
        model = p.gpu_model(n)
        tdp = model.tdp_w if model is not None and model.tdp_w is not None else 0
        power = tuple(budgets_idx[(lvl, dom)] for lvl, dom in zip(cl.levels[:-1], n.path, strict=True)
                      if (lvl, dom) in budgets_idx)
        caps.append(NodeCap(gpus=n.gpus, cpu=n.cpu_milli, mem=n.memory_mib, tdp=tdp, power=power,
                            per_gpu=i in per_gpu and n.gpus > 0,
                            slices=model.memory_slices if model is not None and model.supports_mig else 0,
                            compute=model.compute_slices if model is not None and model.supports_mig else 0,
                            gpu_mem=round(model.memory_gib * 1024) if model is not None and model.memory_gib else 0,
                            homogeneous=model is not None and model.homogeneous))
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    busy = []
    for a in p.running:
        i, w = cl.node_index[a.node], p.workload(a.workload)
        d = p.can_host(w, cl.nodes[i])
        model = p.gpu_model(cl.nodes[i])
        kind = _partial_kind(d) if d is not None else "whole"
        mig = _mig_spec(model, d) if d is not None and kind == "mig" and model is not None else None
        busy.append(Busy(node=i, gpus=len(a.gpus) if kind == "whole" else 0, cpu=w.cpu_milli, mem=w.memory_mib,
                         end=min(ends.get(a.key, horizon), horizon), tenant=w.tenant, isolated=w.isolation == "node",
                         gpu_ids=tuple(a.gpus) if caps[i].per_gpu else (), kind=kind, mig=mig,
                         slice_start=a.mig.start if a.mig is not None else 0,
                         fraction=d.fraction_milli if d is not None and kind == "share" else 0,
                         gpu_mem=d.memory_mib if d is not None and kind == "share" else 0,
                         tenant_isolated=w.isolation == "tenant"))
    return caps, budgets, busy


def job_busy(jb: Job, n: int, count: int, start: int, end: int, places: list[Place] | None) -> list[Busy]:
    """Job ``jb``'s ``count`` replicas on node ``n`` from ``start`` to ``end`` as fixed uses: one per
    replica with its GPUs when ``places`` are given (a node modelled GPU by GPU), else one for all."""
    common = dict(node=n, start=start, end=end, tenant=jb.tenant, isolated=jb.isolated, kind=jb.kind,
                  fraction=jb.fraction, gpu_mem=jb.gpu_mem, tenant_isolated=jb.tenant_isolated,
                  mig=jb.mig[jb.nodes.index(n)] if jb.mig else None)
    if places is None:
        return [Busy(gpus=jb.gpus * count, cpu=jb.cpu * count, mem=jb.mem * count, **common)]  # type: ignore[arg-type]
    return [Busy(gpus=jb.gpus, cpu=jb.cpu, mem=jb.mem, gpu_ids=gs, slice_start=first, **common)  # type: ignore[arg-type]
            for gs, first in places]


def schedule_cpsat(p: Problem, horizon: int, step: int, time_limit: float, seed: int = 0,
                   workers: int = 1, lns: bool | None = None) -> Schedule:
    """CP-SAT over the jobs of ``p``, hinted by list scheduling; the better schedule of the two.

    Up to :data:`FULL_MODEL_INTERVALS` optional intervals the full time model is solved; above, a
    large-neighbourhood search over time windows and domains
    (:func:`capplan.placement.schedule.window.improve`) re-solves parts of list scheduling's schedule
    (``lns``: force one or the other).
    """
    from capplan.placement.schedule import SWEEP_FROM_REPLICAS
    from capplan.placement.schedule.sweep import sweep_schedule
    from capplan.placement.schedule.window import improve

    t0 = time.perf_counter()
    known: Outcome | None = None
    if sum(w.replicas for w in p.workloads) >= SWEEP_FROM_REPLICAS:
        known = sweep_schedule(p, horizon, step)
        heuristic, order = known.items, "time-order sweep"
    else:
        heuristic, order = best_list_schedule(p, horizon, step, HINT_SHARE * time_limit)
    jobs = Jobs(p, horizon, step)
    caps, budgets, busy = model_inputs(p, horizon)
    sol: TimeSolution | None = None
    items = heuristic
    strategy = "heuristic"
    left = time_limit - (time.perf_counter() - t0)
    relaxed: TimeSolution | None = None
    if jobs.jobs and left > 0.1 and known is None:  # at sweep scale the pooled model proves nothing in time
        relaxed = pooled(jobs.jobs, busy, caps, horizon, step, gpus=[capacity_rate(p) // UNITS_PER_GPU]).solve(
            None, RELAXED_SHARE * left, seed, workers)
        left = time_limit - (time.perf_counter() - t0)
    relax = relaxation(p, horizon, step)
    relax_time = min(BOUND_SHARE * time_limit, 10.0)
    left -= relax_time
    extra: dict[str, object] = {}
    if lns is None:
        lns = jobs.size(caps) > FULL_MODEL_INTERVALS
    if jobs.jobs and left > 0.1 and not lns:
        tm = TimeModel(jobs.jobs, busy, caps, budgets, horizon, step)
        sol = tm.solve(jobs.hint(heuristic), left, seed, workers)
        if sol is not None:
            cand = jobs.decode(sol)
            strategy = "cpsat"
            if lex_key(p, cand, step) >= lex_key(p, items, step):
                items = cand
            else:
                strategy = "cpsat+heuristic"
    elif jobs.jobs and left > 0.1:
        if known is not None:  # reasons and the validator take seconds on thousands of replicas
            left -= POST_SHARE * time_limit
        items, extra = improve(p, jobs, items, horizon, step, left, seed, workers, (caps, budgets, busy))
        strategy = "cpsat-lns"
        if known is None:  # the search's windows may leave work that could start earlier
            moved = compact(p, horizon, step, items)
            if lex_key(p, moved, step) > lex_key(p, items, step):
                items = moved
    diag = diagnose(p, horizon, step, items, known)
    proven = sol is not None and sol.proven() and items is not heuristic
    exact = sol if sol is not None and sol.exact else None  # a stricter model's stage bounds prove nothing
    bound = combined_bound(p, horizon, step, exact, relaxed, relax=relax, relax_time=relax_time, seed=seed)
    return make_schedule(p, strategy, items, diag.unscheduled, horizon=horizon, step=step,
                         reasons=diag.reasons, bound=bound, proven_optimal=proven,
                         seconds=time.perf_counter() - t0, seed=seed,
                         extra_metrics={"order": order, "stages": [list(s) for s in sol.stages] if sol else [],
                                        "pooled_stages": [list(s) for s in relaxed.stages] if relaxed else [],
                                        **({"model_exact": sol.exact} if sol is not None else {}), **extra})
