"""The inputs and solution of the CP-SAT time model (:mod:`capplan.placement.schedule.timemodel.model`): jobs,
fixed uses of nodes, node capacities and the solved starts, replica counts and (on nodes modelled GPU
by GPU, see :mod:`capplan.placement.schedule.timemodel.gpu`) GPU indices and MIG slice starts."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MigSpec:
    """A MIG profile (or AMD partition mode) on one GPU model: the slices it takes and where it may start."""

    profile: str
    size: int  # memory slices
    compute: int  # compute slices
    starts: tuple[int, ...]
    max_count: int


#: Per replica on a node modelled GPU by GPU: its GPU indices and MIG slice start (0 when not MIG).
Place = tuple[tuple[int, ...], int]


@dataclass(frozen=True)
class Job:
    """One unit of the time model: ``replicas`` replicas that start together."""

    workload: int
    replicas: int
    earliest: int  # first allowed start (seconds, on the grid)
    latest: int  # last allowed start (seconds, on the grid)
    duration: int | None  # None: a service, running to the horizon
    nodes: tuple[int, ...]  # candidate nodes
    gpus: int
    cpu: int
    mem: int
    units: int  # demand units per replica
    release: int
    priority: int
    guaranteed: bool
    domains: tuple[str, ...] = ()  # per candidate node: its domain of the required level ("" when none)
    group: int = -1  # jobs of one workload that must share a domain (-1: none)
    models: tuple[str, ...] = ()  # per candidate node: its GPU model, when the job must stay on one model
    tenant: str = ""
    isolated: bool = False  # node isolation: no other tenant on its nodes while it runs
    kind: str = "whole"  # "whole" (``gpus`` whole GPUs, none for a CPU-only pod), "mig" or "share"
    mig: tuple[MigSpec, ...] = ()  # MIG: per candidate node, the profile there
    fraction: int = 0  # share: milli-GPU per replica
    gpu_mem: int = 0  # share: MiB of GPU memory per replica
    tenant_isolated: bool = False  # tenant isolation: no other tenant on its GPU while it runs
    charges: tuple[tuple[tuple[int, int], ...], ...] = ()  # per candidate node: (quota entry, amount) per replica

    @property
    def partial(self) -> bool:
        """A MIG slice or a share: part of one GPU, placed GPU by GPU."""
        return self.kind != "whole"


@dataclass(frozen=True)
class Busy:
    """A fixed use of a node from ``start`` to ``end``: a running replica (from 0), or work a
    neighbourhood search keeps in place."""

    node: int
    gpus: int
    cpu: int
    mem: int
    end: int
    start: int = 0
    tenant: str = ""
    isolated: bool = False
    # on a node modelled GPU by GPU: which GPUs, and for a MIG slice or a share (``gpus`` 0) what it holds
    gpu_ids: tuple[int, ...] = ()
    kind: str = "whole"
    mig: MigSpec | None = None
    slice_start: int = 0
    fraction: int = 0
    gpu_mem: int = 0
    tenant_isolated: bool = False
    charges: tuple[tuple[int, int], ...] = ()  # (quota entry, amount) in all


@dataclass(frozen=True)
class NodeCap:
    """Capacity of one node: whole GPUs, milli-CPU, MiB, TDP per GPU and its power domains.

    ``per_gpu``: the node may host MIG slices or shares, so its GPUs are modelled one by one
    (``slices``/``compute``: the GPU model's memory and compute slices, 0 without MIG; ``gpu_mem``:
    MiB per GPU; ``homogeneous``: one partition profile per GPU at a time).

    Preset GPU modes (``gpu_modes``; empty tuples when the node has none): ``takes[g]``, the kinds
    (``whole``, ``mig``, ``share``) GPU ``g`` may host; ``mig_starts``, per MIG profile of the model,
    the starts each GPU allows (its preset layout's); ``gpu_class[g]``, GPUs of one class are
    interchangeable (same preset). On a node not modelled GPU by GPU, ``gpus`` counts only the GPUs
    that may be used whole.
    """

    gpus: int
    cpu: int
    mem: int
    tdp: int
    power: tuple[int, ...]  # indices into the budget list
    per_gpu: bool = False
    slices: int = 0
    compute: int = 0
    gpu_mem: int = 0
    homogeneous: bool = False
    takes: tuple[frozenset[str], ...] = ()
    mig_starts: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] = ()
    gpu_class: tuple[int, ...] = ()

    def takes_kind(self, g: int, kind: str) -> bool:
        """GPU ``g`` may host work of ``kind`` (``whole``, ``mig``, ``share``) at all."""
        return not self.takes or kind in self.takes[g]

    def starts_on(self, g: int, spec: MigSpec) -> tuple[int, ...]:
        """The slice starts of ``spec``'s profile that GPU ``g`` allows (none when it takes no MIG)."""
        if not self.takes_kind(g, "mig"):
            return ()
        for profile, per in self.mig_starts:
            if profile == spec.profile:
                return per[g]
        return spec.starts

    def classes(self) -> list[list[int]]:
        """The GPUs in classes of interchangeable ones (same preset), each sorted, in order of first GPU."""
        if not self.gpu_class:
            return [list(range(self.gpus))] if self.gpus else []
        out: dict[int, list[int]] = {}
        for g, c in enumerate(self.gpu_class):
            out.setdefault(c, []).append(g)
        return list(out.values())


@dataclass
class TimeSolution:
    """Per job: start (None when absent) and replicas per node; stage values and bounds."""

    starts: list[int | None]
    counts: list[dict[int, int]]
    stages: list[tuple[str, int, float, str]] = field(default_factory=list)  # name, value, bound, status (scaled)
    deterministic: float = 0.0  # CP-SAT deterministic time spent
    places: list[dict[int, list[Place]]] = field(default_factory=list)  # per job: node -> per replica (per-GPU nodes)
    exact: bool = True  # False: the model was stricter than the rules (its bounds and optimality prove nothing)

    def proven(self) -> bool:
        """Every stage solved to optimality, on a model exactly as strict as the rules."""
        return self.exact and bool(self.stages) and all(s[3] == "optimal" for s in self.stages)
