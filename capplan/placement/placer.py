"""The greedy placer: replicas of one workload on the best-fit nodes, gangs in one topology domain and on one
GPU model.

:class:`GreedyPlacer` places a group of replicas (all or nothing for a gang), inside the single domain of a
required level that fits them most tightly (:meth:`GreedyPlacer.place_in_one_domain`), or, for a gang on one
GPU model, in the domain and model that leave the fewest free GPUs (:meth:`GreedyPlacer.place_gang_best_fit`);
:func:`place_workload` applies a workload's gang, GPU-model and topology rules. The greedy planner
(:mod:`capplan.placement.greedy`), the schedulers and the repairs of other strategies use them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.placement.core.power import domain_room
from capplan.placement.core.reasons import room_estimate
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.nodefill import NodeFill

#: Most domains tried for a workload tied to one domain once one has held it.
_DOMAIN_TRIES = 8

class GreedyPlacer(NodeFill):
    """Constructive placement on a :class:`ClusterState`; reused by other planners for repair.

    Replicas of one workload are identical, so the best-fit order of the candidate nodes is computed
    once per group of replicas and walked: each node is filled until it takes no more (placing on the
    best node keeps it the best, and no other node changes), which is what asking for the best node
    replica by replica gives, at one array pass per workload. The order is
    :class:`~capplan.placement.bestfit.BestFitOrder`'s, the filling of one node
    :class:`~capplan.placement.nodefill.NodeFill`'s.

    Parameters
    ----------
    p, st
        The problem and the occupancy to fill.
    deadline
        Optional: when it expires, domain searches stop trying further domains (the caller checks it
        between workloads and reports the workloads it did not try).
    """

    def __init__(self, p: Problem, st: ClusterState, deadline: Deadline | None = None) -> None:
        super().__init__(p, st)
        self.deadline = deadline
        self._levels: dict[str, tuple[np.ndarray, list[str], dict[str, int]]] = {}

    def place_group(self, w: Workload, n: int, within: np.ndarray | None, all_or_nothing: bool,
                    prefer: set[str] | None = None) -> list[Placement]:
        """Place up to ``n`` replicas (a share's in :meth:`tiers` walks); with ``all_or_nothing`` roll back unless
        all fit."""
        lvl = w.topology.preferred
        done: list[Placement] = []
        pref = set(prefer or ())
        try:
            for keep in self.tiers(w):
                self.keep_room = keep
                while len(done) < n:
                    grown = False
                    for i in self.ordered(w, within, pref if lvl else None):
                        if self._fill(w, i, n, done) and lvl:
                            dom = self.p.cluster.domain_of(self.st.nodes[i], lvl)
                            if dom not in pref:  # the order changes: nodes of this domain come first now
                                pref.add(dom)
                                grown = True
                        if len(done) == n or grown:
                            break
                    if not grown:
                        break
        finally:
            self.keep_room = False
        if all_or_nothing and len(done) < n:
            self.undo(w, done)
            return []
        return done

    def domain_leftover(self, nodes: np.ndarray) -> int:
        """Free whole GPUs left in a set of nodes (smaller means a tighter fit)."""
        return int(self.st.free_whole[nodes].sum())

    def _domains(self, level: str) -> tuple[np.ndarray, list[str], dict[str, int]]:
        """Domain id per node, domain names and the id of each name, for topology ``level`` (cached)."""
        hit = self._levels.get(level)
        if hit is None:
            st = self.st
            if level == self.p.cluster.levels[-1]:
                ids, names = np.arange(st.n, dtype=np.int64), [x.name for x in st.nodes]
            else:
                ids, names = st.domain_ids(level)
            hit = self._levels[level] = (ids, names, {nm: k for k, nm in enumerate(names)})
        return hit

    def _ranking(self, w: Workload, n: int, level: str, fixed_domain: str | None, all_or_nothing: bool,
                 within: np.ndarray | None) -> _Ranking | None:
        """The domains of ``level`` that may hold the replicas, best first (see :meth:`place_in_one_domain`)."""
        st = self.st
        ids, names, pos = self._domains(level)
        idx, _ = st.eligible(w)
        if within is not None:
            idx = self._inside(idx, within)
        if fixed_domain is not None:
            idx = idx[ids[idx] == pos[fixed_domain]]
        if idx.size == 0:
            return None
        ok = st.node_ok(w, idx)
        room = np.where(ok, np.minimum(room_estimate(st, w, idx), n), 0)
        cap = domain_room(st, w, idx, room, ids, len(names))
        scope = np.arange(st.n, dtype=np.int64) if within is None else within
        free = np.bincount(ids[scope], weights=st.free_whole[scope], minlength=len(names)).astype(np.int64)
        est_n = np.minimum(cap, n)
        if w.gpus is not None:
            est_left = free - est_n * w.gpus
        elif w.has_gpu_demand:  # a slice or share turns at most one free GPU busy
            est_left = np.maximum(free - est_n, 0)
        else:
            est_left = free
        has = np.zeros(len(names), dtype=bool)
        has[ids[idx]] = True
        cand = np.flatnonzero(has & (est_n >= (n if all_or_nothing else 1)))
        if fixed_domain is not None:
            cand = np.array([pos[fixed_domain]], dtype=np.int64)
        order = cand[np.lexsort((cand, est_left[cand], -est_n[cand]))].tolist()
        return _Ranking(idx, ids, scope, est_n, est_left, order)

    def place_in_one_domain(self, w: Workload, n: int, level: str, fixed_domain: str | None,
                            all_or_nothing: bool, within: np.ndarray | None = None) -> list[Placement]:
        """Place replicas of ``w`` inside the single domain of ``level`` that fits them most tightly.

        Domains are ranked by an optimistic estimate (replicas that fit by CPU, memory, free whole GPUs and
        the power budgets over them, :func:`~capplan.placement.core.power.domain_room`; then the free whole
        GPUs left) and tried in that order, skipping those whose estimate cannot hold an all-or-nothing group (under
        binding power budgets most racks cannot, and trying each cost a failed trial per gang); the search
        stops at a domain whose trial meets its estimate (no later domain can do better), or after a few tries.
        """
        r = self._ranking(w, n, level, fixed_domain, all_or_nothing, within)
        if r is None:
            return []
        idx, ids, scope, est_n, est_left = r.idx, r.ids, r.scope, r.est_n, r.est_left
        best: tuple[tuple[int, int], int] | None = None
        kept: list[Placement] = []  # the best trial stays applied while it may be the last one
        for tries, dom in enumerate(r.order):
            est = (-int(est_n[dom]), int(est_left[dom]))
            if best is not None and (best[0] <= est or tries >= _DOMAIN_TRIES
                                     or (self.deadline is not None and self.deadline.expired())):
                break  # no domain left can beat the best (estimates are optimistic), or enough tries
            self.undo(w, kept)
            kept = []
            trial = self.place_group(w, n, idx[ids[idx] == dom], all_or_nothing)
            if trial:
                key = (-len(trial), self.domain_leftover(scope[ids[scope] == dom]))
                if best is None or key < best[0]:
                    best, kept = (key, dom), trial
                else:
                    self.undo(w, trial)
                if len(trial) == n and key[1] == 0:
                    break
        if best is None:
            return []
        if kept:
            return kept
        return self.place_group(w, n, idx[ids[idx] == best[1]], all_or_nothing)

    def place_gang_best_fit(self, w: Workload, n: int, level: str,
                            options: list[tuple[tuple[int, ...], np.ndarray]]) -> list[Placement]:
        """Place gang ``w`` (all ``n`` replicas) in one domain of ``level`` on one GPU model: over every model's
        domains at once (``options``: a tie-break key and the model's nodes, sorted), the domain that holds it
        with the fewest free whole GPUs of the model left (best fit), tried in that order until one holds it."""
        entries: list[tuple[tuple[int, ...], int, int, _Ranking]] = []
        for k, (tie, within) in enumerate(options):
            r = self._ranking(w, n, level, None, True, within)
            if r is not None:
                entries += [((_fit_key(r, dom, tie)), k, dom, r) for dom in r.order]
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
        for tries, (_, _, dom, r) in enumerate(entries):
            if tries >= _DOMAIN_TRIES or (tries and self.deadline is not None and self.deadline.expired()):
                break
            trial = self.place_group(w, n, r.idx[r.ids[r.idx] == dom], True)
            if len(trial) == n:
                return trial
        return []


@dataclass
class _Ranking:
    """Domains ranked for one workload: its candidate nodes, domain id per node, the nodes counted for the
    leftover, the estimated replicas and free whole GPUs left per domain, and the domains in order."""

    idx: np.ndarray
    ids: np.ndarray
    scope: np.ndarray
    est_n: np.ndarray
    est_left: np.ndarray
    order: list[int]


def _fit_key(r: _Ranking, dom: int, tie: tuple[int, ...]) -> tuple[int, ...]:
    """Best fit first: the fewest free whole GPUs left in the domain (of the model), then ``tie``."""
    return (int(r.est_left[dom]), *tie)


def place_workload(placer: GreedyPlacer, w: Workload, n: int, running: list[Assignment],
                   within: np.ndarray | None = None, best_fit: bool = False) -> list[Placement]:
    """Place ``n`` more replicas of ``w`` by its gang, GPU-model and topology rules (inside ``within`` nodes,
    sorted, when given).

    ``running`` are its replicas already placed (they fix the required domain and, for a gang
    that must stay on one GPU model, the model). ``best_fit``: a gang on one model bound to a domain goes to
    the domain and model that hold it with the fewest free whole GPUs of the model left
    (:meth:`GreedyPlacer.place_gang_best_fit`) rather than to the model with the fewest free GPUs overall.
    """
    p, st = placer.p, placer.st
    if not w.one_model:
        return _place_within(placer, w, n, running, within)
    models = {p.cluster.nodes[p.cluster.node_index[a.node]].gpu_model for a in running}
    per = st.eligible(w)[1]
    options = sorted((m for m in per if m is not None and (not models or m in models)),
                     key=lambda m: (per[m].units, m))
    scope = {m: st.model_nodes[m] if within is None else placer._inside(st.model_nodes[m], within)
             for m in options}
    options = [m for m in options if scope[m].size]
    if best_fit and w.topology.required and not running and w.gpus is not None:
        return placer.place_gang_best_fit(w, n, w.topology.required, [((per[m].units,), scope[m]) for m in options])
    if w.gpus is not None:
        # each GPU model on its own; keep the one holding least, then leaving the fewest free whole GPUs of the
        # model: a gang takes n x gpus whole GPUs wherever it goes, so the order is known before any trial and
        # the first model whose trial holds the gang is the one the trials of all would choose
        order = sorted(options, key=lambda m: (per[m].units, int(st.free_whole[scope[m]].sum())))
        for m in order:
            got = _place_within(placer, w, n, running, scope[m])
            if len(got) == n:
                return got
            placer.undo(w, got)
        return []
    best: tuple[tuple[int, int], str] | None = None
    for m in options:  # each GPU model on its own; keep the one holding least, then fitting tightest
        trial = _place_within(placer, w, n, running, scope[m])
        if len(trial) == n:
            key = (per[m].units, placer.domain_leftover(scope[m]))
            if best is None or key < best[0]:
                best = (key, m)
        placer.undo(w, trial)
    if best is None:
        return []
    return _place_within(placer, w, n, running, scope[best[1]])


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
