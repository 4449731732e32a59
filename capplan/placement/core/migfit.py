"""Which MIG profiles each GPU of the occupancy can still take: the exact MIG screen of the greedy placer.

A GPU's answer depends only on its model, its memory-slice mask, its per-profile instance counts and its
preset layout (the rules of :func:`~capplan.placement.core.migslots.free_starts`), so it is worked out once per
distinct (model, mask, counts, layout) and kept as a bit mask over the model's profiles: bit ``k`` is set
when ``model.profiles[k]`` has a valid free start on the GPU and the GPU may be partitioned (its preset mode
and its use now). The node's mask is the union over its GPUs. Tenants and power are not part of it (they
depend on the workload and on other nodes). Rows are recomputed lazily for the nodes changed since the last
read (:meth:`ClusterState.touch <capplan.placement.core.state.ClusterState.touch>`); at fleet scale the
screen then drops every node whose GPUs cannot take the slice, instead of trying each one node by node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from capplan.model.problem import Demand
from capplan.placement.core.fleet import FREE, MIG
from capplan.placement.core.migslots import free_starts

if TYPE_CHECKING:
    from capplan.placement.core.state import ClusterState

#: Dirty nodes above this many are recomputed with array operations (one answer per distinct GPU state).
_ARRAY_ROWS = 64


class MigFit:
    """Per GPU and per node, the profiles of the node's model that have a valid free start now.

    Parameters
    ----------
    st
        The occupancy; its :meth:`touch` marks the rows to recompute (in ``dirty``).
    """

    def __init__(self, st: ClusterState) -> None:
        self.st = st
        n, g = st.n, st.g
        self.gpu = np.zeros((n, g), dtype=np.int64)
        self.node = np.zeros(n, dtype=np.int64)
        self.dirty: set[int] = set(range(n))
        ids: dict[frozenset[tuple[str, int]], int] = {}
        self.layouts: list[frozenset[tuple[str, int]] | None] = [None]
        self.layout_id = np.zeros((n, g), dtype=np.int64)
        for (i, gi), slots in st.layout_slots.items():
            k = ids.get(slots)
            if k is None:
                k = ids[slots] = len(self.layouts)
                self.layouts.append(slots)
            self.layout_id[i, gi] = k
        self._ok = np.array([m is not None and m.supports_mig and bool(m.profiles) for m in st.models])
        self._memo: dict[tuple[int, int, int, bytes], int] = {}
        self._bits: dict[tuple[int, str], int] = {}
        self._want: dict[int, tuple[list[Demand | None], np.ndarray]] = {}  # want() per demand list (the state's)

    def want(self, per: list[Demand | None]) -> np.ndarray:
        """Per model id, the bit of the MIG profile of demand ``per[model id]`` (0: no MIG demand there); ``per`` is
        a workload shape's demand list of the state (:meth:`ClusterState.demands`), cached by identity (read-only)."""
        hit = self._want.get(id(per))
        if hit is not None and hit[0] is per:
            return hit[1]
        out = np.zeros(len(per), dtype=np.int64)
        self._want[id(per)] = (per, out)
        for mid, d in enumerate(per):
            model = self.st.models[mid] if mid < len(self.st.models) else None
            if d is not None and d.kind == "mig" and d.profile is not None and model is not None:
                names = [x.name for x in model.profiles]
                if d.profile.name in names:
                    out[mid] = 1 << names.index(d.profile.name)
        return out

    def bit(self, mid: int, profile: str) -> int:
        """The bit of ``profile`` in the masks of a GPU of model id ``mid`` (0 if the model has no such profile)."""
        hit = self._bits.get((mid, profile))
        if hit is None:
            model = self.st.models[mid]
            names = [x.name for x in model.profiles] if model is not None else []
            hit = self._bits[(mid, profile)] = 1 << names.index(profile) if profile in names else 0
        return hit

    def refresh(self) -> None:
        """Recompute the rows of the nodes changed since the last call."""
        if not self.dirty:
            return
        rows = np.fromiter(self.dirty, dtype=np.int64, count=len(self.dirty))
        self.dirty.clear()
        if rows.size <= _ARRAY_ROWS:
            for i in rows.tolist():
                self._row(i)
            return
        st = self.st
        mid = st.model_id[rows]
        fixed, mode, masks = st.fixed[rows], st.mode[rows], st.mig_mask[rows]
        usable = (st.exists[rows] & ((fixed < 0) | (fixed == MIG)) & ((mode == FREE) | (mode == MIG))
                  & self._ok[mid][:, None])
        vals = np.zeros(usable.shape, dtype=np.int64)
        # GPUs with no slice yet (most of them on a fresh fleet): one answer per (model, preset layout)
        empty = usable & (masks == 0) & (st.users[rows] == 0)
        if empty.any():
            r, c = np.nonzero(empty)
            lay = self.layout_id[rows[r], c]
            pair = mid[r] * len(self.layouts) + lay
            uniq, inv = np.unique(pair, return_inverse=True)
            zero = np.zeros(st.prof_count.shape[2], dtype=np.int16)
            got = np.array([self._value(int(u) // len(self.layouts), 0, int(u) % len(self.layouts), zero)
                            for u in uniq.tolist()], dtype=np.int64)
            vals[r, c] = got[np.asarray(inv).reshape(-1)]
        counts = st.prof_count[rows]
        for r, c in zip(*np.nonzero(usable & ~empty), strict=True):
            vals[r, c] = self._value(int(mid[r]), int(masks[r, c]), int(self.layout_id[rows[r], c]), counts[r, c])
        self.gpu[rows] = vals
        self.node[rows] = np.bitwise_or.reduce(vals, axis=1)

    def _row(self, i: int) -> None:
        st = self.st
        mid = int(st.model_id[i])
        acc = 0
        row = self.gpu[i]
        row[:] = 0
        if self._ok[mid]:
            fixed, mode = st.fixed[i].tolist(), st.mode[i].tolist()
            masks, lay, counts = st.mig_mask[i].tolist(), self.layout_id[i].tolist(), st.prof_count[i]
            for gi in range(int(st.gpu_count[i])):
                if fixed[gi] in (-1, MIG) and mode[gi] in (FREE, MIG):
                    v = self._value(mid, masks[gi], lay[gi], counts[gi])
                    row[gi] = v
                    acc |= v
        self.node[i] = acc

    def _value(self, mid: int, mask: int, lay: int, counts: np.ndarray) -> int:
        key = (mid, mask, lay, counts.tobytes())
        hit = self._memo.get(key)
        if hit is None:
            model = self.st.models[mid]
            assert model is not None
            cl = counts.tolist()
            hit = sum(1 << k for k, prof in enumerate(model.profiles)
                      if free_starts(model, prof, mask, cl, self.st.prof_index, self.layouts[lay]))
            self._memo[key] = hit
        return hit
