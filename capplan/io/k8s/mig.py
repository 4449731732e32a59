"""MIG layouts for Kubernetes: resource names, per-GPU packing, standard and mig-parted configs.

Kubernetes only reports MIG instance *counts* (per node, per profile); capplan works with
concrete per-GPU layouts (profile and start on the memory-slice axis). The functions here turn
counts into a valid layout deterministically, by a small exhaustive search over starts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from capplan.model.catalog import GpuModel, MigProfile
from capplan.model.errors import InputError
from capplan.model.plan import MigSlot

#: Per-GPU MIG state: None = MIG disabled (whole GPU), else profile -> instance count.
GpuConfig = dict[str, int] | None

_MIG_RESOURCE = re.compile(r"^(\d+g\.\d+gb)((?:\.[a-z]+)*)$")


def profile_from_resource(suffix: str) -> str | None:
    """``1g.10gb.me`` (the part after ``nvidia.com/mig-``) -> ``1g.10gb+me``; None if malformed."""
    m = _MIG_RESOURCE.match(suffix)
    if not m:
        return None
    base, extras = m.groups()
    return base + "".join("+" + x for x in extras.split(".") if x)


def profile_name(label: str) -> str:
    """A profile as GFD or the device plugin spell it (``1g.5gb.me``, ``1g.24gb.me.all``) -> ``1g.5gb+me``.

    Names already in NVIDIA's ``+attr`` form, and names that are no MIG profile, are returned as they are.
    """
    if "+" in label:
        return label
    m = re.match(r"^((?:\d+c\.)?\d+g\.\d+gb)\.([a-z][a-z0-9.]*)$", label)
    return f"{m.group(1)}+{m.group(2)}" if m else label


def resource_suffix(profile: str) -> str:
    """``1g.10gb+me`` -> ``1g.10gb.me``: the device plugin replaces ``+`` with ``.``."""
    return profile.replace("+", ".")


def _order(model: GpuModel, names: Sequence[str]) -> list[MigProfile]:
    profs = [model.profile(n) for n in names]
    return sorted(profs, key=lambda p: (-p.memory_slices, -p.compute_slices, p.name))


def pack_gpu(model: GpuModel, names: Sequence[str]) -> tuple[MigSlot, ...] | None:
    """A valid layout holding exactly the instances ``names`` on one GPU, or None.

    Larger instances are placed first, each at the lowest free allowed start, with
    backtracking; the result is deterministic.
    """
    profs = _order(model, names)
    counts = Counter(p.name for p in profs)
    if any(counts[p.name] > p.max_count for p in profs):
        return None
    if model.homogeneous and len(counts) > 1:
        return None
    if sum(p.compute_slices for p in profs) > model.compute_slices:
        return None
    chosen: list[MigSlot] = []

    def place(k: int, used: int) -> bool:
        if k == len(profs):
            return True
        p = profs[k]
        for s in p.starts:
            mask = ((1 << p.memory_slices) - 1) << s
            if used & mask:
                continue
            chosen.append(MigSlot(profile=p.name, start=s))
            if place(k + 1, used | mask):
                return True
            chosen.pop()
        return False

    return tuple(sorted(chosen, key=lambda x: x.start)) if place(0, 0) else None


def pack_node(model: GpuModel, counts: Mapping[str, int], gpus: int) -> list[tuple[MigSlot, ...]] | None:
    """Spread instance ``counts`` over ``gpus`` MIG GPUs; one layout per GPU, or None if impossible.

    An even split (the same layout on every GPU, as the standard configs do) is tried first;
    otherwise a first-fit search with backtracking.
    """
    if gpus <= 0:
        return [] if not any(counts.values()) else None
    if all(c % gpus == 0 for c in counts.values()):
        one = pack_gpu(model, [n for n, c in counts.items() for _ in range(c // gpus)])
        if one is not None:
            return [one] * gpus
    items = [p.name for p in _order(model, [n for n, c in counts.items() for _ in range(c)])]
    bins: list[list[str]] = [[] for _ in range(gpus)]

    def assign(k: int) -> bool:
        if k == len(items):
            return True
        tried_empty = False
        for b in bins:
            if not b:
                if tried_empty:
                    continue  # all empty GPUs are interchangeable
                tried_empty = True
            b.append(items[k])
            if pack_gpu(model, b) is not None and assign(k + 1):
                return True
            b.pop()
        return False

    if not assign(0):
        return None
    out = []
    for b in bins:
        layout = pack_gpu(model, b)
        assert layout is not None
        out.append(layout)
    return out


def _base_profiles(model: GpuModel) -> list[MigProfile]:
    return [p for p in model.profiles if "+" not in p.name]


def standard_config(model: GpuModel, name: str) -> GpuConfig | str:
    """Per-GPU config of a config name the MIG manager generates for every GPU.

    Returns None for ``all-disabled``, a profile->count dict for ``all-enabled`` ({}),
    ``all-<profile>`` (its max count) and ``all-balanced``; the string ``"unknown"`` otherwise.
    """
    if name == "all-disabled":
        return None
    if not model.supports_mig:
        return "unknown"
    if name == "all-enabled":
        return {}
    if name == "all-balanced":
        by_g: dict[int, list[MigProfile]] = {}
        for p in _base_profiles(model):
            by_g.setdefault(p.compute_slices, []).append(p)
        if 1 not in by_g or 2 not in by_g:
            return "unknown"
        one = max(by_g[1], key=lambda p: (p.max_count, -p.memory_slices))
        cfg = {one.name: 2, by_g[2][0].name: 1}
        if model.compute_slices >= 7 and 3 in by_g:
            cfg[by_g[3][0].name] = 1
        return (
            cfg if pack_gpu(model, [n for n, c in cfg.items() for _ in range(c)]) is not None else "unknown"
        )
    if name.startswith("all-"):
        for p in model.profiles:
            if resource_suffix(p.name) == name[4:]:
                return {p.name: p.max_count}
    return "unknown"


def _entry_config(entry: Mapping[str, Any], model: GpuModel, path: str) -> GpuConfig:
    enabled = entry.get("mig-enabled")
    if not isinstance(enabled, bool):
        raise InputError(f"{path}.mig-enabled", "is required: true or false")
    if not enabled:
        return None
    devs = entry.get("mig-devices") or {}
    if not isinstance(devs, dict):
        raise InputError(f"{path}.mig-devices", "expected a mapping profile -> count")
    out: dict[str, int] = {}
    for prof, c in devs.items():
        name = profile_from_resource(str(prof)) or str(prof)
        model.profile(name, f"{path}.mig-devices.{prof}")
        if not isinstance(c, int) or isinstance(c, bool) or c < 0:
            raise InputError(f"{path}.mig-devices.{prof}", f"expected a count, got {c!r}")
        if c:
            out[name] = c
    return out


def parse_mig_parted(data: Any) -> dict[str, list[dict[str, Any]]]:
    """Check the ``version: v1`` / ``mig-configs`` shape and return the configs by name."""
    if (
        not isinstance(data, dict)
        or data.get("version") != "v1"
        or not isinstance(data.get("mig-configs"), dict)
    ):
        raise InputError(
            "mig-configs", "expected a nvidia-mig-parted file: `version: v1` and a `mig-configs:` map"
        )
    for name, entries in data["mig-configs"].items():
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise InputError(
                f"mig-configs.{name}", "expected a non-empty list of {devices, mig-enabled, ...}"
            )
    return data["mig-configs"]  # type: ignore[no-any-return]


def config_gpus(entries: list[dict[str, Any]], model: GpuModel, gpus: int, path: str) -> list[GpuConfig]:
    """Per-GPU configs of one mig-parted config on a node with ``gpus`` GPUs of ``model``.

    Entries apply in order (later ones win). Entries with a ``device-filter`` are used only when
    all their profiles exist on ``model`` (PCI device IDs are not in the node labels).
    """
    out: list[GpuConfig] = [None] * gpus
    for j, e in enumerate(entries):
        p = f"{path}[{j}]"
        if "device-filter" in e:
            try:
                cfg = _entry_config(e, model, p)
            except InputError:
                continue
        else:
            cfg = _entry_config(e, model, p)
        devices = e.get("devices")
        if devices == "all":
            idx = list(range(gpus))
        elif isinstance(devices, list) and all(
            isinstance(d, int) and not isinstance(d, bool) for d in devices
        ):
            idx = [d for d in devices if 0 <= d < gpus]
        else:
            raise InputError(f"{p}.devices", "expected `all` or a list of GPU indices")
        for d in idx:
            out[d] = dict(cfg) if cfg is not None else None
    return out
