"""The planning file: a frozen pydantic schema, validated once at the edge.

This module only checks the *shape* of each field (types, signs, ranges). Cross references
(site and class names, GPU model names against the catalog, period labels, probabilities) are
checked by :func:`capplan.reserve.problem.build_problem`, which names the offending field path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from capplan.io.files import load_yaml_or_json
from capplan.model.errors import InputError
from capplan.model.units import Frozen

#: A period reference: a label such as ``2027-03`` (``2027-03-01`` for weekly horizons)
#: or a 0-based period index.
PeriodRef = int | str
#: Demand of one class: one number for every period, or one number per period.
DemandSeries = float | tuple[float, ...]


class Horizon(Frozen):
    """Planning horizon: ``periods`` periods of one ``period`` each, from ``start``."""

    start: str
    periods: int = Field(gt=0, le=520)
    period: Literal["month", "week"] = "month"
    hours_per_period: float | None = Field(default=None, gt=0)


class Site(Frozen):
    """A data-centre site with finite power and rack space."""

    name: str = Field(min_length=1)
    power_kw: float | None = Field(default=None, gt=0)
    rack_units: float | None = Field(default=None, gt=0)
    max_installs_per_period: int | None = Field(default=None, ge=0)
    power_price_per_kwh: float = Field(default=0.0, ge=0)
    pue: float = Field(default=1.0, ge=1.0)


class FleetEntry(Frozen):
    """GPUs installed today at a site; they leave service at the start of ``retire``."""

    site: str
    model: str
    count: int = Field(ge=0)
    retire: PeriodRef | None = None
    power_w: float | None = Field(default=None, gt=0)
    rack_units_per_gpu: float = Field(default=1.0, ge=0)


class InFlightOrder(Frozen):
    """An order already placed (cannot be cancelled); in service from ``arrival``."""

    site: str
    model: str
    count: int = Field(ge=0)
    arrival: PeriodRef
    power_w: float | None = Field(default=None, gt=0)
    rack_units_per_gpu: float = Field(default=1.0, ge=0)


class Tier(Frozen):
    """A priority tier: ``guaranteed`` (service level) or ``flexible`` (deferrable, lost at a penalty)."""

    name: str = Field(min_length=1)
    kind: Literal["guaranteed", "flexible"]
    service_level: float = Field(default=1.0, gt=0, le=1)
    penalty_per_gpu_hour: float | None = Field(default=None, ge=0)
    max_deferral_periods: int = Field(default=0, ge=0)
    deferral_penalty_per_gpu_hour: float = Field(default=0.0, ge=0)
    spot: bool | None = None


class WorkloadClass(Frozen):
    """A workload class: acceptable GPU models with relative throughput, tier and gang shape."""

    name: str = Field(min_length=1)
    tier: str
    models: dict[str, float] = Field(min_length=1)
    gang_size: int = Field(default=1, ge=1)
    topology: Literal["node", "site"] = "node"


class Purchase(Frozen):
    """Buying GPUs: lead time, lots, supply cap, depreciation."""

    name: str | None = None
    model: str
    sites: tuple[str, ...] | None = None
    lead_time: int = Field(ge=0)
    unit_cost: float = Field(ge=0)
    power_w: float | None = Field(default=None, gt=0)
    rack_units_per_gpu: float = Field(default=1.0, ge=0)
    lot_size: int = Field(default=1, ge=1)
    supply_cap: int | None = Field(default=None, ge=0)
    depreciation_periods: int = Field(default=36, ge=1)


class Reserved(Frozen):
    """A cloud reserved term: GPUs committed for ``term_periods`` from a start period."""

    name: str | None = None
    model: str
    term_periods: int = Field(ge=1)
    price_per_gpu_hour: float = Field(ge=0)
    block_gpus: int = Field(default=1, ge=1)
    max_gpus: int | None = Field(default=None, ge=0)
    start_window: tuple[PeriodRef, PeriodRef] | None = None


class CalendarBlock(Frozen):
    """Calendar capacity blocks (fixed size and duration, bounded count, start window)."""

    name: str | None = None
    model: str
    gpus_per_block: int = Field(ge=1)
    duration_periods: int = Field(ge=1)
    max_blocks: int = Field(ge=0)
    price_per_gpu_hour: float = Field(ge=0)
    start_window: tuple[PeriodRef, PeriodRef] | None = None


class OnDemand(Frozen):
    """On-demand cloud GPUs, bought per scenario and period (recourse)."""

    name: str | None = None
    model: str
    price_per_gpu_hour: float = Field(ge=0)
    max_gpus: float | None = Field(default=None, ge=0)


class Spot(Frozen):
    """Spot GPUs: cheap, interrupted at ``interruption_rate``; only for tiers that allow spot."""

    name: str | None = None
    model: str
    price_per_gpu_hour: float = Field(ge=0)
    interruption_rate: float = Field(default=0.0, ge=0, lt=1)
    max_gpus: float | None = Field(default=None, ge=0)


class Options(Frozen):
    """Every way to add capacity."""

    purchases: tuple[Purchase, ...] = ()
    reserved: tuple[Reserved, ...] = ()
    calendar_blocks: tuple[CalendarBlock, ...] = ()
    on_demand: tuple[OnDemand, ...] = ()
    spot: tuple[Spot, ...] = ()


class Scenario(Frozen):
    """One demand scenario with its probability; demand in reference GPUs per class."""

    name: str = Field(min_length=1)
    probability: float = Field(gt=0, le=1)
    demand: dict[str, DemandSeries]


class PlanningFile(Frozen):
    """The whole planning file (see ``docs/reservations.md``)."""

    name: str = ""
    horizon: Horizon
    gpus_per_node: int = Field(default=8, ge=1)
    sites: tuple[Site, ...] = ()
    fleet: tuple[FleetEntry, ...] = ()
    in_flight: tuple[InFlightOrder, ...] = ()
    tiers: tuple[Tier, ...] = Field(min_length=1)
    classes: tuple[WorkloadClass, ...] = Field(min_length=1)
    options: Options = Options()
    scenarios: tuple[Scenario, ...] | None = None
    demand_quantiles: dict[str, dict[str, DemandSeries]] | None = None


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "str", "float", "tuple[float, ...]", "tuple[int, ...]"):
            continue  # union branch names pydantic appends; not a field
        else:
            out += f".{part}" if out else str(part)
    return out


def parse_planning(data: Any, origin: str = "planning file") -> PlanningFile:
    """Validate raw (already loaded) data as a :class:`PlanningFile`.

    Raises
    ------
    InputError
        Naming the field path of the first problem.
    """
    if not isinstance(data, dict):
        raise InputError("", f"{origin}: expected a mapping with horizon, tiers, classes, options, scenarios")
    try:
        return PlanningFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling against docs/reservations.md"
        elif err["type"] == "missing":
            msg = "required field is missing"
        raise InputError(_loc(tuple(err["loc"])), f"{origin}: {msg}") from None


def load_planning(path: str | Path) -> PlanningFile:
    """Load and validate a planning file (YAML or JSON)."""
    return parse_planning(load_yaml_or_json(path, "planning file"), str(path))
