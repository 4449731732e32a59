"""Node scores: best fit and fragmentation gradient (FGD, Weng et al., USENIX ATC 2023).

A score is a cost, lower is better, computed for many candidates at once: one value per
candidate node for whole-GPU and CPU-only replicas, one per (node, GPU) for GPU shares.

*Fragmentation* of a node with respect to a demand shape ``m`` is the free GPU capacity that
``m`` cannot use there: all of it when ``m`` does not fit the node at all (CPU, memory, model,
or too few whole GPUs), otherwise the free capacity of the GPUs whose free share is below
``m``'s per-GPU need. FGD weights shapes by their frequency in the workload (:class:`ShapeMix`)
and places each replica where the expected fragmentation grows least.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from capplan.model.problem import Problem, Workload
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.state import ClusterState


@dataclass(frozen=True)
class ShapeMix:
    """Frequent demand shapes of a workload and their probabilities (the FGD "target workload").

    Attributes
    ----------
    need
        Per-GPU need in demand units (``UNITS_PER_GPU`` for whole GPUs), shape (K,).
    k
        Whole GPUs needed (0 for a GPU share), shape (K,).
    cpu, mem
        Host CPU (milli) and memory (MiB) per replica, shape (K,).
    allowed
        (K, models) mask: which fleet model ids each shape may use.
    prob
        Probabilities, shape (K,), summing to 1 (empty when nothing asks for GPUs).
    """

    need: np.ndarray
    k: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    allowed: np.ndarray
    prob: np.ndarray

    @classmethod
    def of(cls, p: Problem, st: ClusterState, workloads: list[Workload] | None = None, top: int = 16) -> ShapeMix:
        """The ``top`` most frequent GPU shapes of ``workloads`` (default: all), weighted by replicas.

        Shapes are grouped by (whole GPUs, share, allowed models); CPU and memory are the
        replica-weighted medians of each group.
        """
        groups: dict[tuple[int, int, tuple[bool, ...]], list[tuple[int, int, int]]] = {}
        counts: Counter[tuple[int, int, tuple[bool, ...]]] = Counter()
        for w in workloads if workloads is not None else p.workloads:
            if w.gpus is None and w.gpu_fraction is None and w.mig is None:
                continue
            need, k, allowed = _shape_of(p, st, w)
            key = (need, k, allowed)
            groups.setdefault(key, []).append((w.cpu_milli, w.memory_mib, w.replicas))
            counts[key] += w.replicas
        keys = [key for key, _ in counts.most_common(top)]
        total = sum(counts[key] for key in keys) or 1
        cpu = [_wmedian([(c, r) for c, _, r in groups[key]]) for key in keys]
        mem = [_wmedian([(m, r) for _, m, r in groups[key]]) for key in keys]
        nm = len(st.model_names)
        return cls(need=np.array([key[0] for key in keys], dtype=np.int64),
                   k=np.array([key[1] for key in keys], dtype=np.int64),
                   cpu=np.array(cpu, dtype=np.int64), mem=np.array(mem, dtype=np.int64),
                   allowed=np.array([key[2] for key in keys], dtype=bool).reshape(len(keys), nm),
                   prob=np.array([counts[key] / total for key in keys], dtype=np.float64))


def _wmedian(items: list[tuple[int, int]]) -> int:
    items = sorted(items)
    half = sum(r for _, r in items) / 2
    acc = 0
    for v, r in items:
        acc += r
        if acc >= half:
            return v
    return items[-1][0]


def _shape_of(p: Problem, st: ClusterState, w: Workload) -> tuple[int, int, tuple[bool, ...]]:
    allowed = []
    need, k = UNITS_PER_GPU, 0
    for name in st.model_names:
        model = p.catalog.get(name) if name else None
        d = p.demand(w, model) if model and (w.gpu_models is None or model.name in p.allowed_models(w)) else None
        allowed.append(d is not None)
        if d is not None:
            need, k = (UNITS_PER_GPU, d.gpus) if d.kind == "whole" else (d.units, 0)
    return need, k, tuple(allowed)


def fragmentation(mix: ShapeMix, free: np.ndarray, cpu: np.ndarray, mem: np.ndarray,
                  model_id: np.ndarray) -> np.ndarray:
    """Expected fragmentation (demand units) of nodes with per-GPU ``free`` units (..., G).

    ``cpu``, ``mem`` and ``model_id`` have the leading shape of ``free`` without the GPU axis.
    """
    total = free.sum(axis=-1)
    full = (free >= UNITS_PER_GPU).sum(axis=-1)
    # (..., K): free capacity on GPUs too small for each shape.
    small = (free[..., None] * (free[..., None] < mix.need)).sum(axis=-2)
    fits = ((cpu[..., None] >= mix.cpu) & (mem[..., None] >= mix.mem) & mix.allowed.T[model_id]
            & (small < total[..., None]) & (full[..., None] >= mix.k))
    frag = np.where(fits, small, total[..., None])
    return np.asarray(frag @ mix.prob)


class Scorer(Protocol):
    """Cost of candidate placements; lower is better."""

    def whole(self, st: ClusterState, w: Workload, idx: np.ndarray, k: int) -> np.ndarray:
        """One cost per node in ``idx`` for ``k`` whole GPUs."""
        ...

    def share(self, st: ClusterState, w: Workload, idx: np.ndarray, units: int) -> np.ndarray:
        """(len(idx), G) costs for ``units`` of one GPU on each GPU of each node."""
        ...


class BestFit:
    """Best fit: fewest free GPUs left on the node, then least free CPU (normalised)."""

    def whole(self, st: ClusterState, w: Workload, idx: np.ndarray, k: int) -> np.ndarray:
        """Free whole GPUs left, CPU share left as tie-break."""
        left = st.free_whole[idx] - k
        return np.asarray(left + (st.cpu[idx] - w.cpu_milli) / np.maximum(st.cpu[idx], 1) * 0.5)

    def share(self, st: ClusterState, w: Workload, idx: np.ndarray, units: int) -> np.ndarray:
        """Tightest GPU first (least share left), then the fullest node."""
        free = UNITS_PER_GPU - st.used[idx]
        node_free = free.sum(axis=1, keepdims=True) / (UNITS_PER_GPU * st.g)
        return np.asarray((free - units) / UNITS_PER_GPU + 0.01 * node_free)


class Fgd:
    """Fragmentation gradient descent: least growth of expected fragmentation against ``mix``.

    Parameters
    ----------
    mix
        The target workload's shape mix.
    """

    def __init__(self, mix: ShapeMix) -> None:
        self.mix = mix
        self._frag = np.zeros(0)
        self._stamp = np.zeros(0, dtype=np.int64)

    def _before(self, st: ClusterState, idx: np.ndarray) -> np.ndarray:
        """Current fragmentation of nodes ``idx``, recomputed only for nodes changed since last time."""
        if self._frag.size != st.n:
            self._frag = np.zeros(st.n)
            self._stamp = np.full(st.n, -1, dtype=np.int64)
        stale = idx[self._stamp[idx] != st.stamp[idx]]
        if stale.size:
            free = UNITS_PER_GPU - st.used[stale]
            self._frag[stale] = fragmentation(self.mix, free, st.cpu[stale], st.mem[stale], st.model_id[stale])
            self._stamp[stale] = st.stamp[stale]
        return np.asarray(self._frag[idx])

    def whole(self, st: ClusterState, w: Workload, idx: np.ndarray, k: int) -> np.ndarray:
        """Fragmentation growth when ``k`` fully free GPUs of each node are taken."""
        if not self.mix.prob.size:
            return BestFit().whole(st, w, idx, k)
        free = UNITS_PER_GPU - st.used[idx]
        # Taking k full GPUs: zero the first k full ones (which ones does not change the score).
        full = free >= UNITS_PER_GPU
        take = full & (np.cumsum(full, axis=1) <= k)
        after = np.where(take, 0, free)
        frag = fragmentation(self.mix, after, st.cpu[idx] - w.cpu_milli, st.mem[idx] - w.memory_mib,
                             st.model_id[idx])
        return np.asarray(frag - self._before(st, idx))

    def share(self, st: ClusterState, w: Workload, idx: np.ndarray, units: int) -> np.ndarray:
        """Fragmentation growth for a share on each GPU (vectorised over nodes and GPUs)."""
        if not self.mix.prob.size:
            return BestFit().share(st, w, idx, units)
        mix = self.mix
        free = (UNITS_PER_GPU - st.used[idx]).astype(np.int64)  # (C, G)
        cost = np.full(free.shape, np.inf)
        r, g = np.nonzero(free >= units)
        if r.size == 0:
            return cost
        # GPUs of one node with the same free share score the same: evaluate each pair once.
        _, first, inv = np.unique(r * (UNITS_PER_GPU + 1) + free[r, g], return_index=True, return_inverse=True)
        ru, fu = r[first], free[r[first], g[first]]
        total = free.sum(axis=1)
        full = (free >= UNITS_PER_GPU).sum(axis=1)
        small = (free[..., None] * (free[..., None] < mix.need)).sum(axis=1)  # (C, K)
        g_old = fu[:, None] * (fu[:, None] < mix.need)  # (P, K)
        nf = fu - units
        g_new = nf[:, None] * (nf[:, None] < mix.need)
        small_after = small[ru] - g_old + g_new
        total_after = (total[ru] - units)[:, None]
        full_after = (full[ru] - (fu >= UNITS_PER_GPU))[:, None]
        sub = idx[ru]
        nodefit = ((st.cpu[sub] - w.cpu_milli)[:, None] >= mix.cpu) & \
                  ((st.mem[sub] - w.memory_mib)[:, None] >= mix.mem) & mix.allowed.T[st.model_id[sub]]
        fits = nodefit & (small_after < total_after) & (full_after >= mix.k)
        frag_after = np.where(fits, small_after, total_after) @ mix.prob
        vals = frag_after - self._before(st, sub)
        cost[r, g] = vals[inv]
        return cost

