"""Filling one node with replicas of one workload, as fitting them one by one would (the greedy placer's step).

:class:`NodeFill` extends the best-fit order (:class:`~capplan.placement.bestfit.BestFitOrder`) with the
placement of replicas on a node it yields: one replica (:meth:`NodeFill.place_one`), as many as a node takes
(a node's MIG slices, more shares on the GPU the last one took, whole GPUs and CPU-only pods in one step), and
their removal. :class:`~capplan.placement.greedy.GreedyPlacer` adds groups, gangs and topology domains.
"""

from __future__ import annotations

import numpy as np

from capplan.model.problem import Demand, Workload
from capplan.placement.bestfit import BestFitOrder
from capplan.placement.core.fit import fill_shares, fill_slices, fit_more, share_strands
from capplan.placement.core.state import FREE, WHOLE, Placement

#: Reasons a replica does not fit on a node that depend on other nodes too (power domains, quotas).
_NOT_LOCAL = ("power", "quota")


class NodeFill(BestFitOrder):
    """Replicas placed on the nodes of the best-fit order (see the module docstring).

    Parameters
    ----------
    p, st
        The problem and the occupancy to fill (:class:`~capplan.placement.bestfit.BestFitOrder`'s).
    """

    def tiers(self, w: Workload) -> tuple[bool, ...]:
        """The walks of the best-fit order a replica of ``w`` takes: for a share, when some placement may strand
        a GPU's scarcer dimension (:class:`~capplan.placement.core.strand.StrandRule`), first the nodes where it
        strands nothing (``keep_room``), then any node; else one walk. So a replica goes to the first node in
        the order with a GPU it leaves usable, and to the first one with room only when there is none."""
        return (True, False) if w.gpu_fraction is not None and self.st.strand.active else (False,)

    def place_one(self, w: Workload, within: np.ndarray | None = None,
                  prefer: set[str] | None = None) -> Placement | None:
        """Place one replica of ``w`` (optionally inside ``within`` nodes); None if it does not fit."""
        for keep in self.tiers(w):
            for i in self.ordered(w, within, prefer):
                d = self.st.demand_at(w, i)
                r = self.st.fit(w, d, i)
                if isinstance(r, Placement) and not (keep and share_strands(self.st, d, r)):
                    self.st.apply(w, d, r)
                    return r
        return None

    def undo(self, w: Workload, placed: list[Placement]) -> None:
        """Remove placements of ``w`` (in reverse order)."""
        for pl in reversed(placed):
            self.st.apply(w, self.st.demand_at(w, pl.node), pl, -1)

    def _fill(self, w: Workload, i: int, n: int, done: list[Placement]) -> int:
        """Place replicas of ``w`` on node ``i`` until ``done`` holds ``n`` or the node takes no more."""
        st = self.st
        d = st.demand_at(w, i)
        before = len(done)
        if d.kind == "mig" and st.quota is None:  # the node's slices in one step (every failure is local)
            got = fill_slices(st, w, d, i, n - len(done))
            st.apply_many(w, d, got)
            done.extend(got)
            if len(done) < n:
                self.remember(w, np.array([i], dtype=np.int64))
            return len(got)
        if d.kind == "fraction" and (st.quota is None or w.queue is None):
            return self._fill_shares(w, d, i, n, done)
        while len(done) < n:
            more = fit_more(st, w, d, done[-1], n - len(done)) if len(done) > before else []
            if more:  # the same GPU as the last replica: as fit would choose them, applied at once
                st.apply_many(w, d, more)
                done.extend(more)
                continue
            r = st.fit(w, d, i)
            if not isinstance(r, Placement):
                if r not in _NOT_LOCAL:
                    self.remember(w, np.array([i], dtype=np.int64))
                break
            if self.keep_room and d.kind == "fraction" and share_strands(st, d, r):
                break  # the best share here strands: not in this walk
            st.apply(w, d, r)
            done.append(r)
            if d.kind in ("whole", "none") and st.quota is None and len(done) < n:
                self._fill_whole(w, d, i, n, done)
        return len(done) - before

    def _fill_shares(self, w: Workload, d: Demand, i: int, n: int, done: list[Placement]) -> int:
        """Shares of ``w`` on node ``i`` until ``done`` holds ``n`` or the node takes no more, in one step
        (:func:`~capplan.placement.core.fit.fill_shares`: what fitting them one by one gives; while
        :attr:`keep_room`, only those that strand nothing). A node that
        takes no more is not remembered: the kept order of the shape screens it again (it changed)."""
        got, _ = fill_shares(self.st, w, d, i, n - len(done), self.keep_room)
        self.st.apply_many(w, d, got)
        done.extend(got)
        return len(got)

    def _fill_whole(self, w: Workload, d: Demand, i: int, n: int, done: list[Placement]) -> None:
        """After one replica of whole GPUs (or none) fit on node ``i``: as many more as fit there, in one step.

        The replicas :meth:`ClusterState.fit` would give one by one: the node passed its checks once (its
        tenant rule does not change with more of the same workload), so CPU, memory, free GPUs and the
        power headroom decide how many more fit, and each takes the next free GPUs in fit's order."""
        st = self.st
        k = n - len(done)
        if w.cpu_milli:
            k = min(k, int(st.cpu[i]) // w.cpu_milli)
        if w.memory_mib:
            k = min(k, int(st.mem[i]) // w.memory_mib)
        if d.kind == "none":  # CPU-only pods: CPU and memory alone
            if k > 0:
                got = [Placement(node=i)] * k
                st.apply_many(w, d, got)
                done.extend(got)
            return
        users, mode, fixed = st.users[i].tolist(), st.mode[i].tolist(), st.fixed[i].tolist()
        free = [g for g in range(int(st.gpu_count[i]))
                if users[g] == 0 and fixed[g] <= WHOLE and mode[g] in (FREE, WHOLE)]
        free.sort(key=lambda g: fixed[g] < 0)
        k = min(k, len(free) // max(d.gpus, 1))
        tdp = int(st.tdp[i])
        if tdp and d.gpus:
            k = min(k, int(st.power_free[st.node_dom[i]].min()) // (tdp * d.gpus))
        if k <= 0:
            return
        got = [Placement(node=i, gpus=tuple(sorted(free[j * d.gpus:(j + 1) * d.gpus]))) for j in range(k)]
        st.apply_many(w, d, got)
        done.extend(got)
