"""The nodes that came closest to hosting one more replica of an unplaced workload.

Each node whose GPU model the workload may use is scored by its shortfall: for CPU, host memory
and GPU room, the missing part as a share of what one replica asks (0 when enough is free), plus
one for each rule that blocks it outright (isolation, power). The smallest shortfalls come first.
"""

from __future__ import annotations

from capplan.model.problem import Demand, Workload
from capplan.model.units import MIB_PER_GIB, MILLI, gib_to_mib
from capplan.placement.core.state import ClusterState, Placement


def _gpu_room(st: ClusterState, w: Workload, d: Demand, i: int) -> tuple[float, str]:
    """(shortfall in [0, 1], text) of node ``i``'s GPU room for one replica."""
    model = st.models[int(st.model_id[i])]
    gs = st.gpus[i]
    if d.kind == "whole":
        free = sum(1 for s in gs if s.users == 0 and (s.fixed is None or s.fixed.mode == "whole"))
        if free >= d.gpus:
            return 0.0, f"{free} GPUs free"
        return (d.gpus - free) / d.gpus, f"{free} of {d.gpus} GPUs free"
    if d.kind == "mig" and model is not None and d.profile is not None:
        best = 0
        for s in gs:
            if (s.fixed is not None and s.fixed.mode != "mig") or s.mode not in (None, "mig"):
                continue
            best = max(best, _longest_free_run(s.mig_mask, model.memory_slices))
        need = d.profile.memory_slices
        if best >= need:
            return 0.0, f"{best} contiguous free memory slices"
        return (need - best) / need, f"{best} of {need} contiguous memory slices free"
    if d.kind == "fraction" and model is not None:
        cap = gib_to_mib(model.memory_gib) if model.memory_gib else 0
        room = max((MILLI - s.frac_used for s in gs
                    if (s.fixed is None or s.fixed.mode == "shared") and s.mode in (None, "shared")
                    and s.mem_used + d.memory_mib <= cap), default=0)
        if room >= d.fraction_milli:
            return 0.0, f"a {room / MILLI:g} share free"
        short = (d.fraction_milli - room) / d.fraction_milli
        return short, f"best free share {room / MILLI:g} of {d.fraction_milli / MILLI:g}"
    return 0.0, ""


def _longest_free_run(mask: int, width: int) -> int:
    best = run = 0
    for b in range(width):
        run = 0 if mask >> b & 1 else run + 1
        best = max(best, run)
    return best


def closest_nodes(st: ClusterState, w: Workload, limit: int = 3) -> list[tuple[int, str]]:
    """Up to ``limit`` nodes closest to hosting one more replica of ``w``: (node index, what is short).

    Parameters
    ----------
    st
        Occupancy after the plan.
    w
        The unplaced workload.
    limit
        How many nodes to return.
    """
    idx, per_model = st.eligible(w)
    scored: list[tuple[float, int, str]] = []
    for i in (int(x) for x in idx):
        d = per_model[st.model_of[i]]
        parts: list[str] = []
        score = 0.0
        if w.cpu_milli and st.cpu[i] < w.cpu_milli:
            score += (w.cpu_milli - float(st.cpu[i])) / w.cpu_milli
            parts.append(f"CPU {st.cpu[i] / MILLI:g} of {w.cpu:g} cores free")
        if w.memory_mib and st.mem[i] < w.memory_mib:
            score += (w.memory_mib - float(st.mem[i])) / w.memory_mib
            parts.append(f"memory {st.mem[i] / MIB_PER_GIB:g} of {w.memory_gib:g} GiB free")
        short, text = _gpu_room(st, w, d, i)
        if short > 0:
            score += short
            parts.append(text)
        if not parts:
            r = st.fit(w, d, i)
            if not isinstance(r, Placement):
                score += 1.0
                parts.append({"power": "power budget spent", "isolation": "another tenant (isolation)",
                              "gpu": "no single GPU with room of the right kind"}.get(r, r))
            else:
                parts.append("fits one replica; the workload needs more at once (gang or topology)")
        scored.append((score, i, "; ".join(parts)))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [(i, text) for _, i, text in scored[:limit]]
