"""Finance's view of a reservation plan: ``orders.csv``, ``costs.csv`` and the cost categories' labels.

``orders.csv`` has one row per purchase order, reserved term and calendar block (what to sign, for
how many GPUs, when); ``costs.csv`` one row per cost category with its human label, the expected
amount over the horizon and the currency (docs/reservations.md, "Outputs").
"""

from __future__ import annotations

import csv
import io

from capplan.reserve.result import Plan

#: Human labels of the cost categories (the keys of ``plan.json``'s ``costs``), in report order.
COST_LABELS = {
    "capex_depreciation": "GPU purchases (depreciation)",
    "power": "power",
    "cloud_reserved": "cloud reserved terms",
    "cloud_calendar": "cloud calendar blocks",
    "cloud_on_demand": "cloud on-demand",
    "cloud_spot": "cloud spot",
    "penalty_guaranteed_shortfall": "penalty: guaranteed work short",
    "penalty_flexible_lost": "penalty: flexible work lost",
    "penalty_deferral": "penalty: deferred work",
    "total": "total",
}

ORDER_COLUMNS = ("kind", "option", "model", "site", "gpus", "lots_or_units", "order_or_start_period",
                 "arrival_or_end_period", "periods", "unit_cost")
COST_COLUMNS = ("category", "label", "expected_cost", "currency")


def cost_label(key: str) -> str:
    """The human label of a cost category (the key itself for one this table does not know)."""
    return COST_LABELS.get(key, key.replace("_", " "))


def orders_csv(plan: Plan) -> str:
    """What to sign: purchase orders, then reserved terms and calendar blocks."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(ORDER_COLUMNS)
    for o in plan.orders:
        w.writerow(("purchase", o.option, o.model, o.site, o.count, o.lots, o.order_period, o.arrival_period, "",
                    f"{o.unit_cost:g}"))
    for c in plan.commitments:
        w.writerow((c.kind, c.option, c.model, "", c.gpus, c.units, c.start_period, c.end_period, c.periods, ""))
    return buf.getvalue()


def costs_csv(plan: Plan, currency: str = "USD") -> str:
    """The expected cost per category over the horizon, with labels and the currency."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COST_COLUMNS)
    for key, value in plan.costs.items():
        w.writerow((key, cost_label(key), f"{value:.2f}", currency))
    return buf.getvalue()
