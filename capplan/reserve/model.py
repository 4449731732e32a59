"""The planning file: a frozen pydantic schema, validated once at the edge.

This module only checks the *shape* of each field (types, signs, ranges). Cross references
(site and class names, GPU model names against the catalog, period labels, probabilities) are
checked by :func:`capplan.reserve.problem.build_problem`, which names the offending field path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from capplan.io.files import load_yaml_or_json
from capplan.model.errors import InputError, describe
from capplan.model.plan import input_error_from
from capplan.model.timing import parse_seconds
from capplan.model.units import Bool, Float, Frozen, Int, Name, Str

#: A period reference: a label such as ``2027-03`` (``2027-03-01`` for weekly horizons)
#: or a 0-based period index.
PeriodRef = Int | Str
#: Demand of one class: one number for every period, or one number per period.
DemandSeries = Float | tuple[Float, ...]


class Horizon(Frozen):
    """Planning horizon: ``periods`` periods of one ``period`` each, from ``start``."""

    start: Str
    periods: Int = Field(gt=0, le=520)
    period: Literal["month", "week"] = "month"
    hours_per_period: Float | None = Field(default=None, gt=0)


class Site(Frozen):
    """A data-centre site with finite power and rack space."""

    name: Name
    power_kw: Float | None = Field(default=None, gt=0)
    rack_units: Float | None = Field(default=None, gt=0)
    max_installs_per_period: Int | None = Field(default=None, ge=0)
    power_price_per_kwh: Float = Field(default=0.0, ge=0)
    pue: Float = Field(default=1.0, ge=1.0)


class FleetEntry(Frozen):
    """GPUs installed today at a site; they leave service at the start of ``retire``."""

    site: Str
    model: Str
    count: Int = Field(ge=0)
    retire: PeriodRef | None = None
    power_w: Float | None = Field(default=None, gt=0)
    rack_units_per_gpu: Float = Field(default=1.0, ge=0)


class InFlightOrder(Frozen):
    """An order already placed (cannot be cancelled); in service from ``arrival``."""

    site: Str
    model: Str
    count: Int = Field(ge=0)
    arrival: PeriodRef
    power_w: Float | None = Field(default=None, gt=0)
    rack_units_per_gpu: Float = Field(default=1.0, ge=0)


class Tier(Frozen):
    """A priority tier: ``guaranteed`` (service level) or ``flexible`` (deferrable, lost at a penalty)."""

    name: Name
    kind: Literal["guaranteed", "flexible"]
    service_level: Float = Field(default=1.0, gt=0, le=1)
    penalty_per_gpu_hour: Float | None = Field(default=None, ge=0)
    max_deferral_periods: Int = Field(default=0, ge=0)
    deferral_penalty_per_gpu_hour: Float = Field(default=0.0, ge=0)
    spot: Bool | None = None


class WorkloadClass(Frozen):
    """A workload class: acceptable GPU models with relative throughput, tier and gang shape.

    ``checkpoint`` (seconds; ``6m`` accepted) enables the goodput model on spot options that give
    ``interruptions_per_node_hour`` (docs/reservations.md, Spot and goodput).
    """

    name: Name
    tier: Str
    models: dict[Name, Float] = Field(min_length=1)
    gang_size: Int = Field(default=1, ge=1)
    topology: Literal["node", "site"] = "node"
    checkpoint: int | None = Field(default=None, gt=0)

    @field_validator("checkpoint", mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> Any:
        return None if v is None else parse_seconds(v)


class Purchase(Frozen):
    """Buying GPUs: lead time, lots, supply cap, depreciation."""

    name: Str | None = None
    model: Str
    sites: tuple[Name, ...] | None = None
    lead_time: Int = Field(ge=0)
    unit_cost: Float = Field(ge=0)
    power_w: Float | None = Field(default=None, gt=0)
    rack_units_per_gpu: Float = Field(default=1.0, ge=0)
    lot_size: Int = Field(default=1, ge=1)
    supply_cap: Int | None = Field(default=None, ge=0)
    depreciation_periods: Int = Field(default=36, ge=1)


class Reserved(Frozen):
    """A cloud reserved term: GPUs committed for ``term_periods`` from a start period."""

    name: Str | None = None
    model: Str
    term_periods: Int = Field(ge=1)
    price_per_gpu_hour: Float = Field(ge=0)
    block_gpus: Int = Field(default=1, ge=1)
    max_gpus: Int | None = Field(default=None, ge=0)
    start_window: tuple[PeriodRef, PeriodRef] | None = None


class CalendarBlock(Frozen):
    """Calendar capacity blocks (fixed size and duration, bounded count, start window)."""

    name: Str | None = None
    model: Str
    gpus_per_block: Int = Field(ge=1)
    duration_periods: Int = Field(ge=1)
    max_blocks: Int = Field(ge=0)
    price_per_gpu_hour: Float = Field(ge=0)
    start_window: tuple[PeriodRef, PeriodRef] | None = None


class OnDemand(Frozen):
    """On-demand cloud GPUs, bought per scenario and period (recourse)."""

    name: Str | None = None
    model: Str
    price_per_gpu_hour: Float = Field(ge=0)
    max_gpus: Float | None = Field(default=None, ge=0)


class Spot(Frozen):
    """Spot GPUs: cheap, interrupted at ``interruption_rate``; only for tiers that allow spot.

    With ``interruptions_per_node_hour`` (and a class's ``checkpoint``) a spot GPU delivers the goodput
    of the class's gang instead of ``1 - interruption_rate``; ``restart`` is the re-provision time.
    """

    name: Str | None = None
    model: Str
    price_per_gpu_hour: Float = Field(ge=0)
    interruption_rate: Float = Field(default=0.0, ge=0, lt=1)
    max_gpus: Float | None = Field(default=None, ge=0)
    interruptions_per_node_hour: Float | None = Field(default=None, ge=0, le=1000)
    restart: int = Field(default=0, ge=0)

    @field_validator("restart", mode="before")
    @classmethod
    def _seconds(cls, v: Any) -> Any:
        return parse_seconds(v)


class Options(Frozen):
    """Every way to add capacity."""

    purchases: tuple[Purchase, ...] = ()
    reserved: tuple[Reserved, ...] = ()
    calendar_blocks: tuple[CalendarBlock, ...] = ()
    on_demand: tuple[OnDemand, ...] = ()
    spot: tuple[Spot, ...] = ()


class Scenario(Frozen):
    """One demand scenario with its probability; demand in reference GPUs per class."""

    name: Name
    probability: Float = Field(gt=0, le=1)
    demand: dict[str, DemandSeries]


class PlanningFile(Frozen):
    """The whole planning file (see ``docs/reservations.md``)."""

    name: Str = ""
    #: Label of every amount (prices, costs); capplan does not convert currencies.
    currency: Str = Field(default="USD", min_length=1, max_length=12)
    horizon: Horizon
    gpus_per_node: Int = Field(default=8, ge=1)
    sites: tuple[Site, ...] = ()
    fleet: tuple[FleetEntry, ...] = ()
    in_flight: tuple[InFlightOrder, ...] = ()
    tiers: tuple[Tier, ...] = Field(min_length=1)
    classes: tuple[WorkloadClass, ...] = Field(min_length=1)
    options: Options = Options()
    scenarios: tuple[Scenario, ...] | None = None
    demand_quantiles: dict[str, dict[str, DemandSeries]] | None = None


def parse_planning(data: Any, origin: str = "planning file") -> PlanningFile:
    """Validate raw (already loaded) data as a :class:`PlanningFile`.

    Raises
    ------
    InputError
        Naming the field path of every problem (up to a cap); a misspelled field is named with a
        ``did you mean`` hint.
    """
    if not isinstance(data, dict):
        raise InputError("", f"{origin}: a planning file is a mapping with horizon, tiers, classes, options and "
                             f"scenarios (see docs/reservations.md), got {describe(data)}")
    try:
        return PlanningFile.model_validate(data)
    except ValidationError as exc:
        raise input_error_from(exc, "", PlanningFile, origin=origin) from None


def load_planning(path: str | Path) -> PlanningFile:
    """Load and validate a planning file (YAML or JSON)."""
    return parse_planning(load_yaml_or_json(path, "planning file"), str(path))
