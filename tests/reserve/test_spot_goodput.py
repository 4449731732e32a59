"""Spot under the goodput model: a spot GPU delivers the goodput u of the class's gang, with λ = gang nodes ×
``interruptions_per_node_hour``, so spot pays for a one-node class and stops paying for a 32-node one."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy.special import lambertw

from capplan.model.errors import InputError
from capplan.reserve.model import parse_planning
from capplan.reserve.problem import build_problem, useful_share
from capplan.reserve.report import markdown_report
from capplan.reserve.result import Plan
from tests.reserve.conftest import planning, solved

SPOT = {"model": "H100-SXM5", "price_per_gpu_hour": 2.0, "interruptions_per_node_hour": 0.05, "restart": "30m"}


def _data(spot: dict[str, Any] | None = None, checkpoint: str | None = "6m") -> dict[str, Any]:
    ck = {} if checkpoint is None else {"checkpoint": checkpoint}
    return planning(periods=1, tiers=[{"name": "batch", "kind": "flexible", "penalty_per_gpu_hour": 100.0}],
                    classes=[{"name": "small", "tier": "batch", "models": {"H100-SXM5": 1.0}, "gang_size": 8, **ck},
                             {"name": "big", "tier": "batch", "models": {"H100-SXM5": 1.0}, "gang_size": 256,
                              "topology": "site", **ck}],
                    options={"on_demand": [{"model": "H100-SXM5", "price_per_gpu_hour": 4.0}],
                             "spot": [spot or SPOT]},
                    scenarios=[{"name": "base", "probability": 1.0, "demand": {"small": 8, "big": 256}}])


def _u(nodes: int) -> float:
    """By hand: λ = nodes × 0.05/h, M = 1/λ, C = 0.1 h, R = 0.5 h, τ* from the Lambert-W closed form."""
    m, c, r = 1 / (nodes * 0.05), 0.1, 0.5
    tau = m * (1 + float(lambertw(-math.exp(-(c / m + 1)), 0).real))
    return tau / (m * math.exp(r / m) * math.expm1((tau + c) / m))


def test_spot_for_one_node_not_for_32_nodes() -> None:
    """One node: u = 0.8810, 2.00 / 0.8810 = 2.27 per useful GPU-hour < 4.00 on demand: spot. 32 nodes:
    u = 0.2406, 8.31 per useful GPU-hour > 4.00: on demand."""
    pr, plan = solved(_data())
    shares = {(cl.name, ro.kind): useful_share(cl, ro) for cl in pr.classes for ro in pr.recourse}
    assert shares["small", "spot"] == pytest.approx(_u(1), abs=1e-4) == pytest.approx(0.8810, abs=1e-4)
    assert shares["big", "spot"] == pytest.approx(_u(32), abs=1e-4) == pytest.approx(0.2406, abs=1e-4)
    assert shares["small", "on_demand"] == shares["big", "on_demand"] == 1.0
    use = {r["class"]: r["recourse"] for r in plan.coverage}
    assert set(use["small"]) == {"spot-H100-SXM5-80GB"}
    assert use["small"]["spot-H100-SXM5-80GB"] == pytest.approx(8 / _u(1), abs=1e-3)
    assert set(use["big"]) == {"on-demand-H100-SXM5-80GB"}
    prices = {(r["class"], r["kind"]): r["per_useful_gpu_hour"] for r in plan.effective_prices}
    assert prices["small", "spot"] == pytest.approx(2.0 / _u(1), abs=1e-4)
    assert prices["big", "spot"] == pytest.approx(2.0 / _u(32), abs=1e-4)
    assert prices["big", "on_demand"] == 4.0
    text = markdown_report(plan)
    assert "Price per useful GPU-hour" in text and "| big | spot-H100-SXM5-80GB | 2.000 | 0.2406 |" in text
    assert Plan.from_json(plan.to_json()) == plan


def test_without_the_new_fields_the_old_rule_holds() -> None:
    """No interruptions_per_node_hour, or no checkpoint on the class: a spot GPU delivers 1 - interruption_rate,
    the same for a one-node class as for a 32-node one."""
    old = {"model": "H100-SXM5", "price_per_gpu_hour": 2.0, "interruption_rate": 0.15}
    for data in (_data(old), _data(checkpoint=None)):
        pr = build_problem(parse_planning(data))
        spot = next(ro for ro in pr.recourse if ro.kind == "spot")
        want = 1 - spot.interruption_rate
        assert [useful_share(cl, spot) for cl in pr.classes] == [want, want]


@pytest.mark.parametrize(("spot", "cls", "path"), [
    ({**SPOT, "restart": "soon"}, {}, "options.spot[0].restart"),
    ({**SPOT, "interruptions_per_node_hour": -1}, {}, "options.spot[0].interruptions_per_node_hour"),
    (SPOT, {"checkpoint": 0}, "classes[0].checkpoint"),
    (SPOT, {"checkpoint": "6 minutes"}, "classes[0].checkpoint"),
])
def test_bad_values_name_the_field(spot: dict[str, Any], cls: dict[str, Any], path: str) -> None:
    data = _data(spot)
    data["classes"][0].update(cls)
    with pytest.raises(InputError) as err:
        build_problem(parse_planning(data))
    assert err.value.path == path, str(err.value)
