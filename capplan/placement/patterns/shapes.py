"""Shapes and node types: the aggregated view the node-pattern model works on.

Pods (replicas) with the same CPU, memory, GPU demand and accepted models are one *shape*;
nodes with the same GPU model, free CPU and memory and the same free capacity per GPU are one
*node type*. Replicas of a shape are interchangeable, and so are nodes of a type, so a plan
is a count of *patterns* (multisets of shapes that fit one node of a type) per type.

Only workloads whose placement rules the pattern model captures are shapes (:func:`covered`);
the strategy places the others first with the existing heuristic.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU

_UNITS_PER_MILLI = UNITS_PER_GPU // MILLI


def covered(w: Workload) -> bool:
    """True when the pattern model captures every placement rule of ``w``.

    Whole-GPU and shared (fraction) demands of independent replicas without GPU memory,
    isolation, required topology or guaranteed SLA are covered; MIG, gangs of several
    replicas and the rest are placed by the heuristic first.
    """
    return (w.mig is None and (w.gpus is not None or w.gpu_fraction is not None) and not w.gpu_memory_gib
            and w.isolation == "none" and not w.topology.required and w.sla != "guaranteed"
            and not (w.is_gang and w.replicas > 1))


@dataclass(frozen=True)
class GpuSlot:
    """Free capacity of one GPU of a node type: units free, may take a whole pod, may take shares."""

    free: int
    whole_ok: bool
    share_ok: bool


@dataclass
class NodeType:
    """Interchangeable nodes: model, free CPU (milli) and memory (MiB), and GPU slots.

    ``slots`` are sorted with whole-GPU-capable slots first; ``gpu_index[n][k]`` is the
    real GPU index of slot ``k`` on node ``nodes[n]``.
    """

    model: str
    cpu: int
    mem: int
    slots: tuple[GpuSlot, ...]
    nodes: list[int] = field(default_factory=list)
    gpu_index: list[tuple[int, ...]] = field(default_factory=list)

    @property
    def n_whole(self) -> int:
        """Number of slots that can take whole-GPU pods (a prefix of ``slots``)."""
        return sum(s.whole_ok for s in self.slots)


@dataclass
class Shape:
    """Interchangeable replicas: CPU, memory, GPU demand and the node types that accept them.

    ``gpus`` > 0 for whole-GPU pods (that many GPUs); otherwise ``units`` is the share of one
    GPU in demand units. ``replicas`` lists the (workload, replica) pairs of the shape.
    """

    cpu: int
    mem: int
    gpus: int
    units: int
    types: frozenset[int]
    replicas: list[tuple[Workload, int]] = field(default_factory=list)

    @property
    def value(self) -> float:
        """Value of one replica, in GPUs (whole GPUs and shares only: equal to ``Problem.replica_value``)."""
        return (self.gpus * UNITS_PER_GPU if self.gpus else self.units) / UNITS_PER_GPU


def node_types(p: Problem, used: list[Assignment]) -> list[NodeType]:
    """Group GPU nodes by what is still free after ``used`` (running and already placed replicas)."""
    cl = p.cluster
    cpu = [n.cpu_milli for n in cl.nodes]
    mem = [n.memory_mib for n in cl.nodes]
    gpu_used: dict[tuple[int, int], int] = defaultdict(int)
    gpu_kind: dict[tuple[int, int], str] = {}
    for a in used:
        i = cl.node_index[a.node]
        w = p.workload(a.workload)
        cpu[i] -= w.cpu_milli
        mem[i] -= w.memory_mib
        for g in a.gpus:
            gpu_kind[(i, g)] = "fraction" if a.fraction is not None else "mig" if a.mig is not None else "whole"
            gpu_used[(i, g)] += round(a.fraction * MILLI) * _UNITS_PER_MILLI if a.fraction else UNITS_PER_GPU
    groups: dict[tuple[object, ...], NodeType] = {}
    out: list[NodeType] = []
    for i, n in enumerate(cl.nodes):
        if not n.gpus or not n.gpu_model:
            continue
        slots: list[tuple[GpuSlot, int]] = []
        for g in range(n.gpus):
            mode = n.mode_of(g)
            fixed = mode.mode if mode else None
            kind = gpu_kind.get((i, g))
            free = UNITS_PER_GPU - gpu_used[(i, g)]
            whole_ok = kind is None and fixed in (None, "whole")
            share_ok = kind in (None, "fraction") and fixed in (None, "shared") and free > 0
            if whole_ok or share_ok:
                slots.append((GpuSlot(free, whole_ok, share_ok), g))
        if not slots or cpu[i] < 0 or mem[i] < 0:
            continue
        slots.sort(key=lambda s: (not s[0].whole_ok, -s[0].free, s[1]))
        key = (p.catalog.get(n.gpu_model).name, cpu[i], mem[i], tuple(s for s, _ in slots))
        if key not in groups:
            groups[key] = NodeType(model=str(key[0]), cpu=cpu[i], mem=mem[i], slots=tuple(s for s, _ in slots))
            out.append(groups[key])
        groups[key].nodes.append(i)
        groups[key].gpu_index.append(tuple(g for _, g in slots))
    return out


def shapes(p: Problem, todo: list[tuple[Workload, int]], types: list[NodeType]) -> list[Shape]:
    """Group the replicas ``todo`` (covered workloads, GPU demand only) into shapes."""
    by_model: dict[str, list[int]] = defaultdict(list)
    for t, nt in enumerate(types):
        by_model[nt.model].append(t)
    groups: dict[tuple[object, ...], Shape] = {}
    out: list[Shape] = []
    memo: dict[tuple[object, ...], tuple[int, int, frozenset[int]]] = {}
    fit_memo: dict[tuple[object, ...], frozenset[int]] = {}
    last: Workload | None = None
    fits: frozenset[int] = frozenset()
    key: tuple[object, ...] = ()
    for w, r in todo:
        sig = (w.gpus, w.gpu_fraction, w.gpu_models)
        if sig not in memo:
            ok: list[int] = []
            gpus = units = 0
            for model, ts in by_model.items():
                d = p.model_demand(w, model)
                if d is None or d.kind not in ("whole", "fraction"):
                    continue
                gpus, units = (d.gpus, 0) if d.kind == "whole" else (0, d.units)
                ok += [t for t in ts if (gpus <= types[t].n_whole if gpus else
                                         any(s.share_ok and s.free >= units for s in types[t].slots))]
            memo[sig] = (gpus, units, frozenset(ok))
        if w is not last:  # the replicas of a workload come together: its shape is found once
            last = w
            gpus, units, ok_types = memo[sig]
            cpu, mem = w.cpu_milli, w.memory_mib
            fkey = (sig, cpu, mem)
            if fkey not in fit_memo:
                fit_memo[fkey] = frozenset(t for t in ok_types if types[t].cpu >= cpu and types[t].mem >= mem)
            fits = fit_memo[fkey]
            key = (cpu, mem, gpus, units, fits)
            if fits and key not in groups:
                groups[key] = Shape(cpu=cpu, mem=mem, gpus=gpus, units=units, types=fits)
                out.append(groups[key])
        if fits:
            groups[key].replicas.append((w, r))
    return out
