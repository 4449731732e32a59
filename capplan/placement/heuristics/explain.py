"""Reasons for unplaced replicas, counted over all nodes with array operations.

The text names the constraint family that rules out most eligible nodes, with numbers, in the
same words as :mod:`capplan.placement.core.reasons` (which is exact but too slow for fleets of 10,000 nodes).
"""

from __future__ import annotations

import numpy as np

from capplan.model.problem import Workload
from capplan.model.units import MIB_PER_GIB, MILLI, UNITS_PER_GPU
from capplan.placement.core.reasons import FAMILY_TEXT
from capplan.placement.core.summary import describe_demand
from capplan.placement.heuristics.fleet import FREE, MIG, SHARED, FleetState
from capplan.placement.heuristics.placer import FleetPlacer

_TEXT = FAMILY_TEXT


def explain_fleet(placer: FleetPlacer, w: Workload, missing: int) -> str:
    """An actionable reason why ``missing`` replicas of ``w`` are not placed."""
    st: FleetState = placer.st
    p = st.p
    what = describe_demand(p, w)
    _, idx = placer.dem.of(w)
    if idx.size == 0:
        if w.gpus is not None and st.gpu_count.size and w.gpus > int(st.gpu_count.max()):
            return f"needs {what} on one node; the largest node has {int(st.gpu_count.max())} GPUs"
        models = ", ".join(sorted(m for m in st.model_names if m)) or "none"
        return f"needs {what}; no node offers it (cluster GPU models: {models})"
    biggest = int(st.cpu_cap[idx].max())
    if biggest < w.cpu_milli:
        return f"needs {w.cpu:g} cores per replica; the largest eligible node has {biggest / MILLI:g}"
    big_mem = int(st.mem_cap[idx].max())
    if big_mem < w.memory_mib:
        return (f"needs {w.memory_gib:g} GiB host memory per replica; the largest eligible node has "
                f"{big_mem / MIB_PER_GIB:g} GiB")
    lvl = w.topology.required
    if w.is_gang or lvl:
        room = placer.room(w, idx[st.node_ok(w, idx)])
        if lvl and lvl != p.cluster.levels[-1]:
            dom, names = placer.domains(lvl)
            cap = np.zeros(len(names), dtype=np.int64)
            ok = idx[st.node_ok(w, idx)]
            np.add.at(cap, dom[ok], np.minimum(room, w.replicas))
            best = int(np.argmax(cap)) if cap.size else 0
            return (f"needs {w.replicas} x {what} in one {lvl}; the best {lvl} ({names[best]}) "
                    f"has room for about {int(cap[best]) if cap.size else 0}")
        if w.is_gang:
            return f"gang needs {w.replicas} x {what} at once; the cluster has room for about " \
                   f"{int(np.minimum(room, w.replicas).sum())}"
    fam = _families(st, w, idx)
    eligible = int(idx.size)
    worst = max(fam, key=lambda f: fam[f])
    if fam[worst] == 0:
        return f"ran out of room after placing the others ({missing} of {w.replicas} left)"
    return f"needs {what}; {_TEXT[worst]} on {fam[worst]} of {eligible} eligible nodes"


def _families(st: FleetState, w: Workload, idx: np.ndarray) -> dict[str, int]:
    """Nodes ruled out by each family, counting each node once in check order."""
    out: dict[str, int] = {}
    alive = np.ones(idx.size, dtype=bool)
    checks = [("cpu", st.cpu[idx] >= w.cpu_milli), ("memory", st.mem[idx] >= w.memory_mib)]
    node_ok = st.node_ok(w, idx)
    checks.append(("isolation", node_ok))
    if w.gpus is not None:
        checks.append(("gpu", st.free_whole[idx] >= w.gpus))
        checks.append(("power", st.power_headroom(idx) >= w.gpus * st.tdp[idx]))
    elif w.gpu_fraction is not None or w.mig is not None:
        mode = SHARED if w.gpu_fraction is not None else MIG
        room = st.exists[idx] & ((st.mode[idx] == FREE) | (st.mode[idx] == mode))
        if w.gpu_fraction is not None:
            room &= st.frac[idx] + round(w.gpu_fraction * MILLI) <= MILLI
        else:
            room &= st.used[idx] < UNITS_PER_GPU
        checks.append(("gpu", room.any(axis=1)))
        checks.append(("isolation", (room & st.gpu_tenant_ok(w, idx)).any(axis=1) | ~room.any(axis=1)))
    for fam, ok in checks:
        out[fam] = out.get(fam, 0) + int((alive & ~ok).sum())
        alive &= ok
    return out
