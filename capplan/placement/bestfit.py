"""The best-fit order of the greedy placer: candidate nodes for one workload's replicas, best first.

:class:`BestFitOrder` screens the nodes that may take a replica (CPU, memory, GPUs; a per-GPU screen for
slices and shares), ranks them by one integer key (best fit: fewest free whole GPUs left, least free CPU,
busy GPUs first for slices, for MIG the model where the instance takes the least of the GPU, a preferred
domain, CPU-only pods on CPU-only nodes) and yields them lazily, sorting the front of the order only
(``argpartition`` in chunks). Fit failures that depend on the node alone are remembered per fit shape until
the node changes (its stamp), so identical workloads do not try the same full nodes again.
:class:`~capplan.placement.greedy.GreedyPlacer` walks the order.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from capplan.model.catalog import GpuModel
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU, gib_to_mib
from capplan.placement.core.state import FREE, MIG, SHARED, ClusterState
from capplan.placement.shareorder import ShareOrder

#: Candidate nodes sorted at first (then four times as many at each further chunk).
_CHUNK = 32


class BestFitOrder:
    """Candidate nodes of a workload on a :class:`ClusterState`, best fit first (see the module docstring).

    Parameters
    ----------
    p, st
        The problem and the occupancy.
    """

    def __init__(self, p: Problem, st: ClusterState) -> None:
        self.p = p
        self.st = st
        # Per fit shape, the node's stamp when a replica last did not fit there for a reason local to the
        # node (the node has not changed since: it still does not fit; power and quotas depend on others).
        self._failed: dict[tuple[object, ...], np.ndarray] = {}
        self._masks: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # eligibility arrays as node masks
        # Per demand shape (tenants aside), the nodes that passed the screen and the state's release count then:
        # every test of the screen only fails more as replicas are added, so while nothing is released (a
        # replica removed, a GPU reset) the next screen need only look at those nodes: at fleet scale the full
        # nodes drop out once instead of being screened by every workload of the shape.
        self._alive: dict[tuple[object, ...], tuple[int, np.ndarray]] = {}
        # Per share shape, its candidates kept in best-fit order between workloads (see _share_order).
        self._shares: dict[tuple[object, ...], ShareOrder] = {}
        self._ranks: dict[int, tuple[object, np.ndarray]] = {}  # per MIG request (see _model_rank)

    #: While set (the greedy placer's first walk for a share, :meth:`~capplan.placement.nodefill.NodeFill.tiers`),
    #: the order yields only nodes with a GPU that takes the share without being stranded by it.
    keep_room = False

    def _inside(self, idx: np.ndarray, within: np.ndarray) -> np.ndarray:
        """The nodes of sorted ``idx`` (an eligibility array of the state's cache) that are in ``within``:
        a mask of ``idx`` read at ``within`` (a domain is small, the fleet large), sorted like ``idx``."""
        hit = self._masks.get(id(idx))
        if hit is None or hit[0] is not idx:
            mask = np.zeros(self.st.n, dtype=bool)
            mask[idx] = True
            hit = self._masks[id(idx)] = (idx, mask)
        out = within[hit[1][within]]
        return out if bool(np.all(out[1:] >= out[:-1])) else np.sort(out)

    @staticmethod
    def _fit_shape(w: Workload) -> tuple[object, ...]:
        """What :meth:`ClusterState.fit` looks at besides the node."""
        return (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.mig_strategy, w.cpu_milli, w.memory_mib,
                w.tenant, w.isolation, None if w.gpu_models is None else tuple(w.gpu_models), w.queue)

    def _screen(self, w: Workload, within: np.ndarray | None) -> np.ndarray:
        """Eligible nodes (inside ``within``) with room for CPU, memory and one replica's GPU demand.

        A necessary condition only (exact for whole GPUs, power and MIG slices, preset layouts included; GPU
        tenants are checked by :meth:`ClusterState.fit` when a node is tried). Power is screened here
        because a failure on power is not remembered (it depends on other nodes): without the screen every
        workload would try each node of a full power domain again."""
        st = self.st
        idx, _ = st.eligible(w)
        key: tuple[object, ...] | None = None
        if within is not None:
            idx = self._inside(idx, within)
        else:  # the nodes that passed last time, while nothing was released since (see _alive)
            key = (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.mig_strategy, w.cpu_milli, w.memory_mib,
                   None if w.gpu_models is None else tuple(w.gpu_models), w.queue, w.tolerations)
            hit = self._alive.get(key)
            if hit is not None and hit[0] == st.released:
                idx = hit[1]
        if idx.size == 0:
            return idx
        ok = (st.cpu[idx] >= w.cpu_milli) & (st.mem[idx] >= w.memory_mib)
        budgets = st.power_budget.size > 1  # without power budgets (only the sentinel) every draw fits
        if w.gpus is not None:
            ok &= st.free_whole[idx] >= w.gpus
            if w.gpus and budgets and st.tdp[idx].any():  # power_ok exactly: each replica turns w.gpus idle GPUs on
                ok &= (st.tdp[idx] == 0) | (st.power_headroom(idx) >= w.gpus * st.tdp[idx])
        elif w.gpu_fraction is not None:
            ok &= st.frac_room[idx] >= round(w.gpu_fraction * 1000)
            if w.gpu_memory_gib:  # a GPU with the share free and one with the memory free (maybe not the same)
                ok &= st.gmem_room[idx] >= gib_to_mib(w.gpu_memory_gib)
        elif w.mig is not None:
            fit = st.migfit  # exactly: some GPU has a valid free start for the profile (tenants and power aside)
            want = fit.want(st.demands(w)[0])[st.model_id[idx]]
            ok &= (want == 0) | ((fit.node[idx] & want) != 0)
        if w.has_gpu_demand and w.gpus is None and budgets and st.tdp[idx].any():
            # a slice or share turns on an idle GPU (its draw) or joins a busy one (no budget overdrawn)
            head, tdp = st.power_headroom(idx), st.tdp[idx]
            ok &= (tdp == 0) | (head >= tdp) | ((head >= 0) & (st.users[idx] > 0).any(axis=1))
        out = np.asarray(idx[ok])
        if key is not None:
            self._alive[key] = (st.released, out)
        failed = self._failed.get(self._fit_shape(w))  # per tenant too: not kept in _alive
        if failed is not None and out.size:
            out = out[failed[out] != st.stamp[out]]
        return out

    def remember(self, w: Workload, nodes: np.ndarray) -> None:
        """``w`` does not fit on ``nodes`` as they stand (for a reason local to each node): they are left out
        of its candidates until they change."""
        if nodes.size == 0:
            return
        key = self._fit_shape(w)
        failed = self._failed.get(key)
        if failed is None:
            failed = self._failed[key] = np.full(self.st.n, -1, dtype=np.int64)
        failed[nodes] = self.st.stamp[nodes]

    def _gpu_screen(self, w: Workload, part: np.ndarray) -> np.ndarray:
        """Mask over nodes ``part``: some GPU may take one slice or share of ``w`` (its mode, tenants, free
        memory slices or share and GPU memory); a necessary condition, checked on a chunk of candidates."""
        st = self.st
        want = MIG if w.mig is not None else SHARED
        fixed, mode = st.fixed[part], st.mode[part]
        ok = st.exists[part] & ((fixed < 0) | (fixed == want)) & ((mode == FREE) | (mode == want))
        ok &= (st.users[part] == 0) | st.gpu_tenant_ok(w, part)
        if w.mig is not None:
            per = st.demands(w)[0]
            need = np.array([d.profile.memory_slices if d is not None and d.profile is not None else 0
                             for d in per], dtype=np.int64)[st.model_id[part]]
            slices = np.array([m.memory_slices if m is not None else 0 for m in st.models],
                              dtype=np.int64)[st.model_id[part]]
            ok &= (slices[:, None] - np.bitwise_count(st.mig_mask[part]).astype(np.int64)) >= need[:, None]
            fit = st.migfit
            want = fit.want(per)[st.model_id[part]][:, None]
            ok &= (want == 0) | ((fit.gpu[part] & want) != 0)
        else:
            d = st.demand_at(w, int(part[0])) if part.size else None
            if d is None:
                return np.zeros(0, dtype=bool)
            ok &= (st.frac[part] + d.fraction_milli <= MILLI) & (st.gmem[part] + d.memory_mib
                                                                 <= st.gmem_cap[part][:, None])
        return np.asarray(ok.any(axis=1))

    def _room_kept(self, w: Workload, part: np.ndarray) -> np.ndarray:
        """Mask over nodes ``part``: some GPU takes a share of ``w`` (:meth:`_gpu_screen`) without being stranded
        by it (:meth:`~capplan.placement.core.strand.StrandRule.strands`): the nodes of the first walk while
        :attr:`keep_room` (the others would place nothing in it; they are not remembered as failed)."""
        st = self.st
        d = st.demand_at(w, int(part[0])) if part.size else None
        if d is None:
            return np.zeros(0, dtype=bool)
        fixed, mode, frac, gmem = st.fixed[part], st.mode[part], st.frac[part], st.gmem[part]
        cap = st.gmem_cap[part][:, None]
        ok = st.exists[part] & ((fixed < 0) | (fixed == SHARED)) & ((mode == FREE) | (mode == SHARED))
        ok &= ((st.users[part] == 0) | st.gpu_tenant_ok(w, part))
        ok &= (frac + d.fraction_milli <= MILLI) & (gmem + d.memory_mib <= cap)
        ok &= ~st.strand.strands_many(st.model_id[part], MILLI - frac - d.fraction_milli, cap - gmem - d.memory_mib)
        return np.asarray(ok.any(axis=1))

    def keys(self, w: Workload, idx: np.ndarray, prefer: set[str] | None) -> np.ndarray:
        """One integer per node of ``idx``: best fit first (the most significant field first: CPU-only
        pods on CPU-only nodes, the MIG instance taking the least of the GPU (:meth:`_model_rank`), a preferred
        domain, nodes with busy GPUs for slices and shares, fewest free whole GPUs left, least free CPU)."""
        st = self.st
        key = np.zeros(idx.size, dtype=np.int64)

        def push(values: np.ndarray, bits: int) -> None:
            nonlocal key
            key = (key << bits) | np.minimum(np.maximum(values.astype(np.int64), 0), (1 << bits) - 1)  # np.clip

        if not w.has_gpu_demand:
            push(st.gpu_count[idx] > 0, 1)
        if w.mig is not None:
            push(self._model_rank(w)[st.model_id[idx]], 10)
        if prefer:
            lvl = w.topology.preferred
            assert lvl is not None
            ids, names = st.domain_ids(lvl)
            want = np.array([k for k, nm in enumerate(names) if nm in prefer], dtype=np.int64)
            push(~np.isin(ids[idx], want), 1)
        if w.gpus is None:
            push((st.gpu_count[idx] - st.free_whole[idx]) == 0, 1)
        push(st.free_whole[idx] - (w.gpus or 0), 12)
        push(st.cpu[idx], 31)
        return key

    def _model_rank(self, w: Workload) -> np.ndarray:
        """Per model id, the rank of the MIG instance ``w`` takes there (0 best): the smallest share of the GPU
        first (:func:`gpu_share`), then the least GPU memory.

        A 20 GiB ``mig: auto`` replica is one compute slice on H200 (1g.35gb) and on B200 (1g.23gb), but two of
        the H200's eight memory slices: four per GPU where the B200 takes seven, so its compute units alone
        would rank the two models equal. Between models of equal share the instance with the least memory
        serves best (a 10 GiB replica on an H100's 1g.10gb, not a B200's 1g.23gb, which a 20 GiB one needs)."""
        per = self.st.demands(w)[0]
        hit = self._ranks.get(id(per))  # the demand list is the state's, one per eligibility shape
        if hit is not None and hit[0] is per:
            return hit[1]
        keys = [(gpu_share(d, m), d.profile.memory_gib if d is not None and d.profile is not None else 0.0)
                for d, m in zip(per, self.st.models, strict=True)]
        order = sorted(set(keys))
        rank = np.array([order.index(k) for k in keys], dtype=np.int64)
        self._ranks[id(per)] = (per, rank)
        return rank

    def ordered(self, w: Workload, within: np.ndarray | None,
                prefer: set[str] | None = None) -> Iterator[int]:
        """Candidate nodes of ``w`` (inside ``within``), best fit first, computed lazily in chunks."""
        if w.gpu_fraction is not None and within is None and not prefer and self.st.n < 1 << 18:
            yield from self._share_order(w)
            return
        idx = self._screen(w, within)
        if idx.size == 0:
            return
        key = self.keys(w, idx, prefer)
        m = _CHUNK
        while idx.size:
            if idx.size > 2 * m:  # the m best: below the m-th key, then ties by node index (idx is sorted)
                kth = np.partition(key, m - 1)[m - 1]
                sel = key < kth
                sel[np.flatnonzero(key == kth)[: m - int(sel.sum())]] = True
            else:
                sel = np.ones(idx.size, dtype=bool)
            part, pkey = idx[sel], key[sel]
            part = part[np.lexsort((part, pkey))]
            if w.mig is not None or w.gpu_fraction is not None:
                fits = self._gpu_screen(w, part)
                self.remember(w, part[~fits])
                part = part[fits]
                if self.keep_room and w.gpu_fraction is not None:
                    part = part[self._room_kept(w, part)]
            yield from part.tolist()
            idx, key = idx[~sel], key[~sel]
            m *= 4

    def _share_order(self, w: Workload) -> Iterator[int]:
        """:meth:`ordered` for a share on the whole fleet, from an order kept per demand shape.

        Identical replicas of thousands of workloads ask the same few shapes, and a workload changes a few
        nodes: the shape's candidates (nodes where some GPU takes the share as far as its mode, share and GPU
        memory go, with CPU, memory and power as :meth:`_screen` has them) stay sorted by :meth:`_keys` between
        workloads, and only nodes changed since (their stamp, or the power headroom over them) are screened
        and placed again. The nodes dropped would fail :meth:`_gpu_screen`; the GPUs' tenants are checked as
        the walk comes to a node (the first few one by one, then in growing chunks), so the nodes yielded and
        their order are :meth:`ordered`'s. Nothing is remembered per tenant (:meth:`remember`): a node that
        fails on its GPUs' tenants is checked again by the next walk that reaches it (an array per shape and
        tenant, thousands of them, cost more), and a node that fills is screened again as it changed."""
        st = self.st
        idx, _ = st.eligible(w)
        if idx.size == 0:
            return
        key = (w.gpu_fraction, w.gpu_memory_gib, w.cpu_milli, w.memory_mib,
               None if w.gpu_models is None else tuple(w.gpu_models), w.queue, w.tolerations)
        order = self._shares.get(key)
        if order is None or order.eligible is not idx:
            order = self._shares[key] = ShareOrder(self, w, idx)
        else:
            order.update(self, w)
        comp, low = order.comp, order.low
        keep = self.keep_room
        if keep:  # the first walk: only nodes with a GPU the share does not strand
            if not order.kept:
                return
            if order.kept < comp.size:  # (the nodes that keep room are among those of the order)
                comp = comp[order.keeps[comp & low]]
        for i in (comp[:_ONE_BY_ONE] & low).tolist():  # most workloads take the first node or two
            if order.takes(w, i, keep):
                yield i
        lo, m = _ONE_BY_ONE, _CHUNK
        while lo < comp.size:
            part = comp[lo:lo + m] & low
            lo, m = lo + m, 4 * m
            yield from part[order.take(w, part, keep)].tolist()

    def candidates(self, w: Workload, within: np.ndarray | None, prefer: set[str] | None = None) -> list[int]:
        """Eligible nodes with room for CPU, memory and GPUs, best fit first."""
        return list(self.ordered(w, within, prefer))


def gpu_share(d: Demand | None, m: GpuModel | None) -> int:
    """The share of a GPU (demand units) one replica of demand ``d`` takes on a GPU of model ``m``: for a MIG
    instance the larger of its compute and memory slices as shares of the model's (0 where never eligible)."""
    if d is None:
        return 0
    if d.profile is None or m is None:
        return d.units
    return max(d.units, -(-d.profile.memory_slices * UNITS_PER_GPU // m.memory_slices))


#: Nodes of a share's kept order checked one at a time before the walk turns to chunks.
_ONE_BY_ONE = 4
