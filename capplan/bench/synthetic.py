"""Synthetic fleets and workloads with fixed seeds, parameterised by a small YAML config.

Fleet: ``blocks`` x ``racks_per_block`` x ``nodes_per_rack`` nodes, each with ``gpus_per_node``
GPUs of one model drawn from ``models`` (weights; H100/H200/A100 mixes), CPU and memory per node.
Workload: pods drawn until their total GPU demand reaches ``load`` x capacity, each of a kind
drawn with the weights ``mix``:

* ``mig``: MIG-heavy inference, one profile family ``Ng`` (``mig_profiles``) per pod. The pod
  list holds it as a share of N/7 of one GPU (milli-GPU: the online simulator models slice
  capacity, not MIG placement rules); :func:`mig_requests` maps it to a real MIG profile of the
  catalog for the batch protocol;
* ``shared``: GPU-sharing pods with a fraction drawn from ``share_fractions``;
* ``single``: 1-GPU pods;
* ``training``: gangs of 8 to 512 GPUs (``training_sizes``, heavy-tailed with Zipf exponent
  ``size_tail``), 8 GPUs per member, all members or none; a gang is drawn among the sizes that fit the
  fleet and the load still missing (the smallest size when none does), so the workload ends within one
  small gang of ``load``;
* ``cpu_pods``: number of CPU-only pods.

Each pod's kind (``mig``, ``shared``, ``single``, ``training``, ``cpu``) and, for MIG pods, its
profile family are recorded beside the pod list (``Synthetic.kinds`` / ``Synthetic.families``).

See ``benchmarks/configs/*.yaml`` for examples; unknown keys are an error.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capplan.io.alibaba import TraceNode, TracePod
from capplan.io.files import load_yaml_or_json
from capplan.model.catalog import Catalog, GpuModel
from capplan.model.errors import InputError

MODELS = {"H100": "H100-SXM5-80GB", "H200": "H200-SXM-141GB", "A100": "A100-SXM4-80GB"}
# MIG profile families (compute slices of 7) that every model in MODELS offers.
MIG_FAMILIES = ("1g", "2g", "3g", "4g", "7g")


@dataclass(frozen=True)
class SynthConfig:
    """Generator parameters (defaults give a small mixed fleet)."""

    seed: int = 1
    blocks: int = 2
    racks_per_block: int = 2
    nodes_per_rack: int = 8
    gpus_per_node: int = 8
    cpu_per_node: int = 224
    memory_gib_per_node: int = 2048
    models: dict[str, float] = field(default_factory=lambda: {"H100": 0.5, "H200": 0.25, "A100": 0.25})
    load: float = 1.0
    mix: dict[str, float] = field(default_factory=lambda: {"mig": 0.3, "shared": 0.1, "single": 0.2,
                                                           "training": 0.4})
    mig_profiles: dict[str, float] = field(default_factory=lambda: {"1g": 0.5, "2g": 0.2, "3g": 0.2, "7g": 0.1})
    share_fractions: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75])
    training_sizes: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128, 256, 512])
    size_tail: float = 1.2
    cpu_per_gpu: int = 16
    memory_gib_per_gpu: int = 128
    cpu_pods: int = 0
    priorities: dict[int, float] = field(default_factory=lambda: {0: 1.0})


def load_config(path: str | Path) -> SynthConfig:
    """Read a generator config (YAML/JSON); unknown keys or bad values raise InputError."""
    raw = load_yaml_or_json(path, "synthetic config") or {}
    if not isinstance(raw, dict):
        raise InputError(str(path), "a synthetic config is a mapping of parameters")
    known = set(SynthConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise InputError(f"{path}.{unknown[0]}", f"unknown parameter; known: {', '.join(sorted(known))}")
    cfg = SynthConfig(**raw)
    bad = [m for m in cfg.models if m not in MODELS]
    if bad:
        raise InputError(f"{path}.models", f"unknown model {bad[0]!r}; choose from {', '.join(MODELS)}")
    bad = [f for f in cfg.mig_profiles if f not in MIG_FAMILIES]
    if bad:
        raise InputError(f"{path}.mig_profiles", f"unknown MIG profile family {bad[0]!r}; "
                                                 f"choose from {', '.join(MIG_FAMILIES)}")
    if min(cfg.blocks, cfg.racks_per_block, cfg.nodes_per_rack, cfg.gpus_per_node) < 1 or cfg.load <= 0:
        raise InputError(f"{path}", "fleet sizes must be at least 1 and load positive")
    return cfg


@dataclass
class Synthetic:
    """A generated fleet (trace-style nodes with rack/block ids) and workload.

    Per pod (same index as ``pods``): ``replicas`` (gang members), ``priority``, ``kinds``
    (``mig``, ``shared``, ``single``, ``training`` or ``cpu``) and ``families`` (the MIG profile
    family drawn, e.g. ``2g``, for ``mig`` pods; None otherwise).
    """

    nodes: list[TraceNode]
    rack: list[int]
    block: list[int]
    pods: list[TracePod]
    replicas: list[int]
    priority: list[int]
    kinds: list[str] = field(default_factory=list)
    families: list[str | None] = field(default_factory=list)

    def cluster_data(self) -> dict[str, Any]:
        """The scenario ``cluster`` mapping (levels block/rack/node) of the fleet."""
        blocks: dict[int, dict[int, list[dict[str, Any]]]] = {}
        for n, r, b in zip(self.nodes, self.rack, self.block, strict=True):
            blocks.setdefault(b, {}).setdefault(r, []).append(
                {"name": n.name, "cpu": n.cpu_milli // 1000, "memory_gib": n.memory_mib // 1024,
                 "gpu": MODELS[n.model], "gpus": n.gpus})
        return {"name": "synthetic", "levels": ["block", "rack", "node"],
                "blocks": [{"name": f"block-{b}", "racks": [{"name": f"rack-{r}", "nodes": ns}
                                                            for r, ns in racks.items()]}
                           for b, racks in blocks.items()]}


def _pick(rng: random.Random, weights: dict[Any, float]) -> Any:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def generate(cfg: SynthConfig) -> Synthetic:
    """Generate the fleet and workload for ``cfg`` (deterministic for ``cfg.seed``)."""
    rng = random.Random(cfg.seed)
    nodes, rack, block = [], [], []
    for b in range(cfg.blocks):
        for r in range(cfg.racks_per_block):
            model = _pick(rng, cfg.models)  # one model per rack
            for k in range(cfg.nodes_per_rack):
                nodes.append(TraceNode(f"b{b}-r{r}-n{k}", cfg.cpu_per_node * 1000, cfg.memory_gib_per_node * 1024,
                                       cfg.gpus_per_node, model))
                rack.append(b * cfg.racks_per_block + r)
                block.append(b)
    capacity = len(nodes) * cfg.gpus_per_node * 1000
    fleet_gpus = len(nodes) * cfg.gpus_per_node
    pods: list[TracePod] = []
    replicas: list[int] = []
    priority: list[int] = []
    cpu_g, mem_g = cfg.cpu_per_gpu * 1000, cfg.memory_gib_per_gpu * 1024
    sizes = sorted(cfg.training_sizes)
    zipf = {s: 1.0 / (i + 1) ** cfg.size_tail for i, s in enumerate(sizes)}
    kinds: list[str] = []
    families: list[str | None] = []
    total = 0
    while total < cfg.load * capacity:
        kind = _pick(rng, cfg.mix)
        family = None
        if kind == "mig":
            family = str(_pick(rng, cfg.mig_profiles))
            milli = round(int(family.rstrip("g")) * 1000 / 7)
            pod, k = TracePod(f"mig-{len(pods)}", cpu_g // 4, mem_g // 4, 1, milli), 1
        elif kind == "shared":
            milli = round(rng.choice(cfg.share_fractions) * 1000)
            pod, k = TracePod(f"share-{len(pods)}", cpu_g // 2, mem_g // 2, 1, milli), 1
        elif kind == "single":
            pod, k = TracePod(f"single-{len(pods)}", cpu_g, mem_g, 1, 1000), 1
        elif kind == "training":
            # A gang never overshoots the load target by more than the smallest gang, and never exceeds the
            # fleet: one huge draw (256 GPUs on a 256-GPU fleet) made ``load: 1.0`` a 157% workload whose
            # biggest gang fits nowhere, and every policy placed the same rest (identical rows, no 100% bin).
            room = max(cfg.load * capacity - total, 0) / 1000
            fits = {s: z for s, z in zipf.items() if s <= min(fleet_gpus, max(room, sizes[0]))} or {sizes[0]: 1.0}
            gpus = _pick(rng, fits)
            per = min(gpus, cfg.gpus_per_node)
            pod, k = TracePod(f"train-{len(pods)}", cpu_g * per, mem_g * per, per, 1000), gpus // per
        else:
            raise InputError("mix", f"unknown workload kind {kind!r}; use mig, shared, single, training")
        pods.append(pod)
        replicas.append(k)
        priority.append(int(_pick(rng, cfg.priorities)))
        kinds.append(str(kind))
        families.append(family)
        total += pod.gpu_demand_milli * k
    for j in range(cfg.cpu_pods):
        pods.append(TracePod(f"cpu-{j}", rng.choice([2000, 4000, 8000]), rng.choice([4096, 8192, 16384]), 0, 0))
        replicas.append(1)
        priority.append(int(_pick(rng, cfg.priorities)))
        kinds.append("cpu")
        families.append(None)
    return Synthetic(nodes, rack, block, pods, replicas, priority, kinds, families)


@dataclass(frozen=True)
class MigRequest:
    """A MIG pod as a real MIG workload: one profile name and the GPU models offering it."""

    profile: str
    gpu_models: tuple[str, ...]


def family_profile(model: GpuModel, family: str) -> str | None:
    """The smallest-memory profile of ``model`` with the family's compute slices (``2g`` -> 2).

    ``+me`` variants (media extensions) are skipped; None when the model has no such profile.
    Examples: ``2g`` is ``2g.20gb`` on H100-SXM5-80GB and A100-SXM4-80GB, ``2g.35gb`` on H200.
    """
    n = int(family.rstrip("g"))
    found = [p for p in model.profiles if p.compute_slices == n and "+" not in p.name]
    return min(found, key=lambda p: (p.memory_gib, p.memory_slices, p.name)).name if found else None


def mig_requests(syn: Synthetic, catalog: Catalog) -> list[MigRequest | None]:
    """Per pod, its :class:`MigRequest` (``mig`` pods) or None (all others).

    A family ``Ng`` maps, on each GPU model of the fleet, to :func:`family_profile`; models giving
    the same profile name form a group, and a pod may use exactly its group's models. When the
    fleet's models disagree (H200 vs H100/A100), the k-th pod of a family (generation order) goes
    to the group with the largest deficit ``gpus_g * k / gpus_total - assigned_g`` (ties: first
    profile name), so each group receives the family's pods in proportion to its GPUs in the
    fleet, within one pod. Deterministic, with no random draw: the pod list is unchanged.
    """
    gpus_of: dict[str, int] = defaultdict(int)
    for node in syn.nodes:
        gpus_of[catalog.get(MODELS.get(node.model, node.model)).name] += node.gpus
    groups: dict[str, dict[str, list[str]]] = {}
    assigned: dict[tuple[str, str], int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    out: list[MigRequest | None] = []
    for kind, family in zip(syn.kinds, syn.families, strict=True):
        if kind != "mig" or family is None:
            out.append(None)
            continue
        if family not in groups:
            by_name: dict[str, list[str]] = {}
            for model in sorted(gpus_of):
                prof = family_profile(catalog.get(model), family)
                if prof is not None:
                    by_name.setdefault(prof, []).append(model)
            if not by_name:
                raise InputError("mig_profiles", f"no GPU model of the fleet ({', '.join(sorted(gpus_of))}) "
                                                 f"offers a {family} MIG profile; remove {family} or add models")
            groups[family] = dict(sorted(by_name.items()))
        grp = groups[family]
        weight = {prof: sum(gpus_of[m] for m in models) for prof, models in grp.items()}
        total = sum(weight.values())
        seen[family] += 1
        k = seen[family]
        # Integer form of the deficit (scaled by total): max() keeps the first on ties.
        prof = max(grp, key=lambda p: weight[p] * k - assigned[(family, p)] * total)
        assigned[(family, prof)] += 1
        out.append(MigRequest(prof, tuple(grp[prof])))
    return out
