"""Shares in two dimensions: which placement strands the scarcer of a GPU's time and memory.

A time-sliced share takes part of a GPU's time (``gpu_fraction``) and of its memory (``gpu_memory_gib``).
Placing it can leave a GPU with room in one dimension that no share of the problem can use because the other
is gone: time left over on a GPU whose memory is spent (an L40S holding two shares of 0.1 and 24 GiB keeps 0.8
of its time and no memory), or memory left over on a GPU whose time is spent. Only the scarcer dimension
matters: a share's value is its time, so stranded time is lost value when time is what runs out, and stranded
memory is lost value when memory is what runs out (the other dimension is left over anyway).

:class:`StrandRule` says, from the problem alone (fixed while a plan is built), which dimension is scarcer
over every share of the problem (time asked per GPU that may hold shares, against memory asked per MiB of
them) and, per GPU model, which share shapes may use it; :meth:`StrandRule.strands` then says whether a GPU
left with some time and memory *strands*: it keeps room in the scarcer dimension for some share of the
problem (one that asks for some of it), yet no share of the problem fits in what it keeps. The fit rules
(:func:`capplan.placement.core.fit.share_key`) choose a GPU that does not strand before one that does, and the
greedy placer walks its nodes first for placements that strand nothing
(:meth:`capplan.placement.nodefill.NodeFill.tiers`).
Tenants and node limits are left out: the rule looks at shapes only.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

import numpy as np

from capplan.model.units import MILLI
from capplan.placement.core.fleet import SHARED

if TYPE_CHECKING:
    from capplan.placement.core.fleet import FleetArrays


class StrandRule:
    """Which share placements strand a GPU's scarcer dimension (see the module docstring).

    Parameters
    ----------
    fleet
        The fleet (its nodes, GPU models and each workload's demand per model).

    Attributes
    ----------
    time_scarce
        True when time is the scarcer dimension over the problem's shares (ties count as time).
    """

    def __init__(self, fleet: FleetArrays) -> None:
        p = fleet.p
        names = fleet.model_names
        shapes: list[set[tuple[int, int]]] = [set() for _ in names]
        asked_t = asked_m = 0
        hosts = np.zeros(fleet.n, dtype=bool)
        seen: set[int] = set()
        for w in p.workloads:
            if w.gpu_fraction is None:
                continue
            per, nodes = fleet.demands(w)
            one = next((d for d in per if d is not None), None)
            if one is None:
                continue
            asked_t += one.fraction_milli * w.replicas
            asked_m += one.memory_mib * w.replicas
            for k, d in enumerate(per):
                if d is not None:
                    shapes[k].add((d.fraction_milli, d.memory_mib))
            if id(nodes) not in seen:  # the eligibility arrays are shared by workloads of one shape
                seen.add(id(nodes))
                hosts[nodes] = True
        gpus = (fleet.exists & ((fleet.fixed < 0) | (fleet.fixed == SHARED)))[hosts]
        have_t = int(gpus.sum()) * MILLI
        have_m = int((gpus.sum(axis=1) * fleet.gmem_cap[hosts]).sum())
        #: Whether any share asks for GPU memory (without, nothing ever strands).
        self.active = asked_m > 0 and have_t > 0 and have_m > 0
        self.time_scarce = asked_t * have_m >= asked_m * have_t
        # Per model id: the shapes sorted by the scarcer dimension (the key), and the least of the other
        # dimension over the shapes up to each one: what a GPU must keep for some share to fit.
        self._keys: list[list[int]] = []
        self._least: list[list[int]] = []
        for group in shapes:
            # only shapes that use the scarce dimension can use what is left of it
            pairs = sorted({(f, m) for f, m in group} if self.time_scarce else {(m, f) for f, m in group if m})
            least: list[int] = []
            for _, other in pairs:
                least.append(other if not least else min(least[-1], other))
            self._keys.append([k for k, _ in pairs])
            self._least.append(least)
        self._arrays = [(np.array(k, dtype=np.int64), np.array(x, dtype=np.int64))
                        for k, x in zip(self._keys, self._least, strict=True)]
        # Time is counted in milli: when it is the scarcer dimension, the least memory a GPU must keep, by model id
        # and time left (-1: no share fits by time), is one table (the greedy asks it for every GPU it looks at).
        self._at_time: list[list[int]] = []
        if self.time_scarce:
            for keys_k, least_k in self._arrays:
                row = np.full(MILLI + 1, -1, dtype=np.int64)
                for k in range(keys_k.size):
                    row[int(keys_k[k]):] = least_k[k]  # keys ascending, least not increasing: the last set holds
                self._at_time.append(row.tolist())
        self._time_table = np.array(self._at_time, dtype=np.int64).reshape(len(self._at_time), MILLI + 1)

    def strands(self, model: int, time_left: int, mem_left: int) -> bool:
        """Whether a GPU of model id ``model`` left with ``time_left`` milli and ``mem_left`` MiB strands its
        scarcer dimension: some share of the problem would fit there by that dimension, none by both."""
        if not self.active:
            return False
        if self.time_scarce:
            return 0 <= time_left <= MILLI and mem_left < self._at_time[model][time_left]
        k = bisect_right(self._keys[model], mem_left) - 1
        return k >= 0 and time_left < self._least[model][k]

    def strands_many(self, model: np.ndarray, time_left: np.ndarray, mem_left: np.ndarray) -> np.ndarray:
        """:meth:`strands` over nodes at once: ``model`` the model id per node (N,), ``time_left`` and ``mem_left``
        per node and GPU (N, G); a (N, G) mask."""
        out = np.zeros(time_left.shape, dtype=bool)
        if not self.active or model.size == 0:
            return out
        if self.time_scarce:
            ok = (time_left >= 0) & (time_left <= MILLI)
            return np.asarray(ok & (mem_left < self._time_table[model[:, None], np.clip(time_left, 0, MILLI)]))
        scarce, other = mem_left, time_left
        for k in np.unique(model).tolist():
            keys, least = self._arrays[k]
            if keys.size == 0:
                continue
            rows = model == k
            at = np.searchsorted(keys, scarce[rows], side="right") - 1
            out[rows] = (at >= 0) & (other[rows] < least[np.maximum(at, 0)])
        return out

    def floor_by_use(self, fraction: np.ndarray, memory: np.ndarray) -> np.ndarray | None:
        """For one share shape (``fraction`` milli and ``memory`` MiB per model id): per model id and milli
        already shared on a GPU (0..MILLI), the least free GPU memory it must have for the share not to strand it
        (a GPU with less strands); None unless time is the scarcer dimension (ask :meth:`strands_many`)."""
        if not self.active or not self.time_scarce:
            return None
        never = np.iinfo(np.int64).min // 2  # no share fits by the time left: nothing strands
        used = np.arange(MILLI + 1, dtype=np.int64)
        out = np.full((len(self._at_time), MILLI + 1), never, dtype=np.int64)
        for k, row in enumerate(self._time_table):
            if k >= fraction.size or fraction[k] > MILLI:
                continue
            left = MILLI - used - fraction[k]
            at = row[np.clip(left, 0, MILLI)]
            out[k] = np.where((left >= 0) & (at >= 0), at + memory[k], never)
        return out
