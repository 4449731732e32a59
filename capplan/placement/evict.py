"""Evictions for higher priority in the greedy planner (``allow_preemption``).

When a workload's replicas do not fit as the cluster stands, greedy looks for one place where stopping
lower-priority preemptible running replicas (or moving migratable ones, with ``allow_migration``) makes room
for them, in rounds by the priority of the replicas that may stop, lowest first (a place where only
priority-1 replicas stop, or migratable ones move, is tried before one where priority-5 replicas stop: plans
compare the higher priority first). The places are the domains of the
workload's required topology level (for a gang without one, of its preferred level; otherwise the eligible
nodes holding such replicas, as one group), tried in the order of the fewest GPUs to free, a few at most.
A trial:

1. takes every candidate victim in the place out and places the missing replicas there;
2. keeps as victims only those on the nodes that placement used, puts the others back, and places the
   replicas again on those nodes alone, with every replica that stays in place (so power budgets, quotas
   and node rules hold with what stays); failing that, the trial is undone;
3. puts back each victim of whole GPUs whose GPUs the new replicas left free, if its node still takes it;
   moves a migratable one elsewhere (greedy's best fit) and stops a preemptible one (never a guaranteed one:
   plans compare guaranteed replicas first).

An eviction is always on a node where a higher-priority replica now runs (the validator's rule). Members of
running gangs are never victims (a gang stops or moves whole: left to the exact strategies). Evicted
replicas are not placed again (that would be a migration); they are listed unplaced with the workload that
took their node. Deterministic: the order depends on the state and the input order only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.plan import Assignment
from capplan.model.problem import Demand, Problem, Workload
from capplan.placement.core.state import ClusterState, Placement

#: Places tried for one workload (each trial removes and restores its victims).
PLACE_TRIES = 4

Place = Callable[[Workload, int, list[Assignment], "np.ndarray | None"], list[Placement]]
"""Places up to ``n`` replicas of a workload (given its replicas already placed) inside some nodes."""


def _stoppable(w: Workload) -> bool:
    """Preemptible and not guaranteed: plans compare guaranteed replicas first, so stopping one never pays."""
    return w.preemptible and w.sla != "guaranteed"


@dataclass(frozen=True)
class Victim:
    """A running replica that may be evicted: its assignment, workload, demand and placement."""

    a: Assignment
    w: Workload
    d: Demand
    pl: Placement


class Evictor:
    """Makes room for a workload by evicting lower-priority preemptible running replicas (module docstring).

    Parameters
    ----------
    p, st
        The problem and the occupancy (the running replicas applied).
    place
        The greedy placement of a workload's replicas inside a set of nodes.
    deadline
        The run's deadline: no trial starts after it.
    allow_migration, moves_first
        Whether migratable replicas may move; whether a place where they move is tried along with the
        places where replicas only stop (True) or only after none of those works (False).
    allow_preemption
        Whether preemptible replicas may stop (with only ``allow_migration``, replicas only move).
    """

    def __init__(self, p: Problem, st: ClusterState, place: Place, deadline: Deadline,
                 allow_migration: bool = False, moves_first: bool = False, allow_preemption: bool = True) -> None:
        self.p, self.st, self.place, self.deadline = p, st, place, deadline
        self.allow_preemption, self.allow_migration, self.moves_first = allow_preemption, allow_migration, moves_first
        self.by_node: dict[int, list[Victim]] = {}
        for a in p.running:
            w = p.workload(a.workload)
            # a gang's member stops or moves only with the whole gang: left to the exact strategies
            if w.is_gang or not (self._stops(w) or self._migratable(w)):
                continue
            i = p.cluster.node_index[a.node]
            d = p.demand_on(w, p.cluster.nodes[i])
            assert d is not None
            self.by_node.setdefault(i, []).append(Victim(a, w, d, st.placement_of(a)))
        self._held_cache: dict[tuple[int, bool, int], np.ndarray] = {}
        self._cap = 0  # replicas below this priority may stop (the current round of make_room)
        #: The priorities of the replicas that may stop or move, lowest first (the rounds of :meth:`make_room`).
        self._tiers = sorted({v.w.priority for vs in self.by_node.values() for v in vs})
        #: Whether :meth:`make_room` was asked at all.
        self.tried = False
        #: (victim, the workload that took its node), in the order of the evictions.
        self.evicted: list[tuple[Victim, str]] = []
        #: (victim, its new placement, the workload that took its place), in the order of the moves.
        self.moved: list[tuple[Victim, Placement, str]] = []

    def __bool__(self) -> bool:
        return bool(self.by_node)

    def _may_go(self, v: Victim, priority: int, move: bool, cap: int) -> bool:
        """Whether ``v`` may make room for a replica of ``priority``: it stops (preemptible, below ``cap``) or,
        with ``move``, moves (migratable, below ``priority``)."""
        if v.w.priority >= priority:
            return False
        return (self._stops(v.w) and v.w.priority < cap) or (move and self._migratable(v.w))

    def _stops(self, w: Workload) -> bool:
        """May stop: preemption allowed, preemptible and not guaranteed."""
        return self.allow_preemption and _stoppable(w)

    def _migratable(self, w: Workload) -> bool:
        """May move: migration allowed, migratable and not tied to a domain."""
        return self.allow_migration and w.migratable and w.topology.required is None

    def _victims(self, nodes: np.ndarray, priority: int, move: bool) -> list[Victim]:
        """The replicas on ``nodes`` that may make room for a replica of ``priority`` in the current round
        (:meth:`_may_go`)."""
        return [v for i in nodes.tolist() for v in self.by_node.get(i, ())
                if self._may_go(v, priority, move, self._cap)]

    def _held(self, priority: int, move: bool) -> np.ndarray:
        """Per node, the GPUs held by its victims for a replica of ``priority`` in this round (an estimate: a GPU
        two victims share counts twice); kept up to date by :meth:`_forget`."""
        key = (priority, move, self._cap)
        hit = self._held_cache.get(key)
        if hit is None:
            hit = np.zeros(self.st.n, dtype=np.int64)
            for i, vs in self.by_node.items():
                hit[i] = sum(len(v.pl.gpus) for v in vs if self._may_go(v, priority, move, self._cap))
            self._held_cache[key] = hit
        return hit

    def _places(self, w: Workload, n: int, anchors: list[Assignment], move: bool) -> list[np.ndarray]:
        """Candidate node groups for ``w`` among the victims of the round, fewest GPUs to free first
        (at most :data:`PLACE_TRIES`).

        With a domain level (required, or preferred for a gang), its domains that could hold ``n`` replicas
        once their victims are gone; otherwise one group: the nodes with victims, fewest victims' GPUs first,
        until the group could hold ``n`` replicas."""
        st, p = self.st, self.p
        idx, _ = st.eligible(w)
        held_all = self._held(w.priority, move)
        held = idx[held_all[idx] > 0]
        if held.size == 0:
            return []
        g = w.gpus or 1
        level = w.topology.required or (w.topology.preferred if w.is_gang else None)
        if level is None or level == p.cluster.levels[-1]:
            room = (st.free_whole[held] + held_all[held]) // g if w.gpus else np.ones(held.size, dtype=np.int64)
            order = np.lexsort((held, -st.free_whole[held], held_all[held]))
            order = order[room[order] > 0]
            upto = int(np.searchsorted(np.cumsum(room[order]), n)) + 1
            group = np.sort(held[order[:upto]])
            return [group] if group.size else []
        ids, names = st.domain_ids(level)
        k = len(names)
        has = np.zeros(k, dtype=bool)
        has[ids[held]] = True
        free = np.bincount(ids[idx], weights=st.free_whole[idx], minlength=k).astype(np.int64)
        # replicas each node could take once its victims are gone (whole GPUs: per node, not pooled)
        per_node = (st.free_whole[idx] + held_all[idx]) // g
        room = np.bincount(ids[idx], weights=per_node, minlength=k).astype(np.int64)
        need = g * n
        ok = has & ((room >= n) if w.gpus else has)
        if anchors:  # replicas already placed fix the domain
            fixed = names.index(p.cluster.domain_of(p.cluster.nodes[p.cluster.node_index[anchors[0].node]], level))
            ok &= np.arange(k) == fixed
        doms = np.flatnonzero(ok)
        doms = doms[np.lexsort((doms, -free[doms], np.maximum(need - free[doms], 0)))][:PLACE_TRIES]
        return [idx[ids[idx] == d] for d in doms.tolist()]

    def _take_out(self, victims: list[Victim], sign: int) -> None:
        for v in victims:
            self.st.apply(v.w, v.d, v.pl, sign)

    def make_room(self, w: Workload, n: int, anchors: list[Assignment]) -> list[Placement]:
        """Place up to ``n`` more replicas of ``w`` (all of them for a gang) by evicting or moving lower-priority
        running replicas; [] if no trial works.

        ``anchors`` are ``w``'s replicas already placed. The evictions are added to :attr:`evicted`, the
        moves to :attr:`moved`."""
        self.tried = True
        # stops first unless moves_first: a replica moved elsewhere takes room that work of a priority between
        # the two may need; a stop loses the replica (plan_greedy tries both orders)
        rounds = (False,) if not self.allow_migration else (True,) if self.moves_first else (False, True)
        # the lowest priorities first: a place where only priority-1 replicas stop is tried before one where
        # priority-5 replicas stop too (plans compare the higher priority first)
        caps = [t + 1 for t in self._tiers if t + 1 < w.priority] + [w.priority]
        for cap in caps:
            for move in rounds:
                placed = self._make_room(w, n, anchors, move, cap)
                if placed:
                    return placed
        return []

    def _make_room(self, w: Workload, n: int, anchors: list[Assignment], move: bool, cap: int) -> list[Placement]:
        """One round: replicas below priority ``cap`` (at most ``w``'s) may stop; with ``move``, migratable ones
        below ``w``'s priority may move."""
        st = self.st
        self._cap = cap
        for nodes in self._places(w, n, anchors, move):
            if self.deadline.expired():
                break
            victims = self._victims(nodes, w.priority, move)
            self._take_out(victims, -1)
            first = self.place(w, n, anchors, nodes)
            if not first:
                self._take_out(victims, 1)
                continue
            used = np.unique(np.array([pl.node for pl in first], dtype=np.int64))
            on_used = set(used.tolist())
            stay = [v for v in victims if v.pl.node not in on_used]
            go = [v for v in victims if v.pl.node in on_used]
            placed = first
            back: list[Victim] = []
            for v in stay:  # off the new replicas' nodes: each returns if power and quotas still allow it
                if not self._fits(v):
                    break
                st.apply(v.w, v.d, v.pl)
                back.append(v)
            else:
                stay = []
            if stay:  # place again on the used nodes alone, with every victim off them back
                self._take_out(back, -1)
                self._undo(w, first)
                self._take_out(stay, 1)
                placed = self.place(w, n, anchors, used)
                if len(placed) < (n if w.is_gang else 1):
                    self._undo(w, placed)
                    self._take_out(go, 1)
                    continue
            taken = {pl.node for pl in placed}
            if self._settle(w, taken, go):
                return placed
            self._undo(w, placed)
            self._take_out(go, 1)
        return []

    def _settle(self, w: Workload, taken: set[int], go: list[Victim]) -> bool:
        """After ``w``'s replicas took nodes ``taken``: each victim returns where it ran if it can, moves
        (migratable) or stops (preemptible). False, with nothing changed, if one can do none of these (and
        always for one off ``taken``, which may not stop: no higher-priority replica takes its node)."""
        st = self.st
        back: list[Victim] = []
        moves: list[tuple[Victim, Placement]] = []
        stops: list[Victim] = []
        ok = True
        for v in sorted(go, key=lambda v: v.pl.node not in taken, reverse=True):  # those off `taken` first
            if (v.pl.node not in taken or self._free_again(v)) and self._fits(v):
                st.apply(v.w, v.d, v.pl)
                back.append(v)
                continue
            if v.pl.node not in taken:
                ok = False
                break
            if self._migratable(v.w):
                dest = self.place(v.w, 1, [], None)
                if dest:
                    moves.append((v, dest[0]))
                    continue
            if not (self._stops(v.w) and v.w.priority < self._cap):
                ok = False
                break
            stops.append(v)
        if not ok:
            for v, to in moves:
                self._undo(v.w, [to])
            self._take_out(back, -1)
            return False
        for v, to in moves:
            self.moved.append((v, to, w.name))
            self._forget(v)
        for v in stops:
            self.evicted.append((v, w.name))
            self._forget(v)
        return True

    def _forget(self, v: Victim) -> None:
        """``v`` stopped or moved: no longer a victim (the cached per-node counts follow)."""
        self.by_node[v.pl.node].remove(v)
        for (priority, move, cap), held in self._held_cache.items():
            if self._may_go(v, priority, move, cap):
                held[v.pl.node] -= len(v.pl.gpus)

    def _free_again(self, v: Victim) -> bool:
        """A victim of whole GPUs whose GPUs the new replicas left free."""
        return v.d.kind == "whole" and bool(np.all(self.st.users[v.pl.node, list(v.pl.gpus)] == 0))

    def _fits(self, v: Victim) -> bool:
        """Whether ``v``'s node takes it back: its GPUs are as they were (a node the new replicas did not use,
        or whole GPUs left free), so the node's rules, power and quota decide, as :meth:`ClusterState.fit` checks."""
        return isinstance(self.st.fit(v.w, v.d, v.pl.node), Placement)

    def _undo(self, w: Workload, placed: list[Placement]) -> None:
        for pl in reversed(placed):
            self.st.apply(w, self.st.demand_at(w, pl.node), pl, -1)
