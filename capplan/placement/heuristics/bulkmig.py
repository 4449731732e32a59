"""The MIG side of bulk placement (:mod:`capplan.placement.heuristics.bulk`).

Per-GPU MIG arrays (which GPUs may take a profile, a greedy fill at the lowest free starts, the
starts that keep the most placements free) and the packer's stages
(:mod:`capplan.placement.heuristics.migpack`): free slots of the GPUs' target layouts and MIG GPUs
without one (``"open"``), then fresh GPUs with the planned layout (``("fresh", layout id)``), then
any free start. The stage functions act on a :class:`~capplan.placement.heuristics.bulk.BulkPlacer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from capplan.model.catalog import MigProfile
from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Workload
from capplan.model.units import UNITS_PER_GPU
from capplan.placement.core.state import FREE, MIG, ClusterState, Placement
from capplan.placement.heuristics.choose import placement_masks

if TYPE_CHECKING:
    from capplan.placement.heuristics.bulk import BulkPlacer

#: A stage of the MIG packer (see :meth:`BulkPlacer._evaluate`): None, "open" or ("fresh", layout id).
Stage = str | tuple[str, int] | None


def mig_ok(st: ClusterState, prof: MigProfile, homogeneous: bool, idx: np.ndarray) -> np.ndarray:
    """(len(idx), G): GPUs that may hold an instance of ``prof`` (mode, fixed mode, homogeneity)."""
    ok = (st.exists[idx] & ((st.mode[idx] == FREE) | (st.mode[idx] == MIG))
          & ((st.fixed[idx] < 0) | (st.fixed[idx] == MIG)))
    if homogeneous:
        counts = st.prof_count[idx]
        pi = st.prof_index[prof.name]
        ok &= (counts.sum(axis=2) - counts[..., pi]) == 0
    return np.asarray(ok)


def mig_fill(st: ClusterState, prof: MigProfile, units: int, homogeneous: bool,
             idx: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Greedy MIG fill of every GPU of ``idx``: (count per GPU, taken mask per start).

    Instances of one profile have one length and aligned starts, so taking free starts in
    increasing order places the most of them (earliest finish first).
    """
    ok = mig_ok(st, prof, homogeneous, idx)
    have = st.prof_count[idx][..., st.prof_index[prof.name]].astype(np.int64)
    mask = st.mig_mask[idx].copy()
    used = st.used[idx].astype(np.int64)
    n = np.zeros(mask.shape, dtype=np.int64)
    taken = []
    for s in prof.starts:
        sm = ((1 << prof.memory_slices) - 1) << s
        can = ok & ((mask & sm) == 0) & (used + units <= UNITS_PER_GPU) & (have + n < prof.max_count)
        mask |= np.where(can, sm, 0)
        used += can * units
        n += can
        taken.append(can)
    return n, taken


def mig_starts(prof: MigProfile, units: int, state: tuple[int, int, int], want: int,
               allm: list[int] | None) -> list[int]:
    """Starts for up to ``want`` instances on one GPU (mask, used units, count of ``prof``).

    With ``allm`` (memory masks of every placement of the model) each start keeps the most of
    them free; without it the lowest free start is taken.
    """
    mask, used, have = state
    width = (1 << prof.memory_slices) - 1
    out: list[int] = []
    while len(out) < want and have < prof.max_count and used + units <= UNITS_PER_GPU:
        free = [s for s in prof.starts if not mask & (width << s)]
        if not free:
            break
        if allm is None:
            s = free[0]
        else:
            s = max(free, key=lambda x: (sum(1 for m in allm if not (mask | (width << x)) & m), -x))
        mask, used, have = mask | (width << s), used + units, have + 1
        out.append(s)
    return out


def is_homogeneous(st: ClusterState, idx: np.ndarray) -> bool:
    model = st.models[int(st.model_id[idx[0]])] if idx.size else None
    return bool(model is not None and model.homogeneous)


def evaluate_packed(bp: BulkPlacer, w: Workload, d: Demand, idx: np.ndarray, stage: Stage,
                    cap: np.ndarray) -> np.ndarray:
    """:meth:`BulkPlacer._evaluate` for the packer's stages (``cap``: what CPU, memory and isolation allow)."""
    st, pk = bp.st, bp.packer
    assert pk is not None and d.profile is not None
    s = int(pk.sig_of_model[int(st.model_id[idx[0]])]) if idx.size else -1
    node_free = (UNITS_PER_GPU - st.used[idx]).sum(axis=1)
    has_mig = (st.mode[idx] == MIG).any(axis=1)
    if s < 0:
        return np.stack([np.zeros(idx.size), np.zeros(idx.size)], axis=1)
    pi = pk.profile_index(s, d.profile.name)
    if stage == "open":
        gcap = open_caps(bp, w, d, idx, s, pi)
        cap = np.minimum(cap, gcap.sum(axis=1))
        cost = d.units * 1e10 + node_free * 1e3  # the smallest slice that serves first (least held)
    else:
        assert isinstance(stage, tuple)
        lid = stage[1]
        free = (st.exists[idx] & (st.mode[idx] == FREE) & ((st.fixed[idx] < 0) | (st.fixed[idx] == MIG))
                & st.gpu_tenant_ok(w, idx)).sum(axis=1)
        size, per_gpu = int(pk.lay_size[lid]), int(pk.lay_counts[lid][pi])
        if w.cpu_milli or w.memory_mib:
            room = np.maximum(cap - pk.reserved(idx), 0)  # instances the host can still feed
            free = np.minimum(free, room // max(size, 1))
        cap = np.where(cap > 0, free * per_gpu, 0)
        cost = (~has_mig) * 1e9 + node_free * 1e3
    return np.stack([cap.astype(np.float64), np.asarray(cost, dtype=np.float64)], axis=1)


def open_caps(bp: BulkPlacer, w: Workload, d: Demand, idx: np.ndarray, s: int, pi: int) -> np.ndarray:
    """(len(idx), G) instances of ``d`` each MIG GPU still takes: free slots of its target layout,
    or (no target) what fits at any free start."""
    st, pk = bp.st, bp.packer
    assert pk is not None and d.profile is not None
    t = pk.valid_targets(idx)
    gcap = pk.open_slots(s, pi, idx)
    bare = (t < 0) & (st.mode[idx] == MIG)  # MIG GPUs without a target (e.g. running instances)
    rows = np.flatnonzero(bare.any(axis=1))
    if rows.size:
        loose = mig_fill(st, d.profile, d.units, is_homogeneous(st, idx), idx[rows])[0]
        gcap[rows] = np.where(bare[rows], loose, gcap[rows])
    return np.asarray(np.where(st.gpu_tenant_ok(w, idx), gcap, 0))


def place_packed(bp: BulkPlacer, w: Workload, per: list[Demand | None], n: int,
                 idx: np.ndarray | None) -> list[Placement]:
    """MIG placement with the packer: free target slots, then fresh GPUs by the layout plan, then any start."""
    pk = bp.packer
    assert pk is not None
    pk.begin(w)
    out = bp._fill(w, per, n, idx, "open")
    held = {int(pk.sig_of_model[m]): x.units for m, x in enumerate(per) if x is not None}
    # Geometries whose instance holds least first (the smallest slice that serves).
    sigs = sorted({int(pk.sig_of_model[m]) for m, _, _ in bp.groups(w, per, idx)} - {-1},
                  key=lambda g: (held[g], g))
    for s in sigs:
        mids = [m for m, d in enumerate(per) if d is not None and d.profile is not None
                and int(pk.sig_of_model[m]) == s]
        d0 = per[mids[0]]
        assert d0 is not None and d0.profile is not None
        pi = pk.profile_index(s, d0.profile.name)
        only = [x if int(pk.sig_of_model[m]) == s else None for m, x in enumerate(per)]
        while len(out) < n:
            lid = pk.layout_for(s, pi, w.priority, n - len(out))
            per_gpu = int(pk.lay_counts[lid][pi])
            quota = pk.quota.get((s, w.priority))
            left = float(quota[lid - pk.base[s]]) if quota is not None else 0.0
            gpus = max(1, int(left + 1e-9))  # this round opens at most the layout's quota of GPUs
            got = bp._fill(w, only, min(n - len(out), gpus * per_gpu), idx, ("fresh", lid))
            if not got:
                break
            out += got
    if len(out) < n:
        got = bp._fill(w, per, n - len(out), idx)
        t = pk.target
        for c in got:  # instances off their GPU's target: the GPU has no target any more
            t[c.node, c.gpus[0]] = -1
        out += got
    return out


def packed_choices(bp: BulkPlacer, w: Workload, d: Demand, i: int, k: int, stage: Stage) -> list[Placement]:
    """``k`` MIG placements on node ``i`` for a packer stage (known to fit)."""
    st, pk = bp.st, bp.packer
    prof = d.profile
    assert pk is not None and prof is not None and stage is not None
    s = int(pk.sig_of_model[int(st.model_id[i])])
    pi = pk.profile_index(s, prof.name)
    one = np.array([i], dtype=np.int64)
    width = (1 << prof.memory_slices) - 1
    out: list[Placement] = []
    if stage == "open":
        t = pk.valid_targets(one)[0].tolist()
        ok = st.gpu_tenant_ok(w, one)[0].tolist()
        masks = st.mig_mask[i].tolist()
        # Free slots of the targets first (plain integers: at most a few GPUs and slots).
        for gi, lid in enumerate(t):
            if lid < 0 or not ok[gi]:
                continue
            for x, slot in layout_slots(bp, lid, pi, prof.name):
                if not masks[gi] & (width << x):
                    out.append(Placement(node=i, gpus=(gi,), slot=slot))
                    if len(out) == k:
                        return out
        if not any(lid < 0 and mode == MIG for lid, mode in zip(t, st.mode[i].tolist(), strict=True)):
            return out
        # MIG GPUs without a target: the start that keeps the most placements free.
        gcap = open_caps(bp, w, d, one, s, pi)[0]
        model = st.models[int(st.model_id[i])]
        assert model is not None
        allm = placement_masks(model).tolist()
        for gi in np.flatnonzero(gcap > 0).tolist():
            if t[gi] >= 0:
                continue
            want = min(int(gcap[gi]), k - len(out))
            state = (int(st.mig_mask[i, gi]), int(st.used[i, gi]),
                     int(st.prof_count[i, gi, st.prof_index[prof.name]]))
            starts = mig_starts(prof, d.units, state, want, allm)
            if len(starts) < want:
                low = mig_starts(prof, d.units, state, want, None)
                starts = low if len(low) > len(starts) else starts
            out += [Placement(node=i, gpus=(gi,), slot=bp._slot(prof.name, x)) for x in starts]
            if len(out) == k:
                break
        return out
    assert isinstance(stage, tuple)
    lid = stage[1]
    slots = [slot for _, slot in layout_slots(bp, lid, pi, prof.name)]
    free = np.flatnonzero(st.exists[i] & (st.mode[i] == FREE) & ((st.fixed[i] < 0) | (st.fixed[i] == MIG))
                          & st.gpu_tenant_ok(w, one)[0]).tolist()
    opened = 0
    for gi in free:
        if len(out) == k:
            break
        pk.target[i, gi] = lid
        opened += 1
        out += [Placement(node=i, gpus=(gi,), slot=x) for x in slots[:k - len(out)]]
    pk.opened(lid, w.priority, opened)
    return out


def layout_slots(bp: BulkPlacer, lid: int, pi: int, name: str) -> list[tuple[int, MigSlot]]:
    """(start, slot) of profile ``pi``'s places in layout ``lid``."""
    got = bp._lay_slots.get((lid, pi))
    if got is None:
        assert bp.packer is not None
        got = bp._lay_slots[(lid, pi)] = [(x, bp._slot(name, x)) for p, x in bp.packer.lay_slots[lid]
                                            if p == pi]
    return got
