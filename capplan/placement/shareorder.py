"""A share shape's candidate nodes kept in best-fit order between workloads (greedy's shares).

:class:`ShareOrder` holds, for one share shape, the nodes that pass its screens as one sorted array of
(best-fit key, node) numbers and follows the state's log of touched nodes: only the nodes changed since the
shape was last used are screened and placed again. :class:`~capplan.placement.bestfit.BestFitOrder` makes one
per shape and walks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from capplan.model.problem import Workload
from capplan.model.units import MILLI
from capplan.placement.core.state import BLOCKED, FREE, MIG, SHARED, WHOLE, ClusterState

if TYPE_CHECKING:
    from capplan.placement.bestfit import BestFitOrder


#: Per GPU mode code: whether a GPU in that mode may take a share (free, or already shared).
_SHARE_MODE = np.zeros(max(FREE, WHOLE, SHARED, MIG, BLOCKED) + 1, dtype=bool)
_SHARE_MODE[[FREE, SHARED]] = True


class ShareOrder:
    """The candidates of one share shape in best-fit order
    (:meth:`~capplan.placement.bestfit.BestFitOrder._share_order`): one sorted array of (key, node) numbers,
    the node in the low bits, followed along the state's log of touched nodes (and the power headroom, when
    budgets may bind), with the per-GPU screens of the shape."""

    def __init__(self, bf: BestFitOrder, w: Workload, eligible: np.ndarray) -> None:
        st = self.st = bf.st
        self.eligible = eligible
        self.bits = max(1, int(st.n - 1).bit_length())  # the node index below the key
        self.low = (1 << self.bits) - 1
        self.member = np.zeros(st.n, dtype=bool)
        self.member[eligible] = True
        per = st.demands(w)[0]  # the share and GPU memory per model id (beyond a GPU where never eligible)
        self.fm = np.array([d.fraction_milli if d is not None else MILLI + 1 for d in per], dtype=np.int64)
        self.mm = np.array([d.memory_mib if d is not None else 0 for d in per], dtype=np.int64)
        # per node, the most a GPU may have in use and still take the share: time (milli) and GPU memory (MiB)
        self.frac_most = MILLI - self.fm[st.model_id]
        self.gmem_most = st.gmem_cap - self.mm[st.model_id]
        self.budgets = st.power_budget.size > 1 and bool(st.tdp[eligible].any())  # else power never binds
        self.shareable = st.exists & ((st.fixed < 0) | (st.fixed == SHARED))  # GPUs whose preset allows shares
        # The nodes that pass the screen with a GPU the share does not strand (tenants aside), and how many:
        # the first walk of :attr:`BestFitOrder.keep_room` looks at those only (none: it is over at once).
        self.keeps = np.zeros(st.n, dtype=bool)
        self.kept = 0
        self.keep_gpus = np.zeros((st.n, st.g), dtype=bool)  # per GPU of those nodes: it takes it so
        self.floor = st.strand.floor_by_use(self.fm, self.mm)  # the GPU memory that keeps room, by share used
        self._rebuild(bf, w)

    def _rebuild(self, bf: BestFitOrder, w: Workload) -> None:
        st = self.st
        self.keeps[:] = False
        self.kept = 0
        self.seen = st.touched_base + len(st.touched)  # touches already reflected
        self.head = st.headroom().copy() if self.budgets else None
        self.comp = self._screened(bf, w, self.eligible)
        self.at = np.full(st.n, -1, dtype=np.int64)  # per node, its (key, node) number in the order, or -1
        self.at[self.comp & self.low] = self.comp

    def _room(self, st: ClusterState, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) mask: the GPU's mode, share and GPU memory take one more share (tenants aside)."""
        return np.asarray(self.shareable[idx] & _SHARE_MODE[st.mode[idx]]
                          & (st.frac[idx] <= self.frac_most[idx][:, None])
                          & (st.gmem[idx] <= self.gmem_most[idx][:, None]))

    def take(self, w: Workload, idx: np.ndarray, keep_room: bool = False) -> np.ndarray:
        """Mask over nodes ``idx``: some GPU takes a share of ``w``, its tenants too (:meth:`_gpu_screen`);
        ``keep_room``: and is not stranded by it (:meth:`BestFitOrder._room_kept`)."""
        st = self.st
        room = self.keep_gpus[idx] if keep_room else self._room(st, idx)  # the nodes are as last screened
        ok = room & ((st.users[idx] == 0) | st.gpu_tenant_ok(w, idx))
        return np.asarray(ok.any(axis=1))

    def takes(self, w: Workload, i: int, keep_room: bool = False) -> bool:
        """:meth:`take` for one node, in Python."""
        st = self.st
        mid = int(st.model_id[i])
        f, m, cap = int(self.fm[mid]), int(self.mm[mid]), int(st.gmem_cap[i])
        users, frac, gmem = st.users[i].tolist(), st.frac[i].tolist(), st.gmem[i].tolist()
        fixed, mode = st.fixed[i].tolist(), st.mode[i].tolist()
        kept = self.keep_gpus[i].tolist() if keep_room else []
        for g in range(int(st.gpu_count[i])):
            if (fixed[g] in (-1, SHARED) and mode[g] in (FREE, SHARED) and frac[g] + f <= MILLI
                    and gmem[g] + m <= cap and (not users[g] or st.gpu_tenant_ok_at(w, i, g))
                    and (not keep_room or kept[g])):
                return True
        return False

    def _screened(self, bf: BestFitOrder, w: Workload, idx: np.ndarray) -> np.ndarray:
        """The (key, node) numbers of the nodes of ``idx`` that pass the shape's screen, sorted."""
        st = self.st
        if idx.size == 0:
            return idx
        room = self._room(st, idx)
        ok = room.any(axis=1) & (st.cpu[idx] >= w.cpu_milli) & (st.mem[idx] >= w.memory_mib)
        if self.budgets:  # as _screen: a share turns on an idle GPU (its draw) or joins a busy one
            head, tdp = st.power_headroom(idx), st.tdp[idx]
            ok &= (tdp == 0) | (head >= tdp) | ((head >= 0) & (st.users[idx] > 0).any(axis=1))
        if st.strand.active:
            mid = st.model_id[idx]
            if self.floor is not None:
                used = np.minimum(st.frac[idx], MILLI)  # a scheduler's union over a window may hold more (no room)
                room &= st.gmem_cap[idx][:, None] - st.gmem[idx] >= self.floor[mid[:, None], used]
            else:
                room &= ~st.strand.strands_many(mid, MILLI - st.frac[idx] - self.fm[mid][:, None],
                                                st.gmem_cap[idx][:, None] - st.gmem[idx] - self.mm[mid][:, None])
            self.keep_gpus[idx] = room
            keeps = ok & room.any(axis=1)
            self.kept += int(keeps.sum()) - int(self.keeps[idx].sum())
            self.keeps[idx] = keeps
        idx = idx[ok]
        comp = (bf.keys(w, idx, None) << self.bits) | idx  # a share's key has 44 bits, the node below 18
        comp.sort()
        return np.asarray(comp)

    def update(self, bf: BestFitOrder, w: Workload) -> None:
        """Screen and place again the nodes touched since the order was made or last updated (all of them
        when the state's log was cleared since)."""
        st = self.st
        start = self.seen - st.touched_base
        if start < 0:
            self._rebuild(bf, w)
            return
        log = st.touched[start:]
        self.seen = st.touched_base + len(st.touched)
        changed = np.fromiter(set(log), dtype=np.int64)
        if self.head is not None:  # the headroom over a node changes with its power domains' other nodes
            head = st.headroom()
            changed = np.union1d(changed, np.flatnonzero(head != self.head))
            self.head = head.copy()
        changed = changed[self.member[changed]]
        if changed.size == 0:
            return
        old = self.at[changed]  # the changed nodes' numbers in the order: found by search, taken out
        keep = np.ones(self.comp.size, dtype=bool)
        keep[np.searchsorted(self.comp, old[old >= 0])] = False
        comp = self.comp[keep]
        new = self._screened(bf, w, changed)
        self.at[changed] = -1
        self.at[new & self.low] = new
        self.comp = np.insert(comp, np.searchsorted(comp, new), new)
