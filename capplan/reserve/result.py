"""The reservation plan: a small, JSON-serialisable result object (see docs/reservations.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "capplan.reserve.plan/1"


@dataclass(frozen=True)
class Order:
    """A purchase order: ``count`` GPUs of ``model`` for ``site``, ordered and arriving in periods."""

    option: str
    model: str
    site: str
    count: int
    lots: int
    order_period: str
    arrival_period: str
    unit_cost: float

    def line(self) -> str:
        """Human-readable order line."""
        return (
            f"order {self.count} {self.model} for {self.site} in {self.order_period}, "
            f"arrives {self.arrival_period}"
        )


@dataclass(frozen=True)
class Commitment:
    """A cloud reserved term or calendar block: ``gpus`` GPUs for periods ``start``..``end``."""

    kind: str
    option: str
    model: str
    gpus: int
    units: int
    start_period: str
    end_period: str
    periods: int

    def line(self) -> str:
        """Human-readable commitment line."""
        what = "reserve" if self.kind == "reserved" else "book calendar block of"
        return (
            f"{what} {self.gpus} {self.model} ({self.option}) from {self.start_period} to {self.end_period}"
        )


@dataclass(frozen=True)
class TierOutcome:
    """Shortfall statistics of one tier across scenarios (GPU-hours in reference GPUs)."""

    tier: str
    kind: str
    service_level: float
    shortfall_probability: float
    expected_shortfall_gpu_hours: float
    worst_shortfall_gpu_hours: float
    worst_scenario: str | None
    met: bool


@dataclass(frozen=True)
class Unmet:
    """Where a guaranteed tier cannot be met, and the constraints that bind there."""

    tier: str
    workload_class: str
    period: str
    scenario: str
    shortfall_gpus: float
    sites: tuple[str, ...]
    binding: tuple[str, ...]

    def line(self) -> str:
        """Human-readable explanation."""
        where = f" at {', '.join(self.sites)}" if self.sites else ""
        return (
            f"tier {self.tier}: class {self.workload_class} short {self.shortfall_gpus:g} GPUs in "
            f"{self.period} (scenario {self.scenario}){where}; binding: {'; '.join(self.binding)}"
        )


@dataclass(frozen=True)
class Plan:
    """A reservation plan and its evaluation.

    Attributes
    ----------
    status
        ``ok`` (every guaranteed tier met) or ``guaranteed_unmet``.
    solver
        Solver statistics: backend, solve status, runtime, sizes, objective.
    orders, commitments
        First-stage decisions (the schedule to act on).
    gang_blocks
        Whole gangs reserved per class, location, model and period (topology ``site`` classes).
    capacity
        Committed capacity per model and period: ``{"model", "period", "own", "cloud", "by_site"}``.
    coverage
        One row per scenario, class and period: demand, served, use by model and option, shortfall.
    costs
        Expected cost per category, and ``total``.
    tiers
        Shortfall probability and size per tier.
    unmet
        Explanations when a guaranteed tier cannot be met.
    what_if
        What-if deltas against this plan (filled by :mod:`capplan.reserve.whatif`).
    effective_prices
        Per class and on-demand or spot option it may use: the price, the useful share of a GPU
        (goodput under interruptions, or ``1 - interruption_rate``) and the price per useful GPU-hour.
    """

    name: str
    status: str
    periods: tuple[str, ...]
    scenarios: tuple[str, ...]
    probabilities: tuple[float, ...]
    solver: dict[str, Any]
    orders: tuple[Order, ...]
    commitments: tuple[Commitment, ...]
    gang_blocks: tuple[dict[str, Any], ...]
    capacity: tuple[dict[str, Any], ...]
    coverage: tuple[dict[str, Any], ...]
    costs: dict[str, float]
    tiers: tuple[TierOutcome, ...]
    unmet: tuple[Unmet, ...] = ()
    what_if: tuple[dict[str, Any], ...] = field(default=())
    effective_prices: tuple[dict[str, Any], ...] = field(default=())

    @property
    def guaranteed_met(self) -> bool:
        """True when every guaranteed tier meets its service level."""
        return self.status == "ok"

    def summary(self, unmet: bool = True) -> str:
        """A few lines for the console (the first unmet tiers too, unless ``unmet`` is False)."""
        lines = [
            f"reserve plan {self.name or ''}: {self.status}, expected cost {self.costs['total']:,.0f} "
            f"({self.solver['status']}, {self.solver['runtime_s']:.2f} s)"
        ]
        lines += [o.line() for o in self.orders]
        lines += [c.line() for c in self.commitments]
        lines += [u.line() for u in self.unmet[:5]] if unmet else []
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (the ``plan.json`` document)."""
        d = asdict(self)
        d = {"schema": SCHEMA, **d}
        return d

    def to_json(self) -> str:
        """Serialise to JSON text (stable key order, so output is deterministic)."""
        return json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        """Rebuild a plan from :meth:`to_dict` output."""
        return cls(
            name=d["name"],
            status=d["status"],
            periods=tuple(d["periods"]),
            scenarios=tuple(d["scenarios"]),
            probabilities=tuple(d["probabilities"]),
            solver=dict(d["solver"]),
            orders=tuple(Order(**o) for o in d["orders"]),
            commitments=tuple(Commitment(**c) for c in d["commitments"]),
            gang_blocks=tuple(d["gang_blocks"]),
            capacity=tuple(d["capacity"]),
            coverage=tuple(d["coverage"]),
            costs=dict(d["costs"]),
            tiers=tuple(TierOutcome(**t) for t in d["tiers"]),
            unmet=tuple(
                Unmet(**{**u, "sites": tuple(u["sites"]), "binding": tuple(u["binding"])}) for u in d["unmet"]
            ),
            what_if=tuple(d.get("what_if", ())),
            effective_prices=tuple(d.get("effective_prices", ())),
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Parse :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))
