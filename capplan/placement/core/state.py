"""Mutable cluster occupancy for constructive planners (greedy, heuristics, repair).

Planners place and remove replicas here; the independent validator never uses this module.
Node-level free capacity is kept in numpy arrays so that candidate nodes can be filtered and
scored without a Python loop over nodes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Demand, GpuMode, Problem, Workload
from capplan.model.units import MILLI, gib_to_mib

# Why a replica does not fit on a node, in the order they are checked.
REASONS = ("model", "cpu", "memory", "gpu", "isolation", "power")


@dataclass
class GpuState:
    """Occupancy of one physical GPU."""

    fixed: GpuMode | None
    mode: str | None = None  # "whole" | "mig" | "shared" while in use
    users: int = 0
    tenants: Counter[str] = field(default_factory=Counter)
    isolated: int = 0  # users whose workload asks for tenant isolation
    mig_mask: int = 0
    mig_counts: Counter[str] = field(default_factory=Counter)
    frac_used: int = 0
    mem_used: int = 0


@dataclass(frozen=True)
class Placement:
    """Where one replica goes: node index, GPU indices, MIG slot or fraction."""

    node: int
    gpus: tuple[int, ...] = ()
    slot: MigSlot | None = None
    fraction_milli: int = 0


class ClusterState:
    """Free capacity of every node, GPU and power domain."""

    def __init__(self, problem: Problem) -> None:
        self.p = problem
        cl = problem.cluster
        self.nodes = cl.nodes
        self.models: list[GpuModel | None] = [problem.gpu_model(n) for n in cl.nodes]
        self.free_cpu = np.array([n.cpu_milli for n in cl.nodes], dtype=np.int64)
        self.free_mem = np.array([n.memory_mib for n in cl.nodes], dtype=np.int64)
        self.gpus = [[GpuState(fixed=n.mode_of(g)) for g in range(n.gpus)] for n in cl.nodes]
        self.free_whole = np.array([sum(1 for g in gs if g.fixed is None or g.fixed.mode == "whole")
                                    for gs in self.gpus], dtype=np.int64)
        self.gpu_count = np.array([n.gpus for n in cl.nodes], dtype=np.int64)
        self.node_tenants: list[Counter[str]] = [Counter() for _ in cl.nodes]
        self.node_isolated: list[int] = [0] * len(cl.nodes)
        budgets = {(d.level, d.name): d.power_w for d in cl.domains if d.power_w is not None}
        self.power_free: dict[tuple[str, str], int] = {k: v for k, v in budgets.items() if v is not None}
        self.node_power: list[list[tuple[str, str]]] = [
            [(lvl, dom) for lvl, dom in zip(cl.levels[:-1], n.path, strict=True) if (lvl, dom) in budgets]
            for n in cl.nodes]
        self.tdp = [m.tdp_w if m and m.tdp_w is not None else 0 for m in self.models]
        self.frac_room = np.zeros(len(cl.nodes), dtype=np.int64)
        self.mig_free = np.zeros(len(cl.nodes), dtype=np.int64)
        for i in range(len(cl.nodes)):
            self._refresh(i)
        self.model_of: list[str | None] = [n.gpu_model if n.gpus else None for n in cl.nodes]
        by_model: dict[str | None, list[int]] = {}
        for i, m in enumerate(self.model_of):
            by_model.setdefault(m, []).append(i)
        self.model_nodes = {m: np.array(idx, dtype=np.int64) for m, idx in by_model.items()}
        self.cap_cpu = self.free_cpu.copy()
        self.cap_mem = self.free_mem.copy()
        self._eligible: dict[str, tuple[np.ndarray, dict[str | None, Demand]]] = {}
        self.domain_nodes: dict[tuple[str, str], np.ndarray] = {}
        for lvl in cl.levels[:-1]:
            groups: dict[str, list[int]] = {}
            for i, n in enumerate(cl.nodes):
                groups.setdefault(cl.domain_of(n, lvl), []).append(i)
            for dom, idx in groups.items():
                self.domain_nodes[(lvl, dom)] = np.array(idx, dtype=np.int64)

    def _refresh(self, i: int) -> None:
        """Recompute node ``i``'s best free share and most free MIG slices (for vectorised filters)."""
        model = self.models[i]
        frac = 0
        mig = 0
        for s in self.gpus[i]:
            if self._mode_ok(s, "shared"):
                frac = max(frac, MILLI - s.frac_used)
            if model is not None and model.supports_mig and self._mode_ok(s, "mig"):
                mig = max(mig, model.memory_slices - bin(s.mig_mask).count("1"))
        self.frac_room[i] = frac
        self.mig_free[i] = mig

    # ----------------------------------------------------------------- queries
    def eligible(self, w: Workload) -> tuple[np.ndarray, dict[str | None, Demand]]:
        """Sorted indices of nodes that could ever host ``w``, and its demand per GPU model."""
        hit = self._eligible.get(w.name)
        if hit is None:
            per_model: dict[str | None, Demand] = {}
            parts = []
            for m, idx in self.model_nodes.items():
                d = self.p.model_demand(w, m)
                if d is None:
                    continue
                per_model[m] = d
                if d.kind == "mig" and (self.p.single_mig or w.mig_strategy != "mixed"):  # per-node MIG strategies
                    nodes_ = self.p.cluster.nodes
                    idx = idx[np.array([self.p.can_host(w, nodes_[i]) is not None for i in idx], dtype=bool)]
                parts.append(idx[self.gpu_count[idx] >= d.gpus] if d.kind == "whole" else idx)
            nodes = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
            hit = self._eligible[w.name] = (nodes, per_model)
        return hit

    def demand_at(self, w: Workload, i: int) -> Demand:
        """``w``'s demand on node ``i`` (which must be eligible)."""
        return self.eligible(w)[1][self.model_of[i]]

    def _gpu_ok_for_tenant(self, g: GpuState, w: Workload) -> bool:
        others = g.users - g.tenants[w.tenant]
        if others == 0:
            return True
        return w.isolation != "tenant" and g.isolated == 0

    def _node_ok_for_tenant(self, i: int, w: Workload) -> bool:
        t = self.node_tenants[i]
        others = sum(t.values()) - t[w.tenant]
        return not (others and (w.isolation == "node" or self.node_isolated[i]))

    def _power_ok(self, i: int, new_gpus: int) -> bool:
        need = new_gpus * self.tdp[i]
        return all(self.power_free[k] >= need for k in self.node_power[i]) if need else True

    def _mode_ok(self, g: GpuState, mode: str) -> bool:
        if g.fixed is not None and g.fixed.mode != mode:
            return False
        return g.mode is None or g.mode == mode

    def fit(self, w: Workload, d: Demand, i: int) -> Placement | str:
        """Best placement of one replica of ``w`` on node ``i``, or the reason it does not fit."""
        if self.free_cpu[i] < w.cpu_milli:
            return "cpu"
        if self.free_mem[i] < w.memory_mib:
            return "memory"
        if not self._node_ok_for_tenant(i, w):
            return "isolation"
        if d.kind == "none":
            return Placement(node=i)
        gs = self.gpus[i]
        model = self.models[i]
        assert model is not None
        blocked = False
        if d.kind == "whole":
            free = [g for g, s in enumerate(gs) if s.users == 0 and self._mode_ok(s, "whole")]
            if len(free) < d.gpus:
                return "gpu"
            free.sort(key=lambda g: gs[g].fixed is None)  # use GPUs preset to whole first
            chosen = tuple(sorted(free[: d.gpus]))
            return Placement(node=i, gpus=chosen) if self._power_ok(i, d.gpus) else "power"
        best: tuple[tuple[int, ...], Placement] | None = None
        for gi, s in enumerate(gs):
            mode = "mig" if d.kind == "mig" else "shared"
            if not self._mode_ok(s, mode):
                continue
            if d.kind == "mig":
                assert d.profile is not None
                opt = self._mig_choice(model, s, d.profile)
                if opt is None:
                    continue
                start, after = opt
                cand = Placement(node=i, gpus=(gi,), slot=MigSlot(profile=d.profile.name, start=start))
                key = (s.users == 0, bin(s.mig_mask).count("1") * -1, -after, gi)
            else:
                cap = gib_to_mib(model.memory_gib) if model.memory_gib else 0
                if s.frac_used + d.fraction_milli > MILLI or s.mem_used + d.memory_mib > cap:
                    continue
                cand = Placement(node=i, gpus=(gi,), fraction_milli=d.fraction_milli)
                key = (s.users == 0, MILLI - s.frac_used - d.fraction_milli, 0, gi)
            if not self._gpu_ok_for_tenant(s, w):
                blocked = True
                continue
            if s.users == 0 and not self._power_ok(i, 1):
                continue
            if best is None or key < best[0]:
                best = (key, cand)
        if best is None:
            return "isolation" if blocked else "gpu"
        return best[1]

    def _mig_choice(self, model: GpuModel, s: GpuState, prof: MigProfile) -> tuple[int, int] | None:
        """Free start for ``prof`` keeping the most valid placements; (start, placements left)."""
        if s.mig_counts[prof.name] >= prof.max_count:
            return None
        if model.homogeneous and s.mig_counts and prof.name not in s.mig_counts:
            return None
        layout = s.fixed.layout if s.fixed is not None else None
        best: tuple[int, int] | None = None
        for start in prof.starts:
            mask = ((1 << prof.memory_slices) - 1) << start
            if s.mig_mask & mask:
                continue
            if layout is not None and MigSlot(profile=prof.name, start=start) not in layout:
                continue
            after = self._placements_left(model, s.mig_mask | mask, layout)
            if best is None or after > best[1]:
                best = (start, after)
        return best

    @staticmethod
    def _placements_left(model: GpuModel, mask: int, layout: tuple[MigSlot, ...] | None) -> int:
        n = 0
        for p in model.profiles:
            for st in p.starts:
                if not mask & (((1 << p.memory_slices) - 1) << st) and (
                        layout is None or MigSlot(profile=p.name, start=st) in layout):
                    n += 1
        return n

    # --------------------------------------------------------------- mutation
    def apply(self, w: Workload, d: Demand, pl: Placement, sign: int = 1) -> None:
        """Add (``sign=1``) or remove (``sign=-1``) one replica's use."""
        i = pl.node
        self.free_cpu[i] -= sign * w.cpu_milli
        self.free_mem[i] -= sign * w.memory_mib
        self.node_tenants[i][w.tenant] += sign
        self.node_isolated[i] += sign * (w.isolation == "node")
        for gi in pl.gpus:
            s = self.gpus[i][gi]
            was_free = s.users == 0
            s.users += sign
            s.tenants[w.tenant] += sign
            s.isolated += sign * (w.isolation == "tenant")
            if d.kind == "mig" and pl.slot is not None and d.profile is not None:
                mask = ((1 << d.profile.memory_slices) - 1) << pl.slot.start
                s.mig_mask ^= mask
                s.mig_counts[d.profile.name] += sign
                s.mode = "mig"
            elif d.kind == "fraction":
                s.frac_used += sign * pl.fraction_milli
                s.mem_used += sign * d.memory_mib
                s.mode = "shared"
            else:
                s.mode = "whole"
            now_free = s.users == 0
            if now_free:
                s.mode = None
                s.mig_counts = Counter()
            if was_free != now_free:
                delta = 1 if now_free else -1
                if s.fixed is None or s.fixed.mode == "whole":
                    self.free_whole[i] += delta
                for k in self.node_power[i]:
                    self.power_free[k] += delta * self.tdp[i]
        if pl.gpus:
            self._refresh(i)

    @classmethod
    def with_assignments(cls, problem: Problem, assignments: list[Assignment]) -> ClusterState:
        """A state with ``assignments`` (e.g. a plan's or a running state) already applied."""
        st = cls(problem)
        nodes = problem.cluster.nodes
        for a in assignments:
            w = problem.workload(a.workload)
            d = problem.can_host(w, nodes[problem.cluster.node_index[a.node]])
            assert d is not None
            st.place_assignment(w, d, a)
        return st

    def place_assignment(self, w: Workload, d: Demand, a: Assignment) -> Placement:
        """Apply an existing assignment (running state) to the occupancy."""
        i = self.p.cluster.node_index[a.node]
        pl = Placement(node=i, gpus=tuple(a.gpus), slot=a.mig,
                       fraction_milli=round(a.fraction * MILLI) if a.fraction else 0)
        self.apply(w, d, pl)
        return pl

    def assignment(self, w: Workload, replica: int, pl: Placement) -> Assignment:
        """The plan assignment for a placement."""
        return Assignment(workload=w.name, replica=replica, node=self.nodes[pl.node].name, gpus=pl.gpus,
                          mig=pl.slot, fraction=pl.fraction_milli / MILLI if pl.fraction_milli else None)
