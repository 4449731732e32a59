"""The validated, immutable placement problem: cluster, workloads, running state and catalog.

A :class:`Problem` is built once at the edge (see :mod:`capplan.io.scenario` for the YAML form) and
never changes; :meth:`Problem.replace` returns a new, re-validated problem. Planners read
integer quantities from it: milli-CPU, MiB, watts and demand units
(:data:`capplan.model.units.UNITS_PER_GPU` per GPU).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from capplan.model.catalog import Catalog, GpuModel, MigProfile
from capplan.model.decode import LIMITS
from capplan.model.errors import InputError, suggest
from capplan.model.interruptions import Interruptions
from capplan.model.plan import Assignment, MigSlot
from capplan.model.quota import ClusterQueue, Flavor
from capplan.model.timing import RunningEnd, ScheduleSpec, format_seconds, parse_seconds
from capplan.model.units import MILLI, UNITS_PER_GPU, Bool, Float, Frozen, Int, Name, Str, cores_to_milli, gib_to_mib

Kind = Literal["training", "inference", "shared"]
Isolation = Literal["none", "tenant", "node"]
Sla = Literal["guaranteed", "best-effort"]
#: How MIG devices are requested (the NVIDIA device plugin's MIG strategy): ``mixed`` as
#: ``nvidia.com/mig-<profile>``; ``single`` as ``nvidia.com/gpu`` on a node whose MIG GPUs all
#: carry one profile.
MigStrategy = Literal["mixed", "single"]
#: Most spare nodes one gang may hold.
MAX_SPARES = 64


class Domain(Frozen):
    """A topology domain above the node level (a block, a rack, ...)."""

    level: Name
    name: Name
    parent: Str | None = None
    power_w: Int | None = Field(default=None, ge=0, le=LIMITS.power_kw * 1000)


#: The effects of a node taint (Kubernetes ``spec.taints[].effect``).
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
#: Effects that keep a new replica off a node unless it tolerates them; ``PreferNoSchedule`` is ignored.
HARD_EFFECTS = ("NoSchedule", "NoExecute")


class Taint(Frozen):
    """A node taint ``key=value:effect`` (Kubernetes ``spec.taints``): a replica lands on the node only
    when one of its tolerations tolerates it (``NoSchedule``, ``NoExecute``; ``PreferNoSchedule`` is ignored)."""

    key: Name
    value: Str = ""
    effect: TaintEffect

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


class Toleration(Frozen):
    """A workload's toleration, with Kubernetes' matching rules (``Toleration.ToleratesTaint``).

    An empty ``effect`` matches every effect; an empty ``key`` (with ``operator: Exists``) matches every
    key; ``Exists`` matches every value, ``Equal`` (the default) the value given.
    """

    key: Str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: Str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""

    @model_validator(mode="after")
    def _rules(self) -> Toleration:
        if not self.key and self.operator != "Exists":
            raise ValueError("a toleration without a key must have operator: Exists (it tolerates every taint)")
        if self.operator == "Exists" and self.value:
            raise ValueError("operator: Exists matches every value; drop value or use operator: Equal")
        return self

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates ``taint`` (effect, then key, then value by the operator)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


def untolerated(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> list[Taint]:
    """The ``NoSchedule``/``NoExecute`` taints among ``taints`` that no toleration tolerates."""
    tols = tuple(tolerations)
    return [t for t in taints if t.effect in HARD_EFFECTS and not any(x.tolerates(t) for x in tols)]


class GpuMode(Frozen):
    """Pre-existing mode of one GPU: ``whole``, ``mig`` (optionally a fixed layout) or ``shared``.

    With a MIG ``layout`` the GPU offers exactly those instances (profile and start); without
    one, any valid MIG instance may be created.
    """

    gpu: Int = Field(ge=0, lt=LIMITS.gpus_per_node)
    mode: Literal["whole", "mig", "shared"]
    layout: tuple[MigSlot, ...] | None = None


class Node(Frozen):
    """A machine: its GPUs, CPU and host memory, and the domains that contain it.

    ``mig_strategy: single`` (the device plugin's ``nvidia.com/mig.strategy=single``): the node
    either runs no MIG at all or every GPU preset to MIG with instances of one profile, offered
    as ``nvidia.com/gpu``; only ``mig_strategy: single`` workloads of that profile use them.
    """

    name: Name
    path: tuple[Str, ...] = ()
    gpu_model: Str | None = None
    gpus: Int = Field(default=0, ge=0, le=LIMITS.gpus_per_node)
    cpu_milli: Int = Field(ge=0, le=LIMITS.cpu_cores * MILLI)
    memory_mib: Int = Field(ge=0, le=LIMITS.memory_gib * 1024)
    gpu_modes: tuple[GpuMode, ...] = ()
    mig_strategy: MigStrategy = "mixed"
    taints: tuple[Taint, ...] = ()

    def mode_of(self, gpu: int) -> GpuMode | None:
        """The fixed mode of GPU ``gpu``, or None when the planner may choose."""
        for m in self.gpu_modes:
            if m.gpu == gpu:
                return m
        return None

    @property
    def single_profile(self) -> str | None:
        """The one MIG profile a ``single``-strategy node offers: every GPU preset to a MIG layout of it.

        None when MIG is off on the node (or the presets do not form such a layout).
        """
        layouts = [m.layout for m in self.gpu_modes if m.mode == "mig"]
        if not self.gpus or len(layouts) != self.gpus or any(not lay for lay in layouts):
            return None
        profiles = {s.profile for lay in layouts if lay for s in lay}
        return profiles.pop() if len(profiles) == 1 else None


class Cluster(Frozen):
    """Topology levels (outermost first, ending with ``node``), domains and nodes."""

    name: Str = "cluster"
    levels: tuple[Name, ...] = ("node",)
    domains: tuple[Domain, ...] = ()
    nodes: tuple[Node, ...] = ()

    @cached_property
    def node_index(self) -> dict[str, int]:
        """Node name -> position in :attr:`nodes`."""
        return {n.name: i for i, n in enumerate(self.nodes)}

    def domain_of(self, node: Node, level: str) -> str:
        """Name of the domain of ``level`` that contains ``node`` (the node itself for ``node``)."""
        if level == self.levels[-1]:
            return node.name
        return node.path[self.levels.index(level)]

    @property
    def gpus_total(self) -> int:
        """Number of physical GPUs in the cluster."""
        return sum(n.gpus for n in self.nodes)


class Topology(Frozen):
    """Topology wishes: ``required`` level (all replicas in one domain), ``preferred`` (pack tightly)."""

    required: Str | None = None
    preferred: Str | None = None


class Workload(Frozen):
    """A set of identical replicas with one resource demand each.

    Each replica asks for at most one kind of GPU demand: ``gpus`` (whole GPUs on one node),
    ``mig`` (a profile name, or ``auto`` with ``gpu_memory_gib``) or ``gpu_fraction`` (a
    time-sliced share of one GPU). A replica without GPU demand is a CPU-only pod.

    For ``capplan schedule``: ``duration`` is how long a replica runs once started (none: a
    service, running to the horizon), ``release`` the earliest start and ``deadline`` the latest
    end, all in seconds (the scenario may write ``90s``, ``15m``, ``2h``, ``3d``).

    ``mig_strategy: single`` marks a MIG demand requested as ``nvidia.com/gpu`` from the
    single-strategy nodes of that profile (the default ``mixed`` asks ``nvidia.com/mig-<profile>``).

    Goodput (training gangs of whole GPUs, with the scenario's ``interruptions:``): ``checkpoint`` is
    the time to write one checkpoint, ``checkpoint_interval`` the work between two (default: the
    interval maximising goodput), ``spares`` the hot-spare nodes held idle for the gang (a number or
    ``auto``; see :mod:`capplan.model.goodput`).
    """

    name: Name
    kind: Kind = "inference"
    replicas: Int = Field(default=1, gt=0, le=LIMITS.replicas)
    gpus: Int | None = Field(default=None, gt=0, le=LIMITS.gpus_per_node)
    mig: Name | None = None
    gpu_fraction: Float | None = Field(default=None, gt=0, lt=1)
    gpu_memory_gib: Float | None = Field(default=None, ge=0, le=LIMITS.memory_gib)
    cpu: Float = Field(default=0, ge=0, le=LIMITS.cpu_cores)
    memory_gib: Float = Field(default=0, ge=0, le=LIMITS.memory_gib)
    gpu_models: tuple[Name, ...] | None = None
    topology: Topology = Topology()
    tenant: Name = "default"
    isolation: Isolation = "none"
    priority: Int = Field(default=0, ge=-LIMITS.weight, le=LIMITS.weight)
    sla: Sla = "best-effort"
    preemptible: Bool = False
    migratable: Bool = False
    migration_cost: Int = Field(default=1, ge=0, le=LIMITS.weight)
    mixed_models: Bool = False
    mig_strategy: MigStrategy = "mixed"
    duration: int | None = Field(default=None, gt=0)
    release: int = Field(default=0, ge=0)
    deadline: int | None = Field(default=None, gt=0)
    checkpoint: int | None = Field(default=None, gt=0)
    checkpoint_interval: int | None = Field(default=None, gt=0)
    spares: int | Literal["auto"] = 0
    queue: Name | None = None
    created: int = 0
    tolerations: tuple[Toleration, ...] = ()

    #: Fields given in seconds or as ``90s``/``15m``/``2h``/``3d`` (the file format's times; the schema follows).
    TIME_FIELDS: ClassVar[tuple[str, ...]] = ("duration", "release", "deadline", "checkpoint", "checkpoint_interval")

    @field_validator(*TIME_FIELDS, mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> Any:
        return None if v is None else parse_seconds(v)

    @field_validator("spares", mode="before")
    @classmethod
    def _spares(cls, v: Any) -> Any:
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_SPARES):
            return v
        raise ValueError(f"expected a number of spare nodes 0..{MAX_SPARES} or auto, got {v!r}")
    @field_validator("created", mode="before")
    @classmethod
    def _signed_seconds(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().startswith("-"):
            return -parse_seconds(v.strip()[1:])
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        return parse_seconds(v)

    @model_validator(mode="after")
    def _times(self) -> Workload:
        if self.deadline is None:
            return self
        if self.duration is None:
            raise ValueError("a deadline needs a duration (a workload without one is a service that runs to "
                             "the horizon); give duration or drop deadline")
        if self.release + self.duration > self.deadline:
            raise ValueError(f"release {format_seconds(self.release)} + duration {format_seconds(self.duration)} "
                             f"ends after the deadline {format_seconds(self.deadline)}; move the deadline or release")
        return self

    @model_validator(mode="after")
    def _one_demand(self) -> Workload:
        given = [k for k in ("gpus", "mig", "gpu_fraction") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one GPU demand per replica, not {' and '.join(given)}")
        if not given and self.cpu <= 0 and self.memory_gib <= 0:
            raise ValueError("a replica without GPU demand is a CPU-only pod and must ask for cpu or memory_gib")
        if self.mig == "auto" and self.gpu_memory_gib is None:
            raise ValueError("mig: auto needs gpu_memory_gib to pick the smallest fitting profile")
        if self.gpu_fraction is not None and round(self.gpu_fraction * MILLI) == 0:
            raise ValueError("gpu_fraction must be at least 0.001")
        if self.mixed_models and self.kind != "training":
            raise ValueError("mixed_models applies to training gangs only; remove it or set kind: training")
        return self

    @property
    def is_gang(self) -> bool:
        """Training workloads are gangs: all replicas are placed or none."""
        return self.kind == "training"

    @property
    def one_model(self) -> bool:
        """A gang whose replicas must all sit on one GPU model (unless ``mixed_models: true``)."""
        return self.kind == "training" and not self.mixed_models and self.has_gpu_demand

    @property
    def has_gpu_demand(self) -> bool:
        """Whether a replica asks for GPUs (whole, MIG or a share); False for CPU-only pods."""
        return self.gpus is not None or self.mig is not None or self.gpu_fraction is not None

    @cached_property
    def cpu_milli(self) -> int:
        """Host CPU per replica in milli-cores."""
        return cores_to_milli(self.cpu)

    @cached_property
    def memory_mib(self) -> int:
        """Host memory per replica in MiB."""
        return gib_to_mib(self.memory_gib)


@dataclass(frozen=True)
class Demand:
    """A replica's GPU demand resolved for one GPU model, in integer units."""

    kind: Literal["none", "whole", "mig", "fraction"]
    gpus: int = 0
    profile: MigProfile | None = None
    fraction_milli: int = 0
    memory_mib: int = 0
    units: int = 0


class Problem(Frozen):
    """A complete, validated placement problem.

    Attributes
    ----------
    cluster
        Topology, domains and nodes.
    workloads
        Workloads with unique names.
    running
        Replicas already running (same shape as plan assignments), for incremental planning.
    catalog
        The GPU catalog the names were resolved against.
    schedule
        The time grid of ``capplan schedule`` (horizon and step), when the scenario gives one.
    ends_in
        Remaining run time of running replicas that end (the others run to the horizon).
    interruptions
        Failure rates and restart times of the goodput model (gangs with ``checkpoint``).
    flavors, queues
        Kueue's ResourceFlavors and ClusterQueues: the quota per queue over time (:mod:`capplan.model.quota`);
        a workload's ``queue`` names its ClusterQueue.
    now
        The wall-clock time (RFC 3339) of time 0, when the scenario was taken from a live cluster.
    reconfigure
        What a GPU's preset mode (``gpu_modes``) means: ``forbidden`` (the default) a fixed mode and
        layout; ``allowed`` the GPU's current mode and layout, which a plan may change at the cost of one
        reconfigured GPU (docs/concepts.md). GPUs without a preset mode are free either way.
    """

    cluster: Cluster
    workloads: tuple[Workload, ...] = ()
    running: tuple[Assignment, ...] = ()
    catalog: Catalog
    schedule: ScheduleSpec | None = None
    ends_in: tuple[RunningEnd, ...] = ()
    interruptions: Interruptions | None = None
    flavors: tuple[Flavor, ...] = ()
    queues: tuple[ClusterQueue, ...] = ()
    now: Str | None = None
    reconfigure: Literal["forbidden", "allowed"] = "forbidden"

    @model_validator(mode="after")
    def _check(self) -> Problem:
        from capplan.model.checks import check_problem

        check_problem(self)
        return self

    def replace(self, **changes: Any) -> Problem:
        """Return a new problem with ``changes`` applied, validated again."""
        data = {k: getattr(self, k) for k in ("cluster", "workloads", "running", "catalog", "schedule", "ends_in",
                                          "interruptions", "flavors", "queues", "now", "reconfigure")}
        data.update(changes)
        if "ends_in" not in changes:  # keep the remaining run times of replicas still running
            keys = {(a.workload, a.replica) for a in data["running"]}
            data["ends_in"] = tuple(e for e in self.ends_in if (e.workload, e.replica) in keys)
        return Problem.model_validate(data)

    @cached_property
    def workload_index(self) -> dict[str, int]:
        """Workload name -> position in :attr:`workloads`."""
        return {w.name: i for i, w in enumerate(self.workloads)}

    def workload(self, name: str) -> Workload:
        """The workload called ``name``."""
        return self.workloads[self.workload_index[name]]

    @cached_property
    def priorities(self) -> tuple[int, ...]:
        """Distinct workload priorities, highest first (the objective's order)."""
        return tuple(sorted({w.priority for w in self.workloads}, reverse=True))

    def gpu_model(self, node: Node) -> GpuModel | None:
        """The catalog model of ``node``'s GPUs (None for CPU-only nodes)."""
        return self.catalog.get(node.gpu_model) if node.gpu_model else None

    @cached_property
    def demand_cache(self) -> dict[tuple[str, str | None], Demand | None]:
        """Memo of :meth:`model_demand` (a plain dict: fast lookups on hot paths)."""
        return {}

    def demand(self, w: Workload, model: GpuModel | None) -> Demand | None:
        """Resolve ``w``'s per-replica GPU demand on ``model``; None if that model cannot host it."""
        return _resolve(w, model)

    def model_demand(self, w: Workload, model_name: str | None) -> Demand | None:
        """``w``'s demand on nodes of GPU model ``model_name`` (None: CPU-only node), or None if not allowed.

        Node size is not considered here; :meth:`can_host` adds the per-node GPU count check.
        """
        key = (w.name, model_name)
        cache = self.demand_cache
        if key in cache:
            return cache[key]
        if w.gpus is None and w.mig is None and w.gpu_fraction is None:
            d: Demand | None = _resolve(w, None)
        elif model_name is None:
            d = None
        else:
            model = self.catalog.get(model_name)
            allowed = w.gpu_models is None or model.name in self.allowed_models(w)
            d = _resolve(w, model) if allowed else None
        cache[key] = d
        return d

    @cached_property
    def value_cache(self) -> dict[str, int]:
        """Memo of :meth:`replica_value` by workload name (and by request, under keys starting with a NUL)."""
        return {}

    def replica_value(self, w: Workload) -> int:
        """The value of one placed replica of ``w`` in demand units: fixed by the workload alone.

        This is the one definition every planner, bound and report uses (the contract of
        ``docs/concepts.md``), and it never depends on where the replica lands:

        * whole GPUs: ``gpus`` GPUs;
        * ``gpu_fraction``: the fraction;
        * a named MIG profile: its compute fraction of the GPU (compute slices / the model's
          compute slices), the smallest among the allowed models that offer the profile;
        * ``mig: auto``: the smallest compute fraction among the profiles with at least
          ``gpu_memory_gib`` on the allowed models;
        * CPU-only pods (and MIG demands no allowed model can serve): 0.
        """
        v = self.value_cache.get(w.name)
        if v is None:
            # workloads of one request share the value (a fleet has thousands of workloads, a few requests)
            shape = f"\0{w.gpus}\0{w.gpu_fraction}\0{w.mig}\0{w.gpu_memory_gib}\0{w.gpu_models}"
            v = self.value_cache.get(shape)
            if v is None:
                v = self.value_cache[shape] = _value(self, w)
            self.value_cache[w.name] = v
        return v

    def demand_units(self, w: Workload) -> int:
        """Value of one replica in demand units (see :meth:`replica_value`); for ordering."""
        return self.replica_value(w)

    def allowed_models(self, w: Workload) -> list[str]:
        """Canonical GPU model names ``w`` may use (all catalog models when unrestricted)."""
        if w.gpu_models is None:
            return self.catalog.names()
        return [self.catalog.get(m).name for m in w.gpu_models]

    @cached_property
    def single_mig(self) -> bool:
        """True when a node or workload uses ``mig_strategy: single`` (eligibility then depends on the node)."""
        return any(n.mig_strategy == "single" for n in self.cluster.nodes) or any(
            w.mig_strategy == "single" for w in self.workloads)

    @cached_property
    def tainted(self) -> bool:
        """True when a node has taints (eligibility then depends on the node, not only its GPU model)."""
        return any(n.taints for n in self.cluster.nodes)

    def can_host(self, w: Workload, node: Node) -> Demand | None:
        """The demand ``w`` would have on ``node``, or None when the node is never eligible for a new replica.

        A MIG demand lands only on a node of the same ``mig_strategy``; on a ``single`` node only
        when the node's GPUs are preset to MIG instances of exactly that profile. A node with a
        ``NoSchedule``/``NoExecute`` taint ``w`` does not tolerate is never eligible (a replica already
        running there keeps its demand: see :meth:`demand_on`).
        """
        if node.taints and untolerated(node.taints, w.tolerations):
            return None
        return self.demand_on(w, node)

    def demand_on(self, w: Workload, node: Node) -> Demand | None:
        """The demand of a replica of ``w`` on ``node`` by the hardware alone (GPU model and count, MIG
        strategy), taints aside: for replicas already assigned there (the running state, a plan's)."""
        d = self.model_demand(w, node.gpu_model if node.gpus else None)
        if d is not None and d.kind == "whole" and d.gpus > node.gpus:
            return None
        if d is not None and d.kind == "mig" and (self.single_mig or w.mig_strategy != "mixed") and (
                w.mig_strategy != node.mig_strategy
                or (node.mig_strategy == "single" and d.profile is not None
                    and node.single_profile != d.profile.name)):
            return None
        return d


def _resolve(w: Workload, model: GpuModel | None) -> Demand | None:
    mem = gib_to_mib(w.gpu_memory_gib) if w.gpu_memory_gib else 0
    if w.gpus is None and w.mig is None and w.gpu_fraction is None:
        return Demand(kind="none")
    if model is None:
        return None
    model_mem = gib_to_mib(model.memory_gib) if model.memory_gib else None
    if mem and (model_mem is None or mem > model_mem):
        return None
    if w.gpus is not None:
        return Demand(kind="whole", gpus=w.gpus, memory_mib=mem, units=w.gpus * UNITS_PER_GPU)
    if w.gpu_fraction is not None:
        milli = round(w.gpu_fraction * MILLI)
        return Demand(kind="fraction", gpus=1, fraction_milli=milli, memory_mib=mem,
                      units=milli * (UNITS_PER_GPU // MILLI))
    assert w.mig is not None
    if not model.supports_mig:
        return None
    if w.mig == "auto":
        fitting = [p for p in model.profiles if gib_to_mib(p.memory_gib) >= mem and "+" not in p.name]
        if not fitting:
            return None
        prof = min(fitting, key=lambda p: (p.memory_gib, p.compute_slices, p.memory_slices))
    else:
        found = [p for p in model.profiles if p.name == w.mig]
        if not found or gib_to_mib(found[0].memory_gib) < mem:
            return None
        prof = found[0]
    return Demand(kind="mig", gpus=1, profile=prof, memory_mib=mem, units=model.profile_units(prof))


def _value(p: Problem, w: Workload) -> int:
    if w.gpus is not None:
        return w.gpus * UNITS_PER_GPU
    if w.gpu_fraction is not None:
        return round(w.gpu_fraction * MILLI) * (UNITS_PER_GPU // MILLI)
    if w.mig is None:
        return 0
    mem = gib_to_mib(w.gpu_memory_gib) if w.gpu_memory_gib else 0
    fractions = []
    for name in p.allowed_models(w):
        model = p.catalog.get(name)
        if not model.supports_mig:
            continue
        for prof in model.profiles:
            if gib_to_mib(prof.memory_gib) < mem:
                continue
            if (w.mig == "auto" and "+" not in prof.name) or prof.name == w.mig:
                fractions.append(model.profile_units(prof))
    return min(fractions, default=0)


def unknown_profile_error(path: str, name: str, catalog: Catalog, models: Iterable[str] = ()) -> InputError:
    """Error for a MIG profile name no model in the catalog knows; suggestions come from ``models`` first."""
    near = sorted({p.name for m in models for p in catalog.get(m).profiles})
    names = near if suggest(name, near) else sorted({p.name for m in catalog.models for p in m.profiles})
    return InputError(path, f"unknown MIG profile {name!r}{suggest(name, names)}; "
                            "use a profile of the GPU model (see `capplan catalog MODEL`) or `auto`")
