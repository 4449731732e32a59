"""Why a workload was left unplaced: a diagnosis by constraint family, from the occupancy.

The one reason engine of every strategy. For each eligible node the replica's fit is checked family
by family (GPU model, CPU, memory, GPU room, isolation, power); the family that rules out the last
candidates is reported with numbers, and with gangs, one GPU model per gang and required topology
the best domain's room is compared with what is needed. Every reason starts with the family
(``GPU capacity: ...``), gives its numbers in GPUs, and names the workloads that hold the contested
capacity on the eligible nodes (:class:`Holdings`).

Two ways of counting share that text: exact (:func:`explain`: each node's :meth:`ClusterState.fit`, and
replicas placed tentatively per domain) and, for fleets of thousands of nodes, by array operations over
all nodes at once (:func:`explain_fast`: the same families in check order, rooms as estimates,
``about N``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from capplan.model.families import FAMILIES
from capplan.model.plan import Assignment
from capplan.model.problem import Demand, Problem, Workload, untolerated
from capplan.model.units import MIB_PER_GIB, MILLI, UNITS_PER_GPU, gib_to_mib, units_to_gpus
from capplan.placement.core.state import FREE, MIG, SHARED, ClusterState, Placement
from capplan.placement.core.summary import describe_demand

#: The name each reason starts with, per constraint family (:data:`capplan.model.families.FAMILIES`), and
#: ``capacity`` for work that fits alone but not beside what is placed.
FAMILY_LABEL = {**{k: f.label for k, f in FAMILIES.items()}, "capacity": "capacity"}


class Holdings:
    """What each workload holds per GPU model of the nodes (``None``: CPU-only nodes).

    GPU units held (a MIG replica holds its profile's compute fraction on the GPU it got), host
    CPU in milli-cores and host memory in MiB, summed from a plan's assignments.
    """

    def __init__(self, p: Problem, assignments: Iterable[Assignment]) -> None:
        self.p = p
        self.gpu: dict[str | None, Counter[str]] = defaultdict(Counter)
        self.cpu: dict[str | None, Counter[str]] = defaultdict(Counter)
        self.mem: dict[str | None, Counter[str]] = defaultdict(Counter)
        self._ranked: dict[tuple[str, tuple[str | None, ...], int], tuple[list[tuple[str, int]], int]] = {}
        nodes, index = p.cluster.nodes, p.cluster.node_index
        # replicas per (workload, node) first: at fleet scale many replicas share a node
        for (name, at), k in Counter((a.workload, a.node) for a in assignments).items():
            w = p.workload(name)
            node = nodes[index[at]]
            m = node.gpu_model if node.gpus else None
            d = p.demand_on(w, node)
            if d is not None and d.units:
                self.gpu[m][w.name] += k * d.units
            self.cpu[m][w.name] += k * w.cpu_milli
            self.mem[m][w.name] += k * w.memory_mib

    def competing(self, w: Workload, models: Iterable[str | None], family: str, top: int = 3) -> str:
        """``; held by A (priority 5): 4 GPUs, ...``: the largest holders of ``family``'s resource."""
        table, unit = ((self.cpu, "cores") if family == "cpu" else (self.mem, "GiB") if family == "memory"
                       else (self.gpu, "GPUs"))
        key = (unit, tuple(sorted(set(models), key=str)), top)
        hit = self._ranked.get(key)
        if hit is None:  # the holdings do not change: one merge per family and set of models
            total: Counter[str] = Counter()
            for m in key[1]:
                total.update(table.get(m, Counter()))
            positive = [(n, x) for n, x in total.most_common() if x > 0]
            hit = self._ranked[key] = (positive[:top], len(positive))
        ranked, held = hit
        if not ranked:
            return ""

        def amount(x: int) -> str:
            v = x / MILLI if unit == "cores" else x / MIB_PER_GIB if unit == "GiB" else units_to_gpus(x)
            return f"{v:g} {unit}"

        parts = [f"{n}{' itself' if n == w.name else ''} (priority {self.p.workload(n).priority}): {amount(x)}"
                 for n, x in ranked]
        more = held - len(ranked)
        return "; held by " + ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def _models_of(st: ClusterState, idx: np.ndarray) -> list[str | None]:
    """GPU models of nodes ``idx``, in a fixed order (ties in :meth:`Holdings.competing` do not depend on hashing)."""
    models: list[str | None] = [st.model_names[int(m)] for m in np.unique(st.model_id[idx])]
    return sorted(models, key=str)


def _gpus_of(st: ClusterState, idx: np.ndarray) -> str:
    """``8 GPUs, 3 wholly free``: GPUs of nodes ``idx`` and how many have no user."""
    return f"{int(st.gpu_count[idx].sum())} GPUs, {int(st.free_whole[idx].sum())} wholly free"


def value_text(p: Problem, w: Workload, n: int) -> str:
    """``n`` replicas of ``w`` in GPUs of value (``3 GPUs``)."""
    return f"{units_to_gpus(n * p.replica_value(w)):g} GPUs"


def taint_reason(p: Problem, w: Workload, what: str) -> str | None:
    """``taint: ...`` when the only nodes whose hardware could host ``w`` carry a hard taint it does not
    tolerate (naming the taints and their nodes), else None."""
    by_taint: dict[str, list[str]] = defaultdict(list)
    for n in p.cluster.nodes:
        if n.taints and p.demand_on(w, n) is not None and p.can_host(w, n) is None:
            by_taint[str(untolerated(n.taints, w.tolerations)[0])].append(n.name)
    if not by_taint:
        return None
    parts = []
    for taint, names in sorted(by_taint.items()):
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        parts.append(f"{taint} on nodes {', '.join(names[:3])}{more}")
    return (f"taint: needs {what}; {'; '.join(parts)} not tolerated (the only nodes that could host it); "
            "add a matching toleration (tolerations:) or remove the taint")


def strategy_note(p: Problem, w: Workload) -> str:
    """``; ...``: why nodes whose GPU model offers ``w``'s MIG profile are still not eligible (the MIG strategy).

    Empty when no such node exists. Names ``mig_strategy: single`` with MIG off, a single node preset to
    another profile, and a request whose strategy differs from the node's.
    """
    if w.mig is None:
        return ""
    off: list[str] = []
    other: list[str] = []
    mismatch: list[str] = []
    for n in p.cluster.nodes:
        d = p.model_demand(w, n.gpu_model if n.gpus else None)
        if d is None or d.kind != "mig" or p.can_host(w, n) is not None:
            continue
        if n.mig_strategy == "single" and n.single_profile is None:
            off.append(n.name)
        elif n.mig_strategy == "single" and w.mig_strategy == "single":
            other.append(n.name)
        else:
            mismatch.append(n.name)

    def names(xs: list[str]) -> str:
        return ", ".join(xs[:3]) + (f" and {len(xs) - 3} more" if len(xs) > 3 else "")

    parts = []
    if off:
        parts.append(f"{len(off)} node(s) whose GPU model has the profile ({names(off)}) use mig_strategy single "
                     "(nvidia.com/mig.strategy=single) with MIG off: enable MIG there with one profile for every "
                     "GPU, or switch them to the mixed strategy")
    if other:
        parts.append(f"{len(other)} single-strategy node(s) ({names(other)}) are preset to another profile")
    if mismatch:
        node_side = "single" if w.mig_strategy == "mixed" else "mixed"
        parts.append(f"{len(mismatch)} node(s) ({names(mismatch)}) use mig_strategy {node_side}, whose MIG devices "
                     f"do not serve a {w.mig_strategy}-strategy request")
    return "".join(f"; {x}" for x in parts)


def _ever_fits(st: ClusterState, w: Workload) -> str | None:
    """Reason no node could host one replica even when empty, or None."""
    p = st.p
    idx, _ = st.eligible(w)
    what = describe_demand(p, w)
    if idx.size == 0 and st.quota is not None and w.queue is not None:
        return (f"quota: ClusterQueue {w.queue} has no flavor with quota for {what} on a node that could host it; "
                "add the flavor and its quota to the ClusterQueue")
    if idx.size == 0 and (why := taint_reason(p, w, what)):
        return why
    if idx.size == 0:
        models = sorted({n.gpu_model for n in p.cluster.nodes if n.gpu_model})
        if w.gpus is not None and any(n.gpu_model for n in p.cluster.nodes):
            biggest = max(n.gpus for n in p.cluster.nodes)
            if w.gpus > biggest:
                return f"GPU model: needs {what} on one node; the largest node has {biggest} GPUs"
        return (f"GPU model: needs {what}; no node offers it (cluster GPU models: {', '.join(models) or 'none'})"
                f"{strategy_note(p, w)}")
    if int(st.cpu_cap[idx].max()) < w.cpu_milli:
        return (f"host CPU: needs {w.cpu:g} cores per replica; the largest eligible node has "
                f"{st.cpu_cap[idx].max() / MILLI:g}")
    if int(st.mem_cap[idx].max()) < w.memory_mib:
        return (f"host memory: needs {w.memory_gib:g} GiB host memory per replica; the largest eligible node has "
                f"{st.mem_cap[idx].max() / MIB_PER_GIB:g} GiB")
    return None


def node_failures(st: ClusterState, w: Workload) -> Counter[str]:
    """How many nodes reject one more replica of ``w``, by constraint family."""
    idx, _ = st.eligible(w)
    out: Counter[str] = Counter({"model": len(st.nodes) - idx.size})
    cpu_ok = st.cpu[idx] >= w.cpu_milli
    mem_ok = st.mem[idx] >= w.memory_mib
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


def _one_model_in_domains(st: ClusterState, w: Workload, lvl: str, what: str) -> str:
    """The one-model reason when some ``lvl`` domain has room for the gang only across GPU models, else ``""``."""
    best_one, best_mixed, best_dom = 0, 0, ""
    for (level, dom), nodes in st.domain_nodes.items():
        if level != lvl:
            continue
        members = [int(i) for i in nodes]
        by_model: dict[str | None, list[int]] = defaultdict(list)
        for i in members:
            by_model[st.model_of[i]].append(i)
        one = max((_room_in_domain(st, w, ns) for ns in by_model.values()), default=0)
        best_one = max(best_one, one)
        if one < w.replicas and len(by_model) > 1:
            room = _room_in_domain(st, w, members)
            if room > best_mixed:
                best_mixed, best_dom = room, dom
    if best_one >= w.replicas or best_mixed < w.replicas:
        return ""
    return (f"one GPU model per gang: needs {w.replicas} x {what} on one GPU model in one {lvl}; {lvl} {best_dom} "
            f"has room for {best_mixed} across GPU models, no {lvl} for more than {best_one} on one model "
            "(set mixed_models: true to allow mixing)")


#: Text per constraint family a node check can rule out, shared with the fleet-scale explanations.
FAMILY_TEXT = {k: FAMILIES[k].blocked for k in ("quota", "cpu", "memory", "gpu", "isolation", "power")}


def explain(st: ClusterState, w: Workload, missing: int, holdings: Holdings | None = None) -> str:
    """A specific, actionable reason why ``missing`` replicas of ``w`` were not placed.

    The text starts with the constraint family, gives the numbers in GPUs and, with
    ``holdings`` (the plan's assignments), names the workloads holding the contested capacity.
    """
    p = st.p
    base = _ever_fits(st, w)
    if base:
        return base
    what = describe_demand(p, w)
    idx, per_model = st.eligible(w)
    if st.quota is not None and w.queue is not None:
        count = missing if (w.is_gang or w.topology.required) else 1
        why = st.quota.blocking(w, {i: per_model.get(st.model_of[i]) for i in idx.tolist()}, idx.tolist(), count)
        if why:
            return why
    need = f"{missing} x {what} ({value_text(p, w, missing)})" if w.has_gpu_demand else f"{missing} x {what}"

    def held(family: str) -> str:
        return holdings.competing(w, _models_of(st, idx), family) if holdings is not None else ""

    lvl = w.topology.required
    if lvl and lvl != "node" and w.replicas > 1 and w.one_model:
        mixed = _one_model_in_domains(st, w, lvl, what)
        if mixed:
            return mixed + held("gpu")
    if lvl and lvl != "node" and w.replicas > 1:
        best, best_dom = 0, ""
        for (level, dom), nodes in st.domain_nodes.items():
            if level == lvl:
                room = _room_in_domain(st, w, [int(i) for i in nodes])
                if room > best:
                    best, best_dom = room, dom
        where = f"the best {lvl} ({best_dom}) has room for {best}" if best_dom else f"no {lvl} has room for one"
        return f"topology: needs {w.replicas} x {what} in one {lvl}; {where}{held('gpu')}"
    if w.one_model:
        empty = ClusterState(p)  # the rule is structural when no model could take the gang even empty
        rooms = {m: _room_in_domain(empty, w, [int(i) for i in empty.model_nodes[m]]) for m in _models_of(st, idx)}
        if max(rooms.values(), default=0) < w.replicas <= _room_in_domain(empty, w, [int(i) for i in idx]):
            per = ", ".join(f"{m}: {r}" for m, r in sorted(rooms.items(), key=lambda x: str(x[0])))
            return (f"one GPU model per gang: needs {w.replicas} x {what} on one GPU model; even on the empty "
                    f"cluster the room per model is {per} (set mixed_models: true to allow mixing)")
    fails = node_failures(st, w)
    if fails["fits"]:
        if w.is_gang:
            if w.one_model:
                rooms = {m: _room_in_domain(st, w, [int(i) for i in st.model_nodes[m]]) for m in _models_of(st, idx)}
                room_all = _room_in_domain(st, w, [int(i) for i in idx])
                if room_all >= w.replicas:
                    per = ", ".join(f"{m}: {r}" for m, r in sorted(rooms.items(), key=lambda x: str(x[0])))
                    return (f"one GPU model per gang: needs {w.replicas} x {what} on one GPU model; room per "
                            f"model {per}, {room_all} across models (set mixed_models: true to allow mixing)"
                            f"{held('gpu')}")
            room = _room_in_domain(st, w, list(range(len(st.nodes))))
            return (f"gang: needs {w.replicas} x {what} ({value_text(p, w, w.replicas)}) at once; the cluster "
                    f"has room for {room} ({_gpus_of(st, idx)} on the eligible nodes){held('gpu')}")
        if lvl == "node":
            room = max(_room_in_domain(st, w, [i]) for i in range(len(st.nodes)))
            return (f"topology: needs {w.replicas} x {what} on one node; the best node has room for {room}"
                    f"{held('gpu')}")
        return (f"capacity: {missing} of {w.replicas} left after the others were placed ({need}); "
                f"{_gpus_of(st, idx)} on the eligible nodes{held('gpu')}")
    family = max((f for f in fails if f not in ("model", "fits")), key=lambda f: fails[f], default="model")
    eligible = len(st.nodes) - fails["model"]
    detail = FAMILY_TEXT.get(family, family)
    return (f"{FAMILY_LABEL.get(family, family)}: needs {need}; {detail} on {fails[family]} of {eligible} "
            f"eligible nodes ({_gpus_of(st, idx)}){held(family)}")


# ------------------------------------------------------------------ by array operations (fleets)
def explain_fast(st: ClusterState, w: Workload, missing: int, idx: np.ndarray,
                 holdings: Holdings | None = None, memo: dict[object, Any] | None = None) -> str:
    """:func:`explain` counted with array operations over the eligible nodes ``idx`` (fleet scale).

    The families are counted once per node in check order; domain and gang rooms are upper estimates
    from CPU, memory and free whole GPUs (``about N``). ``memo``: a dict the caller keeps while the state does
    not change, for what many workloads of one eligibility share (thousands of tenants' workloads of a few
    shapes on a fleet).
    """
    p = st.p
    what = describe_demand(p, w)
    if idx.size == 0 and (why := taint_reason(p, w, what)):
        return why
    if idx.size == 0:
        if w.gpus is not None and st.gpu_count.size and w.gpus > int(st.gpu_count.max()):
            return f"GPU model: needs {what} on one node; the largest node has {int(st.gpu_count.max())} GPUs"
        listed = ", ".join(sorted(m for m in st.model_names if m)) or "none"
        return f"GPU model: needs {what}; no node offers it (cluster GPU models: {listed}){strategy_note(p, w)}"
    biggest = int(st.cpu_cap[idx].max())
    if biggest < w.cpu_milli:
        return f"host CPU: needs {w.cpu:g} cores per replica; the largest eligible node has {biggest / MILLI:g}"
    big_mem = int(st.mem_cap[idx].max())
    if big_mem < w.memory_mib:
        return (f"host memory: needs {w.memory_gib:g} GiB host memory per replica; the largest eligible node has "
                f"{big_mem / MIB_PER_GIB:g} GiB")
    if memo is None:
        models, gpus = _models_of(st, idx), _gpus_of(st, idx)
    else:
        hit = memo.get(("nodes", id(idx)))
        if hit is None or hit[0] is not idx:  # the array is kept with its figures: its id is not reused
            hit = memo[("nodes", id(idx))] = (idx, _models_of(st, idx), _gpus_of(st, idx))
        models, gpus = hit[1], hit[2]

    def held(family: str) -> str:
        return holdings.competing(w, models, family) if holdings is not None else ""

    if w.one_model:  # structural: no single GPU model could take the gang even on the empty fleet
        empty = _empty_room(st, w, idx)
        per = {st.model_names[int(m)]: int(empty[st.model_id[idx] == m].sum()) for m in np.unique(st.model_id[idx])}
        if max(per.values(), default=0) < w.replicas <= int(empty.sum()):
            text = ", ".join(f"{m}: {r}" for m, r in sorted(per.items(), key=lambda x: str(x[0])))
            return (f"one GPU model per gang: needs {w.replicas} x {what} on one GPU model; even on the empty "
                    f"fleet the room per model is {text} (set mixed_models: true to allow mixing)")
    if w.is_gang or w.topology.required:
        return _gang_or_topology_fast(st, w, idx, what, gpus, held)
    fam = _families(st, w, idx) if memo is None or w.gpu_fraction is None else _share_families(st, w, idx, memo)
    worst = max(fam, key=lambda f: fam[f])
    need = f"{missing} x {what}" + (f" ({value_text(p, w, missing)})" if w.has_gpu_demand else "")
    if fam[worst] == 0:
        return (f"capacity: {missing} of {w.replicas} left after the others were placed ({need}); "
                f"{gpus} on the eligible nodes{held('gpu')}")
    return (f"{FAMILY_LABEL.get(worst, worst)}: needs {need}; {FAMILY_TEXT[worst]} on {fam[worst]} of {idx.size} "
            f"eligible nodes ({gpus}){held(worst)}")


def _gang_or_topology_fast(st: ClusterState, w: Workload, idx: np.ndarray, what: str, gpus: str,
                           held: Callable[[str], str]) -> str:
    p = st.p
    lvl = w.topology.required
    ok = idx[st.node_ok(w, idx)]
    room = room_estimate(st, w, ok)
    if lvl and lvl != p.cluster.levels[-1]:
        dom, names = st.domain_ids(lvl)
        cap = np.zeros(len(names), dtype=np.int64)
        np.add.at(cap, dom[ok], np.minimum(room, w.replicas))
        best = int(np.argmax(cap)) if cap.size else 0
        return (f"topology: needs {w.replicas} x {what} in one {lvl}; the best {lvl} ({names[best]}) "
                f"has room for about {int(cap[best]) if cap.size else 0}{held('gpu')}")
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


def room_estimate(st: ClusterState, w: Workload, idx: np.ndarray) -> np.ndarray:
    """Upper estimate of how many replicas of ``w`` each node in ``idx`` can still take (CPU, memory, whole GPUs)."""
    big = 1 << 30
    cpu = st.cpu[idx] // w.cpu_milli if w.cpu_milli else np.full(idx.size, big)
    mem = st.mem[idx] // w.memory_mib if w.memory_mib else np.full(idx.size, big)
    gpu = st.free_whole[idx] // w.gpus if w.gpus is not None else np.full(idx.size, big)
    return np.asarray(np.minimum(np.minimum(cpu, mem), gpu))


def _empty_room(st: ClusterState, w: Workload, idx: np.ndarray) -> np.ndarray:
    """Replicas of ``w`` each node of ``idx`` could take when empty (CPU, memory, GPUs; an upper estimate)."""
    room = np.full(idx.size, 1 << 30, dtype=np.int64)
    if w.cpu_milli:
        room = np.minimum(room, st.cpu_cap[idx] // w.cpu_milli)
    if w.memory_mib:
        room = np.minimum(room, st.mem_cap[idx] // w.memory_mib)
    if w.gpus is not None:
        room = np.minimum(room, st.gpu_count[idx] // w.gpus)
    return np.minimum(room, w.replicas)


def _share_mib(w: Workload) -> int:
    """The GPU memory a share of ``w`` asks on its GPU (MiB; 0 without ``gpu_memory_gib``)."""
    return gib_to_mib(w.gpu_memory_gib) if w.gpu_memory_gib else 0


def _families(st: ClusterState, w: Workload, idx: np.ndarray) -> dict[str, int]:
    """Nodes ruled out by each family, counting each node once in check order."""
    out: dict[str, int] = {}
    alive = np.ones(idx.size, dtype=bool)
    checks = [("cpu", st.cpu[idx] >= w.cpu_milli), ("memory", st.mem[idx] >= w.memory_mib),
              ("isolation", st.node_ok(w, idx))]
    if w.gpus is not None:
        checks.append(("gpu", st.free_whole[idx] >= w.gpus))
        checks.append(("power", st.power_headroom(idx) >= w.gpus * st.tdp[idx]))
    elif w.gpu_fraction is not None or w.mig is not None:
        mode = SHARED if w.gpu_fraction is not None else MIG
        room = st.exists[idx] & ((st.mode[idx] == FREE) | (st.mode[idx] == mode))
        if w.gpu_fraction is not None:
            room &= st.frac[idx] + round(w.gpu_fraction * MILLI) <= MILLI
            room &= st.gmem[idx] + _share_mib(w) <= st.gmem_cap[idx][:, None]
        else:
            room &= st.used[idx] < UNITS_PER_GPU
        checks.append(("gpu", room.any(axis=1)))
        checks.append(("isolation", (room & st.gpu_tenant_ok(w, idx)).any(axis=1) | ~room.any(axis=1)))
    for fam, ok in checks:
        out[fam] = out.get(fam, 0) + int((alive & ~ok).sum())
        alive &= ok
    return out


def _share_families(st: ClusterState, w: Workload, idx: np.ndarray, memo: dict[object, Any]) -> dict[str, int]:
    """:func:`_families` for a share, what does not depend on its tenant kept in ``memo``: the checks on CPU,
    memory and the GPUs' mode and share are the same for every workload of the shape, and so are the nodes
    with a GPU any tenant may join (no user, or no user asking isolation); node tenants (and quotas) and the
    GPUs of the workload's own tenant are then checked on the nodes still counted."""
    key = ("shares", id(idx), w.cpu_milli, w.memory_mib, round(w.gpu_fraction * MILLI) if w.gpu_fraction else 0,
           _share_mib(w))
    hit = memo.get(key)
    if hit is None or hit[0] is not idx:
        cpu_ok = st.cpu[idx] >= w.cpu_milli
        mem_ok = cpu_ok & (st.mem[idx] >= w.memory_mib)
        room = st.exists[idx] & ((st.mode[idx] == FREE) | (st.mode[idx] == SHARED))
        room &= (st.frac[idx] + key[4] <= MILLI) & (st.gmem[idx] + key[5] <= st.gmem_cap[idx][:, None])
        alive = np.flatnonzero(mem_ok)
        room_any = room.any(axis=1)
        roomy = alive[room_any[alive]]
        at, room = idx[roomy], room[roomy]
        idle = st.users[at] == 0
        tenant, iso = st.gpu_tenant[at], st.gpu_iso[at]
        # per kind of tenant rule: the rows no GPU of which every tenant may join, and those rows' GPUs
        rest = {kind: np.flatnonzero(~(room & anyone).any(axis=1))
                for kind, anyone in ((True, idle), (False, idle | (iso == 0)))}
        rest_gpus = {kind: (room[r], tenant[r]) for kind, r in rest.items()}
        hit = memo[key] = (idx, int((~cpu_ok).sum()), int((cpu_ok & ~mem_ok).sum()), alive, room_any, roomy,
                           bool(st.node_iso[idx].any()), rest_gpus)
    _, cpu_out, mem_out, alive, room_any, roomy, node_iso, rest_gpus = hit
    t = st.tenant_id(w.tenant)
    if w.isolation == "node" or node_iso or (st.quota is not None and w.queue is not None):
        node_ok = st.node_ok(w, idx[alive])  # CPU and memory hold on these: node tenants and quotas
        node_out = int((~node_ok).sum())
        alive = alive[node_ok]
        gpu_ok = room_any[alive]
        gpu_out = int((~gpu_ok).sum())
        at = idx[alive[gpu_ok]]
        room = st.exists[at] & ((st.mode[at] == FREE) | (st.mode[at] == SHARED))
        room &= (st.frac[at] + key[4] <= MILLI) & (st.gmem[at] + key[5] <= st.gmem_cap[at][:, None])
        tenant_out = int((~(room & st.gpu_tenant_ok(w, at)).any(axis=1)).sum())
    else:  # no node isolation anywhere: every node passes it; a row fails on tenants if no GPU there is open
        node_out, gpu_out = 0, alive.size - roomy.size
        room, tenant = rest_gpus[w.isolation == "tenant"]
        tenant_out = int((~(room & (tenant == t)).any(axis=1)).sum())
    return {"cpu": cpu_out, "memory": mem_out, "isolation": node_out + tenant_out, "gpu": gpu_out}
