"""Vectorised occupancy of a whole fleet: one numpy row per node, one column per GPU slot.

:class:`FleetState` keeps every quantity a placement rule needs (free CPU and memory, GPU mode,
used share, GPU memory, MIG masks and profile counts, tenants, isolation, power headroom) in
arrays, so the feasibility of one replica on *every* node is a handful of array operations
instead of a Python loop over nodes. Changes can be journalled and rolled back, which gang
placement uses to try a domain and undo it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU, gib_to_mib

FREE, WHOLE, SHARED, MIG = 0, 1, 2, 3
_MODE = {"whole": WHOLE, "shared": SHARED, "mig": MIG}
_UNITS_PER_MILLI = UNITS_PER_GPU // MILLI
_NO_TENANT, _MIXED = -1, -2


@dataclass(frozen=True)
class Choice:
    """One replica's placement: node index, GPU indices and MIG slot or fraction (milli)."""

    node: int
    gpus: tuple[int, ...] = ()
    slot: MigSlot | None = None
    fraction_milli: int = 0


class FleetState:
    """Free capacity of every node and GPU as numpy arrays (see the module docstring).

    Parameters
    ----------
    p
        The problem; its running replicas are applied at construction.
    """

    def __init__(self, p: Problem) -> None:
        self.p = p
        cl = p.cluster
        nodes = cl.nodes
        n = len(nodes)
        g = max((x.gpus for x in nodes), default=0) or 1
        self.n, self.g = n, g
        self.model_names: list[str | None] = [*sorted({x.gpu_model for x in nodes if x.gpu_model}), None]
        mid = {m: i for i, m in enumerate(self.model_names)}
        self.model_id = np.array([mid[x.gpu_model if x.gpu_model and x.gpus else None] for x in nodes],
                                 dtype=np.int64)
        models = [p.catalog.get(m) if m else None for m in self.model_names]
        self.models = models
        self.cpu = np.array([x.cpu_milli for x in nodes], dtype=np.int64)
        self.mem = np.array([x.memory_mib for x in nodes], dtype=np.int64)
        self.cpu_cap, self.mem_cap = self.cpu.copy(), self.mem.copy()
        self.gpu_count = np.array([x.gpus for x in nodes], dtype=np.int64)
        cols = np.arange(g)
        self.exists = cols[None, :] < self.gpu_count[:, None]
        self.fixed = np.full((n, g), -1, dtype=np.int8)
        self.layouts: dict[tuple[int, int], tuple[MigSlot, ...]] = {}
        for i, x in enumerate(nodes):
            for gm in x.gpu_modes:
                self.fixed[i, gm.gpu] = _MODE[gm.mode]
                if gm.layout is not None:
                    self.layouts[(i, gm.gpu)] = gm.layout
        self.mode = np.zeros((n, g), dtype=np.int8)
        self.users = np.zeros((n, g), dtype=np.int32)
        self.used = np.where(self.exists, 0, UNITS_PER_GPU).astype(np.int32)  # units in use per GPU
        self.frac = np.zeros((n, g), dtype=np.int32)  # milli in use by shares
        self.gmem = np.zeros((n, g), dtype=np.int64)  # GPU memory in use by shares (MiB)
        self.mig_mask = np.zeros((n, g), dtype=np.int64)
        self.gpu_tenant = np.full((n, g), _NO_TENANT, dtype=np.int32)
        self.gpu_iso = np.zeros((n, g), dtype=np.int32)
        self.node_tenant = np.full(n, _NO_TENANT, dtype=np.int32)
        self.node_iso = np.zeros(n, dtype=np.int32)
        cap = [gib_to_mib(m.memory_gib) if m and m.memory_gib else 0 for m in models]
        self.gmem_cap = np.array(cap, dtype=np.int64)[self.model_id]
        self.tdp = np.array([(m.tdp_w or 0) if m else 0 for m in models], dtype=np.int64)[self.model_id]
        prof_names = sorted({pr.name for m in models if m for pr in m.profiles})
        self.prof_index = {name: i for i, name in enumerate(prof_names)}
        self.prof_count = np.zeros((n, g, max(1, len(prof_names))), dtype=np.int16)
        self.free_whole = (self.exists & (self.fixed <= WHOLE)).sum(axis=1).astype(np.int64)
        # Power: domains with a budget; column D (a sentinel) has unlimited headroom.
        budgets = [(d.level, d.name, d.power_w) for d in cl.domains if d.power_w is not None]
        didx = {(lv, nm): i for i, (lv, nm, _) in enumerate(budgets)}
        self.power_free = np.array([b for _, _, b in budgets] + [np.iinfo(np.int64).max // 4], dtype=np.int64)
        sentinel = len(budgets)
        lv = max(1, len(cl.levels) - 1)
        self.node_dom = np.full((n, lv), sentinel, dtype=np.int64)
        for i, x in enumerate(nodes):
            for j, (level, dom) in enumerate(zip(cl.levels[:-1], x.path, strict=False)):
                self.node_dom[i, j] = didx.get((level, dom), sentinel)
        self.stamp = np.zeros(n, dtype=np.int64)  # bumped whenever a node changes (score caches)
        self.tenants: dict[str, int] = {}
        self.journal: list[tuple[int, tuple[np.ndarray, ...], np.ndarray]] | None = None
        self._depth = 0
        for a in p.running:
            w = p.workload(a.workload)
            i = cl.node_index[a.node]
            d = p.can_host(w, nodes[i])
            assert d is not None
            self.apply(w, d, Choice(node=i, gpus=tuple(a.gpus), slot=a.mig,
                                    fraction_milli=round(a.fraction * MILLI) if a.fraction else 0))

    # ----------------------------------------------------------------- helpers
    def tenant_id(self, name: str) -> int:
        """Integer id of a tenant name."""
        return self.tenants.setdefault(name, len(self.tenants))

    def power_headroom(self, idx: np.ndarray) -> np.ndarray:
        """Watts still available to nodes ``idx`` (the tightest of their power domains)."""
        return np.asarray(self.power_free[self.node_dom[idx]].min(axis=1))

    def node_ok(self, w: Workload, idx: np.ndarray, count: int = 1) -> np.ndarray:
        """Mask over ``idx``: CPU, memory and node isolation allow ``count`` more replicas of ``w``."""
        t = self.tenant_id(w.tenant)
        nt = self.node_tenant[idx]
        alone = (nt == _NO_TENANT) | (nt == t)
        iso_ok = alone | ((w.isolation != "node") & (self.node_iso[idx] == 0))
        return np.asarray((self.cpu[idx] >= count * w.cpu_milli) & (self.mem[idx] >= count * w.memory_mib) & iso_ok)

    def gpu_tenant_ok(self, w: Workload, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) mask: sharing each GPU with ``w`` respects tenant isolation."""
        t = self.tenant_id(w.tenant)
        gt = self.gpu_tenant[idx]
        alone = (gt == _NO_TENANT) | (gt == t)
        return np.asarray(alone | ((w.isolation != "tenant") & (self.gpu_iso[idx] == 0)))

    def whole_free(self, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) mask of GPUs free for whole use."""
        return np.asarray(self.exists[idx] & (self.mode[idx] == FREE) & (self.fixed[idx] <= WHOLE))

    # --------------------------------------------------------------- mutation
    def checkpoint(self) -> int:
        """Start journalling (nested calls allowed); returns a mark for :meth:`rollback`.

        Every checkpoint is closed by exactly one :meth:`rollback` or :meth:`commit`.
        """
        if self.journal is None:
            self.journal = []
        self._depth += 1
        return len(self.journal)

    def rollback(self, mark: int) -> None:
        """Undo every change made after ``mark`` and close its checkpoint."""
        assert self.journal is not None
        while len(self.journal) > mark:
            i, rows, power = self.journal.pop()
            self._set_rows(i, rows)
            self.power_free[:] = power
        self._close()

    def commit(self) -> None:
        """Keep the changes and close the innermost checkpoint."""
        self._close()

    def _close(self) -> None:
        self._depth -= 1
        if self._depth <= 0:
            self._depth, self.journal = 0, None

    def _rows(self, i: int) -> tuple[np.ndarray, ...]:
        return (self.cpu[i:i + 1].copy(), self.mem[i:i + 1].copy(), self.node_tenant[i:i + 1].copy(),
                self.node_iso[i:i + 1].copy(), self.free_whole[i:i + 1].copy(), self.mode[i].copy(),
                self.users[i].copy(), self.used[i].copy(), self.frac[i].copy(), self.gmem[i].copy(),
                self.mig_mask[i].copy(), self.gpu_tenant[i].copy(), self.gpu_iso[i].copy(),
                self.prof_count[i].copy())

    def _set_rows(self, i: int, r: tuple[np.ndarray, ...]) -> None:
        self.stamp[i] += 1
        (self.cpu[i], self.mem[i], self.node_tenant[i], self.node_iso[i], self.free_whole[i]) = (
            r[0][0], r[1][0], r[2][0], r[3][0], r[4][0])
        self.mode[i], self.users[i], self.used[i], self.frac[i], self.gmem[i] = r[5], r[6], r[7], r[8], r[9]
        self.mig_mask[i], self.gpu_tenant[i], self.gpu_iso[i], self.prof_count[i] = r[10], r[11], r[12], r[13]

    def apply(self, w: Workload, d: Demand, c: Choice) -> None:
        """Add one replica of ``w`` with demand ``d`` at ``c``."""
        i = c.node
        if self.journal is not None:
            self.journal.append((i, self._rows(i), self.power_free.copy()))
        t = self.tenant_id(w.tenant)
        self.stamp[i] += 1
        self.cpu[i] -= w.cpu_milli
        self.mem[i] -= w.memory_mib
        nt = self.node_tenant[i]
        self.node_tenant[i] = t if nt in (_NO_TENANT, t) else _MIXED
        self.node_iso[i] += w.isolation == "node"
        new_gpus = 0
        for gi in c.gpus:
            new_gpus += int(self.users[i, gi] == 0)
            if self.users[i, gi] == 0 and self.fixed[i, gi] <= WHOLE:
                self.free_whole[i] -= 1
            self.users[i, gi] += 1
            gt = self.gpu_tenant[i, gi]
            self.gpu_tenant[i, gi] = t if gt in (_NO_TENANT, t) else _MIXED
            self.gpu_iso[i, gi] += w.isolation == "tenant"
            if d.kind == "whole":
                self.mode[i, gi] = WHOLE
                self.used[i, gi] = UNITS_PER_GPU
            elif d.kind == "fraction":
                self.mode[i, gi] = SHARED
                self.frac[i, gi] += c.fraction_milli
                self.gmem[i, gi] += d.memory_mib
                self.used[i, gi] += c.fraction_milli * _UNITS_PER_MILLI
            else:
                assert d.profile is not None and c.slot is not None
                self.mode[i, gi] = MIG
                self.mig_mask[i, gi] |= ((1 << d.profile.memory_slices) - 1) << c.slot.start
                self.prof_count[i, gi, self.prof_index[d.profile.name]] += 1
                self.used[i, gi] += d.units
        if new_gpus:
            self.power_free[self.node_dom[i]] -= new_gpus * self.tdp[i]
            self.power_free[-1] = np.iinfo(np.int64).max // 4

    def apply_many(self, w: Workload, d: Demand, cs: list[Choice]) -> None:
        """Add several replicas of ``w`` on one node at once (same effect as :meth:`apply` for each)."""
        if not cs:
            return
        i = cs[0].node
        if self.journal is not None:
            self.journal.append((i, self._rows(i), self.power_free.copy()))
        k = len(cs)
        t = self.tenant_id(w.tenant)
        self.stamp[i] += 1
        self.cpu[i] -= k * w.cpu_milli
        self.mem[i] -= k * w.memory_mib
        nt = self.node_tenant[i]
        self.node_tenant[i] = t if nt in (_NO_TENANT, t) else _MIXED
        self.node_iso[i] += k * (w.isolation == "node")
        cnt: dict[int, int] = {}
        for c in cs:
            for gi in c.gpus:
                cnt[gi] = cnt.get(gi, 0) + 1
        iso = int(w.isolation == "tenant")
        mode = _MODE["whole" if d.kind == "whole" else "shared" if d.kind == "fraction" else "mig"]
        pi = self.prof_index[d.profile.name] if d.profile is not None else 0
        new_gpus = 0
        # Python scalars per touched GPU: cheaper than array operations on one short row.
        for gi, k_g in cnt.items():
            if self.users[i, gi] == 0:
                new_gpus += 1
                if self.fixed[i, gi] <= WHOLE:
                    self.free_whole[i] -= 1
            self.users[i, gi] += k_g
            gt = self.gpu_tenant[i, gi]
            self.gpu_tenant[i, gi] = t if gt in (_NO_TENANT, t) else _MIXED
            self.gpu_iso[i, gi] += k_g * iso
            self.mode[i, gi] = mode
            if d.kind == "whole":
                self.used[i, gi] = UNITS_PER_GPU
            elif d.kind == "fraction":
                self.frac[i, gi] += k_g * cs[0].fraction_milli
                self.gmem[i, gi] += k_g * d.memory_mib
                self.used[i, gi] += k_g * cs[0].fraction_milli * _UNITS_PER_MILLI
            else:
                self.prof_count[i, gi, pi] += k_g
                self.used[i, gi] += k_g * d.units
        if d.kind == "mig":
            assert d.profile is not None
            width = (1 << d.profile.memory_slices) - 1
            for c in cs:
                assert c.slot is not None
                self.mig_mask[i, c.gpus[0]] |= width << c.slot.start
        if new_gpus:
            self.power_free[self.node_dom[i]] -= new_gpus * self.tdp[i]
            self.power_free[-1] = np.iinfo(np.int64).max // 4

    def assignment(self, w: Workload, replica: int, c: Choice) -> Assignment:
        """The plan assignment of a choice."""
        return Assignment(workload=w.name, replica=replica, node=self.p.cluster.nodes[c.node].name, gpus=c.gpus,
                          mig=c.slot, fraction=c.fraction_milli / MILLI if c.fraction_milli else None)
