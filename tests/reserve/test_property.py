"""Property test: every plan on random small problems passes the independent checker."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.reserve.check import check_plan
from capplan.reserve.model import parse_planning
from capplan.reserve.planner import solve
from capplan.reserve.problem import build_problem
from tests.reserve.conftest import SETTINGS


@st.composite
def problems(draw: st.DrawFn) -> dict[str, Any]:
    """Random 1-2 site, 3-period problems with power, lots, caps, gangs, chance and flexible tiers."""
    T = 3
    n_sites = draw(st.integers(1, 2))
    sites = [
        {
            "name": f"s{i}",
            "power_kw": draw(st.sampled_from([5, 10, 40])),
            "rack_units": draw(st.sampled_from([16, 64])),
            "max_installs_per_period": draw(st.sampled_from([8, 64])),
        }
        for i in range(n_sites)
    ]
    fleet = [
        {
            "site": "s0",
            "model": "H100-SXM5",
            "count": draw(st.integers(0, 6)),
            "retire": draw(st.integers(1, 3)),
        }
    ]
    level = draw(st.sampled_from([1.0, 0.5]))
    tiers = [
        {
            "name": "prod",
            "kind": "guaranteed",
            "service_level": level,
            **({"penalty_per_gpu_hour": 9} if level < 1 else {}),
        },
        {
            "name": "batch",
            "kind": "flexible",
            "penalty_per_gpu_hour": 7,
            "max_deferral_periods": draw(st.integers(0, 2)),
            "deferral_penalty_per_gpu_hour": 1,
        },
    ]
    gang = draw(st.sampled_from([1, 2, 4]))
    classes = [
        {
            "name": "train",
            "tier": "prod",
            "models": {"H100-SXM5": 1.0, "H200": 1.4},
            "gang_size": gang,
            "topology": draw(st.sampled_from(["node", "site"])),
        },
        {"name": "eval", "tier": "batch", "models": {"H100-SXM5": 1.0}},
    ]
    options = {
        "purchases": [
            {
                "model": "H200",
                "lead_time": draw(st.integers(0, 2)),
                "unit_cost": 300,
                "lot_size": draw(st.sampled_from([1, 4])),
                "supply_cap": draw(st.sampled_from([8, 16])),
                "depreciation_periods": 3,
            },
            {"model": "H100-SXM5", "lead_time": 1, "unit_cost": 200, "depreciation_periods": 3},
        ],
        "reserved": [{"model": "H100-SXM5", "term_periods": 2, "price_per_gpu_hour": 90, "block_gpus": 4}],
        "calendar_blocks": [
            {
                "model": "H200",
                "gpus_per_block": 4,
                "duration_periods": 1,
                "max_blocks": 1,
                "price_per_gpu_hour": 150,
            }
        ],
        "on_demand": [
            {"model": "H100-SXM5", "price_per_gpu_hour": 120, "max_gpus": draw(st.sampled_from([4, 100]))}
        ],
        "spot": [{"model": "H100-SXM5", "price_per_gpu_hour": 40, "interruption_rate": 0.25, "max_gpus": 4}],
    }
    dem = st.lists(st.integers(0, 12), min_size=T, max_size=T)
    scen = [
        {"name": f"w{i}", "probability": 0.5, "demand": {"train": draw(dem), "eval": draw(dem)}}
        for i in range(2)
    ]
    return {
        "horizon": {"start": "2027-01", "periods": T, "hours_per_period": 1},
        "sites": sites,
        "fleet": fleet,
        "tiers": tiers,
        "classes": classes,
        "options": options,
        "scenarios": scen,
    }


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_every_plan_passes_the_checker(data: dict[str, Any]) -> None:
    """Capacity, power, space, installs, lead times, lots and tier rules hold in every produced plan."""
    pr = build_problem(parse_planning(data))
    plan = solve(pr, SETTINGS)
    assert check_plan(pr, plan) == []
