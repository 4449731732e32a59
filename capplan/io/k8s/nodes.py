"""Import ``kubectl get nodes -o json``: GPUs, MIG/partition layouts, allocatable CPU/memory, topology.

Field mapping (see docs/kubernetes.md): ``nvidia.com/gpu.product`` -> catalog model (via its
aliases), ``nvidia.com/gpu.count`` -> GPUs, MIG strategy ``single`` (``<model>-MIG-<profile>``) or
``mixed`` (``nvidia.com/mig-<profile>.count``) -> preset per-GPU MIG layouts, AMD
``amd.com/gpu.product-name`` and partition resources -> MI300X partition layouts,
``status.allocatable`` -> CPU and memory, level labels -> topology domains.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from capplan.io.k8s import labels as L
from capplan.io.k8s.domains import topology_paths
from capplan.io.k8s.mig import (
    GpuConfig,
    config_gpus,
    pack_gpu,
    pack_node,
    profile_from_resource,
    profile_name,
    standard_config,
)
from capplan.io.k8s.quantity import MAX_DEVICES, count, cpu_milli, memory_mib
from capplan.model.catalog import Catalog, GpuModel
from capplan.model.errors import InputError
from capplan.model.plan import MigSlot
from capplan.model.problem import Cluster, GpuMode, Node, Taint
from capplan.model.units import MIB_PER_GIB

log = logging.getLogger("capplan.io.k8s")
_MIXED_COUNT = re.compile(r"^nvidia\.com/mig-(.+)\.count$")
_AMD_MIXED = re.compile(r"^amd\.com/(spx|dpx|qpx|cpx)_(nps\d)$")


@dataclass
class NodeFacts:
    """What the pod importer needs to know about a node beyond :class:`~capplan.model.problem.Node`."""

    labels: dict[str, str]
    product: str | None = None
    single_profile: str | None = None  # `nvidia.com/gpu` / `amd.com/gpu` on this node means this slice
    vendor: str | None = None
    mig_strategy: str = "mixed"  # the node's `nvidia.com/mig.strategy`
    selector: dict[str, str] = field(default_factory=dict)  # the label that names the node's GPU product


@dataclass
class NodesResult:
    """Imported cluster, per-node facts and the warnings raised."""

    cluster: Cluster
    facts: dict[str, NodeFacts]
    today: Cluster  # the nodes with every GPU's mode today (MIG off: `whole`), to place running pods
    warnings: list[str] = field(default_factory=list)


def _modes(layouts: Sequence[tuple[MigSlot, ...] | None]) -> tuple[GpuMode, ...]:
    """Today's modes: MIG GPUs with their layout, MIG-disabled GPUs ``whole``."""
    return tuple(
        GpuMode(gpu=g, mode="whole") if lay is None else GpuMode(gpu=g, mode="mig", layout=lay)
        for g, lay in enumerate(layouts)
    )


def node_taints(item: dict[str, Any], path: str) -> tuple[Taint, ...]:
    """``spec.taints`` of a Node (``timeAdded`` dropped)."""
    raw = L.mapping(item.get("spec"), f"{path}.spec").get("taints") or []
    if not isinstance(raw, list):
        raise InputError(f"{path}.spec.taints", "expected a list of {key, value, effect}")
    out = []
    for j, t in enumerate(raw):
        tp = f"{path}.spec.taints[{j}]"
        t = L.mapping(t, tp)
        effect = t.get("effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise InputError(f"{tp}.effect", f"expected NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}")
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise InputError(f"{tp}.key", "a taint needs a key")
        out.append(Taint(key=key, value=str(t.get("value") or ""), effect=effect))
    return tuple(out)


def _alloc(item: dict[str, Any], path: str) -> dict[str, Any]:
    status = L.mapping(item.get("status"), f"{path}.status")
    alloc = L.mapping(status.get("allocatable") or status.get("capacity"), f"{path}.status.allocatable")
    return alloc


class _NodeReader:
    def __init__(
        self, catalog: Catalog, mig_configs: Mapping[str, list[dict[str, Any]]] | None, warnings: list[str]
    ) -> None:
        self.catalog = catalog
        self.mig_configs = mig_configs
        self.warn = warnings.append
        self.no_strategy: list[str] = []  # MIG-capable NVIDIA nodes without a nvidia.com/mig.strategy label

    def finish(self) -> None:
        """Report, in one line, the MIG-capable nodes without a MIG strategy label."""
        if self.no_strategy:
            more = ", ..." if len(self.no_strategy) > 5 else ""
            self.warn(
                f"{len(self.no_strategy)} MIG-capable node(s) have no {L.MIG_STRATEGY} label "
                f"({', '.join(self.no_strategy[:5])}{more}); planned as mixed (MIG devices requested as "
                "nvidia.com/mig-<profile>)"
            )

    def gpus(
        self, name: str, labels: dict[str, str], alloc: dict[str, Any], path: str
    ) -> tuple[GpuModel | None, int, tuple[GpuMode, ...], NodeFacts]:
        lp = f"{path}.metadata.labels"
        facts = NodeFacts(labels=labels)
        if L.GPU_PRODUCT in labels:
            return self._nvidia(name, labels, alloc, path, facts)
        amd = next((labels[k] for k in L.AMD_PRODUCT if k in labels), None)
        dev = next((labels[k] for k in L.AMD_DEVICE_ID if k in labels), None)
        if amd is not None or (dev is not None and dev.lower() in L.AMD_DEVICE_IDS):
            key = next((k for k in L.AMD_PRODUCT if k in labels), L.AMD_PRODUCT[0])
            if amd is not None and (dev is None or dev.lower() not in L.AMD_DEVICE_IDS):
                model = L.resolve_model(amd, self.catalog, L.label_path(lp, key))
            else:
                model = self.catalog.get(L.AMD_DEVICE_IDS[str(dev).lower()])
            facts.product, facts.vendor = amd or model.name, "amd"
            if amd is not None:
                facts.selector = {key: amd}
            return self._amd(name, model, labels, alloc, path, facts)
        if count(alloc.get(L.NVIDIA_GPU, 0), f'{path}.status.allocatable["{L.NVIDIA_GPU}"]', MAX_DEVICES):
            raise InputError(
                L.label_path(lp, L.GPU_PRODUCT),
                "the node offers nvidia.com/gpu but has no GPU "
                "Feature Discovery labels; deploy GFD (GPU Operator) or add the label by hand",
            )
        return None, 0, (), facts

    def _nvidia(
        self, name: str, labels: dict[str, str], alloc: dict[str, Any], path: str, facts: NodeFacts
    ) -> tuple[GpuModel | None, int, tuple[GpuMode, ...], NodeFacts]:
        lp = f"{path}.metadata.labels"
        product = labels[L.GPU_PRODUCT].removesuffix("-SHARED")
        replicas = labels.get("nvidia.com/gpu.replicas", "1")
        if product != labels[L.GPU_PRODUCT] or (replicas.isdigit() and int(replicas) > 1):
            self.warn(
                f"node {name}: GPUs shared by time-slicing/MPS (nvidia.com/gpu.replicas={replicas}); "
                "imported as whole GPUs"
            )
        base, _, single = product.partition("-MIG-")
        single = profile_name(single)
        model = L.resolve_model(base, self.catalog, L.label_path(lp, L.GPU_PRODUCT))
        facts.product, facts.vendor = base, "nvidia"
        facts.selector = {L.GPU_PRODUCT: labels[L.GPU_PRODUCT]}
        strategy = labels.get(L.MIG_STRATEGY)
        if strategy in ("single", "mixed"):
            facts.mig_strategy = strategy
        elif strategy is not None and strategy != "none":
            raise InputError(L.label_path(lp, L.MIG_STRATEGY), f"expected single or mixed, got {strategy!r}")
        elif model.supports_mig:
            self.no_strategy.append(name)
        raw_count = labels.get(L.GPU_COUNT, alloc.get(L.NVIDIA_GPU, 0))
        n = count(
            raw_count,
            L.label_path(lp, L.GPU_COUNT)
            if L.GPU_COUNT in labels
            else f'{path}.status.allocatable["{L.NVIDIA_GPU}"]',
            MAX_DEVICES,
        )
        if single == "INVALID":
            self.warn(f"node {name}: MIG configuration is INVALID (single strategy); its GPUs are left out")
            return None, 0, (), facts
        if single:
            prof = model.profile(single, L.label_path(lp, L.GPU_PRODUCT))
            gpus = math.ceil(n / prof.max_count)
            layouts: list[tuple[MigSlot, ...] | None] = []
            for g in range(gpus):
                k = min(prof.max_count, n - g * prof.max_count)
                layouts.append(pack_gpu(model, [prof.name] * k))
            self.warn(
                f"node {name}: single MIG strategy labels count MIG devices, not GPUs; {n} x {prof.name} "
                f"taken as {gpus} GPU(s) with up to {prof.max_count} each"
                + ("" if n % prof.max_count == 0 else " (not a whole number of full GPUs)")
            )
            facts.single_profile = prof.name
            facts.mig_strategy = "single"
            return model, gpus, _modes(layouts), facts
        if L.GPU_MEMORY in labels and model.memory_gib:
            mem = count(labels[L.GPU_MEMORY], L.label_path(lp, L.GPU_MEMORY))
            if abs(mem / MIB_PER_GIB - model.memory_gib) > 0.1 * model.memory_gib:
                self.warn(
                    f"node {name}: {L.GPU_MEMORY}={mem} MiB differs from {model.name}'s "
                    f"{model.memory_gib:g} GiB; check the catalog alias"
                )
        return model, n, self._mixed_modes(name, model, n, labels, alloc, path), facts

    def _mixed_modes(
        self, name: str, model: GpuModel, n: int, labels: dict[str, str], alloc: dict[str, Any], path: str
    ) -> tuple[GpuMode, ...]:
        lp = f"{path}.metadata.labels"
        counts: dict[str, int] = {}
        for key, val in labels.items():
            m = _MIXED_COUNT.match(key)
            prof = profile_from_resource(m.group(1)) if m else None
            if m and prof is not None:
                model.profile(prof, L.label_path(lp, key))
                c = count(val, L.label_path(lp, key), MAX_DEVICES)
                if c:
                    counts[prof] = counts.get(prof, 0) + c
        cfg_name = labels.get(L.MIG_CONFIG)
        per_gpu: list[GpuConfig] | None = None
        if cfg_name and self.mig_configs is not None and cfg_name in self.mig_configs:
            per_gpu = config_gpus(self.mig_configs[cfg_name], model, n, f"mig-configs.{cfg_name}")
        elif cfg_name:
            std = standard_config(model, cfg_name)
            per_gpu = None if isinstance(std, str) else [dict(std) if std is not None else None] * n
            if per_gpu is None and counts:
                self.warn(
                    f"node {name}: MIG config {cfg_name!r} is not a standard one and no --mig-parted file "
                    "defines it; per-GPU layouts packed from the instance counts"
                )
        if per_gpu is not None:
            totals: dict[str, int] = {}
            for cfg in per_gpu:
                for p, c in (cfg or {}).items():
                    totals[p] = totals.get(p, 0) + c
            if counts and totals != counts:
                self.warn(
                    f"node {name}: MIG counts in the labels differ from config {cfg_name!r} "
                    f"(state {labels.get(L.MIG_CONFIG_STATE, '?')}); using the labels"
                )
                per_gpu = None
        if per_gpu is None and not counts:
            return _modes([None] * n)  # MIG off on every GPU: today each is a whole GPU
        if per_gpu is None:
            whole_key = f'{path}.status.allocatable["{L.NVIDIA_GPU}"]'
            whole = count(alloc.get(L.NVIDIA_GPU, 0), whole_key, MAX_DEVICES)
            packed = pack_node(model, counts, n - whole)
            if packed is None:
                raise InputError(
                    L.label_path(lp, L.MIG_CONFIG),
                    f"MIG instances {counts} do not fit on the "
                    f"{n - whole} MIG-enabled GPUs ({n} GPUs, {whole} whole); check the labels",
                )
            return _modes([None] * whole + list(packed))
        layouts: list[tuple[MigSlot, ...] | None] = []
        for g, cfg in enumerate(per_gpu):
            if cfg is None:
                layouts.append(None)
                continue
            lay = pack_gpu(model, [p for p, c in cfg.items() for _ in range(c)])
            if lay is None:
                raise InputError(
                    f"mig-configs.{cfg_name}", f"GPU {g}: {cfg} does not fit on one {model.name}"
                )
            layouts.append(lay)
        return _modes(layouts)

    def _amd(
        self,
        name: str,
        model: GpuModel,
        labels: dict[str, str],
        alloc: dict[str, Any],
        path: str,
        facts: NodeFacts,
    ) -> tuple[GpuModel | None, int, tuple[GpuMode, ...], NodeFacts]:
        ap = f"{path}.status.allocatable"
        mixed = {
            m.group(1).upper(): count(v, f'{ap}["{k}"]', MAX_DEVICES)
            for k, v in alloc.items()
            if (m := _AMD_MIXED.match(k))
        }
        if not mixed:
            key = L.first_label(labels, L.AMD_PARTITION_KEYS)
            mode = labels[key].split("_")[0].upper() if key else "SPX"
            mixed = {mode: count(alloc.get(L.AMD_GPU, 0), f'{ap}["{L.AMD_GPU}"]', MAX_DEVICES)}
            if key is None and model.supports_mig and mixed[mode]:
                self.warn(
                    f"node {name}: no {L.AMD_PARTITION} label; its {mixed[mode]} {L.AMD_GPU} taken as whole "
                    "(SPX) GPUs"
                )
            if mode != "SPX":
                facts.single_profile = mode
        layouts: list[tuple[MigSlot, ...] | None] = []
        for mode, parts in sorted(mixed.items(), key=lambda kv: kv[0] != "SPX"):
            if not model.supports_mig or mode == "SPX":
                layouts.extend([None] * parts)
                continue
            key = L.first_label(labels, L.AMD_PARTITION_KEYS) or L.AMD_PARTITION
            prof = model.profile(mode, L.label_path(f"{path}.metadata.labels", key))
            gpus = math.ceil(parts / prof.max_count)
            if parts % prof.max_count:
                self.warn(f"node {name}: {parts} {mode} partitions are not a whole number of GPUs")
            layouts.extend(pack_gpu(model, [mode] * prof.max_count) for _ in range(gpus))
        return model, len(layouts), _modes(layouts), facts


def import_nodes(
    data: Any,
    level_labels: Sequence[tuple[str, str]],
    catalog: Catalog,
    mig_configs: Mapping[str, list[dict[str, Any]]] | None = None,
    name: str = "kubernetes",
) -> NodesResult:
    """Build a :class:`~capplan.model.problem.Cluster` from ``kubectl get nodes -o json`` data.

    Parameters
    ----------
    data
        The parsed JSON (a Kubernetes List of Node objects).
    level_labels
        ``(level, label key)`` pairs, outermost first; ``node`` is added as the innermost level.
    catalog
        GPU catalog the product labels are resolved against.
    mig_configs
        Optional nvidia-mig-parted configs (by name) to read exact per-GPU layouts from the
        ``nvidia.com/mig.config`` label; otherwise standard names or the count labels are used.
    name
        Cluster name.
    """
    warnings: list[str] = []
    reader = _NodeReader(catalog, mig_configs, warnings)
    items = L.k8s_list(data, "nodes")
    raw: list[tuple[str, list[str]]] = []
    specs: list[dict[str, Any]] = []
    facts: dict[str, NodeFacts] = {}
    for i, item in enumerate(items):
        path = f"items[{i}]"
        if item.get("kind", "Node") != "Node":
            raise InputError(f"{path}.kind", f"expected a Node, got {item.get('kind')!r}")
        meta = L.mapping(item.get("metadata"), f"{path}.metadata")
        nname = meta.get("name")
        if not isinstance(nname, str) or not nname:
            raise InputError(f"{path}.metadata.name", "every node needs a name")
        if nname in facts:
            raise InputError(f"{path}.metadata.name", f"node {nname!r} is listed twice")
        labels = L.string_map(meta.get("labels"), f"{path}.metadata.labels")
        alloc = _alloc(item, path)
        for key in ("cpu", "memory"):
            if key not in alloc:
                raise InputError(
                    f"{path}.status.allocatable.{key}", "is required (from `kubectl get nodes -o json`)"
                )
        model, gpus, modes, f = reader.gpus(nname, labels, alloc, path)
        facts[nname] = f
        raw.append((nname, [labels.get(lb, "") for _, lb in level_labels]))
        specs.append(
            dict(
                name=nname,
                gpu_model=model.name if model else None,
                gpus=gpus,
                cpu_milli=cpu_milli(alloc["cpu"], f"{path}.status.allocatable.cpu"),
                memory_mib=memory_mib(alloc["memory"], f"{path}.status.allocatable.memory"),
                gpu_modes=modes,
                mig_strategy=f.mig_strategy,
                taints=node_taints(item, path),
            )
        )
    paths, domains = topology_paths(raw, level_labels, warnings)
    levels = (*(lv for lv, _ in level_labels), "node")
    today = Cluster(
        name=name,
        levels=levels,
        domains=tuple(domains),
        nodes=tuple(Node(path=p, **s) for s, p in zip(specs, paths, strict=True)),
    )
    reader.finish()
    # Every GPU keeps today's mode (MIG layouts, ``whole`` for MIG off): whether a plan may change one is the
    # problem's ``reconfigure`` switch (import_kubernetes), priced as a reconfigured GPU.
    return NodesResult(cluster=today, facts=facts, today=today, warnings=warnings)
