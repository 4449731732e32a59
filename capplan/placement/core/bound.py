"""A fast upper bound on the placed value per priority: a GPU-level cutting-stock relaxation.

Items occupy what they hold on each GPU model (their GPUs, share or MIG slice there) and are worth
their workload's value (:meth:`~capplan.model.problem.Problem.replica_value`), wherever they land.

Every plan packs each GPU with replicas whose per-GPU demand fits in one GPU (``UNITS_PER_GPU``
units): a whole GPU or shares summing to at most one GPU, or else (a GPU runs in one mode) MIG
instances forming a valid layout of the model (memory slices at allowed starts without overlap,
counts, compute slices: :mod:`capplan.placement.core.miglayouts`). Dropping everything that ties
GPUs together (nodes, topology, gangs, GPU memory, isolation, power) but keeping the GPU models and
the host CPU and memory of all nodes of a model in aggregate gives a relaxation whose optimum
bounds every plan's objective: an LP over packing *patterns* of one GPU (Gilmore-Gomory), with
interchangeable replicas and GPUs aggregated into counts. Patterns are generated on demand
(column generation) and priced by an exact unbounded knapsack (whole GPUs and shares) or by
enumerating the model's maximal MIG layouts. If time runs out before no pattern improves, the
Lagrangian (Farley) correction keeps the value a valid bound.

Each priority is bounded on its own: its replicas alone on the whole fleet, which bounds that
component of any plan's objective whatever the other priorities place.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from capplan.model.catalog import GpuModel
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.highs import ColumnLP
from capplan.placement.core.miglayouts import mig_layouts, most_alone

_EPS = 1e-7
_SLACK_PENALTY = 1e4  # per unit of a floor left unmet (a unit is a GPU's 1/UNITS_PER_GPU; weights are <= 1)
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


#: What an item holds on one GPU of a bin type: ("u", units) for a whole GPU or a share (packed by
#: units), ("m", profile name) for a MIG instance (packed by the model's valid MIG layouts).
Slot = tuple[str, int | str]


@dataclass
class _Items:
    sizes: list[dict[int, Slot]]  # per item type: bin type -> what it holds per GPU slot
    count: list[int]  # GPU slots
    value: list[int]  # per slot: the replica's value (Problem.replica_value) per GPU slot
    cpu: list[int]  # per slot
    mem: list[int]


def _sizes(p: Problem, w: Workload, models: list[str], max_gpus: list[int]) -> tuple[dict[int, Slot], int]:
    """What ``w`` holds per GPU slot on each bin type, and GPU slots per replica."""
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
        slots = d.gpus if d.kind == "whole" else 1
        if d.kind == "mig" and d.profile is not None:
            sizes[b] = ("m", d.profile.name)
        else:
            sizes[b] = ("u", UNITS_PER_GPU if d.kind == "whole" else d.units)
    return sizes, slots


def _items(p: Problem, ws: list[Workload], models: list[str], max_gpus: list[int],
           of: dict[str, int] | None = None) -> _Items:
    """Item types of ``ws`` (filling ``of``: workload name -> item type index, when given)."""
    groups: dict[tuple[tuple[tuple[int, Slot], ...], int, int, int], int] = defaultdict(int)
    key_of: dict[str, tuple[tuple[tuple[int, Slot], ...], int, int, int]] = {}
    memo: dict[tuple[object, ...], tuple[tuple[tuple[int, Slot], ...], int]] = {}
    for w in ws:
        shape = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.gpu_models)
        found = memo.get(shape)
        if found is None:
            sizes, slots = _sizes(p, w, models, max_gpus)
            found = memo[shape] = (tuple(sorted(sizes.items())), slots)
        size_key, slots = found
        if not size_key:
            continue
        key = (size_key, (w.cpu_milli // slots) // _CPU_GRID * _CPU_GRID,
               (w.memory_mib // slots) // _MEM_GRID * _MEM_GRID, p.replica_value(w) // slots)
        groups[key] += w.replicas * slots
        key_of[w.name] = key
    keys = sorted(groups)
    if of is not None:
        pos = {k: i for i, k in enumerate(keys)}
        of.update({name: pos[k] for name, k in key_of.items()})
    return _Items(sizes=[dict(k[0]) for k in keys], count=[groups[k] for k in keys],
                  cpu=[k[1] for k in keys], mem=[k[2] for k in keys], value=[k[3] for k in keys])


def _knapsack(sizes: np.ndarray, values: np.ndarray, cap: int) -> tuple[float, dict[int, int]]:
    """Exact unbounded knapsack: best value of a multiset of ``sizes`` within ``cap``.

    ``dp[x]`` is the best value with total size at most ``x``; each item is applied by doubling
    (1, 2, 4, ... copies) so the work is vectorised over capacities.
    """
    g = math.gcd(cap, *[int(s) for s in sizes])
    sz = (sizes // g).astype(np.int64)
    c = cap // g
    dp = np.zeros(c + 1)
    for s, v in zip(sz.tolist(), values.tolist(), strict=True):
        if v <= 0 or s > c:
            continue
        step, val = s, v
        while step <= c:
            cand = dp[:c + 1 - step] + val
            np.maximum(dp[step:], cand, out=dp[step:])
            step, val = step * 2, val * 2
    pattern: dict[int, int] = defaultdict(int)
    x = c
    while x > 0:
        for j, (s, v) in enumerate(zip(sz.tolist(), values.tolist(), strict=True)):
            if v > 0 and s <= x and abs(dp[x] - (dp[x - s] + v)) <= 1e-9 * max(1.0, abs(dp[x])):
                pattern[j] += 1
                x -= s
                break
        else:
            x -= 1
    return float(dp[c]), dict(pattern)


def _mig_patterns(model: GpuModel, names: list[str]) -> np.ndarray:
    """(layouts, len(names)) instances of each profile of ``names`` in every maximal layout of ``model``."""
    idx = {pr.name: i for i, pr in enumerate(model.profiles)}
    lays = mig_layouts(model)
    out = np.zeros((len(lays), len(names)), dtype=np.int64)
    for r, lay in enumerate(lays):
        for c, name in enumerate(names):
            if name in idx:
                out[r, c] = lay.counts[idx[name]]
    return out


def _bound_items(items: _Items, n_bins: list[int], cpu_cap: list[int], mem_cap: list[int],
                 deadline: float, weight: list[float] | None = None,
                 floors: list[tuple[list[int], float]] | None = None,
                 gpu_models: list[GpuModel | None] | None = None,
                 ) -> tuple[float, bool, dict[tuple[int, int], float]]:
    """Column generation for items over GPU bin types.

    A GPU pattern holds either whole GPUs and shares (at most ``UNITS_PER_GPU`` units: an
    unbounded knapsack prices them) or MIG instances forming one valid layout of the bin type's
    model (``gpu_models``, :func:`~capplan.placement.core.miglayouts.mig_layouts`: priced by
    enumeration), never both: a GPU runs in one mode.

    ``weight`` (default all 1) weighs each item type's units in the objective; each
    ``(item types, units)`` of ``floors`` requires at least that many units of those items placed.
    Returns the upper bound in units, whether it converged, and the LP's placed GPU slots per
    (item type, bin type) (a fractional assignment that heuristics can follow).

    Every floor has a slack column with a penalty of :data:`_SLACK_PENALTY` per unit, so the LP is
    feasible from the first iteration, even when the starting patterns (one size per GPU) cannot
    meet floors that need mixed patterns. Any solution meeting the floors is also a solution of the
    penalised LP with zero slack, so its optimum (and the Farley bound on it) stays an upper bound;
    column generation then drives the slack out as mixed patterns appear.
    """
    weight = weight if weight is not None else [1.0] * len(items.count)
    floors = floors or []
    nb = len(n_bins)
    # Distinct slots per model (the rows that link items to patterns).
    size_rows: list[dict[Slot, int]] = [dict() for _ in range(nb)]
    for it in items.sizes:
        for b, s in it.items():
            size_rows[b].setdefault(s, len(size_rows[b]))
    xs = [(i, b) for i, it in enumerate(items.sizes) for b in it if n_bins[b] > 0]
    if not xs:
        return 0.0, True, {}
    mig_of: list[tuple[list[Slot], np.ndarray] | None] = []  # per model: MIG slots, layouts x slots
    for b in range(nb):
        names = [s for s in size_rows[b] if s[0] == "m"]
        model = gpu_models[b] if gpu_models is not None else None
        if names and model is None:
            raise ValueError("MIG items need the bin types' GPU models")
        mig_of.append((names, _mig_patterns(model, [str(x[1]) for x in names]))
                      if names and model is not None else None)
    patterns: list[tuple[int, dict[Slot, int]]] = []  # (model, slot -> copies)
    for b in range(nb):
        for s in size_rows[b]:
            if n_bins[b] > 0:
                if s[0] == "m":
                    model = gpu_models[b] if gpu_models is not None else None
                    assert model is not None
                    pi = next(k for k, pr in enumerate(model.profiles) if pr.name == s[1])
                    patterns.append((b, {s: most_alone(model, pi)}))
                else:
                    patterns.append((b, {s: UNITS_PER_GPU // int(s[1])}))
    n_items = len(items.count)
    link0 = n_items
    link_off = []
    off = link0
    for b in range(nb):
        link_off.append(off)
        off += len(size_rows[b])
    bins0, cpu0, mem0 = off, off + nb, off + 2 * nb
    floor0 = mem0 + nb
    n_rows = floor0 + len(floors)
    rhs = np.zeros(n_rows)
    rhs[:n_items] = items.count
    rhs[bins0:bins0 + nb] = n_bins
    rhs[cpu0:cpu0 + nb] = cpu_cap
    rhs[mem0:mem0 + nb] = mem_cap
    floor_of: dict[int, int] = {}
    for f, (members, units) in enumerate(floors):
        rhs[floor0 + f] = -units
        floor_of.update({i: f for i in members})
    rows, cols, vals = [], [], []
    cost = []
    n_slack = len(floors)
    for f in range(n_slack):  # slack columns first: column j = f
        cost.append(_SLACK_PENALTY)
        rows.append(floor0 + f)
        cols.append(f)
        vals.append(-1.0)
    for j0, (i, b) in enumerate(xs):
        j = n_slack + j0
        s = items.sizes[i][b]
        cost.append(-float(items.value[i]) * weight[i])
        rows += [i, link_off[b] + size_rows[b][s], cpu0 + b, mem0 + b]
        cols += [j] * 4
        vals += [1.0, 1.0, float(items.cpu[i]), float(items.mem[i])]
        if i in floor_of:
            rows.append(floor0 + floor_of[i])
            cols.append(j)
            vals.append(-float(items.value[i]))
    converged = False
    value = float("inf")
    lp = ColumnLP(rhs)
    lp.add_entries(-np.array(cost), rows, cols, vals)
    nx = n_slack + len(xs)

    def add_patterns(new: list[tuple[int, dict[Slot, int]]]) -> None:
        prow: list[int] = []
        pcol: list[int] = []
        pval: list[float] = []
        for k, (b, pat) in enumerate(new):
            for s, a in pat.items():
                prow.append(link_off[b] + size_rows[b][s])
                pcol.append(k)
                pval.append(-float(a))
            prow.append(bins0 + b)
            pcol.append(k)
            pval.append(1.0)
        lp.add_entries(np.zeros(len(new)), prow, pcol, pval)

    add_patterns(patterns)
    while True:
        res = lp.solve(max(0.01, deadline - time.perf_counter()))
        if res.status != "optimal":  # out of time before a first LP optimum (or a solver failure): claim nothing new
            return value, False, {}
        primal = {xs[j]: float(v) for j, v in enumerate(res.x[n_slack:nx]) if v > 1e-9}
        duals = res.duals
        lp_value = res.value
        # Price one pattern per model; the Farley correction bounds the full LP at any iteration.
        extra = 0.0
        new: list[tuple[int, dict[Slot, int]]] = []
        for b in range(nb):
            if n_bins[b] == 0 or not size_rows[b]:
                continue
            flat = [s for s in size_rows[b] if s[0] == "u"]
            best, col = 0.0, {}
            if flat:
                sizes = np.array([int(s[1]) for s in flat], dtype=np.int64)
                price = np.array([duals[link_off[b] + size_rows[b][s]] for s in flat])
                best, pick = _knapsack(sizes, price, UNITS_PER_GPU)
                col = {flat[j]: c for j, c in pick.items()}
            mig = mig_of[b]
            if mig is not None and mig[1].size:
                names, lay = mig
                worth = lay @ np.array([duals[link_off[b] + size_rows[b][s]] for s in names])
                r = int(np.argmax(worth))
                if worth[r] > best:
                    best = float(worth[r])
                    col = {s: int(c) for s, c in zip(names, lay[r].tolist(), strict=True) if c}
            rc = best - duals[bins0 + b]
            if rc > 1e-9:
                extra += n_bins[b] * rc
            if rc > 1e-6 * max(1.0, duals[bins0 + b]):
                new.append((b, col))
        value = min(value, lp_value + extra)
        if not new:
            converged = True
            break
        if time.perf_counter() > deadline:
            break
        add_patterns(new)
    return value, converged, primal


@dataclass(frozen=True)
class BinTypes:
    """GPU bin types: nodes with the same GPU model, GPU count, CPU and memory are interchangeable."""

    keys: list[tuple[str, int, int, int]]
    nodes: list[list[int]]  # node indices per type

    @classmethod
    def of(cls, p: Problem) -> BinTypes:
        """Group the GPU nodes of ``p`` by (model, GPUs, CPU, memory)."""
        groups: dict[tuple[str, int, int, int], list[int]] = defaultdict(list)
        for i, n in enumerate(p.cluster.nodes):
            if n.gpu_model and n.gpus:
                groups[(p.catalog.get(n.gpu_model).name, n.gpus, n.cpu_milli, n.memory_mib)].append(i)
        keys = sorted(groups)
        return cls(keys=keys, nodes=[groups[k] for k in keys])

    def models(self, p: Problem) -> list[GpuModel | None]:
        """The catalog GPU model of each bin type."""
        return [p.catalog.get(k[0]) for k in self.keys]


def _solve(p: Problem, ws: list[Workload], types: BinTypes, deadline: float,
           of: dict[str, int] | None = None) -> tuple[_Items, float, bool, dict[tuple[int, int], float]]:
    models = [k[0] for k in types.keys]
    counts = [len(x) for x in types.nodes]
    n_bins = [c * k[1] for c, k in zip(counts, types.keys, strict=True)]
    cpu_cap = [c * k[2] for c, k in zip(counts, types.keys, strict=True)]
    mem_cap = [c * k[3] for c, k in zip(counts, types.keys, strict=True)]
    items = _items(p, ws, models, [k[1] for k in types.keys], of)
    return (items, *_bound_items(items, n_bins, cpu_cap, mem_cap, deadline, gpu_models=types.models(p)))


def lp_assignment(p: Problem, ws: list[Workload], time_limit: float = 10.0) -> dict[str, dict[int, float]]:
    """The relaxation's fractional assignment: workload name -> {bin type: share of its replicas}.

    Bin types are those of :meth:`BinTypes.of`; heuristics use this to send each replica to
    the kind of node the LP put it on (CPU-heavy replicas to CPU-rich nodes, ...).
    """
    types = BinTypes.of(p)
    of: dict[str, int] = {}
    items, _, _, primal = _solve(p, ws, types, time.perf_counter() + time_limit, of)
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
    types = BinTypes.of(p)
    out: dict[int, int] = {}
    converged = True
    for q in p.priorities:
        items, value, ok, _ = _solve(p, [w for w in p.workloads if w.priority == q], types, deadline)
        converged &= ok
        hostable = sum(c * v for c, v in zip(items.count, items.value, strict=True))
        out[q] = min(hostable, math.floor(value * (1 + 1e-9) + 1e-6)) if value != float("inf") else hostable
    return Bound(per_priority=out, converged=converged, seconds=time.perf_counter() - t0)


def lexicographic_bound(p: Problem, achieved: dict[int, int], time_limit: float = 10.0,
                        base: Bound | None = None, guaranteed_met: bool = True) -> Bound:
    """:func:`upper_bound` tightened for the priority order, given units a plan ``achieved``.

    When a plan meets the bound of every priority above ``q``, any plan at least as good
    lexicographically places at least as much of each of them, so priority ``q`` is bounded by
    the relaxation of all these priorities together with their placed units as floors (and
    stays bounded by its own value). Below the first priority whose objective is under its
    bound nothing changes. The result is a valid lexicographic upper bound on every plan.
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
    types = BinTypes.of(p)
    models = [k[0] for k in types.keys]
    counts = [len(x) for x in types.nodes]
    n_bins = [c * k[1] for c, k in zip(counts, types.keys, strict=True)]
    cpu_cap = [c * k[2] for c, k in zip(counts, types.keys, strict=True)]
    mem_cap = [c * k[3] for c, k in zip(counts, types.keys, strict=True)]
    capacity = sum(n_bins) * UNITS_PER_GPU
    above: list[int] = []
    for q in p.priorities:
        if above and time.perf_counter() < deadline:
            prios = [*above, q]
            parts = [_items(p, [w for w in p.workloads if w.priority == x], models, [k[1] for k in types.keys])
                     for x in prios]
            merged = _Items(sizes=[], count=[], cpu=[], mem=[], value=[])
            owner: list[int] = []
            for x, it in zip(prios, parts, strict=True):
                merged.sizes += it.sizes
                merged.count += it.count
                merged.cpu += it.cpu
                merged.mem += it.mem
                merged.value += it.value
                owner += [x] * len(it.count)
            # Floors slightly below the placed units: float tolerance must never cut off that plan.
            floors = [([i for i, o in enumerate(owner) if o == x], achieved.get(x, 0) * (1 - 1e-9) - 1e-6)
                      for x in above]
            value, ok, _ = _bound_items(merged, n_bins, cpu_cap, mem_cap, deadline,
                                        weight=[1.0 if o == q else 0.0 for o in owner], floors=floors,
                                        gpu_models=types.models(p))
            converged &= ok
            if value != float("inf"):
                out[q] = min(out[q], max(achieved.get(q, 0), math.floor(value * (1 + 1e-9) + 1e-6)))
        if above:
            # Whatever the relaxation gave: the GPUs the priorities above keep are not free for q.
            out[q] = min(out[q], max(achieved.get(q, 0), capacity - sum(achieved.get(x, 0) for x in above)))
        if achieved.get(q, 0) < out[q]:
            break
        above.append(q)
    return Bound(per_priority=out, converged=converged, seconds=time.perf_counter() - t0)
