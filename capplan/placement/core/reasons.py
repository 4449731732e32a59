"""Why a workload was left unplaced: a diagnosis by constraint family, from the occupancy.

For each node the replica's fit is checked family by family (GPU model, CPU, memory, GPU room,
isolation, power); the family that rules out the last candidates is reported with numbers, and
with gangs and required topology the best domain's room is compared with what is needed.
"""

from __future__ import annotations

from collections import Counter

from capplan.model.problem import Demand, Workload
from capplan.model.units import MIB_PER_GIB, MILLI
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.core.summary import describe_demand


def _ever_fits(st: ClusterState, w: Workload) -> str | None:
    """Reason no node could host one replica even when empty, or None."""
    p = st.p
    idx, _ = st.eligible(w)
    what = describe_demand(p, w)
    if idx.size == 0:
        models = sorted({n.gpu_model for n in p.cluster.nodes if n.gpu_model})
        if w.gpus is not None and any(n.gpu_model for n in p.cluster.nodes):
            biggest = max(n.gpus for n in p.cluster.nodes)
            if w.gpus > biggest:
                return f"needs {what} on one node; the largest node has {biggest} GPUs"
        return f"needs {what}; no node offers it (cluster GPU models: {', '.join(models) or 'none'})"
    if int(st.cap_cpu[idx].max()) < w.cpu_milli:
        return f"needs {w.cpu:g} cores per replica; the largest eligible node has {st.cap_cpu[idx].max() / MILLI:g}"
    if int(st.cap_mem[idx].max()) < w.memory_mib:
        return (f"needs {w.memory_gib:g} GiB host memory per replica; the largest eligible node has "
                f"{st.cap_mem[idx].max() / MIB_PER_GIB:g} GiB")
    return None


def node_failures(st: ClusterState, w: Workload) -> Counter[str]:
    """How many nodes reject one more replica of ``w``, by constraint family."""
    idx, _ = st.eligible(w)
    out: Counter[str] = Counter({"model": len(st.nodes) - idx.size})
    cpu_ok = st.free_cpu[idx] >= w.cpu_milli
    mem_ok = st.free_mem[idx] >= w.memory_mib
    out["cpu"] = int((~cpu_ok).sum())
    out["memory"] = int((cpu_ok & ~mem_ok).sum())
    for i in idx[cpu_ok & mem_ok]:
        r = st.fit(w, st.demand_at(w, int(i)), int(i))
        out["fits" if isinstance(r, Placement) else r] += 1
    return +out


def _room_in_domain(st: ClusterState, w: Workload, nodes: list[int]) -> int:
    """How many replicas of ``w`` fit together in ``nodes`` (placed tentatively, then removed)."""
    done: list[tuple[Demand, Placement]] = []
    eligible = set(st.eligible(w)[0].tolist())
    for i in nodes:
        if i not in eligible:
            continue
        d = st.demand_at(w, i)
        while len(done) < w.replicas:
            r = st.fit(w, d, i)
            if not isinstance(r, Placement):
                break
            st.apply(w, d, r)
            done.append((d, r))
    for d, r in reversed(done):
        st.apply(w, d, r, -1)
    return len(done)


#: Text per constraint family, shared with the fleet-scale explanations.
FAMILY_TEXT = {
    "cpu": "not enough free CPU", "memory": "not enough free host memory",
    "gpu": "no free GPU capacity of the right kind",
    "isolation": "isolation: the GPUs or nodes with room host another tenant",
    "power": "power budget exhausted where GPUs are free",
}


def explain(st: ClusterState, w: Workload, missing: int) -> str:
    """A specific, actionable reason why ``missing`` replicas of ``w`` were not placed."""
    p = st.p
    base = _ever_fits(st, w)
    if base:
        return base
    what = describe_demand(p, w)
    lvl = w.topology.required
    if lvl and lvl != "node" and w.replicas > 1:
        best, best_dom = 0, ""
        for (level, dom), idx in st.domain_nodes.items():
            if level == lvl:
                room = _room_in_domain(st, w, [int(i) for i in idx])
                if room > best:
                    best, best_dom = room, dom
        where = f"the best {lvl} ({best_dom}) has room for {best}" if best_dom else f"no {lvl} has room for one"
        return f"needs {w.replicas} x {what} in one {lvl}; {where}"
    fails = node_failures(st, w)
    if fails["fits"]:
        if w.is_gang:
            room = _room_in_domain(st, w, list(range(len(st.nodes))))
            return f"gang needs {w.replicas} x {what} at once; the cluster has room for {room}"
        if lvl == "node":
            room = max(_room_in_domain(st, w, [i]) for i in range(len(st.nodes)))
            return f"needs {w.replicas} x {what} on one node; the best node has room for {room}"
        return f"ran out of room after placing the others ({missing} of {w.replicas} left)"
    family = max((f for f in fails if f not in ("model", "fits")), key=lambda f: fails[f], default="model")
    eligible = len(st.nodes) - fails["model"]
    detail = FAMILY_TEXT.get(family, family)
    return f"needs {what}; {detail} on {fails[family]} of {eligible} eligible nodes"
