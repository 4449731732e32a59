"""Pricing: the most valuable pattern for one node type, by dynamic programming over CPU.

A pattern fills a node's GPU slots one by one: a slot stays empty, takes a one-GPU pod or a
set of shares (a 2-D knapsack over the GPU's free units and CPU, :func:`share_table`); ``k``
consecutive whole-capable slots take a ``k``-GPU pod. The node DP keeps, per number of slots
filled and CPU budget, the best value (a max-plus convolution per slot). CPU is rounded *up* to
a grid and capacities down, so every pattern found fits; memory and shape counts are checked
after the DP and the pattern is trimmed until it fits (so pricing is a heuristic, which is all
column generation needs; the bound comes from :mod:`capplan.placement.core.bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capplan.placement.patterns.shapes import NodeType, Shape

FloatArr = npt.NDArray[np.float64]
_NEG = -1e18


@dataclass(frozen=True)
class Pattern:
    """A multiset of shapes on one node of a type: (shape index, slot indices) per replica."""

    type: int
    items: tuple[tuple[int, tuple[int, ...]], ...]
    value: float  # placed GPUs

    def counts(self) -> dict[int, int]:
        """Replicas per shape."""
        out: dict[int, int] = {}
        for s, _ in self.items:
            out[s] = out.get(s, 0) + 1
        return out


@dataclass
class ShareTable:
    """Best value of shares on one GPU per (free units, CPU budget), with the choices to rebuild it."""

    best: FloatArr  # (U + 1, C + 1)
    steps: list[tuple[int, int, int, float, int]]  # (shape, units lvl, cpu lvl, value, copies)
    taken: list[npt.NDArray[np.bool_]]
    unit: int

    def rebuild(self, u: int, c: int) -> list[int]:
        """Shape indices (with repeats) of the best fill within ``u`` unit levels and ``c`` CPU levels."""
        out: list[int] = []
        for k in range(len(self.steps) - 1, -1, -1):
            s, du, dc, _, copies = self.steps[k]
            if u >= du and c >= dc and self.taken[k][u, c]:
                out += [s] * copies
                u, c = u - du, c - dc
        return out


def share_table(cands: list[tuple[int, int, int, float, int]], free: int, unit: int, levels: int) -> ShareTable:
    """Bounded 2-D knapsack for shares on a GPU with ``free`` units.

    ``cands``: (shape, units, CPU level, value, max copies). Copies are split in powers of two
    so each piece is a 0/1 item and every update is one array operation.
    """
    ulev = free // unit
    best = np.zeros((ulev + 1, levels + 1))
    steps: list[tuple[int, int, int, float, int]] = []
    taken: list[npt.NDArray[np.bool_]] = []
    for s, units, cl, v, cap in cands:
        du = -(-units // unit)
        if du > ulev or cl > levels or v <= 0:
            continue
        left = min(cap, ulev // du)
        piece = 1
        while left > 0:
            k = min(piece, left)
            a, b = du * k, cl * k
            if a > ulev or b > levels:
                break
            cand = best[:ulev + 1 - a, :levels + 1 - b] + v * k
            mask = np.zeros_like(best, dtype=bool)
            view = best[a:, b:]
            better = cand > view + 1e-12
            mask[a:, b:] = better
            best[a:, b:] = np.where(better, cand, view)
            steps.append((s, a, b, v * k, k))
            taken.append(mask)
            left -= k
            piece *= 2
    return ShareTable(best=best, steps=steps, taken=taken, unit=unit)


_IDX: dict[int, tuple[npt.NDArray[np.int64], FloatArr]] = {}


def _maxplus(h: FloatArr, g: FloatArr) -> tuple[FloatArr, npt.NDArray[np.int64]]:
    """``out[c] = max_{d <= c} h[c - d] + g[d]`` and the maximising ``d``."""
    n = len(h)
    if n not in _IDX:
        idx = np.arange(n)[:, None] - np.arange(n)[None, :]
        _IDX[n] = (np.maximum(idx, 0), np.where(idx >= 0, 0.0, _NEG))
    idx, pad = _IDX[n]
    m = h[idx]
    m += pad
    m += g[None, :]
    arg = m.argmax(axis=1)
    return m[np.arange(n), arg], arg


def _cummax(vals: FloatArr) -> tuple[FloatArr, npt.NDArray[np.int64]]:
    """Running maximum and the position where it is reached."""
    pos = np.where(vals >= np.maximum.accumulate(vals), np.arange(len(vals)), 0)
    pos = np.maximum.accumulate(pos)
    return vals[pos], pos


class Pricer:
    """Finds improving patterns for node types given shape values (reduced profits).

    Parameters
    ----------
    types, shapes
        The aggregated problem.
    cpu_step
        CPU grid in milli-cores (shape CPU rounded up, node CPU down).
    unit
        Share grid in demand units (shares rounded up, GPU free capacity down).
    """

    def __init__(self, types: list[NodeType], shapes: list[Shape], cpu_step: int, unit: int) -> None:
        self.types, self.shapes = types, shapes
        self.step, self.unit = cpu_step, unit
        self.levels = max(t.cpu for t in types) // cpu_step
        self.cl = [-(-s.cpu // cpu_step) for s in shapes]
        self._tables: dict[tuple[object, ...], ShareTable] = {}
        self._whole = [[i for i, s in enumerate(shapes) if s.gpus and t in s.types] for t in range(len(types))]
        self._share = [[i for i, s in enumerate(shapes) if not s.gpus and t in s.types] for t in range(len(types))]
        #: replicas of each shape a pattern may hold (all of them unless :meth:`start` says otherwise)
        self.caps = [len(s.replicas) for s in shapes]

    def start(self, caps: list[int] | None = None, same_values: bool = False) -> None:
        """Forget cached share tables (call when the shape values change; ``same_values`` keeps them
        when only ``caps`` changed); ``caps`` limits the replicas of each shape a pattern may hold
        (default: all the shape's replicas)."""
        if not same_values:
            self._tables = {}
        self.caps = list(caps) if caps is not None else [len(s.replicas) for s in self.shapes]

    def _table(self, t: int, free: int, vals: FloatArr) -> ShareTable:
        share = tuple(i for i in self._share[t] if vals[i] > 0 and self.caps[i] > 0)
        key = (free, share, tuple(self.caps[i] for i in share))
        if key not in self._tables:
            cands = [(i, self.shapes[i].units, self.cl[i], float(vals[i]), self.caps[i])
                     for i in share]
            self._tables[key] = share_table(cands, free, self.unit, self.levels)
        return self._tables[key]

    def price(self, t: int, vals: FloatArr) -> Pattern | None:
        """The best pattern found for type ``t`` with profit ``vals[s]`` per replica of shape ``s``."""
        nt = self.types[t]
        c_max = nt.cpu // self.step
        n = c_max + 1
        whole: dict[int, tuple[FloatArr, npt.NDArray[np.int64]]] = {}
        for i in self._whole[t]:
            s = self.shapes[i]
            if vals[i] > 0 and self.cl[i] <= c_max and self.caps[i] > 0:
                if s.gpus not in whole:
                    whole[s.gpus] = (np.full(n, _NEG), np.full(n, -1, dtype=np.int64))
                arr = whole[s.gpus]
                if vals[i] > arr[0][self.cl[i]]:
                    arr[0][self.cl[i]], arr[1][self.cl[i]] = vals[i], i
        wk = {}
        for k, (v, who) in whole.items():
            cm, pos = _cummax(v)
            wk[k] = (cm, who[pos])
        g_slots = len(nt.slots)
        h: list[FloatArr] = [np.zeros(n)] + [np.full(n, _NEG) for _ in range(g_slots)]
        back: list[list[tuple[int, int, npt.NDArray[np.int64], npt.NDArray[np.int64]]]] = [[] for _ in h]
        for j in range(1, g_slots + 1):
            slot = nt.slots[j - 1]
            gain, tag = np.zeros(n), np.full(n, -1, dtype=np.int64)  # tag: -1 empty, -2 shares, else shape
            if slot.share_ok:
                tab = self._table(t, slot.free, vals)
                fill = tab.best[slot.free // self.unit, :n]
                better = fill > gain
                gain, tag = np.where(better, fill, gain), np.where(better, -2, tag)
            if slot.whole_ok and 1 in wk:
                better = wk[1][0] > gain
                gain, tag = np.where(better, wk[1][0], gain), np.where(better, wk[1][1], tag)
            val, arg = _maxplus(h[j - 1], gain)
            h[j] = val
            back[j] = [(j - 1, 1, arg, tag[arg])]
            for k, (cm, who) in wk.items():
                if k > 1 and j <= nt.n_whole and j - k >= 0:
                    val, arg = _maxplus(h[j - k], cm)
                    upd = val > h[j] + 1e-12
                    if upd.any():
                        h[j] = np.where(upd, val, h[j])
                        back[j].append((j - k, k, np.where(upd, arg, -1), np.where(upd, who[arg], -1)))
        return self._rebuild(t, h, back, vals)

    def _rebuild(self, t: int, h: list[FloatArr], back: list[list[tuple[int, int, npt.NDArray[np.int64],
                                                                          npt.NDArray[np.int64]]]],
                 vals: FloatArr) -> Pattern | None:
        nt = self.types[t]
        j, c = len(nt.slots), len(h[0]) - 1
        if h[j][c] <= 1e-9:
            return None
        items: list[tuple[int, tuple[int, ...]]] = []
        while j > 0:
            choice = back[j][0]
            for cand in back[j][1:]:
                if cand[2][c] >= 0:
                    choice = cand  # a later k-GPU transition overrode the single-slot one here
            prev, k, arg, tag = choice
            d, who = int(arg[c]), int(tag[c])
            if k > 1:
                items.append((who, tuple(range(prev, j))))
            elif who >= 0:
                items.append((who, (j - 1,)))
            elif who == -2:
                slot = nt.slots[j - 1]
                tab = self._table(t, slot.free, vals)
                items += [(s, (j - 1,)) for s in tab.rebuild(slot.free // self.unit, d)]
            j, c = prev, c - d
        return self._trim(t, items, vals)

    def _trim(self, t: int, items: list[tuple[int, tuple[int, ...]]], vals: FloatArr) -> Pattern | None:
        """Drop replicas beyond a shape's count or over the node's memory, then refill greedily."""
        nt = self.types[t]
        seen: dict[int, int] = {}
        kept = []
        for s, gp in sorted(items, key=lambda x: -vals[x[0]]):
            seen[s] = seen.get(s, 0) + 1
            if seen[s] <= self.caps[s]:
                kept.append((s, gp))
        mem = sum(self.shapes[s].mem for s, _ in kept)
        if mem > nt.mem:
            kept.sort(key=lambda x: vals[x[0]] / max(1, self.shapes[x[0]].mem))
            while kept and mem > nt.mem:
                mem -= self.shapes[kept.pop(0)[0]].mem
        kept = self._fill(t, kept, vals)
        if not kept:
            return None
        assert sum(self.shapes[s].cpu for s, _ in kept) <= nt.cpu
        return Pattern(type=t, items=tuple(sorted(kept)), value=sum(self.shapes[s].value for s, _ in kept))

    def _fill(self, t: int, kept: list[tuple[int, tuple[int, ...]]],
              vals: FloatArr) -> list[tuple[int, tuple[int, ...]]]:
        """Add replicas of positive profit (best first) where room is left: GPUs, CPU, memory, counts."""
        nt = self.types[t]
        cpu = nt.cpu - sum(self.shapes[s].cpu for s, _ in kept)
        mem = nt.mem - sum(self.shapes[s].mem for s, _ in kept)
        free = [sl.free if sl.share_ok else 0 for sl in nt.slots]
        idle = [True] * len(nt.slots)
        used: dict[int, int] = {}
        for s, slots in kept:
            used[s] = used.get(s, 0) + 1
            for g in slots:
                idle[g] = False
                free[g] = 0 if self.shapes[s].gpus else free[g] - self.shapes[s].units
        out = list(kept)
        for s in np.argsort(-vals, kind="stable").tolist():
            sh = self.shapes[s]
            if vals[s] <= 0:
                break
            if t not in sh.types:
                continue
            while used.get(s, 0) < self.caps[s] and sh.cpu <= cpu and sh.mem <= mem:
                if sh.gpus:
                    gp: list[int] = [g for g in range(nt.n_whole) if idle[g]][:sh.gpus]
                    if len(gp) < sh.gpus:
                        break
                    for g in gp:
                        idle[g], free[g] = False, 0
                else:
                    fit = [g for g in range(len(free)) if free[g] >= sh.units]
                    if not fit:
                        break
                    g = min(fit, key=lambda x: free[x])
                    gp, idle[g] = [g], False
                    free[g] -= sh.units
                out.append((s, tuple(gp)))
                used[s] = used.get(s, 0) + 1
                cpu, mem = cpu - sh.cpu, mem - sh.mem
        return out


def homogeneous(types: list[NodeType], shapes: list[Shape]) -> list[Pattern]:
    """Starting columns: per node type and shape, as many replicas of that shape alone as fit."""
    out = []
    for t, nt in enumerate(types):
        for i, s in enumerate(shapes):
            if t not in s.types:
                continue
            most = min(len(s.replicas), nt.cpu // s.cpu if s.cpu else 1 << 30, nt.mem // s.mem if s.mem else 1 << 30)
            items: list[tuple[int, tuple[int, ...]]] = []
            if s.gpus:
                items = [(i, tuple(range(k * s.gpus, (k + 1) * s.gpus))) for k in range(nt.n_whole // s.gpus)]
            else:
                for g, slot in enumerate(nt.slots):
                    if slot.share_ok:
                        items += [(i, (g,))] * (slot.free // s.units)
            items = items[:most]
            if items:
                out.append(Pattern(type=t, items=tuple(items), value=len(items) * s.value))
    return out


def grids(types: list[NodeType], shapes: list[Shape], max_levels: int = 128,
          max_units: int = 200) -> tuple[int, int]:
    """CPU step (milli) and share unit: exact gcds when small enough, else coarser conservative grids."""
    cpus = [t.cpu for t in types] + [s.cpu for s in shapes]
    step = max(1, math.gcd(*cpus))
    top = max(t.cpu for t in types)
    if top // step > max_levels:
        step = -(-top // max_levels)
    units = [s.units for s in shapes if not s.gpus] + [sl.free for t in types for sl in t.slots]
    unit = max(1, math.gcd(*units))
    big = max(sl.free for t in types for sl in t.slots)
    if big // unit > max_units:
        unit = -(-big // max_units)
    return step, unit
