"""Resolve a validated :class:`PlanningFile` into an indexed, immutable :class:`Problem`.

This is where cross references are checked (site, tier and class names; GPU models against the
catalog; period labels; scenario probabilities) and where defaults are filled in (power per
GPU from the catalog TDP). Every error is an :class:`InputError` naming the field path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from capplan.model.catalog import Catalog, builtin_catalog
from capplan.model.errors import InputError, suggest
from capplan.model.goodput import best_goodput
from capplan.reserve.model import PlanningFile
from capplan.reserve.resolve import Resolver, scenarios, unique, window

HOURS = {"month": 730.0, "week": 168.0}


@dataclass(frozen=True)
class SiteData:
    """A site with its limits; ``energy_cost_per_w`` is money per watt installed per period."""

    name: str
    power_w: float | None
    rack_units: float | None
    max_installs: int | None
    energy_cost_per_w: float


@dataclass(frozen=True)
class Installed:
    """Fleet or in-flight GPUs at a site: in service for periods ``[start, end)``."""

    kind: str
    site: int
    model: str
    count: int
    start: int
    end: int
    power_w: float
    rack_units_per_gpu: float


@dataclass(frozen=True)
class PurchaseData:
    """A resolved purchase option; ``sites`` are site indices."""

    name: str
    model: str
    sites: tuple[int, ...]
    lead_time: int
    unit_cost: float
    power_w: float
    rack_units_per_gpu: float
    lot_size: int
    supply_cap: int | None
    depreciation_periods: int


@dataclass(frozen=True)
class CloudCommitData:
    """A reserved term (``kind='reserved'``) or calendar block (``kind='calendar'``) option.

    ``unit`` GPUs per integer decision; ``duration`` periods; ``max_units`` bounds the sum of
    decisions (calendar) and ``max_gpus`` the active GPUs in a period (reserved).
    """

    kind: str
    name: str
    model: str
    unit: int
    duration: int
    price_per_gpu_hour: float
    starts: tuple[int, ...]
    max_units: int | None
    max_gpus: int | None


@dataclass(frozen=True)
class RecourseData:
    """An on-demand (``kind='on_demand'``) or spot (``kind='spot'``) option."""

    kind: str
    name: str
    model: str
    price_per_gpu_hour: float
    max_gpus: float | None
    interruption_rate: float = 0.0
    interruptions_per_node_hour: float | None = None
    restart_s: float = 0.0


#: GPUs per node when a class's gang is counted in nodes for spot interruptions (the contract's 8-GPU nodes)
SPOT_NODE_GPUS = 8


def useful_share(cl: ClassData, ro: RecourseData) -> float:
    """The share of an on-demand or spot GPU's throughput that class ``cl`` gets: the one rule.

    With the option's ``interruptions_per_node_hour`` and the class's ``checkpoint``: the goodput ``u`` of
    the class's gang (λ = ⌈gang_size / 8⌉ nodes × interruptions_per_node_hour, restart = the option's
    ``restart``, the best checkpoint interval; :mod:`capplan.model.goodput`). Otherwise the old rule,
    ``1 - interruption_rate``.
    """
    if ro.interruptions_per_node_hour is None or cl.checkpoint_s is None:
        return 1.0 - ro.interruption_rate
    nodes = -(-cl.gang_size // SPOT_NODE_GPUS)
    return best_goodput(nodes * ro.interruptions_per_node_hour, cl.checkpoint_s, ro.restart_s)


@dataclass(frozen=True)
class TierData:
    """A resolved priority tier."""

    name: str
    kind: str
    service_level: float
    penalty_per_gpu_hour: float
    max_deferral: int
    deferral_penalty_per_gpu_hour: float
    spot: bool


@dataclass(frozen=True)
class ClassData:
    """A resolved workload class; ``factor`` raw GPUs consumed per usable GPU (node rounding)."""

    name: str
    tier: int
    ratios: dict[str, float]
    gang_size: int
    topology: str
    factor: float
    checkpoint_s: float | None = None

    @property
    def site_gangs(self) -> bool:
        """True when the class is counted in whole gangs per site (topology ``site``, gang > 1)."""
        return self.topology == "site" and self.gang_size > 1


@dataclass(frozen=True)
class Problem:
    """An indexed reservation-planning problem. Build it with :func:`build_problem`."""

    name: str
    labels: tuple[str, ...]
    hours: float
    gpus_per_node: int
    models: tuple[str, ...]
    sites: tuple[SiteData, ...]
    installed: tuple[Installed, ...]
    purchases: tuple[PurchaseData, ...]
    commits: tuple[CloudCommitData, ...]
    recourse: tuple[RecourseData, ...]
    tiers: tuple[TierData, ...]
    classes: tuple[ClassData, ...]
    scenario_names: tuple[str, ...]
    probabilities: tuple[float, ...]
    demand: npt.NDArray[np.float64] = field(repr=False)  # shape (scenarios, classes, periods)

    @property
    def periods(self) -> int:
        """Number of periods in the horizon."""
        return len(self.labels)

    def base_count(self, site: int, model: str, period: int) -> int:
        """GPUs of ``model`` in service at ``site`` in ``period`` from fleet and in-flight orders."""
        return sum(
            i.count
            for i in self.installed
            if i.site == site and i.model == model and i.start <= period < i.end
        )


def build_problem(pf: PlanningFile, catalog: Catalog | None = None) -> Problem:
    """Check cross references and defaults, and index a planning file.

    Parameters
    ----------
    pf
        The validated planning file.
    catalog
        GPU catalog for model names and default power (the built-in one when omitted).

    Raises
    ------
    InputError
        Naming the field path and the fix (the first problem, in file order).
    """
    r = Resolver(pf, catalog or builtin_catalog())
    hours = pf.horizon.hours_per_period or HOURS[pf.horizon.period]
    sites = _sites(pf, hours)
    installed = _installed(r)
    _check_fleet_fits(r, sites, installed)
    tiers = _tiers(pf)
    classes = _classes(r)
    opts = _Options(r, len(sites))
    names, probs, dem = scenarios(r, [c.name for c in pf.classes])
    return Problem(
        pf.name,
        tuple(r.labels),
        hours,
        pf.gpus_per_node,
        tuple(r.models),
        sites,
        installed,
        opts.purchases,
        opts.commits,
        opts.recourse,
        tiers,
        classes,
        tuple(names),
        tuple(probs),
        np.array(dem, dtype=np.float64),
    )


def _sites(pf: PlanningFile, hours: float) -> tuple[SiteData, ...]:
    unique([s.name for s in pf.sites], "sites", "site")
    return tuple(
        SiteData(
            s.name,
            None if s.power_kw is None else s.power_kw * 1000,
            s.rack_units,
            s.max_installs_per_period,
            s.power_price_per_kwh * s.pue * hours / 1000,
        )
        for s in pf.sites
    )


def _installed(r: Resolver) -> tuple[Installed, ...]:
    """Fleet entries (in service until they retire) and in-flight orders (from their arrival)."""
    t = len(r.labels)
    out: list[Installed] = []
    for i, f in enumerate(r.pf.fleet):
        path = f"fleet[{i}]"
        m = r.model(f.model, f"{path}.model")
        end = t if f.retire is None else r.period(f.retire, f"{path}.retire", allow_end=True)
        site = r.site(f.site, f"{path}.site")
        power = r.power(m, f.power_w, f"{path}.power_w")
        out.append(Installed("fleet", site, m, f.count, 0, end, power, f.rack_units_per_gpu))
    for i, o in enumerate(r.pf.in_flight):
        path = f"in_flight[{i}]"
        m = r.model(o.model, f"{path}.model")
        site = r.site(o.site, f"{path}.site")
        start = r.period(o.arrival, f"{path}.arrival")
        power = r.power(m, o.power_w, f"{path}.power_w")
        out.append(Installed("in_flight", site, m, o.count, start, t, power, o.rack_units_per_gpu))
    return tuple(out)


def _check_fleet_fits(r: Resolver, sites: tuple[SiteData, ...], installed: tuple[Installed, ...]) -> None:
    """Fleet and in-flight orders alone must fit each site's power and rack space."""
    for s, site in enumerate(sites):
        for p in range(len(r.labels)):
            inst = [i for i in installed if i.site == s and i.start <= p < i.end]
            watts = sum(i.count * i.power_w for i in inst)
            units = sum(i.count * i.rack_units_per_gpu for i in inst)
            if site.power_w is not None and watts > site.power_w + 1e-6:
                raise InputError(
                    f"sites[{s}].power_kw",
                    f"fleet and in-flight orders need {watts / 1000:g} kW in {r.labels[p]} but {site.name} has "
                    f"{site.power_w / 1000:g} kW; raise it or retire GPUs",
                )
            if site.rack_units is not None and units > site.rack_units + 1e-6:
                raise InputError(
                    f"sites[{s}].rack_units",
                    f"fleet and in-flight orders need {units:g} rack units in {r.labels[p]} but {site.name} has "
                    f"{site.rack_units:g}",
                )


def _tiers(pf: PlanningFile) -> tuple[TierData, ...]:
    unique([x.name for x in pf.tiers], "tiers", "tier")
    out: list[TierData] = []
    for i, x in enumerate(pf.tiers):
        path = f"tiers[{i}]"
        if (x.kind == "flexible" or x.service_level < 1) and x.penalty_per_gpu_hour is None:
            raise InputError(
                f"{path}.penalty_per_gpu_hour",
                "required for flexible tiers and for guaranteed tiers with service_level < 1 "
                "(the cost of one GPU-hour of unmet demand)",
            )
        if x.kind == "guaranteed":
            if x.spot:
                raise InputError(
                    f"{path}.spot",
                    "spot capacity can be interrupted; a guaranteed tier cannot use it (remove `spot: true`)",
                )
            if x.max_deferral_periods:
                raise InputError(f"{path}.max_deferral_periods", "only flexible tiers can defer demand")
        elif x.service_level != 1.0:
            raise InputError(
                f"{path}.service_level",
                "only guaranteed tiers have a service level; flexible tiers use penalty_per_gpu_hour",
            )
        spot = x.kind == "flexible" if x.spot is None else x.spot
        out.append(
            TierData(
                x.name, x.kind, x.service_level, x.penalty_per_gpu_hour or 0.0, x.max_deferral_periods,
                x.deferral_penalty_per_gpu_hour, spot,
            )
        )
    return tuple(out)


def _classes(r: Resolver) -> tuple[ClassData, ...]:
    """Workload classes: tier, accepted models (catalog names) and the node-rounding factor."""
    pf = r.pf
    tier_names = [x.name for x in pf.tiers]
    unique([c.name for c in pf.classes], "classes", "class")
    out: list[ClassData] = []
    for i, c in enumerate(pf.classes):
        path = f"classes[{i}]"
        if c.tier not in tier_names:
            raise InputError(f"{path}.tier", f"unknown tier {c.tier!r}{suggest(c.tier, tier_names)}")
        ratios: dict[str, float] = {}
        for mname, ratio in c.models.items():
            if not ratio > 0:
                raise InputError(f"{path}.models.{mname}", "relative throughput must be > 0")
            ratios[r.model(mname, f"{path}.models.{mname}")] = float(ratio)
        factor = 1.0
        if c.topology == "node":
            if c.gang_size > pf.gpus_per_node:
                raise InputError(
                    f"{path}.gang_size",
                    f"a gang of {c.gang_size} does not fit in a node of {pf.gpus_per_node} GPUs; use topology: site",
                )
            usable = (pf.gpus_per_node // c.gang_size) * c.gang_size
            factor = pf.gpus_per_node / usable
        out.append(ClassData(c.name, tier_names.index(c.tier), ratios, c.gang_size, c.topology, factor,
                             None if c.checkpoint is None else float(c.checkpoint)))
    return tuple(out)


class _Options:
    """The ways to add capacity, resolved in file order with unique option names."""

    def __init__(self, r: Resolver, n_sites: int) -> None:
        self.r, self.n_sites = r, n_sites
        self.names: list[str] = []
        #: purchase options; reserved terms, then calendar blocks; on-demand, then spot options
        self.purchases = self._resolve_purchases()
        self.commits = self._resolve_commits()
        self.recourse = self._resolve_recourse()

    def name(self, given: str | None, default: str, path: str) -> str:
        """The option's name (``default`` when not given; numbered when the default repeats)."""
        name = given or default
        if name in self.names:
            if given:
                raise InputError(f"{path}.name", f"duplicate option name {name!r}")
            name = f"{default}-{len(self.names)}"
        self.names.append(name)
        return name

    def _resolve_purchases(self) -> tuple[PurchaseData, ...]:
        r, out = self.r, []
        for i, pu in enumerate(r.pf.options.purchases):
            path = f"options.purchases[{i}]"
            m = r.model(pu.model, f"{path}.model")
            idx = (
                tuple(range(self.n_sites))
                if pu.sites is None
                else tuple(r.site(s, f"{path}.sites[{j}]") for j, s in enumerate(pu.sites))
            )
            if not idx:
                raise InputError(f"{path}.sites", "no site to install purchases at; add a site under `sites:`")
            out.append(
                PurchaseData(
                    self.name(pu.name, f"buy-{m}", path), m, idx, pu.lead_time, pu.unit_cost,
                    r.power(m, pu.power_w, f"{path}.power_w"), pu.rack_units_per_gpu, pu.lot_size,
                    pu.supply_cap, pu.depreciation_periods,
                )
            )
        return tuple(out)

    def _resolve_commits(self) -> tuple[CloudCommitData, ...]:
        r, out = self.r, []
        for i, rv in enumerate(r.pf.options.reserved):
            path = f"options.reserved[{i}]"
            m = r.model(rv.model, f"{path}.model")
            a, b = window(r, rv.start_window, path)
            name = self.name(rv.name, f"reserved-{m}", path)
            out.append(
                CloudCommitData(
                    "reserved", name, m, rv.block_gpus, rv.term_periods, rv.price_per_gpu_hour,
                    tuple(range(a, b + 1)), None, rv.max_gpus,
                )
            )
        for i, cb in enumerate(r.pf.options.calendar_blocks):
            path = f"options.calendar_blocks[{i}]"
            m = r.model(cb.model, f"{path}.model")
            a, b = window(r, cb.start_window, path)
            name = self.name(cb.name, f"calendar-{m}", path)
            out.append(
                CloudCommitData(
                    "calendar", name, m, cb.gpus_per_block, cb.duration_periods, cb.price_per_gpu_hour,
                    tuple(range(a, b + 1)), cb.max_blocks, None,
                )
            )
        return tuple(out)

    def _resolve_recourse(self) -> tuple[RecourseData, ...]:
        r, out = self.r, []
        for i, od in enumerate(r.pf.options.on_demand):
            path = f"options.on_demand[{i}]"
            m = r.model(od.model, f"{path}.model")
            name = self.name(od.name, f"on-demand-{m}", path)
            out.append(RecourseData("on_demand", name, m, od.price_per_gpu_hour, od.max_gpus))
        for i, sp in enumerate(r.pf.options.spot):
            path = f"options.spot[{i}]"
            m = r.model(sp.model, f"{path}.model")
            name = self.name(sp.name, f"spot-{m}", path)
            out.append(RecourseData("spot", name, m, sp.price_per_gpu_hour, sp.max_gpus, sp.interruption_rate,
                                    sp.interruptions_per_node_hour, float(sp.restart)))
        return tuple(out)
