"""A fast upper bound on the placed value per priority: a GPU-level cutting-stock relaxation.

Items occupy what they hold on each GPU model (their GPUs, share or MIG slice there) and are worth
their workload's value (:meth:`~capplan.model.problem.Problem.replica_value`), wherever they land.

Every plan packs each GPU with replicas whose per-GPU demand fits in one GPU (``UNITS_PER_GPU``
units): a whole GPU or shares summing to at most one GPU, or else (a GPU runs in one mode) MIG
instances forming a valid layout of the model (memory slices at allowed starts without overlap,
counts, compute slices: :mod:`capplan.placement.core.miglayouts`), shares also within the GPU's memory.
A GPU preset to a fixed MIG layout (``gpu_modes``, unless ``reconfigure: allowed``) holds only a part of
that layout. Dropping everything that ties GPUs together (nodes, the packing of gangs into domains,
isolation) but keeping the GPU models, their preset layouts, the host CPU and memory of all nodes of a kind
in aggregate, the busy GPUs the power budgets allow and the replicas the best single domain holds for a
gang or a workload with
``topology.required`` (:mod:`capplan.placement.core.domaincap`) gives a relaxation whose optimum
bounds every plan's objective: an LP over packing *patterns* of one GPU (Gilmore-Gomory), with
interchangeable replicas and GPUs aggregated into counts. Patterns are generated on demand
(column generation) and priced by an exact unbounded knapsack (whole GPUs and shares) or by
enumerating the model's maximal MIG layouts (the LP and its pricing:
:mod:`capplan.placement.core.patternlp`). If time runs out before no pattern improves, the
Lagrangian (Farley) correction keeps the value a valid bound.

Each priority is bounded on its own: its replicas alone on the whole fleet, which bounds that
component of any plan's objective whatever the other priorities place.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

from capplan.model.catalog import GpuModel
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.units import UNITS_PER_GPU, gib_to_mib
from capplan.placement.core.domaincap import busy_caps, full_value, gang_models, joint_cap, replica_caps
from capplan.placement.core.patternlp import MEM_CELLS, Items, Preset, Slot, bound_items

_EPS = 1e-7
_CPU_GRID, _MEM_GRID = 1000, 8192  # rounding *down* keeps the relaxation valid and merges items


@dataclass(frozen=True)
class Bound:
    """Result of :func:`upper_bound`.

    Attributes
    ----------
    per_priority
        Upper bound on placed demand units per priority.
    converged
        True when column generation proved the LP optimum (otherwise the Farley bound is used).
    seconds
        Time spent.
    """

    per_priority: dict[int, int]
    converged: bool
    seconds: float


def _sizes(p: Problem, w: Workload, models: list[str], max_gpus: list[int], presets: list[Preset]
           ) -> tuple[dict[int, Slot], int]:
    """What ``w`` holds per GPU slot on each bin type, and GPU slots per replica (a bin type with a preset MIG
    layout holds only the layout's profiles)."""
    sizes: dict[int, Slot] = {}
    slots = 1
    allowed = None if w.gpu_models is None else set(p.allowed_models(w))
    per_model: dict[str, object] = {}
    for b, name in enumerate(models):
        if allowed is not None and name not in allowed:
            continue
        if name not in per_model:
            per_model[name] = p.demand(w, p.catalog.get(name))
        d = per_model[name]
        if not isinstance(d, Demand) or d.kind == "none" or (d.kind == "whole" and d.gpus > max_gpus[b]):
            continue
        pre = presets[b]
        if pre is not None and (d.kind != "mig" or d.profile is None or d.profile.name not in pre):
            continue
        slots = d.gpus if d.kind == "whole" else 1
        if d.kind == "mig" and d.profile is not None:
            sizes[b] = ("m", d.profile.name, 0)
        elif d.kind == "whole":
            sizes[b] = ("u", UNITS_PER_GPU, 0)
        else:
            mem = p.catalog.get(name).memory_gib
            cells = d.memory_mib * MEM_CELLS // gib_to_mib(mem) if d.memory_mib and mem else 0
            sizes[b] = ("u", d.units, cells)
    return sizes, slots


def _items(p: Problem, ws: list[Workload], models: list[str], max_gpus: list[int], presets: list[Preset],
           of: dict[str, int] | None = None, caps: dict[str, int] | None = None,
           fits: dict[str, frozenset[str]] | None = None) -> Items:
    """Item types of ``ws`` (filling ``of``: workload name -> item type index, when given); ``caps``: most
    replicas of a workload any plan places (:func:`~capplan.placement.core.domaincap.replica_caps`), ``fits``:
    the GPU models a gang fits on whole (:func:`~capplan.placement.core.domaincap.gang_models`)."""
    caps = caps or {}
    fits = fits or {}
    groups: dict[tuple[tuple[tuple[int, Slot], ...], int, int, int], int] = defaultdict(int)
    key_of: dict[str, tuple[tuple[tuple[int, Slot], ...], int, int, int]] = {}
    memo: dict[tuple[object, ...], tuple[tuple[tuple[int, Slot], ...], int]] = {}
    for w in ws:
        shape = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.gpu_models)
        found = memo.get(shape)
        if found is None:
            sizes, slots = _sizes(p, w, models, max_gpus, presets)
            found = memo[shape] = (tuple(sorted(sizes.items())), slots)
        size_key, slots = found
        if w.name in fits:
            size_key = tuple((b, x) for b, x in size_key if models[b] in fits[w.name])
        if not size_key:
            continue
        key = (size_key, (w.cpu_milli // slots) // _CPU_GRID * _CPU_GRID,
               (w.memory_mib // slots) // _MEM_GRID * _MEM_GRID, p.replica_value(w) // slots)
        groups[key] += caps.get(w.name, w.replicas) * slots
        key_of[w.name] = key
    keys = sorted(k for k in groups if groups[k] > 0)
    if of is not None:
        pos = {k: i for i, k in enumerate(keys)}
        of.update({name: pos[k] for name, k in key_of.items() if k in pos})
    return Items(sizes=[dict(k[0]) for k in keys], count=[groups[k] for k in keys],
                  cpu=[k[1] for k in keys], mem=[k[2] for k in keys], value=[k[3] for k in keys])


#: A GPU's fixed MIG layout as sorted (profile name, instances) pairs; None: no fixed layout.
_Layout = tuple[tuple[str, int], ...] | None


def _fixed_layouts(p: Problem, i: int) -> tuple[_Layout, ...]:
    """Each GPU's fixed MIG layout on node ``i``: a preset ``layout`` kept (``reconfigure`` not ``allowed``, or a
    ``mig_strategy: single`` node) on a GPU no running replica holds (those count as free: looser, still valid)."""
    n = p.cluster.nodes[i]
    if p.reconfigure == "allowed" and n.mig_strategy != "single":
        return (None,) * n.gpus
    out: list[_Layout] = [None] * n.gpus
    for m in n.gpu_modes:
        if m.mode == "mig" and m.layout is not None and m.gpu < n.gpus:
            counts: dict[str, int] = defaultdict(int)
            for s in m.layout:
                counts[s.profile] += 1
            out[m.gpu] = tuple(sorted(counts.items()))
    if p.running and any(out):
        for a in p.running:
            if a.node == n.name:
                for g in a.gpus:
                    if 0 <= g < n.gpus:
                        out[g] = None
    return tuple(out)


@dataclass(frozen=True)
class BinTypes:
    """Node kinds: nodes with the same GPU model, GPU count, CPU, memory and fixed MIG layouts are
    interchangeable. A kind's GPUs form one GPU bin type per distinct fixed layout (None: free)."""

    keys: list[tuple[str, int, int, int]]
    nodes: list[list[int]]  # node indices per kind
    layouts: list[tuple[_Layout, ...]]  # per kind: each GPU's fixed layout

    @classmethod
    def of(cls, p: Problem) -> BinTypes:
        """Group the GPU nodes of ``p`` by (model, GPUs, CPU, memory, fixed layouts)."""
        groups: dict[tuple[str, int, int, int, tuple[_Layout, ...]], list[int]] = defaultdict(list)
        seen: dict[tuple[object, ...], tuple[_Layout, ...]] = {}  # nodes alike in their presets: computed once
        running = {a.node for a in p.running}
        for i, n in enumerate(p.cluster.nodes):
            if n.gpu_model and n.gpus:
                lay: tuple[_Layout, ...] = (None,) * n.gpus
                if n.gpu_modes:
                    like = (n.gpus, n.mig_strategy, n.gpu_modes, n.name if n.name in running else None)
                    if like not in seen:
                        seen[like] = _fixed_layouts(p, i)
                    lay = seen[like]
                groups[(p.catalog.get(n.gpu_model).name, n.gpus, n.cpu_milli, n.memory_mib, lay)].append(i)
        keys = sorted(groups, key=lambda k: (k[:4], repr(k[4])))
        return cls(keys=[k[:4] for k in keys], nodes=[groups[k] for k in keys], layouts=[k[4] for k in keys])

    def bins(self) -> list[tuple[int, _Layout, int]]:
        """The GPU bin types: (node kind, fixed layout, GPUs of that layout per node)."""
        out = []
        for t, lays in enumerate(self.layouts):
            per: dict[_Layout, int] = defaultdict(int)
            for lay in lays:
                per[lay] += 1
            out += [(t, lay, c) for lay, c in sorted(per.items(), key=lambda x: repr(x[0]))]
        return out


@dataclass(frozen=True)
class _Fleet:
    """The LP's capacities, once per problem: per GPU bin type (:meth:`BinTypes.bins`) its GPUs, and per node
    kind (a *group* of bin types) CPU, memory and the busy GPUs the power budgets allow
    (:func:`~capplan.placement.core.domaincap.busy_caps`); and the replica caps of the domains
    (:func:`~capplan.placement.core.domaincap.replica_caps`)."""

    types: BinTypes
    group: list[int]  # per bin type: its node kind
    presets: list[Preset]  # per bin type: its fixed MIG layout (instances per profile)
    n_bins: list[int]
    group_gpus: list[int]
    cpu_cap: list[int]
    mem_cap: list[int]
    caps: dict[str, int]
    fits: dict[str, frozenset[str]]

    @classmethod
    def of(cls, p: Problem, domains: bool = True) -> _Fleet:
        types = BinTypes.of(p)
        counts = [len(x) for x in types.nodes]
        group_gpus = [c * k[1] for c, k in zip(counts, types.keys, strict=True)]
        if domains:
            key_of: list[int | None] = [None] * len(p.cluster.nodes)
            for t, ns in enumerate(types.nodes):
                for i in ns:
                    key_of[i] = t
            busy = busy_caps(p, key_of)
            group_gpus = [min(n, busy.get(t, 0)) for t, n in enumerate(group_gpus)]
        bins = types.bins()
        return cls(types=types, group=[t for t, _, _ in bins],
                   presets=[dict(lay) if lay is not None else None for _, lay, _ in bins],
                   n_bins=[min(counts[t] * c, group_gpus[t]) for t, _, c in bins], group_gpus=group_gpus,
                   cpu_cap=[c * k[2] for c, k in zip(counts, types.keys, strict=True)],
                   mem_cap=[c * k[3] for c, k in zip(counts, types.keys, strict=True)],
                   caps=replica_caps(p) if domains else {}, fits=gang_models(p) if domains else {})

    @property
    def models(self) -> list[str]:
        return [self.types.keys[t][0] for t in self.group]

    @property
    def max_gpus(self) -> list[int]:
        """Per bin type: the GPUs without a fixed layout on one node of its kind (a whole-GPU replica's most)."""
        return [sum(1 for lay in self.types.layouts[t] if lay is None) for t in self.group]

    def gpu_models(self, p: Problem) -> list[GpuModel | None]:
        """The catalog GPU model of each bin type."""
        return [p.catalog.get(m) for m in self.models]

    def items(self, p: Problem, ws: list[Workload], of: dict[str, int] | None = None) -> Items:
        return _items(p, ws, self.models, self.max_gpus, self.presets, of, self.caps, self.fits)

    def bound(self, p: Problem, items: Items, deadline: float, weight: list[float] | None = None,
              floors: list[tuple[list[int], float]] | None = None
              ) -> tuple[float, bool, dict[tuple[int, int], float]]:
        """:func:`~capplan.placement.core.patternlp.bound_items` of ``items`` on this fleet."""
        return bound_items(items, self.n_bins, self.cpu_cap, self.mem_cap, deadline, weight=weight, floors=floors,
                           gpu_models=self.gpu_models(p), group=self.group, group_gpus=self.group_gpus,
                           presets=self.presets)


def _solve(p: Problem, ws: list[Workload], fleet: _Fleet, deadline: float,
           of: dict[str, int] | None = None) -> tuple[Items, float, bool, dict[tuple[int, int], float]]:
    items = fleet.items(p, ws, of)
    return (items, *fleet.bound(p, items, deadline))


def lp_assignment(p: Problem, ws: list[Workload], time_limit: float = 10.0) -> dict[str, dict[int, float]]:
    """The relaxation's fractional assignment: workload name -> {bin type: share of its replicas}.

    Bin types are those of :meth:`BinTypes.bins`; heuristics may use this to send each replica to
    the kind of node the LP put it on (CPU-heavy replicas to CPU-rich nodes, ...).
    """
    of: dict[str, int] = {}
    items, _, _, primal = _solve(p, ws, _Fleet.of(p, domains=False), time.perf_counter() + time_limit, of)
    per_item: dict[int, dict[int, float]] = defaultdict(dict)
    for (i, b), v in primal.items():
        per_item[i][b] = v / items.count[i]
    return {name: per_item.get(i, {}) for name, i in of.items()}


def upper_bound(p: Problem, time_limit: float = 10.0) -> Bound:
    """Per-priority upper bound on placed GPU demand units (see the module docstring).

    Parameters
    ----------
    p
        The problem.
    time_limit
        Seconds for column generation over all priorities; on time-out the bound stays valid.
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    fleet = _Fleet.of(p)
    out: dict[int, int] = {}
    converged = True
    for q in p.priorities:
        items, value, ok, _ = _solve(p, [w for w in p.workloads if w.priority == q], fleet, deadline)
        converged &= ok
        hostable = sum(c * v for c, v in zip(items.count, items.value, strict=True))
        out[q] = min(hostable, math.floor(value * (1 + 1e-9) + 1e-6)) if value != float("inf") else hostable
    return Bound(per_priority=out, converged=converged, seconds=time.perf_counter() - t0)


def lexicographic_bound(p: Problem, achieved: dict[int, int], time_limit: float = 10.0,
                        base: Bound | None = None, guaranteed_met: bool = True) -> Bound:
    """:func:`upper_bound` tightened for the priority order, given units a plan ``achieved``.

    Every lexicographically optimal plan places at least ``achieved`` at each priority down to the first one
    below its bound (:func:`~capplan.placement.core.summary.chained_bound` says why), so each priority
    ``q`` below one of them is bounded by the relaxation of those priorities and ``q`` together, with
    their placed units as floors (and stays bounded by its own value), and by the busy GPUs the fleet
    can hold less what they place. The result is a valid lexicographic upper bound on every plan.
    Guaranteed replicas come before every priority in that order: unless the plan places all of
    them (``guaranteed_met``), a better plan may place less of the priorities, so nothing is
    tightened.

    Parameters
    ----------
    p
        The problem.
    achieved
        Placed units per priority of a valid plan of ``p``.
    time_limit
        Seconds for all the relaxations.
    base
        :func:`upper_bound` of ``p`` when already computed.
    guaranteed_met
        Whether the plan places every replica of every guaranteed workload.
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    base = base or upper_bound(p, time_limit=time_limit / 2)
    if not guaranteed_met:
        return base
    out = dict(base.per_priority)
    converged = base.converged
    fleet = _Fleet.of(p)
    full = full_value(p)
    above: list[int] = []
    parts: dict[int, Items] = {}
    floored = True  # whether q's placed units still floor the lexicographically better plans
    for q in p.priorities:
        if above and time.perf_counter() < deadline:
            prios = [*above, q]
            for x in prios:
                if x not in parts:
                    parts[x] = fleet.items(p, [w for w in p.workloads if w.priority == x])
            merged = Items(sizes=[], count=[], cpu=[], mem=[], value=[])
            owner: list[int] = []
            for x in prios:
                it = parts[x]
                merged.sizes += it.sizes
                merged.count += it.count
                merged.cpu += it.cpu
                merged.mem += it.mem
                merged.value += it.value
                owner += [x] * len(it.count)
            # Floors slightly below the placed units: float tolerance must never cut off that plan.
            floors = [([i for i, o in enumerate(owner) if o == x], achieved.get(x, 0) * (1 - 1e-9) - 1e-6)
                      for x in above]
            value, ok, _ = fleet.bound(p, merged, deadline, weight=[1.0 if o == q else 0.0 for o in owner],
                                       floors=floors)
            converged &= ok
            if value != float("inf"):
                out[q] = min(out[q], max(achieved.get(q, 0), math.floor(value * (1 + 1e-9) + 1e-6)))
        if above:
            # Whatever the relaxation gave: the GPUs the priorities above keep are not free for q.
            forced = [x for x in above if achieved.get(x, 0) >= full.get(x, 0)]
            free = joint_cap(p, (*above, q), forced, guaranteed=True) - sum(achieved.get(x, 0) for x in above)
            out[q] = min(out[q], max(achieved.get(q, 0), free))
        if floored:
            above.append(q)
            floored = achieved.get(q, 0) >= out[q]
    return Bound(per_priority=out, converged=converged, seconds=time.perf_counter() - t0)
