"""The GPU pattern LP of the bound (:mod:`capplan.placement.core.bound`) and its pricing.

A Gilmore-Gomory LP over packing *patterns* of one GPU per bin type, with interchangeable items
aggregated into counts, grown by column generation: each bin type's best pattern is priced by an
exact unbounded knapsack (whole GPUs and shares) or by enumerating the model's maximal MIG layouts
(:mod:`capplan.placement.core.miglayouts`); a GPU preset to a fixed MIG layout takes any part of its
layout. If time runs out before no pattern improves, the Lagrangian (Farley) correction keeps the value a
valid bound.

The GPU bins of one node kind share its host CPU and memory and its busy-GPU cap (a *group*): a node kind
whose GPUs differ in their preset layouts has one GPU bin per layout.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from capplan.lp.highs import ColumnLP
from capplan.model.catalog import GpuModel
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.miglayouts import mig_layouts, most_alone

SLACK_PENALTY = 1e4  # per unit of a floor left unmet (a unit is a GPU's 1/UNITS_PER_GPU; weights are <= 1)

#: What an item holds on one GPU of a bin type: ("u", units, memory cells) for a whole GPU or a share
#: (packed by units and, for shares with GPU memory, by the GPU's memory in :data:`MEM_CELLS` cells, each
#: share's rounded down), ("m", profile name, 0) for a MIG instance (packed by the model's valid MIG layouts).
Slot = tuple[str, int | str, int]
#: A GPU's memory in cells for shares with ``gpu_memory_gib`` (a share's cells rounded down: still a relaxation).
MEM_CELLS = 64
#: A GPU pattern: (bin type, slot -> copies on one GPU).
Pattern = tuple[int, dict[Slot, int]]
#: Per bin type: its MIG slots and (layouts, slots) instances of each in every maximal layout.
MigColumns = tuple[list[Slot], np.ndarray] | None
#: A GPU's preset MIG layout as instances per profile name (None: the GPU is free to take any pattern).
Preset = dict[str, int] | None


@dataclass
class Items:
    """Interchangeable item types (see :func:`capplan.placement.core.bound.upper_bound`)."""

    sizes: list[dict[int, Slot]]  # per item type: bin type -> what it holds per GPU slot
    count: list[int]  # GPU slots
    value: list[int]  # per slot: the replica's value (Problem.replica_value) per GPU slot
    cpu: list[int]  # per slot
    mem: list[int]


@dataclass(frozen=True)
class _Rows:
    """Where the LP's rows are: items, then per bin type its distinct slots (linking items to
    patterns), then GPUs per bin type, CPU, memory and GPUs per group, then the floors."""

    size_rows: list[dict[Slot, int]]  # per bin type: slot -> its index among the bin type's slot rows
    link_off: list[int]  # per bin type: the first of its slot rows
    bins0: int
    cpu0: int
    mem0: int
    gpus0: int
    floor0: int
    group: list[int]  # per bin type: its group

    def link(self, b: int, s: Slot) -> int:
        """The row of slot ``s`` of bin type ``b``."""
        return self.link_off[b] + self.size_rows[b][s]


def knapsack(sizes: np.ndarray, values: np.ndarray, cap: int) -> tuple[float, dict[int, int]]:
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


def knapsack2(sizes: np.ndarray, mems: np.ndarray, values: np.ndarray, cap: int, mcap: int
              ) -> tuple[float, dict[int, int]]:
    """Exact unbounded knapsack in two dimensions: best value of a multiset of items (``sizes``, ``mems``)
    within ``cap`` and ``mcap`` (:func:`knapsack`'s doubling, over a table of both capacities)."""
    g = math.gcd(cap, *[int(x) for x in sizes])
    sz = (sizes // g).astype(np.int64)
    c = cap // g
    dp = np.zeros((c + 1, mcap + 1))
    for s, m, v in zip(sz.tolist(), mems.tolist(), values.tolist(), strict=True):
        if v <= 0 or s > c or m > mcap:
            continue
        step, mstep, val = s, m, v
        while step <= c and mstep <= mcap:
            cand = dp[:c + 1 - step, :mcap + 1 - mstep] + val
            np.maximum(dp[step:, mstep:], cand, out=dp[step:, mstep:])
            step, mstep, val = step * 2, mstep * 2, val * 2
    pattern: dict[int, int] = defaultdict(int)
    x, y = c, mcap
    items = list(zip(sz.tolist(), mems.tolist(), values.tolist(), strict=True))
    while x > 0 and y >= 0 and dp[x, y] > 0:
        for j, (s, m, v) in enumerate(items):
            if v > 0 and s <= x and m <= y and abs(dp[x, y] - (dp[x - s, y - m] + v)) <= 1e-9 * max(1.0, abs(dp[x, y])):
                pattern[j] += 1
                x, y = x - s, y - m
                break
        else:
            if y > 0 and dp[x, y - 1] == dp[x, y]:
                y -= 1
            else:
                x -= 1
    return float(dp[c, mcap]), dict(pattern)


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


def _rows(items: Items, nb: int, group: list[int], ng: int) -> _Rows:
    """The row layout: distinct slots per bin type (the rows that link items to patterns)."""
    size_rows: list[dict[Slot, int]] = [dict() for _ in range(nb)]
    for it in items.sizes:
        for b, s in it.items():
            size_rows[b].setdefault(s, len(size_rows[b]))
    link_off = []
    off = len(items.count)
    for b in range(nb):
        link_off.append(off)
        off += len(size_rows[b])
    return _Rows(size_rows=size_rows, link_off=link_off, bins0=off, cpu0=off + nb, mem0=off + nb + ng,
                 gpus0=off + nb + 2 * ng, floor0=off + nb + 3 * ng, group=group)


def _mig_columns(size_rows: list[dict[Slot, int]], gpu_models: list[GpuModel | None] | None,
                 presets: list[Preset]) -> list[MigColumns]:
    """Per bin type: its MIG slots and their counts in every maximal layout of its model (none for a preset
    layout: :func:`_price` takes it whole)."""
    mig_of: list[MigColumns] = []
    for b in range(len(size_rows)):
        names = [s for s in size_rows[b] if s[0] == "m"] if presets[b] is None else []
        model = gpu_models[b] if gpu_models is not None else None
        if names and model is None:
            raise ValueError("MIG items need the bin types' GPU models")
        mig_of.append((names, _mig_patterns(model, [str(x[1]) for x in names]))
                      if names and model is not None else None)
    return mig_of


def _initial_patterns(size_rows: list[dict[Slot, int]], n_bins: list[int],
                      gpu_models: list[GpuModel | None] | None, presets: list[Preset]) -> list[Pattern]:
    """One pattern per slot of each bin type: as many copies of it alone as fit on one GPU."""
    patterns: list[Pattern] = []
    for b in range(len(n_bins)):
        for s in size_rows[b]:
            if n_bins[b] > 0:
                pre = presets[b]
                if pre is not None:
                    if pre.get(str(s[1]), 0):
                        patterns.append((b, {s: pre[str(s[1])]}))
                elif s[0] == "m":
                    model = gpu_models[b] if gpu_models is not None else None
                    assert model is not None
                    pi = next(k for k, pr in enumerate(model.profiles) if pr.name == s[1])
                    patterns.append((b, {s: most_alone(model, pi)}))
                else:
                    alone = UNITS_PER_GPU // int(s[1])
                    patterns.append((b, {s: min(alone, MEM_CELLS // s[2]) if s[2] else alone}))
    return patterns


def _build_lp(items: Items, xs: list[tuple[int, int]], rows_at: _Rows, n_bins: list[int], cpu_cap: list[int],
              mem_cap: list[int], group_gpus: list[int], weight: list[float],
              floors: list[tuple[list[int], float]]) -> ColumnLP:
    """The LP with its rows, the floors' slack columns (first) and the item columns (no patterns yet)."""
    nb, ng = len(n_bins), len(cpu_cap)
    n_items = len(items.count)
    bins0, cpu0, mem0, floor0 = rows_at.bins0, rows_at.cpu0, rows_at.mem0, rows_at.floor0
    n_rows = floor0 + len(floors)
    rhs = np.zeros(n_rows)
    rhs[:n_items] = items.count
    rhs[bins0:bins0 + nb] = n_bins
    rhs[cpu0:cpu0 + ng] = cpu_cap
    rhs[mem0:mem0 + ng] = mem_cap
    rhs[rows_at.gpus0:rows_at.gpus0 + ng] = group_gpus
    floor_of: dict[int, int] = {}
    for f, (members, units) in enumerate(floors):
        rhs[floor0 + f] = -units
        floor_of.update({i: f for i in members})
    rows, cols, vals = [], [], []
    cost = []
    n_slack = len(floors)
    for f in range(n_slack):  # slack columns first: column j = f
        cost.append(SLACK_PENALTY)
        rows.append(floor0 + f)
        cols.append(f)
        vals.append(-1.0)
    for j0, (i, b) in enumerate(xs):
        j = n_slack + j0
        s = items.sizes[i][b]
        cost.append(-float(items.value[i]) * weight[i])
        g = rows_at.group[b]
        rows += [i, rows_at.link(b, s), cpu0 + g, mem0 + g]
        cols += [j] * 4
        vals += [1.0, 1.0, float(items.cpu[i]), float(items.mem[i])]
        if i in floor_of:
            rows.append(floor0 + floor_of[i])
            cols.append(j)
            vals.append(-float(items.value[i]))
    lp = ColumnLP(rhs)
    lp.add_entries(-np.array(cost), rows, cols, vals)
    return lp


def _add_patterns(lp: ColumnLP, rows_at: _Rows, new: list[Pattern]) -> None:
    """Append the columns of patterns ``new``."""
    prow: list[int] = []
    pcol: list[int] = []
    pval: list[float] = []
    for k, (b, pat) in enumerate(new):
        for s, a in pat.items():
            prow.append(rows_at.link(b, s))
            pcol.append(k)
            pval.append(-float(a))
        prow += [rows_at.bins0 + b, rows_at.gpus0 + rows_at.group[b]]
        pcol += [k, k]
        pval += [1.0, 1.0]
    lp.add_entries(np.zeros(len(new)), prow, pcol, pval)


def _price(b: int, duals: np.ndarray, rows_at: _Rows, mig: MigColumns, preset: Preset
           ) -> tuple[float, dict[Slot, int]]:
    """The best pattern of one GPU of bin type ``b`` at ``duals``: its dual value and its slots."""
    size_rows = rows_at.size_rows
    if preset is not None:  # any part of the preset layout: every instance whose slot has a positive price
        part = {s: preset.get(str(s[1]), 0) for s in size_rows[b] if duals[rows_at.link(b, s)] > 0}
        part = {s: c for s, c in part.items() if c}
        return float(sum(duals[rows_at.link(b, s)] * c for s, c in part.items())), part
    flat = [s for s in size_rows[b] if s[0] == "u"]
    best: float = 0.0
    col: dict[Slot, int] = {}
    if flat:
        sizes = np.array([int(s[1]) for s in flat], dtype=np.int64)
        price = np.array([duals[rows_at.link(b, s)] for s in flat])
        if any(s[2] for s in flat):
            best, pick = knapsack2(sizes, np.array([s[2] for s in flat], dtype=np.int64), price, UNITS_PER_GPU,
                                   MEM_CELLS)
        else:
            best, pick = knapsack(sizes, price, UNITS_PER_GPU)
        col = {flat[j]: c for j, c in pick.items()}
    if mig is not None and mig[1].size:
        names, lay = mig
        worth = lay @ np.array([duals[rows_at.link(b, s)] for s in names])
        r = int(np.argmax(worth))
        if worth[r] > best:
            best = float(worth[r])
            col = {s: int(c) for s, c in zip(names, lay[r].tolist(), strict=True) if c}
    return best, col


def _generate(lp: ColumnLP, rows_at: _Rows, xs: list[tuple[int, int]], n_slack: int, n_bins: list[int],
              mig_of: list[MigColumns], presets: list[Preset], deadline: float
              ) -> tuple[float, bool, dict[tuple[int, int], float]]:
    """The column-generation loop: solve, price one pattern per bin type, add the improving ones."""
    converged = False
    value = float("inf")
    nx = n_slack + len(xs)
    while True:
        res = lp.solve(max(0.01, deadline - time.perf_counter()))
        if res.status != "optimal":  # out of time before a first LP optimum (or a solver failure): claim nothing new
            return value, False, {}
        primal = {xs[j]: float(v) for j, v in enumerate(res.x[n_slack:nx]) if v > 1e-9}
        duals = res.duals
        lp_value = res.value
        # Price one pattern per model; the Farley correction bounds the full LP at any iteration.
        extra = 0.0
        new: list[Pattern] = []
        for b in range(len(n_bins)):
            if n_bins[b] == 0 or not rows_at.size_rows[b]:
                continue
            best, col = _price(b, duals, rows_at, mig_of[b], presets[b])
            cost = duals[rows_at.bins0 + b] + duals[rows_at.gpus0 + rows_at.group[b]]
            rc = best - cost
            if rc > 1e-9:
                extra += n_bins[b] * rc  # at most n_bins[b] patterns of bin type b: Farley's bound
            if rc > 1e-6 * max(1.0, cost):
                new.append((b, col))
        value = min(value, lp_value + extra)
        if not new:
            converged = True
            break
        if time.perf_counter() > deadline:
            break
        _add_patterns(lp, rows_at, new)
    return value, converged, primal


def bound_items(items: Items, n_bins: list[int], cpu_cap: list[int], mem_cap: list[int],
                deadline: float, weight: list[float] | None = None,
                floors: list[tuple[list[int], float]] | None = None,
                gpu_models: list[GpuModel | None] | None = None, group: list[int] | None = None,
                group_gpus: list[int] | None = None, presets: list[Preset] | None = None,
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

    ``group`` maps each bin type to the row of ``cpu_cap`` and ``mem_cap`` it draws on (default: its own),
    where at most ``group_gpus`` of the group's GPUs hold work (default: all); ``presets`` (default none)
    gives a bin type's fixed MIG layout: its patterns are the parts of that layout.

    Every floor has a slack column with a penalty of :data:`SLACK_PENALTY` per unit, so the LP is
    feasible from the first iteration, even when the starting patterns (one size per GPU) cannot
    meet floors that need mixed patterns. Any solution meeting the floors is also a solution of the
    penalised LP with zero slack, so its optimum (and the Farley bound on it) stays an upper bound;
    column generation then drives the slack out as mixed patterns appear.
    """
    weight = weight if weight is not None else [1.0] * len(items.count)
    floors = floors or []
    group = group if group is not None else list(range(len(n_bins)))
    presets = presets if presets is not None else [None] * len(n_bins)
    if group_gpus is None:
        group_gpus = [0] * len(cpu_cap)
        for b, g in enumerate(group):
            group_gpus[g] += n_bins[b]
    rows_at = _rows(items, len(n_bins), group, len(cpu_cap))
    xs = [(i, b) for i, it in enumerate(items.sizes) for b in it if n_bins[b] > 0]
    if not xs:
        return 0.0, True, {}
    mig_of = _mig_columns(rows_at.size_rows, gpu_models, presets)
    patterns = _initial_patterns(rows_at.size_rows, n_bins, gpu_models, presets)
    lp = _build_lp(items, xs, rows_at, n_bins, cpu_cap, mem_cap, group_gpus, weight, floors)
    _add_patterns(lp, rows_at, patterns)
    return _generate(lp, rows_at, xs, len(floors), n_bins, mig_of, presets, deadline)
