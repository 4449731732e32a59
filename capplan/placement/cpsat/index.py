"""Problem data prepared for the CP-SAT model: GPU classes per node, running state, candidates.

Everything here is plain Python: the per-node view the model is built from. Free GPUs are grouped
into interchangeable classes (unfixed, preset whole, preset MIG, preset MIG layout, preset
shared); GPUs that host running replicas are kept individually ("occupied GPUs"). A running
replica is *pinned* unless the options allow it to be evicted (preemptible) or moved
(migratable); optional replicas get keep/evict/move decisions in the model.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Demand, Node, Problem, Workload
from capplan.model.units import MILLI, gib_to_mib
from capplan.placement.core.options import PlanOptions


@dataclass
class Run:
    """A running replica and what the options let the planner do with it."""

    a: Assignment
    w: Workload
    node: int
    demand: Demand
    can_evict: bool
    can_move: bool

    @property
    def optional(self) -> bool:
        """True when the model decides whether the replica stays."""
        return self.can_evict or self.can_move


@dataclass
class OccGpu:
    """A GPU that hosts running replicas (MIG or shared); modelled individually."""

    node: int
    gpu: int
    kind: str  # "mig" | "shared"
    fixed_layout: frozenset[MigSlot] | None
    pinned: list[Run] = field(default_factory=list)
    optional: list[Run] = field(default_factory=list)
    unfixed: bool = False  # no preset mode

    @property
    def releasable(self) -> bool:
        """All users may leave and the GPU has no preset mode: it can rejoin the free pool."""
        return self.unfixed and not self.pinned and bool(self.optional)


@dataclass
class NodeInfo:
    """Per-node classes of free GPUs, occupied GPUs and running replicas."""

    index: int
    node: Node
    model: GpuModel | None
    unfixed: list[int] = field(default_factory=list)
    whole_fixed: list[int] = field(default_factory=list)
    mig_any: list[int] = field(default_factory=list)
    mig_layout: dict[frozenset[MigSlot], list[int]] = field(default_factory=dict)
    shared_fixed: list[int] = field(default_factory=list)
    occ: list[OccGpu] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    @property
    def gpu_mem_mib(self) -> int:
        """GPU memory of one GPU (0 when unknown)."""
        return gib_to_mib(self.model.memory_gib) if self.model and self.model.memory_gib else 0


@dataclass
class Index:
    """The prepared problem: node infos, running replicas, candidate nodes per workload."""

    p: Problem
    opts: PlanOptions
    nodes: list[NodeInfo]
    runs: list[Run]
    cands: dict[str, dict[int, Demand]]
    running_of: dict[str, list[Run]]
    mig_profiles: dict[str, tuple[MigProfile, ...]]  # per GPU model: profiles some workload asks for

    def new_ids(self, w: Workload) -> list[int]:
        """Replica ids of ``w`` that are not running."""
        running = {r.a.replica for r in self.running_of.get(w.name, [])}
        return [r for r in range(w.replicas) if r not in running]

    def movable(self, w: Workload) -> int:
        """Running replicas of ``w`` that may be moved."""
        return sum(1 for r in self.running_of.get(w.name, []) if r.can_move)

    def max_new(self, w: Workload) -> int:
        """Most new placements of ``w``: replicas not running plus movable ones."""
        return len(self.new_ids(w)) + self.movable(w)


def build_index(p: Problem, opts: PlanOptions) -> Index:
    """Prepare ``p`` for the model under ``opts``."""
    nodes = [NodeInfo(index=i, node=n, model=p.gpu_model(n)) for i, n in enumerate(p.cluster.nodes)]
    runs: list[Run] = []
    running_of: dict[str, list[Run]] = defaultdict(list)
    users: dict[tuple[int, int], list[Run]] = defaultdict(list)
    for a in p.running:
        w = p.workload(a.workload)
        i = p.cluster.node_index[a.node]
        d = p.demand_on(w, p.cluster.nodes[i])
        assert d is not None  # the problem checks ensure running replicas fit
        r = Run(
            a=a,
            w=w,
            node=i,
            demand=d,
            can_evict=opts.allow_preemption and w.preemptible,
            can_move=opts.allow_migration and w.migratable,
        )
        runs.append(r)
        running_of[w.name].append(r)
        nodes[i].runs.append(r)
        for g in a.gpus:
            users[(i, g)].append(r)
    for ni in nodes:
        n = ni.node
        for g in range(n.gpus):
            fixed = n.mode_of(g)
            us = users.get((ni.index, g), [])
            kind = (
                None
                if not us
                else "whole"
                if us[0].demand.kind == "whole"
                else ("mig" if us[0].demand.kind == "mig" else "shared")
            )
            if kind in ("mig", "shared"):
                layout = frozenset(fixed.layout) if fixed is not None and fixed.layout is not None else None
                ni.occ.append(
                    OccGpu(
                        node=ni.index,
                        gpu=g,
                        kind=kind,
                        fixed_layout=layout,
                        pinned=[r for r in us if not r.optional],
                        optional=[r for r in us if r.optional],
                        unfixed=fixed is None,
                    )
                )
            elif kind == "whole":
                continue  # freed only when its (optional) replica leaves; see released_gpus
            elif fixed is None:
                ni.unfixed.append(g)
            elif fixed.mode == "whole":
                ni.whole_fixed.append(g)
            elif fixed.mode == "shared":
                ni.shared_fixed.append(g)
            elif fixed.layout is None:
                ni.mig_any.append(g)
            else:
                ni.mig_layout.setdefault(frozenset(fixed.layout), []).append(g)
    cands = {w.name: _candidates(p, w) for w in p.workloads}
    mig_profiles: dict[str, set[str]] = defaultdict(set)
    for w in p.workloads:
        for i, d in cands[w.name].items():
            if d.kind == "mig" and d.profile is not None and nodes[i].model is not None:
                mig_profiles[nodes[i].node.gpu_model or ""].add(d.profile.name)
    for r in runs:
        if r.demand.profile is not None:
            mig_profiles[nodes[r.node].node.gpu_model or ""].add(r.demand.profile.name)
    ordered = {
        m: tuple(pr for pr in p.catalog.get(m).profiles if pr.name in names) for m, names in mig_profiles.items()
    }
    return Index(p=p, opts=opts, nodes=nodes, runs=runs, cands=cands, running_of=dict(running_of), mig_profiles=ordered)


def _candidates(p: Problem, w: Workload) -> dict[int, Demand]:
    """Nodes that can host one replica of ``w`` when empty (model, size, CPU, memory), with the demand."""
    out: dict[int, Demand] = {}
    for i, n in enumerate(p.cluster.nodes):
        d = p.can_host(w, n)
        if d is None or n.cpu_milli < w.cpu_milli or n.memory_mib < w.memory_mib:
            continue
        if d.kind == "fraction":
            model = p.gpu_model(n)
            cap = gib_to_mib(model.memory_gib) if model and model.memory_gib else 0
            if d.memory_mib > cap or d.fraction_milli > MILLI:
                continue
        out[i] = d
    return out


def released_gpus(ni: NodeInfo, r: Run) -> tuple[int, int]:
    """(unfixed, preset-whole) GPUs a running whole-GPU replica frees when it leaves."""
    unfixed = sum(1 for g in r.a.gpus if ni.node.mode_of(g) is None)
    return unfixed, len(r.a.gpus) - unfixed
