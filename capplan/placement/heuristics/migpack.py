"""Geometry-aware MIG packing for the bulk placer: target layouts planned from the demand.

Filling each GPU with one workload's identical instances wastes capacity (two ``3g`` instances
hold all eight memory slices of an A100/H100 but only six of its seven compute slices). The
:class:`MigPacker` plans, per GPU geometry (models with the same profiles) and priority, how many
GPUs of each valid layout (:func:`~capplan.placement.core.miglayouts.mig_layouts`) cover the MIG
instances still to place with the fewest GPUs: a small pattern LP (HiGHS through SciPy),
minimise GPUs subject to covering the instances of every profile. A GPU that is switched to MIG
gets a *target* layout from that plan (the layout with the most quota left among those holding
the profile being placed), and instances go only to the free slots of their GPU's target, at the
target's starts: a ``3g`` at start 4 beside ``2g`` and ``1g`` slots that later workloads fill.
When the plan's quota runs out it is solved again for what is left (less the free target slots).

:class:`~capplan.placement.heuristics.bulk.BulkPlacer` uses it in three stages per MIG workload:
free target slots and MIG GPUs without a target first, then fresh GPUs with a target layout,
then (only if something is still unplaced) any free start, as without the packer.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from capplan.lp.highs import ColumnLP
from capplan.model.catalog import GpuModel
from capplan.model.problem import Workload
from capplan.placement.core.miglayouts import mig_layouts
from capplan.placement.core.state import FREE, MIG, ClusterState

#: A mask that overlaps every GPU's memory slices: pads slot tables (never free).
_NEVER = -1


class MigPacker:
    """Target layouts per GPU and the layout plan per (geometry, priority) (see the module docstring).

    Parameters
    ----------
    st
        The occupancy being filled.
    order
        The workloads in placement order: what is still to come decides the plan.
    """

    def __init__(self, st: ClusterState, order: list[Workload]) -> None:
        self.st = st
        sigs: dict[tuple[object, ...], int] = {}
        self.models: list[GpuModel] = []
        self.sig_of_model = np.full(len(st.models), -1, dtype=np.int64)
        for m, model in enumerate(st.models):
            if model is None or not model.profiles or model.partitioning == "none":
                continue
            key = (*model.profiles, model.compute_slices, model.homogeneous)
            if key not in sigs:
                sigs[key] = len(sigs)
                self.models.append(model)
            self.sig_of_model[m] = sigs[key]
        # Global layout ids: layouts of geometry s are base[s] .. base[s] + len - 1.
        self.base: list[int] = []
        self.lay_sig: list[int] = []
        self.lay_counts: list[np.ndarray] = []
        self.lay_slots: list[tuple[tuple[int, int], ...]] = []
        for s, model in enumerate(self.models):
            self.base.append(len(self.lay_sig))
            for lay in mig_layouts(model):
                self.lay_sig.append(s)
                self.lay_counts.append(np.array(lay.counts, dtype=np.int64))
                self.lay_slots.append(lay.slots)
        self.lay_size = np.array([int(c.sum()) for c in self.lay_counts] + [0], dtype=np.int64)  # [-1]: none
        self.target = np.full((st.n, st.g), -1, dtype=np.int64)
        self._tables: dict[tuple[int, int], np.ndarray] = {}
        self._counts: dict[int, np.ndarray] = {}
        self._pidx = {(s, pr.name): i for s, model in enumerate(self.models) for i, pr in enumerate(model.profiles)}
        self.plans = 0  # pattern LPs solved
        self.quota: dict[tuple[int, int], np.ndarray] = {}
        self._planned: dict[tuple[int, int], tuple[int, ...]] = {}
        self.upcoming: dict[int, Counter[tuple[int, int]]] = {}
        self.seen: set[str] = set()
        for w in order:
            for key, k in self._demand_of(w, w.replicas).items():
                self.upcoming.setdefault(w.priority, Counter())[key] += k

    # ------------------------------------------------------------ demand
    def _demand_of(self, w: Workload, n: int) -> dict[tuple[int, int], int]:
        """(geometry, profile index) -> instances, for ``n`` replicas of ``w`` (each geometry once)."""
        if w.mig is None or n <= 0:
            return {}
        per, _ = self.st.demands(w)
        out: dict[tuple[int, int], int] = {}
        for m, d in enumerate(per):
            s = int(self.sig_of_model[m])
            if d is None or d.kind != "mig" or d.profile is None or s < 0:
                continue
            pi = self.profile_index(s, d.profile.name)
            out.setdefault((s, pi), n)
        return out

    def profile_index(self, s: int, name: str) -> int:
        """Index of profile ``name`` in geometry ``s``'s profile list."""
        return self._pidx[(s, name)]

    def begin(self, w: Workload) -> None:
        """``w`` is being placed: it no longer counts as demand to come."""
        if w.name in self.seen:
            return
        self.seen.add(w.name)
        up = self.upcoming.get(w.priority)
        if up is not None:
            for key, k in self._demand_of(w, w.replicas).items():
                up[key] = max(0, up[key] - k)

    # ------------------------------------------------------------ slots
    def slot_table(self, s: int, pi: int) -> np.ndarray:
        """(layouts + 1, K) memory masks of profile ``pi``'s slots in every global layout (row -1:
        no target); padded with a mask that is never free. Only geometry ``s``'s layouts have slots."""
        key = (s, pi)
        tab = self._tables.get(key)
        if tab is None:
            model = self.models[s]
            width = (1 << model.profiles[pi].memory_slices) - 1
            k = max(1, max((int(c[pi]) for c, g in zip(self.lay_counts, self.lay_sig, strict=True) if g == s),
                           default=1))
            tab = np.full((len(self.lay_sig) + 1, k), _NEVER, dtype=np.int64)
            for lid, (g, slots) in enumerate(zip(self.lay_sig, self.lay_slots, strict=True)):
                if g != s:
                    continue
                starts = [st for p, st in slots if p == pi]
                tab[lid, :len(starts)] = [width << st for st in starts]
            tab.setflags(write=False)
            self._tables[key] = tab
        return tab

    def valid_targets(self, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) target layout ids, -1 where a GPU has none (or is no longer in MIG mode)."""
        t = self.target[idx]
        return np.asarray(np.where(self.st.mode[idx] == MIG, t, -1))

    def open_slots(self, s: int, pi: int, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) free slots of profile ``pi`` in the targets of GPUs ``idx``."""
        t = self.valid_targets(idx)
        masks = self.slot_table(s, pi)[t]  # (C, G, K); row -1 is all _NEVER
        free = ((self.st.mig_mask[idx][..., None] & masks) == 0) & (masks != _NEVER)
        return np.asarray(np.where(t >= 0, free.sum(axis=2), 0))

    def reserved(self, idx: np.ndarray) -> np.ndarray:
        """Instances still expected on each node of ``idx``: free slots of its GPUs' targets."""
        t = self.valid_targets(idx)
        left = self.lay_size[t] - self.st.users[idx]
        return np.asarray(np.where(t >= 0, np.maximum(left, 0), 0).sum(axis=1))

    # ------------------------------------------------------------- plan
    def layout_for(self, s: int, pi: int, prio: int, now: int) -> int:
        """The global id of the layout a fresh GPU gets for profile ``pi`` (``now`` instances of it
        are being placed), re-planning when no layout holding ``pi`` has quota left."""
        key = (s, prio)
        base = self.base[s]
        counts = self.counts_of(s)
        has = counts[:, pi] > 0
        q = self.quota.get(key)
        if q is None or not (q[has] > 1e-9).any():
            demand = self._remaining(s, prio, pi, now)
            gpus = self._free_gpus(s)
            sig = (*demand.tolist(), gpus)
            if self._planned.get(key) != sig:
                self._planned[key] = sig
                value = np.array([pr.compute_slices for pr in self.models[s].profiles], dtype=np.float64)
                q = self.quota[key] = _cover(counts, demand, value, gpus)
                self.plans += 1
        if q is not None and (q[has] > 1e-9).any():
            score = np.where(has, q, -np.inf)
            return base + int(np.argmax(score))
        # Nothing planned holds it: the layout with the most of it (then the fewest others).
        return base + int(np.lexsort((counts.sum(axis=1), -counts[:, pi]))[0])

    def counts_of(self, s: int) -> np.ndarray:
        """(layouts, profiles) instance counts of geometry ``s``'s layouts."""
        c = self._counts.get(s)
        if c is None:
            n_lay = sum(1 for g in self.lay_sig if g == s)
            c = self._counts[s] = np.stack(self.lay_counts[self.base[s]:self.base[s] + n_lay])
        return c

    def opened(self, lid: int, prio: int, gpus: int) -> None:
        """``gpus`` fresh GPUs got layout ``lid`` for work of priority ``prio``: take them off its quota."""
        s = self.lay_sig[lid]
        q = self.quota.get((s, prio))
        if q is not None:
            q[lid - self.base[s]] -= gpus

    def _free_gpus(self, s: int) -> int:
        """GPUs of geometry ``s`` that could still be switched to MIG."""
        st = self.st
        rows = np.flatnonzero(self.sig_of_model[st.model_id] == s)
        return int((st.exists[rows] & (st.mode[rows] == FREE) & ((st.fixed[rows] < 0) | (st.fixed[rows] == MIG))).sum())

    def _remaining(self, s: int, prio: int, pi: int, now: int) -> np.ndarray:
        """Instances per profile of geometry ``s`` still to place at ``prio``, less the free target slots."""
        model = self.models[s]
        up = self.upcoming.get(prio, Counter())
        dem = np.array([up.get((s, j), 0) for j in range(len(model.profiles))], dtype=np.int64)
        dem[pi] += now
        nodes = np.flatnonzero(self.sig_of_model[self.st.model_id] == s)
        for j in np.flatnonzero(dem).tolist():
            dem[j] -= int(self.open_slots(s, j, nodes).sum())
        return np.asarray(np.maximum(dem, 0))


def _cover(counts: np.ndarray, demand: np.ndarray, value: np.ndarray, gpus: int) -> np.ndarray:
    """Fractional GPUs per layout: the pattern LP.

    Maximise the compute slices placed (``value`` per instance of each profile, at most ``demand``)
    on at most ``gpus`` GPUs, then use the fewest GPUs, then the fewest instances (less host CPU
    and memory): with room for all the demand, the fewest GPUs whose layouts cover it.
    """
    need = np.flatnonzero(demand > 0)
    n_lay = counts.shape[0]
    if need.size == 0 or gpus <= 0:
        return np.zeros(n_lay)
    k = need.size
    # Variables: GPUs per layout, then instances placed per needed profile.
    cost = np.concatenate([1e-3 + 1e-6 * counts.sum(axis=1), -value[need]])
    link = np.hstack([-counts[:, need].T.astype(np.float64), np.eye(k)])  # placed <= held
    room = np.concatenate([np.ones(n_lay), np.zeros(k)])[None, :]  # GPUs <= free GPUs
    a = np.vstack([link, room])
    rows, cols = np.nonzero(a)
    lp = ColumnLP(np.concatenate([np.zeros(k), [float(gpus)]]))
    lp.add_entries(-cost, rows.tolist(), cols.tolist(), a[rows, cols].tolist())
    lp.set_upper(np.arange(n_lay, n_lay + k, dtype=np.int32), demand[need].astype(np.float64))
    res = lp.solve(float("inf"))
    if res.status != "optimal":
        return np.zeros(n_lay)
    return np.asarray(res.x[:n_lay], dtype=np.float64)
