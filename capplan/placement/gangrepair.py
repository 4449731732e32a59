"""Greedy's bounded repair for gangs bound to one domain: move planned gangs to open a domain for one that does not fit.

Greedy places gangs one at a time, so an early gang can take the one domain part (a block's H100 nodes, a rack's
A100s) a later, larger gang needed while it would have fitted elsewhere. When a gang with ``topology.required``
finds no domain, :class:`GangRepair` looks for a domain (and, for a gang on one GPU model, a model) where removing
a few gangs this plan placed (never running replicas) leaves room; it removes them, places the new gang there,
then places the removed ones again wherever they fit (their own rules, by the greedy placer). If any of them
does not fit again (after a nested repair of its own, up to :data:`DEPTH` levels), every change is rolled
back. So a repair never loses a placed replica: it only adds the new gang, and the plan is never worse at the
priorities placed so far.

The search is small and bounded: the candidate domains are ranked by the GPUs of the gangs to move (fewest
first, from per-node arrays of what movable gangs hold), each moved gang's chance to fit again is estimated
before anything is touched, a few trials are made, and the deadline is checked before each. Deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from capplan.model.deadline import Deadline
from capplan.model.problem import Workload
from capplan.placement.core.reasons import room_estimate
from capplan.placement.core.state import Placement
from capplan.placement.nodefill import NodeFill

#: Candidate (domain, model) pairs tried per gang that does not fit (and per gang moved that does not fit again).
CANDIDATES = (3, 1)
#: Nested repairs: how many levels a gang moved out of the way may itself move others (0: none; one level never
#: succeeded on the shapes' gang fleets at 1k-10k GPUs, and its failed trials were most of the repair's time).
DEPTH = 0
#: Trials (of a domain, with its gangs moved), nested ones included, per gang that does not fit.
TRIALS = 6
#: Most gangs moved to open one domain.
MOST_MOVED = 6


@dataclass
class Held:
    """A gang this plan placed (movable): its workload, replica ids and placements."""

    w: Workload
    replicas: list[int]
    placements: list[Placement]

    @property
    def gpus(self) -> int:
        """Whole GPUs the gang holds."""
        return sum(len(pl.gpus) for pl in self.placements)


#: How the repair places a gang on its own rules anywhere: ``place(w, n)`` (all or nothing).
PlaceFn = Callable[[Workload, int], list[Placement]]
#: How it places a gang inside one domain of its required level: ``place_in(w, n, domain, within)``.
PlaceInFn = Callable[[Workload, int, str, "np.ndarray | None"], list[Placement]]


class GangRepair:
    """The movable gangs of a greedy pass and the repair that moves them (see the module docstring).

    Parameters
    ----------
    placer
        The greedy placer (its state is changed; its ``_domains`` give the domain ids of a level).
    place, place_in
        Placing a gang anywhere by its rules, and inside one named domain of its required level (optionally on
        the nodes ``within``, sorted); both all or nothing.
    domains
        ``domains(level)``: domain id per node, domain names, id per name.
    deadline
        Checked before every trial; an expired deadline ends the repair (nothing half done is kept).
    """

    def __init__(self, placer: NodeFill, place: PlaceFn, place_in: PlaceInFn,
                 domains: Callable[[str], tuple[np.ndarray, list[str], dict[str, int]]],
                 deadline: Deadline | None = None) -> None:
        self.placer, self.st = placer, placer.st
        self.place, self.place_in, self.domains = place, place_in, domains
        self.deadline = deadline
        self.held: dict[str, Held] = {}
        n = self.st.n
        self._gpus = np.zeros(n, dtype=np.int64)  # whole GPUs, CPU and memory movable gangs hold per node
        self._cpu = np.zeros(n, dtype=np.int64)
        self._mem = np.zeros(n, dtype=np.int64)
        self._on: dict[int, dict[str, int]] = {}  # node -> movable gang -> replicas there
        self._log: list[tuple[int, Held]] = []  # (+1 added / -1 dropped, gang): undone when a repair fails
        self.moved = 0  # gangs moved by successful repairs
        self._trials = 0  # trials left for the current gang
        self.repaired = 0  # gangs placed by a repair

    @staticmethod
    def movable(w: Workload) -> bool:
        """Gangs of whole GPUs are movable (and repairable when bound to a domain)."""
        return w.is_gang and w.gpus is not None and w.gpus > 0

    # ------------------------------------------------------------------ bookkeeping
    def add(self, w: Workload, replicas: list[int], placements: list[Placement]) -> None:
        """Record a gang this plan placed (all its replicas), so a later repair may move it."""
        self._put(Held(w, list(replicas), list(placements)))

    def _put(self, h: Held) -> None:
        self.held[h.w.name] = h
        self._account(h.w, h.placements, 1)
        self._log.append((1, h))

    def _drop(self, name: str) -> Held:
        h = self.held.pop(name)
        self._account(h.w, h.placements, -1)
        self._log.append((-1, h))
        return h

    def _account(self, w: Workload, placements: list[Placement], sign: int) -> None:
        for pl in placements:
            i = pl.node
            self._gpus[i] += sign * len(pl.gpus)
            self._cpu[i] += sign * w.cpu_milli
            self._mem[i] += sign * w.memory_mib
            on = self._on.setdefault(i, {})
            on[w.name] = on.get(w.name, 0) + sign
            if on[w.name] == 0:
                del on[w.name]

    def _undo_log(self, mark: int) -> None:
        """Undo every gang added or dropped after ``mark``: the bookkeeping and the placements in the state."""
        while len(self._log) > mark:
            sign, h = self._log.pop()
            if sign > 0:
                del self.held[h.w.name]
                self.placer.undo(h.w, h.placements)
            else:
                self.held[h.w.name] = h
                for pl in h.placements:
                    self.st.apply(h.w, self.st.demand_at(h.w, pl.node), pl)
            self._account(h.w, h.placements, -sign)

    # ------------------------------------------------------------------ repair
    def fit(self, w: Workload, n: int) -> list[Placement]:
        """Place the ``n`` replicas of gang ``w`` (bound to a domain) by moving movable gangs; [] if no repair
        found (the state is then as before)."""
        if not (self.movable(w) and w.topology.required) or not self.held:
            return []
        self._trials = TRIALS
        got = self._fit(w, n, frozenset({w.name}), 0)
        self._log.clear()
        self.repaired += bool(got)
        return got

    def can_fit(self, w: Workload, n: int) -> bool:
        """Whether :meth:`fit` would place gang ``w`` now; the state and the bookkeeping are left as they were."""
        if not self.may_fit(w, n):
            return False
        self._trials = TRIALS
        mark, moved = len(self._log), self.moved
        got = self._fit(w, n, frozenset({w.name}), 0)
        if got:
            self.placer.undo(w, got)
            self._undo_log(mark)
        self.moved = moved
        return bool(got)

    def may_fit(self, w: Workload, n: int) -> bool:
        """Whether a repair has a domain to try for gang ``w`` (``n`` replicas) as things stand (an estimate)."""
        if not (self.movable(w) and w.topology.required and self.held):
            return False
        return any(self._may_fit_again(victims, w, dom, model)
                   for dom, model, victims in self._candidates(w, n, frozenset({w.name}), CANDIDATES[0]))

    def restore(self, held: dict[str, Held]) -> None:
        """Make the movable gangs (bookkeeping and state) those of ``held`` (a copy of :attr:`held` taken before):
        the gangs placed or moved since come off, then the ones of ``held`` go back where they were."""
        self._log.clear()
        for name in [g for g, h in self.held.items() if held.get(g) is not h]:
            h = self.held.pop(name)
            self._account(h.w, h.placements, -1)
            self.placer.undo(h.w, h.placements)
        for name, h in held.items():
            if name not in self.held:
                self.held[name] = h
                self._account(h.w, h.placements, 1)
                for pl in h.placements:
                    self.st.apply(h.w, self.st.demand_at(h.w, pl.node), pl)

    def _expired(self) -> bool:
        return self.deadline is not None and self.deadline.expired()

    def _fit(self, w: Workload, n: int, locked: frozenset[str], depth: int) -> list[Placement]:
        for dom, model, victims in self._candidates(w, n, locked, CANDIDATES[min(depth, 1)]):
            if self._trials <= 0 or self._expired():
                return []
            self._trials -= 1
            if not self._may_fit_again(victims, w, dom, model):
                continue
            got = self._attempt(w, n, dom, model, victims, locked | set(victims), depth)
            if got:
                return got
        return []

    def _candidates(self, w: Workload, n: int, locked: frozenset[str],
                    most: int) -> list[tuple[str, str | None, list[str]]]:
        """(domain name, GPU model or None, gangs to move), fewest GPUs moved first, at most ``most``."""
        st = self.st
        level = w.topology.required
        assert level is not None and w.gpus is not None
        ids, names, _ = self.domains(level)
        idx, _ = st.eligible(w)
        idx = idx[st.node_ok(w, idx)]
        if idx.size == 0:
            return []
        now = room_estimate(st, w, idx)
        big = 1 << 30
        held_gpus = self._gpus[idx]
        # replicas each node could take with every movable gang on it gone (CPU, memory, whole GPUs)
        pot = np.minimum.reduce([
            (st.free_whole[idx] + held_gpus) // w.gpus if w.gpus else np.full(idx.size, big),
            (st.cpu[idx] + self._cpu[idx]) // w.cpu_milli if w.cpu_milli else np.full(idx.size, big),
            (st.mem[idx] + self._mem[idx]) // w.memory_mib if w.memory_mib else np.full(idx.size, big)])
        models = st.model_id[idx] if w.one_model else np.zeros(idx.size, dtype=np.int64)
        nm = int(models.max()) + 1
        key = ids[idx] * nm + models
        size = int(key.max()) + 1
        pot_sum = np.bincount(key, weights=np.minimum(pot, n), minlength=size)
        now_sum = np.bincount(key, weights=np.minimum(now, n), minlength=size)
        ok = np.flatnonzero((pot_sum >= n) & (now_sum < n))
        if ok.size == 0:
            return []
        # the smallest shortfall first: a few are worked out exactly (which gangs to move)
        ok = ok[np.lexsort((ok, n - now_sum[ok]))][:4 * most]
        out: list[tuple[int, str, str | None, list[str]]] = []
        for k in ok.tolist():
            sel = idx[key == k]
            victims = self._victims(w, n, sel, now[key == k], locked)
            if victims is None:
                continue
            cost = sum(self.held[v].gpus for v in victims)
            model = st.model_of[int(sel[0])] if w.one_model else None
            out.append((cost, names[k // nm], model, victims))
        out.sort(key=lambda c: (c[0], len(c[3]), c[1], c[2] or ""))
        return [(d, m, v) for _, d, m, v in out[:most]]

    def _victims(self, w: Workload, n: int, nodes: np.ndarray, now: np.ndarray,
                 locked: frozenset[str]) -> list[str] | None:
        """The movable gangs to take off ``nodes`` so that ``n`` replicas of ``w`` may fit there (an estimate by
        whole GPUs, CPU and memory per node): the smallest gangs first, or the one smallest gang that frees enough
        alone if that moves fewer GPUs; None if no set of at most :data:`MOST_MOVED` does."""
        assert w.gpus is not None
        st = self.st
        on = [self._on.get(int(i), {}) for i in nodes.tolist()]
        names = sorted({g for o in on for g in o if g not in locked}, key=lambda g: (self.held[g].gpus, g))
        if not names:
            return None
        col = {g: k for k, g in enumerate(names)}
        count = np.zeros((len(names), nodes.size), dtype=np.int64)  # replicas of each gang on each node
        for j, o in enumerate(on):
            for g, c in o.items():
                if g in col:
                    count[col[g], j] = c
        hw = [self.held[g].w for g in names]
        per = np.array([[x.gpus or 0, x.cpu_milli, x.memory_mib] for x in hw], dtype=np.int64)
        base = np.stack([st.free_whole[nodes], st.cpu[nodes], st.mem[nodes]])
        need = np.array([w.gpus, w.cpu_milli, w.memory_mib], dtype=np.int64)
        use = need > 0

        def room_without(take: np.ndarray) -> int:
            """Replicas of ``w`` the nodes hold with the gangs of mask ``take`` gone."""
            if not take.any():
                return int(now.sum())
            freed = base + per[take].T @ count[take]
            touched = count[take].any(axis=0)
            r = (freed[use] // need[use, None]).min(axis=0)
            return int(np.where(touched, r, now).sum())

        prefix = np.zeros(len(names), dtype=bool)
        ok = False
        for k in range(min(len(names), MOST_MOVED)):
            prefix[k] = True
            if room_without(prefix) >= n:
                ok = True
                break
        gpus = [self.held[g].gpus for g in names]
        single = None
        for k in range(len(names)):
            one = np.zeros(len(names), dtype=bool)
            one[k] = True
            if room_without(one) >= n:
                single = k
                break
        if single is not None and (not ok or gpus[single] <= sum(g for g, t in zip(gpus, prefix, strict=True) if t)):
            return [names[single]]
        return [g for g, t in zip(names, prefix, strict=True) if t] if ok else None

    def _may_fit_again(self, victims: list[str], w: Workload, dom: str, model: str | None) -> bool:
        """Whether each gang of ``victims`` may fit somewhere once they are all off and ``w`` took its nodes in
        ``dom`` (on ``model``): an optimistic estimate per domain of the gang's level (whole GPUs, CPU, memory),
        so that trials bound to fail are not made (each moves whole gangs in the state)."""
        st = self.st
        level = w.topology.required
        assert level is not None
        ids, _, pos = self.domains(level)
        region = ids == pos[dom]
        if model is not None:
            region &= st.model_id == st.model_id[st.model_nodes[model][0]]
        gpus, cpu, mem = st.free_whole.copy(), st.cpu.copy(), st.mem.copy()
        for v in victims:
            h = self.held[v]
            for pl in h.placements:
                gpus[pl.node] += len(pl.gpus)
                cpu[pl.node] += h.w.cpu_milli
                mem[pl.node] += h.w.memory_mib
        big = 1 << 30
        for v in victims:
            x, k = self.held[v].w, len(self.held[v].replicas)
            idx, _ = st.eligible(x)
            idx = idx[~region[idx]]
            if idx.size == 0:
                return False
            room = np.minimum.reduce([gpus[idx] // x.gpus if x.gpus else np.full(idx.size, big),
                                      cpu[idx] // x.cpu_milli if x.cpu_milli else np.full(idx.size, big),
                                      mem[idx] // x.memory_mib if x.memory_mib else np.full(idx.size, big)])
            group = st.model_id[idx] if x.one_model else np.zeros(idx.size, dtype=np.int64)
            if x.topology.required:
                group = self.domains(x.topology.required)[0][idx] * (int(st.model_id.max()) + 1) + group
            if np.bincount(group, weights=np.minimum(room, k)).max() < k:
                return False
        return True

    def _attempt(self, w: Workload, n: int, dom: str, model: str | None, victims: list[str],
                 locked: frozenset[str], depth: int) -> list[Placement]:
        """Move ``victims`` off, place ``w`` in ``dom`` (on ``model``), place the victims again; all or nothing."""
        log = len(self._log)
        gone = [self._drop(v) for v in victims]
        for h in gone:
            self.placer.undo(h.w, h.placements)
        within = self.st.model_nodes[model] if model is not None else None
        got = self.place_in(w, n, dom, within)
        ok = len(got) == n
        if ok:
            for h in sorted(gone, key=lambda h: (-h.gpus, h.w.name)):
                k = len(h.replicas)
                pl = self.place(h.w, k)
                if len(pl) < k and depth < DEPTH and h.w.topology.required and not self._expired():
                    pl = self._fit(h.w, k, locked, depth + 1)
                if len(pl) < k:
                    ok = False
                    break
                self.add(h.w, h.replicas, pl)  # logged: a failure later undoes it
        if ok:
            self.moved += len(gone)
            return got
        self.placer.undo(w, got)
        self._undo_log(log)  # the gangs placed again come off, the ones moved go back where they were
        return []
