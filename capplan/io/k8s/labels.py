"""Label keys, ``--level-label`` parsing and GPU product-name resolution against the catalog."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from capplan.model.catalog import Catalog, GpuModel
from capplan.model.errors import InputError, suggest

HOSTNAME = "kubernetes.io/hostname"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_MEMORY = "nvidia.com/gpu.memory"
MIG_STRATEGY = "nvidia.com/mig.strategy"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
AMD_PRODUCT = ("amd.com/gpu.product-name", "beta.amd.com/gpu.product-name")
AMD_DEVICE_ID = ("amd.com/gpu.device-id", "beta.amd.com/gpu.device-id")
#: The partition label: the key the ROCm node labeller writes (``createLabelPrefix``), its beta twin, and the
#: key the ROCm user guide documents (older labellers).
AMD_PARTITION_KEYS = (
    "amd.com/gpu.compute-memory-partition",
    "beta.amd.com/gpu.compute-memory-partition",
    "amd.com/compute-memory-partition",
)
AMD_PARTITION = AMD_PARTITION_KEYS[0]
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"

#: PCI device IDs of AMD accelerators in the built-in catalog (MI300X and its VF).
AMD_DEVICE_IDS = {"74a1": "MI300X-192GB", "74b5": "MI300X-192GB"}

_LEVEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(
    rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}$"
)


def first_label(labels: dict[str, str] | dict[str, list[str]], keys: Sequence[str]) -> str | None:
    """The first of ``keys`` present in ``labels`` (None if none is)."""
    return next((k for k in keys if k in labels), None)


_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")


def valid_label(key: str, value: str) -> bool:
    """True for a valid Kubernetes label key and value (value: up to 63 characters, may be empty)."""
    return bool(_LABEL_KEY.match(key)) and len(key) <= 317 and bool(_LABEL_VALUE.match(value))


def label_path(base: str, key: str) -> str:
    """Field path of a label or annotation: ``items[3].metadata.labels["nvidia.com/gpu.product"]``."""
    return f'{base}["{key}"]'


def parse_level_labels(specs: Sequence[str]) -> list[tuple[str, str]]:
    """Parse ``--level-label LEVEL=LABEL`` options (outermost level first).

    Raises
    ------
    InputError
        Malformed option, a reserved or repeated level, or an invalid label key.
    """
    out: list[tuple[str, str]] = []
    for spec in specs:
        level, sep, label = spec.partition("=")
        level, label = level.strip(), label.strip()
        if not sep or not level or not label:
            raise InputError(
                "--level-label", f"expected LEVEL=LABEL, e.g. rack=example.com/rack, got {spec!r}"
            )
        if not _LEVEL.match(level):
            raise InputError(
                "--level-label", f"level name {level!r} must be lower-case letters, digits, - or _"
            )
        if level == "node":
            raise InputError(
                "--level-label",
                f"`node` is the implicit innermost level ({HOSTNAME}); "
                "name the levels above it, e.g. rack=example.com/rack",
            )
        if label == HOSTNAME:
            raise InputError(
                "--level-label", f"{HOSTNAME} is the node level itself; map only the levels above it"
            )
        if not _LABEL_KEY.match(label) or len(label) > 317:
            raise InputError(
                "--level-label",
                f"{label!r} is not a valid Kubernetes label key "
                "(optional DNS prefix and `/`, then a name of up to 63 characters)",
            )
        if any(level == lv for lv, _ in out) or any(label == lb for _, lb in out):
            raise InputError("--level-label", f"level {level!r} or label {label!r} is given twice")
        out.append((level, label))
    return out


def _names(catalog: Catalog) -> list[str]:
    return [n for m in catalog.models for n in (m.name, *m.aliases)]


def resolve_model(product: str, catalog: Catalog, path: str) -> GpuModel:
    """The catalog model of a sanitised product label, e.g. ``NVIDIA-A100-SXM4-40GB``.

    Raises
    ------
    InputError
        Unknown product: names the closest catalog names and how to add an entry.
    """
    dashed = product.replace("_", "-").replace(" ", "-")
    for cand in (
        product,
        dashed,
        dashed.removeprefix("NVIDIA-"),
        dashed.removeprefix("AMD-"),
        "NVIDIA-" + dashed,
    ):
        if cand in catalog:
            return catalog.get(cand)
    raise InputError(
        path,
        f"unknown GPU product {product!r}{suggest(dashed, _names(catalog))}; add a catalog "
        f"entry to a YAML file (`models:` list, see `capplan catalog MODEL --json` for the "
        f"fields) with {product!r} under `aliases:` and pass it with --catalog FILE",
    )


def mapping(obj: Any, path: str) -> dict[str, Any]:
    """``obj`` if it is a mapping (None -> {}), else an :class:`InputError` at ``path``."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise InputError(path, f"expected a mapping, got {type(obj).__name__}")
    return obj


def string_map(obj: Any, path: str) -> dict[str, str]:
    """Labels or annotations: a mapping of strings."""
    m = mapping(obj, path)
    for k, v in m.items():
        if not isinstance(v, str):
            raise InputError(label_path(path, str(k)), f"label and annotation values are strings, got {v!r}")
    return m


def k8s_list(data: Any, what: str) -> list[dict[str, Any]]:
    """The ``items`` of a Kubernetes List (``kubectl get ... -o json``)."""
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items: list[dict[str, Any]] = []
        for i, it in enumerate(data["items"]):
            if not isinstance(it, dict) or not isinstance(it.get("kind", "x"), str):
                raise InputError(f"items[{i}]", "expected a Kubernetes object")
            items.append(it)
        return items
    raise InputError(
        "items",
        f"the {what} file is not a Kubernetes List: produce it with "
        f"`kubectl get {what} -o json` (a JSON object with `kind: List` and `items:`)",
    )
