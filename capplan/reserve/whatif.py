"""What-if analysis: apply deltas such as ``lead_time=+2`` or ``price.H200=-10%`` and re-solve.

Syntax of one what-if: ``KEY[.SELECTOR]=VALUE`` joined by commas for a combined change.
VALUE is ``+N`` / ``-N`` (add), ``+N%`` / ``-N%`` (scale) or ``N`` (set). Keys:

==============  =====================================================  ==========================
key             changes                                                 selector
==============  =====================================================  ==========================
``lead_time``   ``options.purchases[*].lead_time`` (whole periods)     option name or GPU model
``price``       purchase ``unit_cost`` and every cloud price            option name or GPU model
``unit_cost``   purchase ``unit_cost`` only                             option name or GPU model
``cloud_price`` reserved, calendar, on-demand and spot prices           option name or GPU model
``supply_cap``  purchase ``supply_cap`` (unset caps stay unset)         option name or GPU model
``power_kw``    ``sites[*].power_kw``                                   site name
``demand``      every scenario / quantile demand value                  class name
==============  =====================================================  ==========================
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from capplan.model.catalog import Catalog, builtin_catalog
from capplan.model.decode import LIMITS
from capplan.model.errors import InputError, suggest
from capplan.reserve.model import PlanningFile, parse_planning
from capplan.reserve.planner import solve
from capplan.reserve.problem import build_problem
from capplan.reserve.result import Plan
from capplan.reserve.solver import SolverSettings

KEYS = ("lead_time", "price", "unit_cost", "cloud_price", "supply_cap", "power_kw", "demand")
_VALUE = re.compile(r"^([+-]?)(\d+(?:\.\d+)?)(%?)$")
_CLOUD = ("reserved", "calendar_blocks", "on_demand", "spot")


@dataclass(frozen=True)
class Delta:
    """One parsed change: ``key``, optional ``selector``, ``op`` (add/scale/set) and ``amount``."""

    key: str
    selector: str | None
    op: str
    amount: float
    text: str = ""

    def apply(self, x: float) -> float:
        """Apply to a number."""
        if self.op == "add":
            return x + self.amount
        if self.op == "scale":
            return x * (1 + self.amount / 100)
        return self.amount


def parse_whatif(text: str, path: str = "--what-if") -> tuple[Delta, ...]:
    """Parse ``KEY[.SEL]=VALUE[,KEY=VALUE...]``; raises :class:`InputError` on bad syntax."""
    out = []
    for part in (x.strip() for x in text.split(",")):
        if "=" not in part:
            raise InputError(path, f"{part!r} is not KEY=VALUE, e.g. lead_time=+2 or price.H200=-10%")
        lhs, rhs = part.split("=", 1)
        key, _, sel = lhs.strip().partition(".")
        if key not in KEYS:
            raise InputError(
                path, f"unknown what-if key {key!r}{suggest(key, KEYS)}; keys: {', '.join(KEYS)}"
            )
        mt = _VALUE.match(rhs.strip())
        if not mt:
            raise InputError(path, f"{rhs!r} is not a value; write +2, -1, -10%, +5% or 8")
        sign, num, pct = mt.groups()
        amount = float(num) * (-1 if sign == "-" else 1)
        op = "scale" if pct else ("add" if sign else "set")
        if not math.isfinite(amount) or abs(amount) > LIMITS.magnitude:
            raise InputError(path, f"{part!r}: {num} is above the limit of {LIMITS.magnitude:g} "
                                   "(see docs/formats.md, Limits)")
        if op == "scale" and amount < -100:
            raise InputError(path, f"{part!r}: a change below -100% makes {key} negative; "
                                   "-100% is the least (free)")
        out.append(Delta(key, sel or None, op, amount, part))
    return tuple(out)


def apply_deltas(pf: PlanningFile, deltas: Sequence[Delta], catalog: Catalog | None = None) -> PlanningFile:
    """Return a new, re-validated planning file with ``deltas`` applied."""
    cat = catalog or builtin_catalog()
    d: dict[str, Any] = pf.model_dump(mode="python", exclude_none=False)

    def canon(name: str) -> str:
        return cat.get(name).name if name in cat else name

    def where(obj: dict[str, Any]) -> str:
        return f"{obj['name']}" if obj.get("name") else "an entry"

    def matches(opt: dict[str, Any], sel: str | None) -> bool:
        return sel is None or opt.get("name") == sel or canon(opt["model"]) == canon(sel)

    for dl in deltas:
        hit = 0

        def upd(obj: dict[str, Any], field: str, integer: bool = False, dl: Delta = dl) -> None:
            nonlocal hit
            if obj.get(field) is None:
                return
            val = dl.apply(float(obj[field]))
            if val < 0 or val > LIMITS.magnitude:  # the file's bounds hold for what-ifs too: no silent clamp
                raise InputError("--what-if", f"{dl.text} makes {where(obj)}.{field} {val:g}; it must be in "
                                              f"0..{LIMITS.magnitude:g}, as in the planning file")
            obj[field] = round(val) if integer else val
            hit += 1

        opts = d["options"]
        if dl.key in ("lead_time", "price", "unit_cost", "supply_cap"):
            for po in opts["purchases"]:
                if matches(po, dl.selector):
                    field = {"lead_time": "lead_time", "supply_cap": "supply_cap"}.get(dl.key, "unit_cost")
                    upd(po, field, integer=dl.key in ("lead_time", "supply_cap"))
        if dl.key in ("price", "cloud_price"):
            for kind in _CLOUD:
                for co in opts[kind]:
                    if matches(co, dl.selector):
                        upd(co, "price_per_gpu_hour")
        if dl.key == "power_kw":
            for s in d["sites"]:
                if dl.selector in (None, s["name"]):
                    upd(s, "power_kw")
        if dl.key == "demand":

            def scale(v: Any, dl: Delta = dl) -> Any:
                if isinstance(v, list):
                    return [scale(x) for x in v]
                val = dl.apply(v)
                if val < 0 or val > LIMITS.magnitude:
                    raise InputError("--what-if", f"{dl.text} makes a demand value {val:g}; it must be in "
                                                  f"0..{LIMITS.magnitude:g}, as in the planning file")
                return val

            for sc in d.get("scenarios") or []:
                for c in sc["demand"]:
                    if dl.selector in (None, c):
                        sc["demand"][c] = scale(sc["demand"][c])
                        hit += 1
            for c, qs in (d.get("demand_quantiles") or {}).items():
                if dl.selector in (None, c):
                    for k in qs:
                        qs[k] = scale(qs[k])
                        hit += 1
        if not hit:
            raise InputError(
                "--what-if",
                f"{dl.key}{'.' + dl.selector if dl.selector else ''} matches nothing in the planning file",
            )
    return parse_planning(_tuples_to_lists(d), "what-if")


def _tuples_to_lists(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _tuples_to_lists(v) for k, v in x.items() if v is not None}
    if isinstance(x, list | tuple):
        return [_tuples_to_lists(v) for v in x]
    return x


def run_whatifs(
    pf: PlanningFile,
    base: Plan,
    texts: Sequence[str],
    settings: SolverSettings,
    catalog: Catalog | None = None,
) -> tuple[dict[str, Any], ...]:
    """Re-solve for each what-if text and describe the delta against ``base``.

    Returns one dictionary per what-if: ``what_if``, ``status``, ``costs``, ``cost_delta`` (per
    category and total), ``orders_delta`` (GPUs ordered per model), ``orders``.
    """
    out = []
    for i, text in enumerate(texts):
        deltas = parse_whatif(text, f"--what-if[{i}]")
        each = settings if settings.deadline is None else replace(
            settings, deadline=settings.deadline.share(1 / (len(texts) - i)))  # an even share of what is left
        plan = solve(build_problem(apply_deltas(pf, deltas, catalog), catalog), each)
        bought: dict[str, int] = {}
        for o in base.orders:
            bought[o.model] = bought.get(o.model, 0) - o.count
        for o in plan.orders:
            bought[o.model] = bought.get(o.model, 0) + o.count
        out.append(
            {
                "what_if": text,
                "status": plan.status,
                "costs": plan.costs,
                "cost_delta": {k: round(plan.costs[k] - base.costs[k], 2) for k in plan.costs},
                "orders_delta": {k: v for k, v in sorted(bought.items()) if v},
                "orders": [o.line() for o in plan.orders],
                "unmet": [u.line() for u in plan.unmet],
            }
        )
    return tuple(out)
