"""The greedy planner: priority order, gangs first, best fit by topology domain.

Workloads are taken in order of priority (highest first), gangs before independent replicas
within a priority, larger demands first. Each replica goes to the feasible node that leaves
the fewest free whole GPUs (best fit); a gang or a workload with a required topology level is
tried in every domain of that level and kept in the tightest one that holds it all. MIG slices
start where the most valid placements stay free. Deterministic: no randomness is used.
"""

from __future__ import annotations

import time

import numpy as np

from capplan.model.plan import Assignment, Plan, Unplaced
from capplan.model.problem import Problem, Workload
from capplan.placement.core.options import PlanOptions
from capplan.placement.core.reasons import Holdings, explain
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.core.summary import make_plan


def shape_key(w: Workload) -> tuple[object, ...]:
    """Everything about a workload but its name and replica count that decides where it fits."""
    return (w.kind, w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.cpu, w.memory_gib, w.gpu_models,
            w.topology.required, w.topology.preferred, w.tenant, w.isolation, w.queue)


def workload_order(p: Problem) -> list[Workload]:
    """Priority first, gangs first, bigger total demand first, then input order."""
    return sorted(p.workloads, key=lambda w: (-w.priority, not w.is_gang, -p.demand_units(w) * w.replicas,
                                              -w.cpu_milli, p.workload_index[w.name]))


class GreedyPlacer:
    """Constructive placement on a :class:`ClusterState`; reused by other planners for repair."""

    def __init__(self, p: Problem, st: ClusterState) -> None:
        self.p = p
        self.st = st

    def candidates(self, w: Workload, within: np.ndarray | None, prefer: set[str] | None = None) -> list[int]:
        """Eligible nodes with room for CPU, memory and GPUs, best fit first."""
        st = self.st
        idx, _ = st.eligible(w)
        if within is not None:
            idx = np.intersect1d(idx, within, assume_unique=True)
        if idx.size == 0:
            return []
        ok = (st.cpu[idx] >= w.cpu_milli) & (st.mem[idx] >= w.memory_mib)
        if w.gpus is not None:
            ok &= st.free_whole[idx] >= w.gpus
        elif w.gpu_fraction is not None:
            ok &= st.frac_room[idx] >= round(w.gpu_fraction * 1000)
        elif w.mig is not None:
            ok &= st.mig_free[idx] > 0
        idx = idx[ok]
        if idx.size == 0:
            return []
        # Best fit: fewest free whole GPUs left, then least free CPU; nodes with busy GPUs first for slices.
        free_after = st.free_whole[idx] - (w.gpus or 0)
        partial = (st.gpu_count[idx] - st.free_whole[idx]) > 0
        keys = [st.cpu[idx], free_after]
        if w.gpus is None:
            keys.append(~partial)
        if prefer:
            lvl = w.topology.preferred
            assert lvl is not None
            keys.append(np.array([self.p.cluster.domain_of(st.nodes[i], lvl) not in prefer for i in idx]))
        # Least capacity held comes first: the smallest MIG slice that serves the workload, and
        # CPU-only pods on CPU-only nodes (GPU nodes keep their CPU and memory for GPU work).
        if w.mig is not None:
            per = st.eligible(w)[1]
            keys.append(np.array([per[st.model_of[i]].units for i in idx]))
        if not w.has_gpu_demand:
            keys.append(st.gpu_count[idx] > 0)
        order = np.lexsort(tuple(keys))
        return [int(i) for i in idx[order]]

    def place_one(self, w: Workload, within: np.ndarray | None = None,
                  prefer: set[str] | None = None) -> Placement | None:
        """Place one replica of ``w`` (optionally inside ``within`` nodes); None if it does not fit."""
        for i in self.candidates(w, within, prefer):
            d = self.st.demand_at(w, i)
            r = self.st.fit(w, d, i)
            if isinstance(r, Placement):
                self.st.apply(w, d, r)
                return r
        return None

    def undo(self, w: Workload, placed: list[Placement]) -> None:
        """Remove placements of ``w`` (in reverse order)."""
        for pl in reversed(placed):
            self.st.apply(w, self.st.demand_at(w, pl.node), pl, -1)

    def place_group(self, w: Workload, n: int, within: np.ndarray | None, all_or_nothing: bool,
                    prefer: set[str] | None = None) -> list[Placement]:
        """Place up to ``n`` replicas; with ``all_or_nothing`` roll back unless all fit."""
        lvl = w.topology.preferred
        done: list[Placement] = []
        pref = set(prefer or ())
        for _ in range(n):
            pl = self.place_one(w, within, pref if lvl else None)
            if pl is None:
                break
            done.append(pl)
            if lvl:
                pref.add(self.p.cluster.domain_of(self.st.nodes[pl.node], lvl))
        if all_or_nothing and len(done) < n:
            self.undo(w, done)
            return []
        return done

    def domain_leftover(self, nodes: np.ndarray) -> int:
        """Free whole GPUs left in a set of nodes (smaller means a tighter fit)."""
        return int(self.st.free_whole[nodes].sum())

    def place_in_one_domain(self, w: Workload, n: int, level: str, fixed_domain: str | None,
                            all_or_nothing: bool, within: np.ndarray | None = None) -> list[Placement]:
        """Place replicas of ``w`` inside the single domain of ``level`` that fits them most tightly."""
        if level == self.p.cluster.levels[-1]:
            doms = {st_n.name: np.array([i]) for i, st_n in enumerate(self.st.nodes)}
        else:
            doms = {d: idx for (lv, d), idx in self.st.domain_nodes.items() if lv == level}
        if fixed_domain is not None:
            doms = {fixed_domain: doms[fixed_domain]}
        if within is not None:
            doms = {d: x for d, idx in doms.items() if (x := np.intersect1d(idx, within)).size}
        best: tuple[tuple[int, int], str] | None = None
        for dom, idx in doms.items():
            trial = self.place_group(w, n, idx, all_or_nothing)
            if trial:
                key = (-len(trial), self.domain_leftover(idx))
                if best is None or key < best[0]:
                    best = (key, dom)
                self.undo(w, trial)
                if len(trial) == n and key[1] == 0:
                    break
        if best is None:
            return []
        return self.place_group(w, n, doms[best[1]], all_or_nothing)


def place_workload(placer: GreedyPlacer, w: Workload, n: int, running: list[Assignment]) -> list[Placement]:
    """Place ``n`` more replicas of ``w`` by its gang, GPU-model and topology rules.

    ``running`` are its replicas already placed (they fix the required domain and, for a gang
    that must stay on one GPU model, the model).
    """
    p, st = placer.p, placer.st
    if not w.one_model:
        return _place_within(placer, w, n, running, None)
    models = {p.cluster.nodes[p.cluster.node_index[a.node]].gpu_model for a in running}
    per = st.eligible(w)[1]
    options = sorted((m for m in per if m is not None and (not models or m in models)),
                     key=lambda m: (per[m].units, m))
    best: tuple[tuple[int, int], str] | None = None
    for m in options:  # each GPU model on its own; keep the one holding least, then fitting tightest
        trial = _place_within(placer, w, n, running, st.model_nodes[m])
        if len(trial) == n:
            key = (per[m].units, placer.domain_leftover(st.model_nodes[m]))
            if best is None or key < best[0]:
                best = (key, m)
        placer.undo(w, trial)
    if best is None:
        return []
    return _place_within(placer, w, n, running, st.model_nodes[best[1]])


def _place_within(placer: GreedyPlacer, w: Workload, n: int, running: list[Assignment],
                  within: np.ndarray | None) -> list[Placement]:
    p = placer.p
    lvl = w.topology.required
    gang = w.is_gang
    if lvl:
        fixed = (p.cluster.domain_of(p.cluster.nodes[p.cluster.node_index[running[0].node]], lvl)
                 if running else None)
        return placer.place_in_one_domain(w, n, lvl, fixed, gang, within)
    if gang and w.topology.preferred:
        placed = placer.place_in_one_domain(w, n, w.topology.preferred, None, True, within)
        return placed or placer.place_group(w, n, within, True)
    prefer = ({p.cluster.domain_of(p.cluster.nodes[p.cluster.node_index[a.node]], w.topology.preferred)
               for a in running} if w.topology.preferred else None)
    return placer.place_group(w, n, within, gang, prefer)


def plan_greedy(p: Problem, options: PlanOptions) -> Plan:
    """Plan ``p`` greedily; running replicas stay where they are."""
    t0 = time.perf_counter()
    st = ClusterState(p)
    placer = GreedyPlacer(p, st)
    assignments: list[Assignment] = []
    running_of: dict[str, list[Assignment]] = {}
    for a in p.running:
        w = p.workload(a.workload)
        node = p.cluster.nodes[p.cluster.node_index[a.node]]
        d = p.demand_on(w, node)
        assert d is not None
        st.place_assignment(w, d, a)
        assignments.append(a)
        running_of.setdefault(w.name, []).append(a)
    missing_of: list[tuple[Workload, list[int]]] = []
    for w in workload_order(p):
        running = running_of.get(w.name, [])
        free_ids = [r for r in range(w.replicas) if r not in {a.replica for a in running}]
        if not free_ids:
            continue
        placed = place_workload(placer, w, len(free_ids), running)
        for r, pl in zip(free_ids, placed, strict=False):
            assignments.append(st.assignment(w, r, pl))
        missing = free_ids[len(placed):]
        if missing:
            missing_of.append((w, missing))
    # Greedy never removes a placement, so the final occupancy explains every failure; workloads of
    # the same shape share one diagnosis.
    reasons: dict[tuple[object, ...], str] = {}
    unplaced: list[Unplaced] = []
    holdings = Holdings(p, assignments) if missing_of else None
    for w, missing in missing_of:
        key = (shape_key(w), w.mixed_models, w.replicas, len(missing))
        if key not in reasons:
            reasons[key] = explain(st, w, len(missing), holdings)
        unplaced.append(Unplaced(workload=w.name, replicas=tuple(missing), reason=reasons[key]))
    return make_plan(p, "greedy", assignments, unplaced, seconds=time.perf_counter() - t0, seed=options.seed)
