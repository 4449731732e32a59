"""Batch placement with vectorised scores: priority order, gangs all-or-nothing inside one domain.

:class:`FleetPlacer` places workloads in a given order on a :class:`ClusterState`. A gang (a
training workload) is placed completely or not at all; with a required topology level all
replicas go into one domain of that level, tried tightest first after a vectorised capacity
screen; with a preferred level a gang first tries one domain, then the whole fleet.
"""

from __future__ import annotations

import numpy as np

from capplan.model.problem import Problem, Workload
from capplan.placement.core.reasons import room_estimate
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.heuristics.bulk import BulkPlacer, bulk_ok
from capplan.placement.heuristics.choose import choose
from capplan.placement.heuristics.score import Scorer

_DOMAIN_TRIES = 6


def batch_order(p: Problem, workloads: list[Workload] | None = None, seed: int = 0) -> list[Workload]:
    """Priority first, guaranteed before best-effort, gangs first (largest first), then the rest.

    Independent replicas come in a seeded random order: on traces of small pods this packs
    better than largest-first, because it keeps the shape mix of every node close to the
    workload's (the premise of FGD). CPU-only replicas come last: they add nothing to the
    objective.
    """
    rng = np.random.default_rng(seed)
    ws = workloads if workloads is not None else list(p.workloads)
    noise = dict(zip([w.name for w in ws], rng.random(len(ws)).tolist(), strict=True))

    def key(w: Workload) -> tuple[float, ...]:
        units = p.demand_units(w)
        big = -units * w.replicas if w.is_gang or w.topology.required else 0
        return (-w.priority, w.sla != "guaranteed", not (w.is_gang or bool(w.topology.required)), units == 0,
                big, noise[w.name], p.workload_index[w.name])
    return sorted(ws, key=key)


class FleetPlacer:
    """Constructive placement on a :class:`ClusterState` with a pluggable scorer.

    Parameters
    ----------
    st
        The occupancy to fill (running replicas already applied).
    scorer
        Ranks feasible candidates (best fit, FGD, ...).
    """

    def __init__(self, st: ClusterState, scorer: Scorer) -> None:
        self.st = st
        self.p = st.p
        self.scorer = scorer
        self.bulk = BulkPlacer(st, scorer)
        self.switched_at: int | None = None  # set by callers that change the scorer part-way

    def use_scorer(self, scorer: Scorer) -> None:
        """Rank the following placements with ``scorer`` (e.g. a cheaper one near a deadline)."""
        self.scorer = scorer
        self.bulk.scorer = scorer

    def domains(self, level: str) -> tuple[np.ndarray, list[str]]:
        """(domain id per node, domain names) for topology ``level``."""
        return self.st.domain_ids(level)

    def place_one(self, w: Workload, within: np.ndarray | None = None, sticky: int | None = None) -> Placement | None:
        """Place one replica (trying node ``sticky`` first); None when it fits nowhere."""
        c = None
        if sticky is not None and (within is None or sticky in within):
            c = choose(self.st, w, self.scorer, np.array([sticky], dtype=np.int64))
        if c is None:
            c = choose(self.st, w, self.scorer, within)
        if c is not None:
            per, _ = self.st.demands(w)
            d = per[int(self.st.model_id[c.node])]
            assert d is not None
            self.st.apply(w, d, c)
        return c

    def candidates(self, w: Workload, within: np.ndarray | None = None) -> np.ndarray:
        """Eligible nodes of ``w`` (inside ``within`` when given)."""
        _, idx = self.st.demands(w)
        if within is not None:
            idx = np.intersect1d(idx, within, assume_unique=True)
        return idx

    def place_many(self, w: Workload, n: int, within: np.ndarray | None = None) -> list[Placement]:
        """Place up to ``n`` replicas (in bulk when exact, else one by one until one does not fit)."""
        if n <= 0:
            return []
        if bulk_ok(self.st):
            per, _ = self.st.demands(w)
            # per-node MIG strategies and taints: eligibility is per node, not per GPU model
            per_node = (w.mig is not None and (self.st.p.single_mig or w.mig_strategy != "mixed")) or self.st.p.tainted
            return self.bulk.place(w, per, n, None if within is None and not per_node else self.candidates(w, within))
        out: list[Placement] = []
        last: int | None = None
        for _ in range(n):
            c = self.place_one(w, within, last)
            if c is None:
                break
            out.append(c)
            last = c.node
        return out

    def place_gang(self, w: Workload, n: int, within: np.ndarray | None = None) -> list[Placement]:
        """All ``n`` replicas (inside ``within``) or none."""
        if bulk_ok(self.st):
            per, _ = self.st.demands(w)
            if int(np.minimum(self.bulk.capacity(w, per, self.candidates(w, within)), n).sum()) < n:
                return []
        mark = self.st.checkpoint()
        got = self.place_many(w, n, within)
        if len(got) < n:
            self.st.rollback(mark)
            return []
        self.st.commit()
        return got

    def room(self, w: Workload, idx: np.ndarray) -> np.ndarray:
        """Upper estimate of how many replicas of ``w`` each node in ``idx`` can still take."""
        return room_estimate(self.st, w, idx)

    def place_in_domain(self, w: Workload, n: int, level: str, fixed: str | None,
                        all_or_nothing: bool, within: np.ndarray | None = None) -> list[Placement]:
        """Place ``n`` replicas inside one domain of ``level`` (and ``within``), tightest feasible domain first."""
        st = self.st
        eligible = self.candidates(w, within)
        if level == self.p.cluster.levels[-1]:
            dom = np.arange(st.n, dtype=np.int64)
            names = [x.name for x in self.p.cluster.nodes]
        else:
            dom, names = self.domains(level)
        ok = eligible[st.node_ok(w, eligible)]
        if bulk_ok(st):  # exact per-node capacity
            per, _ = self.st.demands(w)
            room = self.bulk.capacity(w, per, ok)
        else:
            room = self.room(w, ok)
        cap = np.bincount(dom[ok], weights=np.minimum(room, n), minlength=len(names)).astype(np.int64)
        order = np.lexsort((np.arange(len(names)), cap - n))
        order = order[cap[order] >= (n if all_or_nothing else 1)]
        if fixed is not None:
            order = np.array([names.index(fixed)], dtype=np.int64)
        best: list[Placement] = []
        for d in order[:_DOMAIN_TRIES]:
            nodes = np.flatnonzero(dom == d)
            if within is not None:
                nodes = np.intersect1d(nodes, within, assume_unique=True)
            mark = st.checkpoint()
            got = self.place_many(w, n, nodes)
            if len(got) == n or (not all_or_nothing and len(got) > len(best)):
                if len(got) == n:
                    st.commit()
                    return got
                st.rollback(mark)
                best_dom = int(d)
                best = got
                continue
            st.rollback(mark)
        if best and not all_or_nothing:
            nodes = np.flatnonzero(dom == best_dom)
            return self.place_many(w, n, nodes if within is None else np.intersect1d(nodes, within))
        return []

    def place_workload(self, w: Workload, n: int, running_nodes: list[int],
                       target: np.ndarray | None = None) -> list[Placement]:
        """Place ``n`` more replicas of ``w`` by its gang, GPU-model and topology rules (``target`` nodes first)."""
        if not w.one_model:
            return self._place_rules(w, n, running_nodes, target, None)
        st = self.st
        per, eligible = self.st.demands(w)
        def held(m: int) -> int:
            d = per[m]
            return d.units if d is not None else 0

        models = sorted(np.unique(st.model_id[eligible]).tolist(), key=lambda m: (held(m), m))
        if running_nodes:
            models = [m for m in models if m in {int(st.model_id[i]) for i in running_nodes}]
        for m in models:  # one GPU model per gang: the model holding least first
            mark = st.checkpoint()
            got = self._place_rules(w, n, running_nodes, target, np.flatnonzero(st.model_id == m))
            if len(got) == n:
                st.commit()
                return got
            st.rollback(mark)
        return []

    def _place_rules(self, w: Workload, n: int, running_nodes: list[int], target: np.ndarray | None,
                     within: np.ndarray | None) -> list[Placement]:
        cl = self.p.cluster
        lvl = w.topology.required
        if lvl:
            fixed = cl.domain_of(cl.nodes[running_nodes[0]], lvl) if running_nodes else None
            got = self.place_in_domain(w, n, lvl, fixed, w.is_gang, within)
        elif w.is_gang:
            got = []
            if w.topology.preferred:
                got = self.place_in_domain(w, n, w.topology.preferred, None, True, within)
            if not got:
                got = self.place_gang(w, n, within)
        else:
            got = self.place_many(w, n, target) if target is not None else []
            if len(got) < n:
                got += self.place_many(w, n - len(got))
        return got
