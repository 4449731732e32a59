"""The occupancy of a cluster while a plan is built: one array-backed state for every planner.

:class:`ClusterState` keeps every quantity a placement rule needs in numpy arrays, one row per
node and one column per GPU slot: free CPU and memory, GPU mode, users, demand units in use,
shares and GPU memory, MIG masks and profile counts, tenants, isolation, power headroom. The
vectorised fleet heuristics read the arrays to screen every node at once
(:meth:`ClusterState.node_ok`, :meth:`ClusterState.whole_free`, ...); the greedy planner, the
schedulers and the reports ask for one node at a time (:meth:`ClusterState.fit`, in
:mod:`capplan.placement.core.fit`). Replicas are added and removed exactly (``sign=-1``), and
changes can be journalled and rolled back (gang placement tries a domain and undoes it). What
does not change while a plan is built (models, preset modes, power budgets, topology, eligibility)
is the base class :class:`~capplan.placement.core.fleet.FleetArrays`.

The independent validator never uses this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from capplan.model.plan import Assignment
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU
from capplan.placement.core import fit as _fit
from capplan.placement.core.fleet import BLOCKED as BLOCKED
from capplan.placement.core.fleet import FREE as FREE
from capplan.placement.core.fleet import KIND_MODE as KIND_MODE
from capplan.placement.core.fleet import MIG as MIG
from capplan.placement.core.fleet import MODE_CODE as MODE_CODE
from capplan.placement.core.fleet import MODE_NAME as MODE_NAME
from capplan.placement.core.fleet import SHARED as SHARED
from capplan.placement.core.fleet import UNLIMITED_W, FleetArrays
from capplan.placement.core.fleet import WHOLE as WHOLE
from capplan.placement.core.fleet import Placement as Placement
from capplan.placement.core.gpuview import GpuRows
from capplan.placement.core.migfit import MigFit
from capplan.placement.core.strand import StrandRule

_UNITS_PER_MILLI = UNITS_PER_GPU // MILLI
_NO_TENANT, _MIXED = -1, -2

# Why a replica does not fit on a node, in the order they are checked.
REASONS = ("model", "quota", "cpu", "memory", "gpu", "isolation", "power")


class ClusterState(FleetArrays):
    """Free capacity of every node, GPU and power domain (see the module docstring); the fleet's
    fixed description (models, preset modes, power domains, topology, eligibility) is the base class's.

    Parameters
    ----------
    problem
        The problem. Its running replicas are *not* applied (see :meth:`with_assignments`).
    """

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        nodes, n, g = self.nodes, self.n, self.g
        self.cpu, self.mem = self.cpu_cap.copy(), self.mem_cap.copy()
        self.mode = np.zeros((n, g), dtype=np.int8)
        self.users = np.zeros((n, g), dtype=np.int32)
        self.used = np.where(self.exists, 0, UNITS_PER_GPU).astype(np.int32)  # demand units in use per GPU
        self.frac = np.zeros((n, g), dtype=np.int32)  # milli in use by shares
        self.gmem = np.zeros((n, g), dtype=np.int64)  # GPU memory in use by shares (MiB)
        self.mig_mask = np.zeros((n, g), dtype=np.int64)
        self.prof_count = np.zeros((n, g, max(1, len(self.prof_index))), dtype=np.int16)
        self.free_whole = (self.exists & (self.fixed <= WHOLE)).sum(axis=1).astype(np.int64)
        # Tenants: an id per name; the arrays hold the one tenant of a node or GPU (or _MIXED),
        # the counters how many replicas each has (so that removals are exact).
        self.tenants: dict[str, int] = {}
        self.node_tenants: list[Counter[str]] = [Counter() for _ in nodes]
        self.gpu_tenants: dict[tuple[int, int], Counter[int]] = {}
        self.node_tenant = np.full(n, _NO_TENANT, dtype=np.int32)
        self.gpu_tenant = np.full((n, g), _NO_TENANT, dtype=np.int32)
        self.node_iso = np.zeros(n, dtype=np.int32)
        self.gpu_iso = np.zeros((n, g), dtype=np.int32)
        self.power_free = self.power_budget.copy()  # watts left per power domain (see FleetArrays)
        self._power_ver, self._head_at, self._head = 0, -1, self.power_free[:0]  # headroom() cache
        self._dom_cols = [np.ascontiguousarray(c) for c in self.node_dom.T]
        #: (topology domain, power domain) pairs per topology level (the cache of core/power.py's domain_room).
        self.power_pairs: dict[int, tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]]] = {}
        self.stamp = np.zeros(n, dtype=np.int64)  # bumped whenever a node changes (score caches)
        #: Bumped whenever capacity may have come back (a replica removed, a GPU's mode or MIG mask set
        #: directly): screens that only drop nodes as replicas are added stay valid while it is unchanged.
        self.released = 0
        #: Nodes touched, in order, since ``touched_base`` touches (kept short: cleared past a few per node), for
        #: caches that follow a few changes between uses (the greedy placer's kept orders of shares).
        self.touched: list[int] = []
        self.touched_base = 0
        self.journal: list[tuple[Workload, Demand, Placement]] | None = None
        self._depth = 0
        self._dirty: set[int] = set(range(n))
        self._frac_room = np.zeros(n, dtype=np.int64)
        self._mig_free = np.zeros(n, dtype=np.int64)
        self._gmem_room = np.zeros(n, dtype=np.int64)
        self.gpus = GpuRows(self)  # st.gpus[i][g]: one GPU's fields, read from the arrays
        self._migfit: MigFit | None = None

    # ----------------------------------------------------------- per-node summaries (greedy's screens)
    def touch(self, i: int) -> None:
        """Mark node ``i`` changed (its summaries are recomputed when next read)."""
        self.stamp[i] += 1
        self._dirty.add(i)
        if self._migfit is not None:
            self._migfit.dirty.add(i)
        self.touched.append(i)
        if len(self.touched) > 4 * self.n + 4096:
            self.touched_base += len(self.touched)
            self.touched.clear()

    def _summaries(self) -> None:
        if not self._dirty:
            return
        if len(self._dirty) <= 4:  # after one placement: cheaper in Python than as array operations
            for i in self._dirty:
                self._summary_of(i)
            self._dirty.clear()
            return
        rows = np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty))
        self._dirty.clear()
        ex, mode, fixed = self.exists[rows], self.mode[rows], self.fixed[rows]
        shared = ex & ((fixed < 0) | (fixed == SHARED)) & ((mode == FREE) | (mode == SHARED))
        self._frac_room[rows] = np.where(shared, MILLI - self.frac[rows], 0).max(axis=1)
        self._gmem_room[rows] = np.where(shared, self.gmem_cap[rows, None] - self.gmem[rows], 0).max(axis=1)
        mig = ex & ((fixed < 0) | (fixed == MIG)) & ((mode == FREE) | (mode == MIG)) & self._mig_ok[rows, None]
        free = self._slices[rows, None] - np.bitwise_count(self.mig_mask[rows]).astype(np.int64)
        self._mig_free[rows] = np.where(mig, free, 0).max(axis=1)

    def _summary_of(self, i: int) -> None:
        """:meth:`_summaries` for one node."""
        frac_room = mig_free = gmem_room = 0
        slices, mig_ok, cap = int(self._slices[i]), bool(self._mig_ok[i]), int(self.gmem_cap[i])
        for fixed, mode, frac, gmem, mask in zip(self.fixed[i].tolist(), self.mode[i].tolist(), self.frac[i].tolist(),
                                                 self.gmem[i].tolist(),
                                                 self.mig_mask[i].tolist()[: int(self.gpu_count[i])], strict=False):
            if fixed in (-1, SHARED) and mode in (FREE, SHARED):
                frac_room = max(frac_room, MILLI - frac)
                gmem_room = max(gmem_room, cap - gmem)
            if mig_ok and fixed in (-1, MIG) and mode in (FREE, MIG):
                mig_free = max(mig_free, slices - mask.bit_count())
        self._frac_room[i], self._mig_free[i], self._gmem_room[i] = frac_room, mig_free, gmem_room

    @property
    def frac_room(self) -> np.ndarray:
        """Per node, the largest free share (milli) of a GPU that may be time-sliced."""
        self._summaries()
        return self._frac_room

    @property
    def gmem_room(self) -> np.ndarray:
        """Per node, the most free GPU memory (MiB) of a GPU that may be time-sliced."""
        self._summaries()
        return self._gmem_room

    @property
    def migfit(self) -> MigFit:
        """Per GPU and node, the MIG profiles with a valid free start now (built at first use, then kept up to date)."""
        if self._migfit is None:
            self._migfit = MigFit(self)
        self._migfit.refresh()
        return self._migfit

    @cached_property
    def strand(self) -> StrandRule:
        """Which share placements strand a GPU's scarcer dimension (fixed by the problem; built at first use)."""
        return StrandRule(self)

    @property
    def mig_free(self) -> np.ndarray:
        """Per node, the most free MIG memory slices of a GPU that may be partitioned."""
        self._summaries()
        return self._mig_free

    # ----------------------------------------------------------------- queries
    def tenant_id(self, name: str) -> int:
        """Integer id of a tenant name."""
        return self.tenants.setdefault(name, len(self.tenants))

    def power_headroom(self, idx: np.ndarray) -> np.ndarray:
        """Watts still available to nodes ``idx`` (the tightest of their power domains)."""
        return np.asarray(self.headroom()[idx])

    def headroom(self) -> np.ndarray:
        """Watts still available to every node (the tightest of its power domains); recomputed for the
        whole fleet when a budget changed since the last call (read-only)."""
        if self._head_at != self._power_ver:
            cols = self._dom_cols
            head = self.power_free[cols[0]]
            for c in cols[1:]:
                np.minimum(head, self.power_free[c], out=head)
            self._head, self._head_at = head, self._power_ver
        return self._head

    def power_ok(self, i: int, new_gpus: int) -> bool:
        """Whether node ``i``'s power domains can feed ``new_gpus`` more busy GPUs."""
        need = new_gpus * int(self.tdp[i])
        return not need or int(self.power_free[self.node_dom[i]].min()) >= need

    def node_ok(self, w: Workload, idx: np.ndarray, count: int = 1) -> np.ndarray:
        """Mask over ``idx``: CPU, memory and node isolation allow ``count`` more replicas of ``w``."""
        ok = ((self.cpu[idx] >= count * w.cpu_milli) & (self.mem[idx] >= count * w.memory_mib)
              & self.node_tenant_ok(w, idx))
        if self.quota is not None and w.queue is not None:
            ok &= self.quota_ok(w, idx, count)
        return np.asarray(ok)

    def quota_ok(self, w: Workload, idx: np.ndarray, count: int = 1) -> np.ndarray:
        """Mask over ``idx``: ``count`` more replicas of ``w`` stay within its ClusterQueue's quotas."""
        if self.quota is None or w.queue is None:
            return np.ones(np.size(idx), dtype=bool)
        per = self.demands(w)[0]
        at = np.atleast_1d(idx)
        return self.quota.mask(w, at, [per[int(self.model_id[i])] for i in at.tolist()], count)

    def tenant_ok_at(self, w: Workload, i: int) -> bool:
        """Whether node isolation lets ``w`` join the replicas on node ``i`` (one node of :meth:`node_tenant_ok`)."""
        nt = int(self.node_tenant[i])
        return nt in (_NO_TENANT, self.tenants.get(w.tenant)) or (w.isolation != "node" and not self.node_iso[i])

    def gpu_tenant_ok_at(self, w: Workload, i: int, g: int) -> bool:
        """Whether tenant isolation lets ``w`` share GPU ``g`` of node ``i`` (one GPU of :meth:`gpu_tenant_ok`)."""
        gt = int(self.gpu_tenant[i, g])
        return gt in (_NO_TENANT, self.tenants.get(w.tenant)) or (w.isolation != "tenant" and not self.gpu_iso[i, g])

    def node_tenant_ok(self, w: Workload, idx: np.ndarray | int) -> np.ndarray:
        """Mask over ``idx``: node isolation lets ``w`` join the replicas already there."""
        t = self.tenant_id(w.tenant)
        nt = self.node_tenant[idx]
        alone = (nt == _NO_TENANT) | (nt == t)
        return np.asarray(alone | ((w.isolation != "node") & (self.node_iso[idx] == 0)))

    def gpu_tenant_ok(self, w: Workload, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) mask: sharing each GPU with ``w`` respects tenant isolation."""
        t = self.tenant_id(w.tenant)
        gt = self.gpu_tenant[idx]
        alone = (gt == _NO_TENANT) | (gt == t)
        return np.asarray(alone | ((w.isolation != "tenant") & (self.gpu_iso[idx] == 0)))

    def whole_free(self, idx: np.ndarray) -> np.ndarray:
        """(len(idx), G) mask of GPUs free for whole use."""
        return np.asarray(self.exists[idx] & (self.mode[idx] == FREE) & (self.fixed[idx] <= WHOLE))

    def fit(self, w: Workload, d: Demand, i: int) -> Placement | str:
        """Best placement of one replica of ``w`` on node ``i``, or the reason it does not fit (:data:`REASONS`)."""
        return _fit.fit_on_node(self, w, d, i)

    # ------------------------------------------------------------- journal
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
        journal, self.journal = self.journal, None  # the removals themselves are not journalled
        while len(journal) > mark:
            w, d, pl = journal.pop()
            self.apply(w, d, pl, -1)
        self.journal = journal
        self._close()

    def commit(self) -> None:
        """Keep the changes and close the innermost checkpoint."""
        self._close()

    def _close(self) -> None:
        self._depth -= 1
        if self._depth <= 0:
            self._depth, self.journal = 0, None

    # --------------------------------------------------------------- mutation
    def apply(self, w: Workload, d: Demand, pl: Placement, sign: int = 1) -> None:
        """Add (``sign=1``) or remove (``sign=-1``) one replica of ``w`` with demand ``d`` at ``pl``."""
        self.apply_many(w, d, [pl], sign)

    def apply_many(self, w: Workload, d: Demand, cs: list[Placement], sign: int = 1) -> None:
        """Add (``sign=1``) or remove (``sign=-1``) replicas of ``w`` with demand ``d``, all on one node."""
        if not cs:
            return
        if self.journal is not None:
            self.journal.extend((w, d, c) for c in cs)
        i, k = cs[0].node, sign * len(cs)
        t = self.tenant_id(w.tenant)
        self.touch(i)
        if sign < 0:
            self.released += 1
        if self.quota is not None:
            self.quota.apply(w, d, i, k)
        self.cpu[i] -= k * w.cpu_milli
        self.mem[i] -= k * w.memory_mib
        self.node_iso[i] += k * (w.isolation == "node")
        self.node_tenant[i] = _count(self.node_tenants[i], w.tenant, k, self.tenants)
        per_gpu: dict[int, list[int]] = {}  # GPU -> [replicas, milli of shares]
        for c in cs:
            for gi in c.gpus:
                acc = per_gpu.setdefault(gi, [0, 0])
                acc[0] += sign
                acc[1] += sign * c.fraction_milli
        iso = int(w.isolation == "tenant")
        mode = KIND_MODE.get(d.kind, WHOLE)
        pi = self.prof_index[d.profile.name] if d.profile is not None else 0
        turned = 0  # GPUs switched on (+) or off (-)
        # Python scalars per touched GPU: cheaper than array operations on one short row.
        for gi, (k_g, milli) in per_gpu.items():
            before = int(self.users[i, gi])
            self.users[i, gi] = after = before + k_g
            counter = self.gpu_tenants.get((i, gi))
            if counter is None:
                counter = self.gpu_tenants[(i, gi)] = Counter()
            self.gpu_tenant[i, gi] = _count(counter, t, k_g, None)
            self.gpu_iso[i, gi] += k_g * iso
            if d.kind == "whole":
                self.used[i, gi] += k_g * UNITS_PER_GPU
            elif d.kind == "fraction":
                self.frac[i, gi] += milli
                self.gmem[i, gi] += k_g * d.memory_mib
                self.used[i, gi] += milli * _UNITS_PER_MILLI
            else:
                self.prof_count[i, gi, pi] += k_g
                self.used[i, gi] += k_g * d.units
            if after == 0:
                self.mode[i, gi] = FREE
            elif sign > 0:
                self.mode[i, gi] = mode
            if (before == 0) != (after == 0):
                turned += 1 if after else -1
                if self.fixed[i, gi] <= WHOLE:
                    self.free_whole[i] -= 1 if after else -1
        if d.kind == "mig":
            assert d.profile is not None
            width = (1 << d.profile.memory_slices) - 1
            for c in cs:
                assert c.slot is not None
                self.mig_mask[i, c.gpus[0]] ^= width << c.slot.start
        if turned:
            self.power_free[self.node_dom[i]] -= turned * self.tdp[i]
            self.power_free[-1] = UNLIMITED_W
            self._power_ver += 1

    @classmethod
    def with_assignments(cls, problem: Problem, assignments: Sequence[Assignment]) -> ClusterState:
        """A state with ``assignments`` (e.g. a plan's, or ``problem.running``) already applied."""
        st = cls(problem)
        nodes = problem.cluster.nodes
        for a in assignments:
            w = problem.workload(a.workload)
            d = problem.demand_on(w, nodes[problem.cluster.node_index[a.node]])
            assert d is not None
            st.place_assignment(w, d, a)
        return st

    def place_assignment(self, w: Workload, d: Demand, a: Assignment) -> Placement:
        """Apply an existing assignment (running state) to the occupancy."""
        pl = self.placement_of(a)
        self.apply(w, d, pl)
        return pl

    def placement_of(self, a: Assignment) -> Placement:
        """The placement of an assignment (not applied)."""
        return Placement(node=self.p.cluster.node_index[a.node], gpus=tuple(a.gpus), slot=a.mig,
                         fraction_milli=round(a.fraction * MILLI) if a.fraction else 0)

    def assignment(self, w: Workload, replica: int, pl: Placement) -> Assignment:
        """The plan assignment for a placement."""
        return Assignment(workload=w.name, replica=replica, node=self.nodes[pl.node].name, gpus=pl.gpus,
                          mig=pl.slot, fraction=pl.fraction_milli / MILLI if pl.fraction_milli else None)


def _count(counter: Counter[str] | Counter[int], key: str | int, sign: int, ids: dict[str, int] | None) -> int:
    """Add ``sign`` to ``counter[key]``; the one key left with users (its id), none, or _MIXED."""
    c: Counter[object] = counter  # type: ignore[assignment]
    c[key] += sign
    if c[key] <= 0:
        del c[key]
    if not c:
        return _NO_TENANT
    if len(c) > 1:
        return _MIXED
    only = next(iter(c))
    return ids[only] if ids is not None else int(only)  # type: ignore[index,call-overload]

