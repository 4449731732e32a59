"""The fleet as arrays: what does not change while a plan is built.

:class:`FleetArrays` holds, one row per node and one column per GPU slot, the node sizes, GPU
models and counts, preset GPU modes and MIG layouts, power domains and their budgets, topology
domains, and where each workload shape may ever go (its demand per GPU model and eligible nodes).
:class:`~capplan.placement.core.state.ClusterState` extends it with the occupancy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capplan.model.catalog import GpuModel
from capplan.model.plan import MigSlot
from capplan.model.problem import Demand, Problem, Workload
from capplan.model.units import gib_to_mib
from capplan.placement.core.quota import QuotaBook

# GPU modes in :attr:`ClusterState.mode` (and preset modes in :attr:`FleetArrays.fixed`, -1: none).
# BLOCKED is a mode no replica asks for (the scheduler's window union marks GPUs used two ways).
FREE, WHOLE, SHARED, MIG, BLOCKED = 0, 1, 2, 3, 4
MODE_CODE = {"whole": WHOLE, "shared": SHARED, "mig": MIG, "blocked": BLOCKED}
MODE_NAME: dict[int, str | None] = {FREE: None, WHOLE: "whole", SHARED: "shared", MIG: "mig", BLOCKED: "blocked"}
KIND_MODE = {"whole": WHOLE, "fraction": SHARED, "mig": MIG}
#: Headroom of the power sentinel (nodes outside every budgeted domain).
UNLIMITED_W = np.iinfo(np.int64).max // 4


def node_kinds(p: Problem) -> list[list[int]]:
    """The cluster's nodes grouped by what :meth:`Problem.can_host` looks at (GPU model and count, MIG
    strategy and preset profile, taints): one call per group answers for all its nodes."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, n in enumerate(p.cluster.nodes):
        key = (n.gpu_model if n.gpus else None, n.gpus, n.mig_strategy, n.single_profile, n.taints)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def kind_demands(p: Problem, w: Workload, kinds: list[list[int]] | None = None) -> list[tuple[Demand, list[int]]]:
    """Where ``w`` may ever go: its demand on each kind of node (:func:`node_kinds`) that can host it,
    with those nodes in cluster order. The one eligibility rule of the planners and the scheduler."""
    nodes = p.cluster.nodes
    out = []
    for group in kinds if kinds is not None else node_kinds(p):
        d = p.can_host(w, nodes[group[0]])
        if d is not None:
            out.append((d, group))
    return out


class FleetArrays:
    """Nodes, GPU slots, models, preset modes, power and topology domains as arrays, and each workload
    shape's eligible nodes (cached).

    Parameters
    ----------
    problem
        The problem whose cluster is described.
    """

    def __init__(self, problem: Problem) -> None:
        self.p = problem
        nodes = self.nodes = problem.cluster.nodes
        n = self.n = len(nodes)
        g = self.g = max((x.gpus for x in nodes), default=0) or 1
        self._init_models(problem)
        self.cpu_cap = np.array([x.cpu_milli for x in nodes], dtype=np.int64)
        self.mem_cap = np.array([x.memory_mib for x in nodes], dtype=np.int64)
        self.gpu_count = np.array([x.gpus for x in nodes], dtype=np.int64)
        self.exists = np.arange(g)[None, :] < self.gpu_count[:, None]
        self.fixed = np.full((n, g), -1, dtype=np.int8)
        self.layouts: dict[tuple[int, int], tuple[MigSlot, ...]] = {}
        #: The same layouts as (profile, start) pairs, for membership tests in the fit rules (hashable).
        self.layout_slots: dict[tuple[int, int], frozenset[tuple[str, int]]] = {}
        for i, x in enumerate(nodes):
            for gm in x.gpu_modes:
                self.fixed[i, gm.gpu] = MODE_CODE[gm.mode]
                if gm.layout is not None:
                    self.layouts[(i, gm.gpu)] = gm.layout
                    self.layout_slots[(i, gm.gpu)] = frozenset((x.profile, x.start) for x in gm.layout)
        self._init_power(problem)
        self._init_domains(problem)
        #: Nodes grouped by what :meth:`Problem.can_host` looks at (see :func:`node_kinds`).
        self.kinds = node_kinds(problem)
        #: ClusterQueue quotas (usage included: the occupancy state charges it); None without queues.
        self.quota: QuotaBook | None = QuotaBook(problem) if problem.queues else None
        #: MIG placements left on a GPU by (model name, slice mask, preset layout slots or None) (core/fit.py's cache).
        self.mig_left: dict[tuple[str, int, frozenset[tuple[str, int]] | None], int] = {}
        #: The slots one MIG profile's slices take, one after another, on a GPU until it is full, with the placements
        #: left after the first, by (model, profile, slice mask, per-profile counts, preset layout) (core/fit.py).
        self.mig_fills: dict[tuple[object, ...], tuple[tuple[MigSlot, ...], int]] = {}
        self._eligible: dict[object, tuple[np.ndarray, dict[str | None, Demand], list[Demand | None]]] = {}

    def _init_models(self, p: Problem) -> None:
        nodes = p.cluster.nodes
        self.model_names: list[str | None] = [*sorted({x.gpu_model for x in nodes if x.gpu_model}), None]
        mid = {m: i for i, m in enumerate(self.model_names)}
        self.model_id = np.array([mid[x.gpu_model if x.gpu_model and x.gpus else None] for x in nodes],
                                 dtype=np.int64)
        #: GPU model per model id (see :attr:`model_id`); None for CPU-only nodes.
        self.models: list[GpuModel | None] = [p.catalog.get(m) if m else None for m in self.model_names]
        #: GPU model name per node (None: no GPUs).
        self.model_of: list[str | None] = [x.gpu_model if x.gpus else None for x in nodes]
        by_model: dict[str | None, list[int]] = {}
        for i, m in enumerate(self.model_of):
            by_model.setdefault(m, []).append(i)
        self.model_nodes = {m: np.array(idx, dtype=np.int64) for m, idx in by_model.items()}
        cap = [gib_to_mib(m.memory_gib) if m and m.memory_gib else 0 for m in self.models]
        self.gmem_cap = np.array(cap, dtype=np.int64)[self.model_id]
        self.tdp = np.array([(m.tdp_w or 0) if m else 0 for m in self.models], dtype=np.int64)[self.model_id]
        self._mig_ok = np.array([m is not None and m.supports_mig for m in self.models])[self.model_id]
        self._slices = np.array([m.memory_slices if m is not None else 0 for m in self.models],
                                dtype=np.int64)[self.model_id]
        prof_names = sorted({pr.name for m in self.models if m for pr in m.profiles})
        self.prof_index = {name: i for i, name in enumerate(prof_names)}

    def _init_power(self, p: Problem) -> None:
        """Power: one column per domain with a budget, and a last one (a sentinel) with unlimited headroom."""
        cl = p.cluster
        budgets = [(d.level, d.name, d.power_w) for d in cl.domains if d.power_w is not None]
        didx = {(lv, nm): i for i, (lv, nm, _) in enumerate(budgets)}
        #: Budget (W) per power domain; the last entry is a sentinel with unlimited headroom.
        self.power_budget = np.array([b for _, _, b in budgets] + [UNLIMITED_W], dtype=np.int64)
        sentinel = len(budgets)
        self.node_dom = np.full((self.n, max(1, len(cl.levels) - 1)), sentinel, dtype=np.int64)
        for i, x in enumerate(cl.nodes):
            for j, (level, dom) in enumerate(zip(cl.levels[:-1], x.path, strict=False)):
                self.node_dom[i, j] = didx.get((level, dom), sentinel)

    def domain_ids(self, level: str) -> tuple[np.ndarray, list[str]]:
        """(domain id per node, domain names) for topology ``level`` (cached)."""
        if level not in self._domain_ids:
            cl = self.p.cluster
            names: dict[str, int] = {}
            ids = np.array([names.setdefault(cl.domain_of(x, level), len(names)) for x in cl.nodes], dtype=np.int64)
            self._domain_ids[level] = (ids, list(names))
        return self._domain_ids[level]

    def _init_domains(self, p: Problem) -> None:
        cl = p.cluster
        self._domain_ids: dict[str, tuple[np.ndarray, list[str]]] = {}
        self.domain_nodes: dict[tuple[str, str], np.ndarray] = {}
        for lvl in cl.levels[:-1]:
            groups: dict[str, list[int]] = {}
            for i, x in enumerate(cl.nodes):
                groups.setdefault(cl.domain_of(x, lvl), []).append(i)
            for dom, idx in groups.items():
                self.domain_nodes[(lvl, dom)] = np.array(idx, dtype=np.int64)

    def _eligibility(self, w: Workload) -> tuple[np.ndarray, dict[str | None, Demand], list[Demand | None]]:
        # GPU demand depends only on the GPU fields, so workloads of one shape share an entry
        # (at fleet scale thousands of workloads share a handful of shapes).
        cpu_only = w.gpus is None and w.mig is None and w.gpu_fraction is None
        # CPU-only pods: the same demand on every node, so only the queue, the resources it charges and the
        # tolerations decide where they may go.
        key: object = ((None, w.queue, w.cpu > 0, w.memory_gib > 0, w.tolerations) if cpu_only else
                       (w.gpus, w.mig, w.gpu_fraction, w.gpu_memory_gib, w.mig_strategy,
                        None if w.gpu_models is None else tuple(w.gpu_models),
                        w.queue, w.cpu > 0, w.memory_gib > 0, w.tolerations))
        hit = self._eligible.get(key)
        if hit is None:
            per_model: dict[str | None, Demand] = {}
            parts = []
            for d, group in kind_demands(self.p, w, self.kinds):
                per_model[self.model_of[group[0]]] = d
                parts.append(group)
            nodes = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
            if self.quota is not None and w.queue is not None:  # only nodes a flavor of its queue covers
                book = self.quota
                nodes = nodes[[book.charges(w, per_model[self.model_of[i]], i) is not None
                               for i in nodes.tolist()]] if nodes.size else nodes
            hit = self._eligible[key] = (nodes, per_model, [per_model.get(m) for m in self.model_names])
        return hit

    def eligible(self, w: Workload) -> tuple[np.ndarray, dict[str | None, Demand]]:
        """Sorted indices of nodes that could ever host ``w``, and its demand per GPU model name."""
        nodes, per_model, _ = self._eligibility(w)
        return nodes, per_model

    def demands(self, w: Workload) -> tuple[list[Demand | None], np.ndarray]:
        """``w``'s demand per model id (:attr:`model_id`; None where never eligible) and its eligible nodes."""
        nodes, _, per_id = self._eligibility(w)
        return per_id, nodes

    def demand_at(self, w: Workload, i: int) -> Demand:
        """``w``'s demand on node ``i`` (which must be eligible)."""
        return self.eligible(w)[1][self.model_of[i]]


@dataclass(frozen=True)
class Placement:
    """Where one replica goes: node index, GPU indices, MIG slot or fraction (milli)."""

    node: int
    gpus: tuple[int, ...] = ()
    slot: MigSlot | None = None
    fraction_milli: int = 0
