"""The hardware catalog: GPU models, their MIG profiles / partition modes and valid placements.

The built-in catalog is data (``models/catalog/*.yaml`` in the repository, installed as the
package ``capplan.catalog_data``). Users add or override models with their own YAML files of the
same shape (``capplan plan --catalog my-gpus.yaml``); a model with the same name replaces the
built-in one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from capplan.model.decode import decode, read_text
from capplan.model.errors import InputError, describe, suggest
from capplan.model.units import UNITS_PER_GPU, Bool, Float, Frozen, Int, Name, Str


class MigProfile(Frozen):
    """One MIG profile (NVIDIA) or compute partition mode (AMD) of a GPU model.

    Attributes
    ----------
    name
        Profile name as the vendor tools print it, e.g. ``3g.40gb`` or ``CPX``.
    compute_slices, memory_slices
        Slices the instance occupies; ``memory_slices`` contiguous slices from its start.
    memory_gib
        Nominal GPU memory of one instance.
    max_count
        Most instances of this profile on one GPU.
    starts
        Allowed start indices on the memory-slice axis.
    """

    name: Name
    compute_slices: Int = Field(gt=0, le=64)
    memory_slices: Int = Field(gt=0, le=64)
    memory_gib: Float = Field(gt=0)
    max_count: Int = Field(gt=0, le=64)
    starts: tuple[Int, ...]


class GpuModel(Frozen):
    """A GPU model: memory, power and partitioning facts.

    ``partitioning`` is ``none`` (whole or time-sliced use only), ``mig`` (NVIDIA MIG, profiles
    may be mixed on one GPU) or ``partition`` (AMD compute partitions; with ``homogeneous`` set
    every instance on one GPU uses the same profile). ``price_per_gpu_hour`` is an editable default
    for cost reports (on-demand list prices, see docs/catalog.md); None when unknown.
    """

    name: Name
    vendor: Str = "unknown"
    memory_gib: Float | None = Field(default=None, gt=0)
    tdp_w: Int | None = Field(default=None, ge=0, le=100_000)
    aliases: tuple[Name, ...] = ()
    partitioning: Literal["none", "mig", "partition"] = "none"
    compute_slices: Int = Field(default=0, ge=0, le=64)
    memory_slices: Int = Field(default=0, ge=0, le=64)
    homogeneous: Bool = False
    profiles: tuple[MigProfile, ...] = ()
    price_per_gpu_hour: Float | None = Field(default=None, ge=0)
    source: Str = ""

    @model_validator(mode="after")
    def _check_geometry(self) -> GpuModel:
        if self.partitioning == "none":
            if self.profiles:
                raise ValueError("profiles given but partitioning is 'none'; set partitioning: mig")
            return self
        if self.compute_slices <= 0 or self.memory_slices <= 0 or not self.profiles:
            raise ValueError("a partitionable model needs compute_slices, memory_slices and profiles")
        if UNITS_PER_GPU % self.compute_slices:
            raise ValueError(f"compute_slices must divide {UNITS_PER_GPU}")
        seen: set[str] = set()
        for p in self.profiles:
            if p.name in seen:
                raise ValueError(f"duplicate profile {p.name!r}")
            seen.add(p.name)
            if p.compute_slices > self.compute_slices:
                raise ValueError(f"profile {p.name!r} has more compute slices than the GPU")
            for s in p.starts:
                if s < 0 or s + p.memory_slices > self.memory_slices:
                    raise ValueError(f"profile {p.name!r}: start {s} runs past slice {self.memory_slices}")
        return self

    @property
    def supports_mig(self) -> bool:
        """True when the model can be partitioned (NVIDIA MIG or AMD partitions)."""
        return self.partitioning != "none"

    def profile(self, name: str, path: str = "") -> MigProfile:
        """Return profile ``name``, or raise :class:`InputError` naming the valid ones."""
        for p in self.profiles:
            if p.name == name:
                return p
        if not self.profiles:
            raise InputError(path, f"GPU model {self.name} does not support MIG/partitions; "
                                   "ask for whole GPUs or a gpu_fraction instead")
        names = [p.name for p in self.profiles]
        raise InputError(path, f"profile {name!r} is not supported by {self.name}{suggest(name, names)}; "
                               f"valid profiles: {', '.join(names)}")

    def profile_units(self, profile: MigProfile) -> int:
        """Demand units of one instance: its compute slices as a share of the GPU."""
        return profile.compute_slices * (UNITS_PER_GPU // self.compute_slices)


class Catalog(Frozen):
    """A set of GPU models addressable by name or alias."""

    models: tuple[GpuModel, ...]

    @model_validator(mode="after")
    def _unique(self) -> Catalog:
        _ = self.index
        return self

    @cached_property
    def index(self) -> dict[str, GpuModel]:
        """Name or alias -> model (a plain dict: lookups sit on hot paths)."""
        index: dict[str, GpuModel] = {}
        for m in self.models:
            if m.name in index and index[m.name].name == m.name:
                raise ValueError(f"duplicate GPU model {m.name!r} in catalog")
            index[m.name] = m
        for m in self.models:
            for a in m.aliases:
                index.setdefault(a, m)
        return index

    def names(self) -> list[str]:
        """Canonical model names, in catalog order."""
        return [m.name for m in self.models]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.index

    def get(self, name: str, path: str = "") -> GpuModel:
        """Return the model called ``name`` (or with that alias).

        Raises
        ------
        InputError
            If no model has that name; the message suggests the closest names.
        """
        try:
            return self.index[name]
        except KeyError:
            raise InputError(path, f"unknown GPU model {name!r}{self.suggest(name)}; "
                                   "see `capplan catalog` or add it with --catalog FILE") from None

    def suggest(self, name: str) -> str:
        """A ``did you mean`` hint for an unknown model: its family first (``H101`` -> ``H100-...``)."""
        if not isinstance(name, str):
            return ""
        return suggest(name, [*self.names(), *self.index], family=self.names())

    def merged(self, other: Catalog) -> Catalog:
        """Return a catalog with ``other``'s models added, replacing models of the same name."""
        names = {m.name for m in other.models}
        return Catalog(models=tuple(m for m in self.models if m.name not in names) + other.models)


def _parse(data: Any, origin: str) -> Catalog:
    from capplan.model.plan import input_error_from

    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        got = "" if isinstance(data, dict) else describe(data)
        raise InputError("models", f"{origin}: a catalog file needs a top-level `models:` list "
                                   "(or an `aliases:` map)" + (f", got {got}" if got else ""))
    try:
        return Catalog.model_validate(data)
    except ValidationError as exc:
        raise input_error_from(exc, "", Catalog, origin=origin) from None


@lru_cache(maxsize=1)
def builtin_catalog() -> Catalog:
    """The catalog shipped with capplan (cached)."""
    models: list[dict[str, Any]] = []
    root = resources.files("capplan") / "catalog_data"
    first = {"nvidia.yaml": 0, "amd.yaml": 1}
    for entry in sorted(root.iterdir(), key=lambda e: (first.get(e.name, 2), e.name)):
        if entry.name.endswith(".yaml"):
            models.extend(decode(entry.read_text(encoding="utf-8"), entry.name)["models"])
    return _parse({"models": models}, "built-in catalog")


def load_catalog(paths: Sequence[str | Path] | Iterable[str | Path] = ()) -> Catalog:
    """Load the built-in catalog, then each user catalog file in order (later files override)."""
    cat = builtin_catalog()
    for p in paths:
        path = str(p)
        data = decode(read_text(path, "catalog file"), f"catalog file {path}", as_json=path.endswith(".json"))
        if not isinstance(data, dict):
            got = describe(data)
            raise InputError("models", f"{path}: a catalog file needs a top-level `models:` list "
                                       f"(or an `aliases:` map), got {got}")
        extra = set(data) - {"models", "aliases"}
        if extra:
            key = sorted(extra)[0]
            raise InputError(key, f"{path}: unknown top-level field{suggest(key, ['models', 'aliases'])}; "
                                  "expected models and/or aliases")
        if "models" in data or "aliases" not in data:
            cat = cat.merged(_parse({"models": data.get("models")}, path))
        cat = with_aliases(cat, data.get("aliases"), path)
    return cat


def with_aliases(cat: Catalog, aliases: Any, origin: str) -> Catalog:
    """``cat`` with extra names for existing models: ``{My-Name: H100-SXM5-80GB}`` (an alias may name an alias).

    Parameters
    ----------
    cat
        The catalog the targets are looked up in.
    aliases
        The ``aliases:`` value of a catalog file (None: nothing to add).
    origin
        The file name, for messages.

    Raises
    ------
    InputError
        Not a mapping of names, an unknown target model, or a name that already means another model.
    """
    if aliases is None:
        return cat
    if not isinstance(aliases, dict):
        raise InputError("aliases", f"{origin}: expected a mapping NEW-NAME: MODEL, e.g. {{My-H100: H100-SXM5-80GB}}")
    added: dict[str, list[str]] = {}
    for alias, target in aliases.items():
        where = f"aliases.{alias}"
        if not isinstance(alias, str) or not alias or not isinstance(target, str):
            raise InputError(where, f"{origin}: expected NEW-NAME: MODEL with both names strings")
        model = cat.get(target, where)
        if alias in cat and cat.get(alias).name != model.name:
            raise InputError(where, f"{origin}: {alias!r} already names {cat.get(alias).name}, not {model.name}")
        added.setdefault(model.name, []).append(alias)
    if not added:
        return cat
    models = tuple(m.model_copy(update={"aliases": (*m.aliases, *(a for a in added[m.name] if a not in m.aliases))})
                   if m.name in added else m for m in cat.models)
    return Catalog(models=models)
