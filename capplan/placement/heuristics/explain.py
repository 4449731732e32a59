"""Reasons for unplaced replicas, counted over all nodes with array operations.

The text names the constraint family that rules out most eligible nodes, with numbers, in the
same words as :mod:`capplan.placement.core.reasons` (which is exact but too slow for fleets of 10,000 nodes).
"""

from __future__ import annotations

import numpy as np

from capplan.model.problem import Workload
from capplan.model.units import MIB_PER_GIB, MILLI, UNITS_PER_GPU
from capplan.placement.core.reasons import FAMILY_LABEL, FAMILY_TEXT, Holdings, value_text
from capplan.placement.core.summary import describe_demand
from capplan.placement.heuristics.fleet import FREE, MIG, SHARED, FleetState
from capplan.placement.heuristics.placer import FleetPlacer

_TEXT = FAMILY_TEXT


def explain_fleet(placer: FleetPlacer, w: Workload, missing: int, holdings: Holdings | None = None) -> str:
    """An actionable reason why ``missing`` replicas of ``w`` are not placed.

    Starts with the constraint family, gives numbers in GPUs and, with ``holdings`` (the plan's
    assignments), names the workloads that hold the contested capacity.
    """
    st: FleetState = placer.st
    p = st.p
    what = describe_demand(p, w)
    _, idx = placer.dem.of(w)
    if idx.size == 0:
        if w.gpus is not None and st.gpu_count.size and w.gpus > int(st.gpu_count.max()):
            return f"GPU model: needs {what} on one node; the largest node has {int(st.gpu_count.max())} GPUs"
        listed = ", ".join(sorted(m for m in st.model_names if m)) or "none"
        return f"GPU model: needs {what}; no node offers it (cluster GPU models: {listed})"
    biggest = int(st.cpu_cap[idx].max())
    if biggest < w.cpu_milli:
        return f"host CPU: needs {w.cpu:g} cores per replica; the largest eligible node has {biggest / MILLI:g}"
    big_mem = int(st.mem_cap[idx].max())
    if big_mem < w.memory_mib:
        return (f"host memory: needs {w.memory_gib:g} GiB host memory per replica; the largest eligible node has "
                f"{big_mem / MIB_PER_GIB:g} GiB")
    models = {st.model_names[int(m)] for m in np.unique(st.model_id[idx])}

    def held(family: str) -> str:
        return holdings.competing(w, models, family) if holdings is not None else ""

    gpus = f"{int(st.gpu_count[idx].sum())} GPUs, {int(st.free_whole[idx].sum())} wholly free"
    if w.one_model:  # structural: no single GPU model could take the gang even on the empty fleet
        empty = _empty_room(st, w, idx)
        per = {st.model_names[int(m)]: int(empty[st.model_id[idx] == m].sum()) for m in np.unique(st.model_id[idx])}
        if max(per.values(), default=0) < w.replicas <= int(empty.sum()):
            text = ", ".join(f"{m}: {r}" for m, r in sorted(per.items(), key=lambda x: str(x[0])))
            return (f"one GPU model per gang: needs {w.replicas} x {what} on one GPU model; even on the empty "
                    f"fleet the room per model is {text} (set mixed_models: true to allow mixing)")
    lvl = w.topology.required
    if w.is_gang or lvl:
        room = placer.room(w, idx[st.node_ok(w, idx)])
        if lvl and lvl != p.cluster.levels[-1]:
            dom, names = placer.domains(lvl)
            cap = np.zeros(len(names), dtype=np.int64)
            ok = idx[st.node_ok(w, idx)]
            np.add.at(cap, dom[ok], np.minimum(room, w.replicas))
            best = int(np.argmax(cap)) if cap.size else 0
            return (f"topology: needs {w.replicas} x {what} in one {lvl}; the best {lvl} ({names[best]}) "
                    f"has room for about {int(cap[best]) if cap.size else 0}{held('gpu')}")
        if w.is_gang:
            ok = idx[st.node_ok(w, idx)]
            total = int(np.minimum(room, w.replicas).sum())
            if w.one_model and total >= w.replicas:
                per = {st.model_names[int(m)]: int(np.minimum(room[st.model_id[ok] == m], w.replicas).sum())
                       for m in np.unique(st.model_id[ok])}
                if max(per.values(), default=0) < w.replicas:
                    text = ", ".join(f"{m}: about {r}" for m, r in sorted(per.items(), key=lambda x: str(x[0])))
                    return (f"one GPU model per gang: needs {w.replicas} x {what} on one GPU model; room per "
                            f"model {text} (set mixed_models: true to allow mixing){held('gpu')}")
            return (f"gang: needs {w.replicas} x {what} ({value_text(p, w, w.replicas)}) at once; the cluster "
                    f"has room for about {total} ({gpus} on the eligible nodes){held('gpu')}")
    fam = _families(st, w, idx)
    eligible = int(idx.size)
    worst = max(fam, key=lambda f: fam[f])
    need = f"{missing} x {what}" + (f" ({value_text(p, w, missing)})" if w.has_gpu_demand else "")
    if fam[worst] == 0:
        return (f"capacity: {missing} of {w.replicas} left after the others were placed ({need}); "
                f"{gpus} on the eligible nodes{held('gpu')}")
    return (f"{FAMILY_LABEL.get(worst, worst)}: needs {need}; {_TEXT[worst]} on {fam[worst]} of {eligible} "
            f"eligible nodes ({gpus}){held(worst)}")


def _empty_room(st: FleetState, w: Workload, idx: np.ndarray) -> np.ndarray:
    """Replicas of ``w`` each node of ``idx`` could take when empty (CPU, memory, GPUs; an upper estimate)."""
    big = 1 << 30
    room = np.full(idx.size, big, dtype=np.int64)
    if w.cpu_milli:
        room = np.minimum(room, st.cpu_cap[idx] // w.cpu_milli)
    if w.memory_mib:
        room = np.minimum(room, st.mem_cap[idx] // w.memory_mib)
    if w.gpus is not None:
        room = np.minimum(room, st.gpu_count[idx] // w.gpus)
    return np.minimum(room, w.replicas)


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
