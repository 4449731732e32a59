"""Resolve a validated :class:`PlanningFile` into an indexed, immutable :class:`Problem`.

This is where cross references are checked (site, tier and class names; GPU models against the
catalog; period labels; scenario probabilities) and where defaults are filled in (power per
GPU from the catalog TDP). Every error is an :class:`InputError` naming the field path.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from capplan.model.catalog import Catalog, builtin_catalog
from capplan.model.errors import InputError, suggest
from capplan.reserve.model import DemandSeries, PeriodRef, PlanningFile

HOURS = {"month": 730.0, "week": 168.0}
_QUANTILE_KEY = re.compile(r"^p(\d{1,2}(\.\d+)?)$")


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


def period_labels(start: str, periods: int, kind: str) -> list[str]:
    """Labels of the periods: ``YYYY-MM`` for months, ``YYYY-MM-DD`` (week start) for weeks."""
    try:
        if kind == "month":
            d = dt.date.fromisoformat(start + "-01") if len(start) == 7 else dt.date.fromisoformat(start)
            out = []
            y, m = d.year, d.month
            for _ in range(periods):
                out.append(f"{y:04d}-{m:02d}")
                m += 1
                if m > 12:
                    y, m = y + 1, 1
            return out
        d = dt.date.fromisoformat(start)
    except ValueError:
        raise InputError(
            "horizon.start", f"{start!r} is not a date; write YYYY-MM (months) or YYYY-MM-DD (weeks)"
        ) from None
    return [(d + dt.timedelta(weeks=k)).isoformat() for k in range(periods)]


class _Resolver:
    def __init__(self, pf: PlanningFile, catalog: Catalog) -> None:
        self.pf = pf
        self.catalog = catalog
        self.labels = period_labels(pf.horizon.start, pf.horizon.periods, pf.horizon.period)
        self.models: list[str] = []

    def period(self, ref: PeriodRef, path: str, allow_end: bool = False) -> int:
        t = len(self.labels)
        if isinstance(ref, int):
            if 0 <= ref < t or (allow_end and ref >= t):
                return min(ref, t) if allow_end else ref
            raise InputError(path, f"period index {ref} is outside the horizon 0..{t - 1}")
        if ref in self.labels:
            return self.labels.index(ref)
        try:
            dt.date.fromisoformat(ref + "-01" if self.pf.horizon.period == "month" else ref)
        except ValueError:
            fmt = "YYYY-MM" if self.pf.horizon.period == "month" else "YYYY-MM-DD"
            raise InputError(path, f"{ref!r} is not a period label ({fmt}) or a 0-based index") from None
        if allow_end and ref > self.labels[-1]:
            return t
        raise InputError(
            path,
            f"period {ref!r} is not in the horizon {self.labels[0]}..{self.labels[-1]}"
            f"{suggest(ref, self.labels)}",
        )

    def model(self, name: str, path: str) -> str:
        canon = self.catalog.get(name, path).name
        if canon not in self.models:
            self.models.append(canon)
        return canon

    def power(self, model: str, given: float | None, path: str) -> float:
        if given is not None:
            return given
        tdp = self.catalog.get(model).tdp_w
        if tdp is None:
            raise InputError(path, f"the catalog has no TDP for {model}; set power_w (watts per GPU)")
        return float(tdp)

    def site(self, name: str, path: str) -> int:
        names = [s.name for s in self.pf.sites]
        if name not in names:
            raise InputError(path, f"unknown site {name!r}{suggest(name, names)}; sites: {', '.join(names)}")
        return names.index(name)

    def series(self, value: DemandSeries, path: str) -> list[float]:
        t = len(self.labels)
        if isinstance(value, int | float):
            vals = [float(value)] * t
        else:
            vals = [float(v) for v in value]
            if len(vals) != t:
                raise InputError(
                    path,
                    f"has {len(vals)} values but the horizon has {t} periods; "
                    "give one value per period or a single number",
                )
        for i, v in enumerate(vals):
            if not np.isfinite(v) or v < 0:
                raise InputError(f"{path}[{i}]", f"demand must be a finite number >= 0, got {v}")
        return vals


def _unique(names: Sequence[str], path: str, what: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise InputError(f"{path}[{i}].name", f"duplicate {what} name {n!r}; names must be unique")
        seen.add(n)


def _window(r: _Resolver, win: tuple[PeriodRef, PeriodRef] | None, path: str) -> tuple[int, int]:
    if win is None:
        return 0, len(r.labels) - 1
    a = r.period(win[0], f"{path}.start_window[0]")
    b = r.period(win[1], f"{path}.start_window[1]")
    if b < a:
        raise InputError(f"{path}.start_window", "the window ends before it starts; write [first, last]")
    return a, b


def _scenarios(
    r: _Resolver, class_names: list[str]
) -> tuple[list[str], list[float], list[list[list[float]]]]:
    pf = r.pf
    if (pf.scenarios is None) == (pf.demand_quantiles is None):
        raise InputError(
            "scenarios", "give demand either as `scenarios:` or as `demand_quantiles:` (exactly one of them)"
        )
    names: list[str] = []
    probs: list[float] = []
    demand: list[list[list[float]]] = []
    if pf.scenarios is not None:
        if not pf.scenarios:
            raise InputError("scenarios", "needs at least one scenario")
        _unique([s.name for s in pf.scenarios], "scenarios", "scenario")
        for i, sc in enumerate(pf.scenarios):
            for cname in sc.demand:
                if cname not in class_names:
                    raise InputError(f"scenarios[{i}].demand.{cname}", _unknown_class(cname, class_names))
            names.append(sc.name)
            probs.append(sc.probability)
            demand.append(
                [r.series(sc.demand.get(c, 0.0), f"scenarios[{i}].demand.{c}") for c in class_names]
            )
        total = sum(probs)
        if abs(total - 1.0) > 1e-6:
            raise InputError("scenarios", f"probabilities sum to {total:.6g}; they must sum to 1")
        return names, probs, demand
    assert pf.demand_quantiles is not None
    levels: list[str] | None = None
    for cname, qs in pf.demand_quantiles.items():
        path = f"demand_quantiles.{cname}"
        if cname not in class_names:
            raise InputError(path, _unknown_class(cname, class_names))
        for k in qs:
            if not _QUANTILE_KEY.match(k) or not 0 < float(k[1:]) < 100:
                raise InputError(f"{path}.{k}", "quantile keys are p<percent>, e.g. p10, p50, p90")
        ks = sorted(qs, key=lambda k: float(k[1:]))
        if levels is None:
            levels = ks
        elif ks != levels:
            raise InputError(path, f"uses quantiles {ks} but other classes use {levels}; use the same set")
    assert levels is not None
    qv = [float(k[1:]) / 100 for k in levels]
    cuts = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(qv)] + [1.0]
    for j, k in enumerate(levels):
        names.append(k)
        probs.append(cuts[j + 1] - cuts[j])
        rows = []
        for c in class_names:
            cq = pf.demand_quantiles.get(c)
            rows.append(r.series(cq[k], f"demand_quantiles.{c}.{k}") if cq else [0.0] * len(r.labels))
        demand.append(rows)
    for ci, c in enumerate(class_names):
        for j in range(1, len(levels)):
            for p in range(len(r.labels)):
                if demand[j][ci][p] < demand[j - 1][ci][p] - 1e-9:
                    raise InputError(
                        f"demand_quantiles.{c}.{levels[j]}[{p}]",
                        f"is below {levels[j - 1]}; quantiles must not decrease",
                    )
    return names, probs, demand


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
        Naming the field path and the fix.
    """
    r = _Resolver(pf, catalog or builtin_catalog())
    t = len(r.labels)
    hours = pf.horizon.hours_per_period or HOURS[pf.horizon.period]
    _unique([s.name for s in pf.sites], "sites", "site")
    sites = tuple(
        SiteData(
            s.name,
            None if s.power_kw is None else s.power_kw * 1000,
            s.rack_units,
            s.max_installs_per_period,
            s.power_price_per_kwh * s.pue * hours / 1000,
        )
        for s in pf.sites
    )
    installed: list[Installed] = []
    for i, f in enumerate(pf.fleet):
        path = f"fleet[{i}]"
        m = r.model(f.model, f"{path}.model")
        end = t if f.retire is None else r.period(f.retire, f"{path}.retire", allow_end=True)
        installed.append(
            Installed(
                "fleet",
                r.site(f.site, f"{path}.site"),
                m,
                f.count,
                0,
                end,
                r.power(m, f.power_w, f"{path}.power_w"),
                f.rack_units_per_gpu,
            )
        )
    for i, o in enumerate(pf.in_flight):
        path = f"in_flight[{i}]"
        m = r.model(o.model, f"{path}.model")
        installed.append(
            Installed(
                "in_flight",
                r.site(o.site, f"{path}.site"),
                m,
                o.count,
                r.period(o.arrival, f"{path}.arrival"),
                t,
                r.power(m, o.power_w, f"{path}.power_w"),
                o.rack_units_per_gpu,
            )
        )

    for s, site in enumerate(sites):
        for p in range(t):
            inst = [i for i in installed if i.site == s and i.start <= p < i.end]
            watts = sum(i.count * i.power_w for i in inst)
            units = sum(i.count * i.rack_units_per_gpu for i in inst)
            if site.power_w is not None and watts > site.power_w + 1e-6:
                raise InputError(
                    f"sites[{s}].power_kw",
                    f"fleet and in-flight orders need {watts / 1000:g} kW "
                    f"in {r.labels[p]} but {site.name} has "
                    f"{site.power_w / 1000:g} kW; raise it or retire GPUs",
                )
            if site.rack_units is not None and units > site.rack_units + 1e-6:
                raise InputError(
                    f"sites[{s}].rack_units",
                    f"fleet and in-flight orders need {units:g} rack "
                    f"units in {r.labels[p]} but {site.name} has "
                    f"{site.rack_units:g}",
                )

    _unique([x.name for x in pf.tiers], "tiers", "tier")
    tiers: list[TierData] = []
    for i, x in enumerate(pf.tiers):
        path = f"tiers[{i}]"
        needs_penalty = x.kind == "flexible" or x.service_level < 1
        if needs_penalty and x.penalty_per_gpu_hour is None:
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
        tiers.append(
            TierData(
                x.name,
                x.kind,
                x.service_level,
                x.penalty_per_gpu_hour or 0.0,
                x.max_deferral_periods,
                x.deferral_penalty_per_gpu_hour,
                x.kind == "flexible" if x.spot is None else x.spot,
            )
        )
    tier_names = [x.name for x in pf.tiers]

    _unique([c.name for c in pf.classes], "classes", "class")
    classes: list[ClassData] = []
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
                    f"a gang of {c.gang_size} does not fit in a node of "
                    f"{pf.gpus_per_node} GPUs; use topology: site",
                )
            usable = (pf.gpus_per_node // c.gang_size) * c.gang_size
            factor = pf.gpus_per_node / usable
        classes.append(ClassData(c.name, tier_names.index(c.tier), ratios, c.gang_size, c.topology, factor))
    class_names = [c.name for c in pf.classes]

    opt = pf.options
    all_names: list[str] = []

    def opt_name(given: str | None, default: str, path: str) -> str:
        name = given or default
        if name in all_names:
            if given:
                raise InputError(f"{path}.name", f"duplicate option name {name!r}")
            name = f"{default}-{len(all_names)}"
        all_names.append(name)
        return name

    purchases: list[PurchaseData] = []
    for i, pu in enumerate(opt.purchases):
        path = f"options.purchases[{i}]"
        m = r.model(pu.model, f"{path}.model")
        idx = (
            tuple(range(len(sites)))
            if pu.sites is None
            else tuple(r.site(s, f"{path}.sites[{j}]") for j, s in enumerate(pu.sites))
        )
        if not idx:
            raise InputError(f"{path}.sites", "no site to install purchases at; add a site under `sites:`")
        purchases.append(
            PurchaseData(
                opt_name(pu.name, f"buy-{m}", path),
                m,
                idx,
                pu.lead_time,
                pu.unit_cost,
                r.power(m, pu.power_w, f"{path}.power_w"),
                pu.rack_units_per_gpu,
                pu.lot_size,
                pu.supply_cap,
                pu.depreciation_periods,
            )
        )
    commits: list[CloudCommitData] = []
    for i, rv in enumerate(opt.reserved):
        path = f"options.reserved[{i}]"
        m = r.model(rv.model, f"{path}.model")
        a, b = _window(r, rv.start_window, path)
        commits.append(
            CloudCommitData(
                "reserved",
                opt_name(rv.name, f"reserved-{m}", path),
                m,
                rv.block_gpus,
                rv.term_periods,
                rv.price_per_gpu_hour,
                tuple(range(a, b + 1)),
                None,
                rv.max_gpus,
            )
        )
    for i, cb in enumerate(opt.calendar_blocks):
        path = f"options.calendar_blocks[{i}]"
        m = r.model(cb.model, f"{path}.model")
        a, b = _window(r, cb.start_window, path)
        commits.append(
            CloudCommitData(
                "calendar",
                opt_name(cb.name, f"calendar-{m}", path),
                m,
                cb.gpus_per_block,
                cb.duration_periods,
                cb.price_per_gpu_hour,
                tuple(range(a, b + 1)),
                cb.max_blocks,
                None,
            )
        )
    recourse: list[RecourseData] = []
    for i, od in enumerate(opt.on_demand):
        path = f"options.on_demand[{i}]"
        m = r.model(od.model, f"{path}.model")
        recourse.append(
            RecourseData(
                "on_demand", opt_name(od.name, f"on-demand-{m}", path), m, od.price_per_gpu_hour, od.max_gpus
            )
        )
    for i, sp in enumerate(opt.spot):
        path = f"options.spot[{i}]"
        m = r.model(sp.model, f"{path}.model")
        recourse.append(
            RecourseData(
                "spot",
                opt_name(sp.name, f"spot-{m}", path),
                m,
                sp.price_per_gpu_hour,
                sp.max_gpus,
                sp.interruption_rate,
            )
        )

    names, probs, dem = _scenarios(r, class_names)
    return Problem(
        pf.name,
        tuple(r.labels),
        hours,
        pf.gpus_per_node,
        tuple(r.models),
        sites,
        tuple(installed),
        tuple(purchases),
        tuple(commits),
        tuple(recourse),
        tuple(tiers),
        tuple(classes),
        tuple(names),
        tuple(probs),
        np.array(dem, dtype=np.float64),
    )


def _unknown_class(name: str, class_names: list[str]) -> str:
    """``unknown class 'x' (did you mean ...?)``, or the list of classes when nothing is close."""
    hint = suggest(name, class_names)
    return f"unknown class {name!r}{hint}" + ("" if hint else f"; the classes are {', '.join(class_names)}")
