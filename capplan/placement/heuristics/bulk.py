"""Bulk placement of identical replicas: per-node capacity by array arithmetic, then one fill pass.

The replicas of one workload are interchangeable. For every candidate node the number of replicas
that fit *at once* is computed exactly (whole GPUs, shares and MIG slices per GPU, CPU, memory,
isolation: the minimum over resources of ``floor(free / need)``, per GPU where GPUs are shared);
nodes are ranked once by the scorer's cost of one replica and filled to capacity in that order.
This is what placing replica by replica while sticking to the last node does (a node's score does
not change when another node fills), at one array pass per workload instead of one per replica.
Per-GPU capacities and node scores are cached per demand shape and recomputed only for nodes that
changed since (:attr:`ClusterState.stamp`).

Not handled here (callers fall back to replica-by-replica placement): power budgets, whose
headroom is shared by all nodes of a domain, and fixed MIG layouts. The MIG side (per-GPU MIG
arrays and the geometry-aware packer's stages) is in :mod:`capplan.placement.heuristics.bulkmig`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU
from capplan.placement.core.state import FREE, MIG, SHARED, WHOLE, ClusterState, Placement
from capplan.placement.heuristics.bulkmig import (
    Stage,
    evaluate_packed,
    is_homogeneous,
    mig_fill,
    mig_ok,
    mig_starts,
    packed_choices,
    place_packed,
)
from capplan.placement.heuristics.choose import cpu_pod_cost, placement_masks
from capplan.placement.heuristics.migpack import MigPacker
from capplan.placement.heuristics.score import Scorer

BIG = 1 << 30


class StampCache:
    """Per-node arrays keyed by demand shape, recomputed only for nodes whose stamp changed.

    Parameters
    ----------
    st
        The occupancy whose :attr:`~ClusterState.stamp` marks changed nodes.
    limit
        Most shapes kept (least recently used dropped first).
    """

    def __init__(self, st: ClusterState, limit: int = 64) -> None:
        self.st = st
        self.limit = limit
        self._d: OrderedDict[Hashable, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    def get(self, key: Hashable, idx: np.ndarray, compute: Callable[[np.ndarray], np.ndarray],
            width: int = 0, dtype: type = np.float64) -> np.ndarray:
        """Values for nodes ``idx`` (rows of width ``width``, 0: scalars), computing stale rows.

        ``key`` must always come with the same ``idx``: the arrays are stored compactly for it.
        The result is the cache's own array (read only).
        """
        st = self.st
        entry = self._d.get(key)
        if entry is None:
            vals: np.ndarray = np.zeros((idx.size, width) if width else idx.size, dtype=dtype)
            entry = (vals, np.full(idx.size, -1, dtype=np.int64))
            self._d[key] = entry
            if len(self._d) > self.limit:
                self._d.popitem(last=False)
        else:
            self._d.move_to_end(key)
        vals, stamps = entry
        cur = st.stamp[idx]
        stale = np.flatnonzero(stamps != cur)
        if stale.size:
            vals[stale] = compute(idx[stale])
            stamps[stale] = cur[stale]
        return vals


def bulk_ok(st: ClusterState) -> bool:
    """Whether bulk placement is exact on ``st`` (no power budgets, no fixed MIG layouts)."""
    return st.power_free.size == 1 and not st.layouts


def _share_caps(st: ClusterState, d: Demand, idx: np.ndarray) -> np.ndarray:
    """(len(idx), G) shares of ``d`` each GPU can still take."""
    ok = (st.exists[idx] & ((st.mode[idx] == FREE) | (st.mode[idx] == SHARED))
          & ((st.fixed[idx] < 0) | (st.fixed[idx] == SHARED)))
    cap = (MILLI - st.frac[idx]) // max(d.fraction_milli, 1)
    if d.memory_mib:
        cap = np.minimum(cap, (st.gmem_cap[idx][:, None] - st.gmem[idx]) // d.memory_mib)
    return np.asarray(np.where(ok, np.maximum(cap, 0), 0))


class BulkPlacer:
    """Capacity, ranking and filling for one workload at a time (see the module docstring).

    Parameters
    ----------
    st
        The occupancy to fill.
    scorer
        Ranks nodes by the cost of one replica.
    """

    def __init__(self, st: ClusterState, scorer: Scorer) -> None:
        self.st = st
        self.scorer = scorer
        self.cache = StampCache(st)
        self._groups: dict[tuple[int, int], np.ndarray] = {}
        self._slots: dict[tuple[str, int], MigSlot] = {}
        self.packer: MigPacker | None = None
        self._lay_slots: dict[tuple[int, int], list[tuple[int, MigSlot]]] = {}

    def pack_mig(self, order: list[Workload]) -> None:
        """Pack MIG instances geometry-aware (:mod:`~capplan.placement.heuristics.migpack`) for the
        workloads of ``order`` (the placement order); without this call each GPU is filled with one
        workload's instances at the lowest free starts. Not for per-node MIG strategies."""
        if bulk_ok(self.st) and not self.st.p.single_mig and not self.st.p.tainted and any(
                w.mig is not None for w in order):
            self.packer = MigPacker(self.st, order)

    # ------------------------------------------------------------ capacity
    def gpu_caps(self, w: Workload, d: Demand, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) replicas of ``w`` each GPU can take (shares and MIG; tenant rules included)."""
        st = self.st
        if d.kind == "fraction":
            cap = _share_caps(st, d, idx)
        else:
            assert d.profile is not None
            cap = mig_fill(st, d.profile, d.units, is_homogeneous(st, idx), idx)[0]
        return np.asarray(np.where(st.gpu_tenant_ok(w, idx), cap, 0))

    def _evaluate(self, w: Workload, d: Demand, idx: np.ndarray, stage: Stage = None) -> np.ndarray:
        """(len(idx), 2): replicas each node takes at once, and the cost of one replica there.

        ``stage`` (MIG with the packer): ``"open"`` counts only free slots of target layouts and
        MIG GPUs without one; ``("fresh", layout)`` only free GPUs that would get that layout.
        """
        st = self.st
        cap = np.where(st.node_ok(w, idx), BIG, 0)
        if w.cpu_milli:
            cap = np.minimum(cap, st.cpu[idx] // w.cpu_milli)
        if w.memory_mib:
            cap = np.minimum(cap, st.mem[idx] // w.memory_mib)
        if stage is not None:
            return evaluate_packed(self, w, d, idx, stage, cap)
        if d.kind == "whole":
            cap = np.minimum(cap, st.free_whole[idx] // max(d.gpus, 1))
            cost = self.scorer.whole(st, w, idx, d.gpus)
        elif d.kind == "fraction":
            gcap = self.gpu_caps(w, d, idx)
            cap = np.minimum(cap, gcap.sum(axis=1))
            g = self.scorer.share(st, w, idx, d.units)
            cost = np.where(gcap > 0, g, np.inf).min(axis=1)
        elif d.kind == "mig":
            gcap = self.gpu_caps(w, d, idx)
            cap = np.minimum(cap, gcap.sum(axis=1))
            node_free = (UNITS_PER_GPU - st.used[idx]).sum(axis=1)
            # A node with a MIG GPU that still has room first, then the fullest node.
            fresh = ~((st.mode[idx] == MIG) & (gcap > 0)).any(axis=1)
            # The smallest slice that serves the workload first (least capacity held).
            cost = d.units * 1e10 + fresh * 1e9 + node_free * 1e3
        else:
            cost = cpu_pod_cost(st, w, idx)
        return np.stack([cap.astype(np.float64), np.asarray(cost, dtype=np.float64)], axis=1)

    def evaluate(self, w: Workload, d: Demand, group: Hashable, idx: np.ndarray, stage: Stage = None) -> np.ndarray:
        """:meth:`_evaluate` for the nodes ``idx`` of ``group``, cached when ``group`` is not None."""
        if group is None:
            return self._evaluate(w, d, idx, stage)
        prof = d.profile
        key = (group, d.kind, d.gpus, d.fraction_milli, d.memory_mib, d.units,
               (prof.name, prof.memory_slices, tuple(prof.starts), prof.max_count) if prof else None,
               w.cpu_milli, w.memory_mib, w.tenant, w.isolation, stage)
        return self.cache.get(key, idx, lambda x: self._evaluate(w, d, x, stage), 2)

    def groups(self, w: Workload, per: list[Demand | None],
               idx: np.ndarray | None) -> list[tuple[int, Hashable, np.ndarray]]:
        """(model id, group key or None, nodes) of the candidates; all eligible nodes when ``idx`` is None.

        Eligible nodes of one model and enough GPUs form a group whose evaluation is cached.
        """
        if idx is not None:
            return [(m, None, sub) for m, sub in _by_model(self.st, idx) if per[m] is not None]
        st = self.st
        out: list[tuple[int, Hashable, np.ndarray]] = []
        k = w.gpus or 0
        for m, d in enumerate(per):
            if d is None:
                continue
            gkey = (m, k)
            sub = self._groups.get(gkey)
            if sub is None:
                sub = self._groups[gkey] = np.flatnonzero((st.model_id == m) & (st.gpu_count >= k))
            if sub.size:
                out.append((m, gkey, sub))
        return out

    def capacity(self, w: Workload, per: list[Demand | None], idx: np.ndarray) -> np.ndarray:
        """Replicas of ``w`` each node of ``idx`` takes at once (exact when :func:`bulk_ok`)."""
        out = np.zeros(self.st.n, dtype=np.int64)
        for _, gkey, sub in self.groups(w, per, None):
            d = per[_]
            assert d is not None
            out[sub] = self.evaluate(w, d, gkey, sub)[:, 0]
        return np.asarray(out[idx])

    # ---------------------------------------------------------------- fill
    def place(self, w: Workload, per: list[Demand | None], n: int, idx: np.ndarray | None) -> list[Placement]:
        """Place up to ``n`` replicas of ``w`` on nodes ``idx`` (None: all eligible), best first, each filled."""
        if self.packer is not None and w.mig is not None and n > 0:
            return place_packed(self, w, per, n, idx)
        return self._fill(w, per, n, idx)

    def _fill(self, w: Workload, per: list[Demand | None], n: int, idx: np.ndarray | None,
              stage: Stage = None) -> list[Placement]:
        """Rank nodes by the cost of one replica and fill each to capacity (see :meth:`_evaluate` for ``stage``)."""
        st = self.st
        parts = []
        for m, gkey, sub in self.groups(w, per, idx):
            d = per[m]
            assert d is not None
            ev = self.evaluate(w, d, gkey, sub, stage)
            keep = ev[:, 0] > 0
            if keep.any():
                parts.append((sub[keep], ev[keep]))
        if not parts:
            return []
        nodes = np.concatenate([x[0] for x in parts])
        ev = np.concatenate([x[1] for x in parts])
        caps, cost = ev[:, 0].astype(np.int64), ev[:, 1]
        if nodes.size > 4 * n:  # only the n cheapest nodes (and ties) can be needed
            kth = np.partition(cost, n - 1)[n - 1]
            sel = cost <= kth
            nodes, caps, cost = nodes[sel], caps[sel], cost[sel]
        order = np.lexsort((nodes, cost))
        take = np.minimum(caps[order], n)
        last = int(np.searchsorted(np.cumsum(take), n)) + 1
        out: list[Placement] = []
        for j in order[:last].tolist():
            k = min(int(caps[j]), n - len(out))
            if k <= 0:
                break
            i = int(nodes[j])
            d = per[int(st.model_id[i])]
            assert d is not None
            got = self._node_choices(w, d, i, k) if stage is None else packed_choices(self, w, d, i, k, stage)
            st.apply_many(w, d, got)
            out += got
        return out

    def _slot(self, name: str, start: int) -> MigSlot:
        slot = self._slots.get((name, start))
        if slot is None:
            slot = self._slots[(name, start)] = MigSlot(profile=name, start=start)
        return slot

    def _node_choices(self, w: Workload, d: Demand, i: int, k: int) -> list[Placement]:
        """``k`` placements of ``w`` on node ``i`` (known to fit)."""
        st = self.st
        one = np.array([i], dtype=np.int64)
        if d.kind == "none":
            return [Placement(node=i)] * k
        if d.kind == "whole":
            free = np.flatnonzero(st.whole_free(one)[0]).tolist()
            free.sort(key=lambda gi: (st.fixed[i, gi] != WHOLE, gi))
            return [Placement(node=i, gpus=tuple(sorted(free[r * d.gpus:(r + 1) * d.gpus]))) for r in range(k)]
        if d.kind == "fraction":
            gcap = self.gpu_caps(w, d, one)[0]
            g = self.scorer.share(st, w, one, d.units)[0]
            out: list[Placement] = []
            for gi in np.lexsort((np.arange(st.g), g)).tolist():
                c = Placement(node=i, gpus=(gi,), fraction_milli=d.fraction_milli)
                out += [c] * min(int(gcap[gi]), k - len(out))
                if len(out) == k:
                    break
            return out
        return self._mig_choices(w, d, i, k)

    def _mig_choices(self, w: Workload, d: Demand, i: int, k: int) -> list[Placement]:
        """``k`` MIG placements on node ``i``: GPUs already in MIG mode first.

        On each GPU every instance takes the free start that leaves the most (profile, start)
        placements of the model free (as :func:`~capplan.placement.heuristics.choose.choose` does); if that
        fits fewer instances than taking the lowest free starts, the lowest starts are used.
        """
        st = self.st
        prof = d.profile
        model = st.models[int(st.model_id[i])]
        assert prof is not None and model is not None
        one = np.array([i], dtype=np.int64)
        ok = (mig_ok(st, prof, is_homogeneous(st, one), one) & st.gpu_tenant_ok(w, one))[0]
        allm = placement_masks(model).tolist()
        gpus = sorted(np.flatnonzero(ok).tolist(), key=lambda gi: (st.mode[i, gi] != MIG, gi))
        out: list[Placement] = []
        for gi in gpus:
            state = (int(st.mig_mask[i, gi]), int(st.used[i, gi]), int(st.prof_count[i, gi, st.prof_index[prof.name]]))
            want = k - len(out)
            starts = mig_starts(prof, d.units, state, want, allm)
            if len(starts) < want:
                low = mig_starts(prof, d.units, state, want, None)
                starts = low if len(low) > len(starts) else starts
            for s in starts:
                slot = self._slots.get((prof.name, s))
                if slot is None:
                    slot = self._slots[(prof.name, s)] = MigSlot(profile=prof.name, start=s)
                out.append(Placement(node=i, gpus=(gi,), slot=slot))
            if len(out) == k:
                break
        return out


def _by_model(st: ClusterState, idx: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(model id, the nodes of ``idx`` with that model) for each GPU model present in ``idx``."""
    if idx.size == 0:
        return []
    mids = st.model_id[idx]
    first = int(mids[0])
    if bool((mids == first).all()):
        return [(first, idx)]
    return [(int(m), idx[mids == m]) for m in np.unique(mids)]
