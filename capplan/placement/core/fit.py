"""One replica on one node: the best placement there, or the constraint family that rules it out.

The per-node question of :class:`~capplan.placement.core.state.ClusterState` (its vectorised
screens answer for many nodes at once). Used by the greedy planner, the schedulers, the reason
engine and the reports. Whole GPUs preset to whole use are taken first; MIG slices start where
the most valid placements stay free; shares go to the GPU they fill most.
"""

from __future__ import annotations

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Workload
from capplan.model.units import MILLI
from capplan.placement.core import state as _st


def node_reason(st: _st.ClusterState, w: Workload, i: int) -> str:
    """Why node ``i`` cannot take one more replica of ``w`` before any GPU is looked at (CPU, memory, node
    isolation, in that order), or ``""``."""
    if st.cpu[i] < w.cpu_milli:
        return "cpu"
    if st.mem[i] < w.memory_mib:
        return "memory"
    if not st.tenant_ok_at(w, i):
        return "isolation"
    return ""


def fit_on_node(st: _st.ClusterState, w: Workload, d: Demand, i: int) -> _st.Placement | str:
    """Best placement of one replica of ``w`` (demand ``d``) on node ``i``, or the reason it does not fit."""
    why = node_reason(st, w, i)
    if why:
        return why
    if d.kind == "none":
        return _st.Placement(node=i)
    if d.kind == "whole":
        return _fit_whole(st, d, i)
    return _fit_slice(st, w, d, i)


def _fit_whole(st: _st.ClusterState, d: Demand, i: int) -> _st.Placement | str:
    """Whole GPUs: the free ones preset to whole use first, then by index."""
    count = int(st.gpu_count[i])
    users, mode, fixed = st.users[i].tolist(), st.mode[i].tolist(), st.fixed[i].tolist()
    ok = (_st.FREE, _st.WHOLE)
    free = [g for g in range(count) if users[g] == 0 and fixed[g] <= _st.WHOLE and mode[g] in ok]
    if len(free) < d.gpus:
        return "gpu"
    free.sort(key=lambda g: fixed[g] < 0)
    chosen = tuple(sorted(free[: d.gpus]))
    return _st.Placement(node=i, gpus=chosen) if st.power_ok(i, d.gpus) else "power"


def _fit_slice(st: _st.ClusterState, w: Workload, d: Demand, i: int) -> _st.Placement | str:
    """A MIG slice or a share: the busiest GPU that takes it (MIG: keeping the most placements free)."""
    model = st.models[int(st.model_id[i])]
    assert model is not None
    count = int(st.gpu_count[i])
    users, mode, fixed = st.users[i].tolist(), st.mode[i].tolist(), st.fixed[i].tolist()
    want = _st.KIND_MODE[d.kind]
    modes_ok = (_st.FREE, want)
    mig = d.kind == "mig"
    if mig:
        assert d.profile is not None
        masks, counts = st.mig_mask[i].tolist(), st.prof_count[i].tolist()
    else:
        frac, gmem, cap = st.frac[i].tolist(), st.gmem[i].tolist(), int(st.gmem_cap[i])
    blocked = False
    power_one: bool | None = None
    best: tuple[tuple[int, ...], _st.Placement] | None = None
    for gi in range(count):
        if fixed[gi] not in (-1, want) or mode[gi] not in modes_ok:
            continue
        if mig:
            assert d.profile is not None
            opt = _mig_choice(st, model, i, gi, masks[gi], counts[gi], d.profile)
            if opt is None:
                continue
            start, after = opt
            cand = _st.Placement(node=i, gpus=(gi,), slot=MigSlot(profile=d.profile.name, start=start))
            key = (users[gi] == 0, -bin(masks[gi]).count("1"), -after, gi)
        else:
            if frac[gi] + d.fraction_milli > MILLI or gmem[gi] + d.memory_mib > cap:
                continue
            cand = _st.Placement(node=i, gpus=(gi,), fraction_milli=d.fraction_milli)
            key = (users[gi] == 0, MILLI - frac[gi] - d.fraction_milli, 0, gi)
        if users[gi] and not st.gpu_tenant_ok_at(w, i, gi):
            blocked = True
            continue
        if users[gi] == 0:
            if power_one is None:
                power_one = st.power_ok(i, 1)
            if not power_one:
                continue
        if best is None or key < best[0]:
            best = (key, cand)
    if best is None:
        return "isolation" if blocked else "gpu"
    return best[1]


def _mig_choice(st: _st.ClusterState, model: GpuModel, i: int, gi: int, mask: int, counts: list[int],
                prof: MigProfile) -> tuple[int, int] | None:
    """Free start for ``prof`` keeping the most valid placements; (start, placements left)."""
    if counts[st.prof_index[prof.name]] >= prof.max_count:
        return None
    if model.homogeneous and any(counts) and not counts[st.prof_index[prof.name]]:
        return None
    layout = st.layouts.get((i, gi))
    best: tuple[int, int] | None = None
    for start in prof.starts:
        m = ((1 << prof.memory_slices) - 1) << start
        if mask & m:
            continue
        if layout is not None and MigSlot(profile=prof.name, start=start) not in layout:
            continue
        after = _placements_left(model, mask | m, layout)
        if best is None or after > best[1]:
            best = (start, after)
    return best


def _placements_left(model: GpuModel, mask: int, layout: tuple[MigSlot, ...] | None) -> int:
    n = 0
    for p in model.profiles:
        for st in p.starts:
            if not mask & (((1 << p.memory_slices) - 1) << st) and (
                    layout is None or MigSlot(profile=p.name, start=st) in layout):
                n += 1
    return n
