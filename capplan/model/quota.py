"""Quota per queue over time: Kueue's ClusterQueues, their flavors and quotas, as scenario data.

A :class:`ClusterQueue` holds quotas per (flavor, resource): ``nominal``, and inside a cohort a
``borrowing_limit`` (how far over its nominal quota it may go with its cohort's unused quota;
none: no limit) and a ``lending_limit`` (how much of its nominal quota the cohort may use; none:
all of it). A :class:`Flavor` (Kueue's ResourceFlavor) is a set of nodes.

The rule, at every instant :

* a replica of a workload of queue ``q`` on node ``n`` charges each resource ``r`` it requests
  to the first quota entry of ``q`` for ``r`` whose flavor holds ``n``; without one, the replica
  may not run on ``n`` (Kueue never admits a workload to a flavor its ClusterQueue has no quota for);
* per (queue, flavor, resource), usage <= nominal (no cohort) or nominal + borrowing_limit;
* per (cohort, flavor, resource): the sum over members of max(0, usage - (nominal - lendable))
  <= the sum over members of lendable, where lendable = lending_limit, or nominal without one.

Amounts are integers: GPUs and MIG instances in counts, ``cpu`` in milli-cores, ``memory`` in MiB.
Quota is charged when a replica starts and released when it ends; the running state's usage counts,
and a rule is broken only where a replica that is not in the running state starts (the running
state may already exceed a quota that was lowered since).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from capplan.model.units import MILLI, Float, Frozen, Name, Str

#: The resources a quota may name: host CPU and memory, whole GPUs (a share or a MIG slice under
#: ``mig_strategy: single`` counts one), MIG instances of one profile (``nvidia.com/mig-<profile>``).
BASE_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "amd.com/gpu")
MIG_PREFIX = "nvidia.com/mig-"
Strategy = Literal["StrictFIFO", "BestEffortFIFO"]


def known_resource(name: str) -> bool:
    """Whether quotas of ``name`` are modelled (:data:`BASE_RESOURCES` or ``nvidia.com/mig-<profile>``)."""
    return name in BASE_RESOURCES or (name.startswith(MIG_PREFIX) and len(name) > len(MIG_PREFIX))


def amount(resource: str, value: float) -> int:
    """A quota in the integer unit of ``resource``: milli-cores for ``cpu``, MiB for ``memory``, else a count."""
    if resource == "cpu":
        return round(value * MILLI)
    if resource == "memory":
        return round(value * 1024)
    return int(value)


class Flavor(Frozen):
    """A ResourceFlavor: the nodes it selects (None: every node, as a flavor without nodeLabels), and the
    Kueue Topology it has for topology-aware scheduling (if any)."""

    name: Name
    nodes: tuple[Str, ...] | None = None
    topology: Str | None = None


class QuotaEntry(Frozen):
    """The quota of one queue for one resource of one flavor (``cpu`` in cores, ``memory`` in GiB)."""

    flavor: Name
    resource: Name
    nominal: Float = Field(ge=0)
    borrowing_limit: Float | None = Field(default=None, ge=0)
    lending_limit: Float | None = Field(default=None, ge=0)

    @field_validator("resource")
    @classmethod
    def _resource(cls, v: str) -> str:
        if not known_resource(v):
            raise ValueError(f"unknown quota resource {v!r}; use cpu, memory, nvidia.com/gpu, amd.com/gpu or "
                             "nvidia.com/mig-<profile>")
        return v

    @model_validator(mode="after")
    def _lend(self) -> QuotaEntry:
        if self.lending_limit is not None and self.lending_limit > self.nominal:
            raise ValueError(f"lending_limit {self.lending_limit:g} is over the nominal quota {self.nominal:g}")
        return self

    @property
    def nominal_int(self) -> int:
        """``nominal`` in the resource's integer unit."""
        return amount(self.resource, self.nominal)

    @property
    def lendable(self) -> int:
        """What the cohort may use of this quota (integer unit)."""
        return amount(self.resource, self.lending_limit if self.lending_limit is not None else self.nominal)

    @property
    def ceiling(self) -> int | None:
        """Most the queue itself may use inside a cohort (None: its cohort decides)."""
        if self.borrowing_limit is None:
            return None
        return self.nominal_int + amount(self.resource, self.borrowing_limit)


class ClusterQueue(Frozen):
    """A ClusterQueue: its cohort, queueing strategy and quotas (in resource-group, flavor order)."""

    name: Name
    cohort: Name | None = None
    strategy: Strategy = "BestEffortFIFO"
    quotas: tuple[QuotaEntry, ...] = ()

    def limit(self, e: QuotaEntry) -> int | None:
        """Most this queue may use of entry ``e`` on its own (None: only the cohort bounds it)."""
        if self.cohort is None:
            return e.nominal_int
        return e.ceiling


#: A quota key: (queue, flavor, resource).
Key = tuple[str, str, str]


def quota_rows(queue: ClusterQueue) -> dict[str, list[QuotaEntry]]:
    """Resource -> its quota entries in flavor order."""
    out: dict[str, list[QuotaEntry]] = {}
    for e in queue.quotas:
        out.setdefault(e.resource, []).append(e)
    return out
