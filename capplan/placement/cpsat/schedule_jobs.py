"""The inputs and solution of the CP-SAT time model (:mod:`capplan.placement.cpsat.schedule`): jobs,
fixed uses of nodes, node capacities and the solved starts and replica counts."""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class NodeCap:
    """Capacity of one node: whole GPUs, milli-CPU, MiB, TDP per GPU and its power domains."""

    gpus: int
    cpu: int
    mem: int
    tdp: int
    power: tuple[int, ...]  # indices into the budget list


@dataclass
class TimeSolution:
    """Per job: start (None when absent) and replicas per node; stage values and bounds."""

    starts: list[int | None]
    counts: list[dict[int, int]]
    stages: list[tuple[str, int, float, str]] = field(default_factory=list)  # name, value, bound, status (scaled)
    deterministic: float = 0.0  # CP-SAT deterministic time spent

    def proven(self) -> bool:
        """Every stage solved to optimality."""
        return bool(self.stages) and all(s[3] == "optimal" for s in self.stages)
