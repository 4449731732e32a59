"""Names and period references of a planning file, resolved with the field path on error.

Used by :func:`capplan.reserve.problem.build_problem`: period labels, GPU models against the
catalog, default power, site names, demand series and the demand scenarios (listed, or built
from quantiles).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Sequence

import numpy as np

from capplan.model.catalog import Catalog
from capplan.model.errors import InputError, suggest
from capplan.reserve.model import DemandSeries, PeriodRef, PlanningFile

_QUANTILE_KEY = re.compile(r"^p(\d{1,2}(\.\d+)?)$")


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


class Resolver:
    """Resolves names and period references of one planning file, naming the field on error."""

    def __init__(self, pf: PlanningFile, catalog: Catalog) -> None:
        self.pf = pf
        self.catalog = catalog
        self.labels = period_labels(pf.horizon.start, pf.horizon.periods, pf.horizon.period)
        self.models: list[str] = []

    def period(self, ref: PeriodRef, path: str, allow_end: bool = False) -> int:
        """Index of a period label or index (``allow_end``: labels after the horizon give its length)."""
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
        """Canonical catalog name of a GPU model; remembered in first-use order."""
        canon = self.catalog.get(name, path).name
        if canon not in self.models:
            self.models.append(canon)
        return canon

    def power(self, model: str, given: float | None, path: str) -> float:
        """Watts per GPU: the given value, else the catalog TDP."""
        if given is not None:
            return given
        tdp = self.catalog.get(model).tdp_w
        if tdp is None:
            raise InputError(path, f"the catalog has no TDP for {model}; set power_w (watts per GPU)")
        return float(tdp)

    def site(self, name: str, path: str) -> int:
        """Index of a site name."""
        names = [s.name for s in self.pf.sites]
        if name not in names:
            raise InputError(path, f"unknown site {name!r}{suggest(name, names)}; sites: {', '.join(names)}")
        return names.index(name)

    def series(self, value: DemandSeries, path: str) -> list[float]:
        """One demand value per period (a single number is repeated)."""
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


def unique(names: Sequence[str], path: str, what: str) -> None:
    """Raise :class:`InputError` at the first repeated name."""
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise InputError(f"{path}[{i}].name", f"duplicate {what} name {n!r}; names must be unique")
        seen.add(n)


def window(r: Resolver, win: tuple[PeriodRef, PeriodRef] | None, path: str) -> tuple[int, int]:
    """First and last start period of a ``start_window`` (the whole horizon when omitted)."""
    if win is None:
        return 0, len(r.labels) - 1
    a = r.period(win[0], f"{path}.start_window[0]")
    b = r.period(win[1], f"{path}.start_window[1]")
    if b < a:
        raise InputError(f"{path}.start_window", "the window ends before it starts; write [first, last]")
    return a, b


#: scenario names, probabilities and demand[scenario][class][period]
Scenarios = tuple[list[str], list[float], list[list[list[float]]]]


def scenarios(r: Resolver, class_names: list[str]) -> Scenarios:
    """Demand scenarios from ``scenarios:`` or from ``demand_quantiles:`` (exactly one of them)."""
    pf = r.pf
    if (pf.scenarios is None) == (pf.demand_quantiles is None):
        raise InputError(
            "scenarios", "give demand either as `scenarios:` or as `demand_quantiles:` (exactly one of them)"
        )
    if pf.scenarios is not None:
        return _listed(r, class_names)
    return _quantiles(r, class_names)


def _listed(r: Resolver, class_names: list[str]) -> Scenarios:
    assert r.pf.scenarios is not None
    if not r.pf.scenarios:
        raise InputError("scenarios", "needs at least one scenario")
    unique([s.name for s in r.pf.scenarios], "scenarios", "scenario")
    names: list[str] = []
    probs: list[float] = []
    demand: list[list[list[float]]] = []
    for i, sc in enumerate(r.pf.scenarios):
        for cname in sc.demand:
            if cname not in class_names:
                raise InputError(f"scenarios[{i}].demand.{cname}", _unknown_class(cname, class_names))
        names.append(sc.name)
        probs.append(sc.probability)
        demand.append([r.series(sc.demand.get(c, 0.0), f"scenarios[{i}].demand.{c}") for c in class_names])
    total = sum(probs)
    if abs(total - 1.0) > 1e-6:
        raise InputError("scenarios", f"probabilities sum to {total:.6g}; they must sum to 1")
    return names, probs, demand


def _levels(r: Resolver, class_names: list[str]) -> list[str]:
    """The quantile keys (``p10``, ...) every class uses, in increasing order."""
    assert r.pf.demand_quantiles is not None
    if not r.pf.demand_quantiles:
        raise InputError("demand_quantiles", "needs at least one class, e.g. {train: {p10: 8, p50: 12, p90: 20}}")
    levels: list[str] | None = None
    for cname, qs in r.pf.demand_quantiles.items():
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
    return levels


def _quantiles(r: Resolver, class_names: list[str]) -> Scenarios:
    """One scenario per quantile level, with the probability between the midpoints to its neighbours."""
    dq = r.pf.demand_quantiles
    assert dq is not None
    levels = _levels(r, class_names)
    qv = [float(k[1:]) / 100 for k in levels]
    cuts = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(qv)] + [1.0]
    names, probs, demand = [], [], []
    for j, k in enumerate(levels):
        names.append(k)
        probs.append(cuts[j + 1] - cuts[j])
        demand.append(
            [r.series(dq[c][k], f"demand_quantiles.{c}.{k}") if c in dq else [0.0] * len(r.labels) for c in class_names]
        )
    for ci, c in enumerate(class_names):
        for j in range(1, len(levels)):
            for p in range(len(r.labels)):
                if demand[j][ci][p] < demand[j - 1][ci][p] - 1e-9:
                    raise InputError(
                        f"demand_quantiles.{c}.{levels[j]}[{p}]",
                        f"is below {levels[j - 1]}; quantiles must not decrease",
                    )
    return names, probs, demand


def _unknown_class(name: str, class_names: list[str]) -> str:
    """``unknown class 'x' (did you mean ...?)``, or the list of classes when nothing is close."""
    hint = suggest(name, class_names)
    return f"unknown class {name!r}{hint}" + ("" if hint else f"; the classes are {', '.join(class_names)}")
