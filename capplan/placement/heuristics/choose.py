"""Choose where one replica goes: feasibility over all candidate nodes at once, then a score.

Feasibility follows every placement rule (CPU, memory, allowed models, GPU modes, shares and
GPU memory, MIG geometry and counts, isolation, power); the :class:`~capplan.placement.heuristics.score.Scorer`
ranks what is feasible. MIG slices start where the most valid placements stay free.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from capplan.model.catalog import GpuModel
from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU
from capplan.placement.core.state import FREE, MIG, SHARED, WHOLE, ClusterState, Placement
from capplan.placement.heuristics.score import Scorer


def cpu_pod_cost(st: ClusterState, w: Workload, idx: np.ndarray) -> np.ndarray:
    """Cost of a CPU-only replica on each node of ``idx``: CPU-only nodes first (GPU nodes keep
    their CPU and memory for GPU work), then the node with the fewest free GPU units, then the fullest CPU."""
    free_units = np.where(st.exists[idx], UNITS_PER_GPU - st.used[idx], 0).sum(axis=1)
    gpu_node = st.gpu_count[idx] > 0
    return np.asarray(gpu_node * 1e12 + free_units * 4.0
                      + (st.cpu[idx] - w.cpu_milli) / np.maximum(st.cpu[idx], 1))


@cache
def placement_masks(model: GpuModel) -> np.ndarray:
    """Memory-slice masks of every (profile, start) placement of ``model``."""
    return np.array([((1 << pr.memory_slices) - 1) << s for pr in model.profiles for s in pr.starts],
                    dtype=np.int64)


def choose(st: ClusterState, w: Workload, scorer: Scorer,
           within: np.ndarray | None = None) -> Placement | None:
    """The best feasible placement of one replica of ``w``, or None.

    Parameters
    ----------
    within
        Optional node indices to restrict the search to (a topology domain).
    """
    per, idx = st.demands(w)
    if within is not None:
        idx = np.intersect1d(idx, within, assume_unique=True)
    if idx.size == 0:
        return None
    idx = idx[st.node_ok(w, idx)]
    if idx.size == 0:
        return None
    kinds = {d.kind for d in (per[m] for m in np.unique(st.model_id[idx])) if d is not None}
    kind = kinds.pop() if len(kinds) == 1 else "mig"
    if kind == "none":
        return Placement(node=int(idx[int(np.argmin(cpu_pod_cost(st, w, idx)))]))
    if kind == "whole":
        k = w.gpus or 0
        idx = idx[(st.free_whole[idx] >= k) & (st.power_headroom(idx) >= k * st.tdp[idx])]
        if idx.size == 0:
            return None
        i = int(idx[int(np.argmin(scorer.whole(st, w, idx, k)))])
        free = np.flatnonzero(st.whole_free(np.array([i]))[0])
        order = sorted(free.tolist(), key=lambda gi: (st.fixed[i, gi] != WHOLE, gi))
        return Placement(node=i, gpus=tuple(sorted(order[:k])))
    if kind == "fraction":
        return _share(st, per, w, idx, scorer)
    return _mig(st, per, w, idx)


def _new_gpu_ok(st: ClusterState, idx: np.ndarray) -> np.ndarray:
    """(C, G): a GPU not yet in use may be switched on (power)."""
    head = st.power_headroom(idx)
    return np.asarray((st.mode[idx] != FREE) | (head >= st.tdp[idx])[:, None])


def _share(st: ClusterState, per: list[Demand | None], w: Workload, idx: np.ndarray,
           scorer: Scorer) -> Placement | None:
    d = next(x for x in per if x is not None)
    ok = (st.exists[idx] & ((st.mode[idx] == FREE) | (st.mode[idx] == SHARED))
          & ((st.fixed[idx] < 0) | (st.fixed[idx] == SHARED))
          & (st.frac[idx] + d.fraction_milli <= MILLI)
          & (st.gmem[idx] + d.memory_mib <= st.gmem_cap[idx][:, None])
          & st.gpu_tenant_ok(w, idx) & _new_gpu_ok(st, idx))
    rows = np.flatnonzero(ok.any(axis=1))
    if rows.size == 0:
        return None
    sub, ok = idx[rows], ok[rows]
    cost = np.where(ok, scorer.share(st, w, sub, d.units), np.inf)
    flat = int(np.argmin(cost))
    r, gi = divmod(flat, st.g)
    return Placement(node=int(sub[r]), gpus=(gi,), fraction_milli=d.fraction_milli)


def _mig(st: ClusterState, per: list[Demand | None], w: Workload, idx: np.ndarray) -> Placement | None:
    best: tuple[tuple[float, float, float], Placement] | None = None
    for m in np.unique(st.model_id[idx]):
        d = per[int(m)]
        model = st.models[int(m)]
        if d is None or d.kind != "mig" or model is None or d.profile is None:
            continue
        prof = d.profile
        sub = idx[st.model_id[idx] == m]
        pi = st.prof_index[prof.name]
        counts = st.prof_count[sub]
        ok = (st.exists[sub] & ((st.mode[sub] == FREE) | (st.mode[sub] == MIG))
              & ((st.fixed[sub] < 0) | (st.fixed[sub] == MIG))
              & (counts[..., pi] < prof.max_count) & (st.used[sub] + d.units <= UNITS_PER_GPU)
              & st.gpu_tenant_ok(w, sub) & _new_gpu_ok(st, sub))
        if model.homogeneous:
            ok &= (counts.sum(axis=2) - counts[..., pi]) == 0
        starts = np.array(prof.starts, dtype=np.int64)
        smask = ((1 << prof.memory_slices) - 1) << starts  # (S,)
        cur = st.mig_mask[sub]
        free_start = ok[..., None] & ((cur[..., None] & smask) == 0)  # (C, G, S)
        for (i, gi), layout in st.layouts.items():
            hit = np.flatnonzero(sub == i)
            if hit.size:
                allowed = np.array([MigSlot(profile=prof.name, start=int(s)) in layout for s in starts])
                free_start[hit[0], gi] &= allowed
        if not free_start.any():
            continue
        allm = placement_masks(model)
        after = cur[..., None] | smask  # (C, G, S)
        left = ((after[..., None] & allm) == 0).sum(axis=-1)  # placements still free
        in_use = (st.mode[sub] == MIG)[..., None]
        node_free = (UNITS_PER_GPU - st.used[sub]).sum(axis=1)[:, None, None]
        key = np.where(free_start, (~in_use) * 1e9 + node_free * 1e3 - left, np.inf)
        flat = int(np.argmin(key))
        r, rest = divmod(flat, st.g * len(starts))
        gi, si = divmod(rest, len(starts))
        cand = (float(d.units), float(key.flat[flat]), 0.0)  # the smallest slice held first
        if best is None or cand < best[0]:
            best = (cand, Placement(node=int(sub[r]), gpus=(gi,), slot=MigSlot(profile=prof.name,
                                                                             start=int(starts[si]))))
    return best[1] if best else None
