"""Bad planning files: each error names the field path and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from capplan.model.errors import InputError
from capplan.reserve.model import parse_planning
from capplan.reserve.problem import build_problem
from tests.reserve.conftest import planning


def _err(d: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as ei:
        build_problem(parse_planning(d))
    return ei.value


def test_unknown_field_names_its_path() -> None:
    """A misspelt field is reported with its path."""
    e = _err(planning(sites=[{"name": "s", "power_kww": 3}]))
    assert e.path == "sites[0].power_kww" and "unknown field" in e.message


def test_negative_lead_time() -> None:
    """A negative lead time names options.purchases[0].lead_time."""
    e = _err(planning(options={"purchases": [{"model": "H200", "lead_time": -1, "unit_cost": 1}]}))
    assert e.path == "options.purchases[0].lead_time"


def test_unknown_model_suggests() -> None:
    """An unknown GPU model suggests close catalog names."""
    e = _err(planning(options={"purchases": [{"model": "H2OO", "lead_time": 1, "unit_cost": 1}]}))
    assert e.path == "options.purchases[0].model" and "did you mean" in e.message


def test_unknown_site_in_fleet() -> None:
    """A fleet entry at an unknown site names fleet[0].site."""
    e = _err(planning(fleet=[{"site": "site-2", "model": "H200", "count": 1}]))
    assert e.path == "fleet[0].site" and "site-1" in e.message


def test_demand_length_mismatch() -> None:
    """A demand series of the wrong length names the scenario and class."""
    e = _err(planning(scenarios=[{"name": "s", "probability": 1, "demand": {"train": [1, 2]}}]))
    assert e.path == "scenarios[0].demand.train" and "4 periods" in e.message


def test_probabilities_must_sum_to_one() -> None:
    """Scenario probabilities that do not sum to 1 are rejected."""
    e = _err(
        planning(
            scenarios=[
                {"name": "a", "probability": 0.5, "demand": {}},
                {"name": "b", "probability": 0.4, "demand": {}},
            ]
        )
    )
    assert e.path == "scenarios" and "sum to 0.9" in e.message


def test_spot_on_guaranteed_tier_rejected() -> None:
    """A guaranteed tier may not use spot."""
    e = _err(planning(tiers=[{"name": "prod", "kind": "guaranteed", "spot": True}]))
    assert e.path == "tiers[0].spot"


def test_chance_tier_needs_penalty() -> None:
    """service_level < 1 needs penalty_per_gpu_hour."""
    e = _err(planning(tiers=[{"name": "prod", "kind": "guaranteed", "service_level": 0.9}]))
    assert e.path == "tiers[0].penalty_per_gpu_hour"


def test_unknown_period_label() -> None:
    """A retire period outside the horizon format is reported with suggestions."""
    e = _err(planning(fleet=[{"site": "site-1", "model": "H200", "count": 1, "retire": "2027-13"}]))
    assert e.path == "fleet[0].retire"


def test_fleet_over_power() -> None:
    """A fleet that already exceeds the site power is an input error naming sites[0].power_kw."""
    e = _err(
        planning(
            sites=[{"name": "site-1", "power_kw": 1}], fleet=[{"site": "site-1", "model": "H200", "count": 2}]
        )
    )
    assert e.path == "sites[0].power_kw"


def test_gang_too_big_for_node() -> None:
    """A node-topology gang larger than a node is rejected with the fix (topology: site)."""
    e = _err(planning(classes=[{"name": "train", "tier": "prod", "models": {"H200": 1}, "gang_size": 16}]))
    assert e.path == "classes[0].gang_size" and "topology: site" in e.message


def test_unknown_class_in_demand() -> None:
    """Demand for an undefined class names the class path."""
    e = _err(planning(scenarios=[{"name": "s", "probability": 1, "demand": {"trian": 1}}]))
    assert e.path == "scenarios[0].demand.trian" and "did you mean" in e.message


def test_quantiles_must_not_decrease() -> None:
    """A p90 below p50 is rejected."""
    d = planning(demand_quantiles={"train": {"p50": 5, "p90": 4}})
    d.pop("scenarios")
    e = _err(d)
    assert e.path == "demand_quantiles.train.p90[0]"


def test_misspelt_field_named_not_reported_missing() -> None:
    """``term_period`` is reported as unknown with a hint, not as ``term_periods`` missing."""
    with pytest.raises(InputError) as ei:
        parse_planning(planning(options={"reserved": [{"model": "H100-SXM5", "term_period": 3,
                                                       "price_per_gpu_hour": 1}]}))
    assert ei.value.problems == [("options.reserved[0].term_period",
                                  "planning file: unknown field 'term_period' (did you mean 'term_periods'?)")]


def test_unknown_demand_class_always_gets_a_hint() -> None:
    """An unknown class in demand suggests a close name, or lists the classes when none is close."""
    close = _err(planning(scenarios=[{"name": "b", "probability": 1.0, "demand": {"trian": 1}}]))
    far = _err(planning(scenarios=[{"name": "b", "probability": 1.0, "demand": {"gpu-x": 1}}]))
    assert "did you mean 'train'" in close.message and "the classes are train" in far.message


def test_strict_types() -> None:
    """Strings are not coerced to numbers or booleans in a planning file."""
    with pytest.raises(InputError) as ei:
        parse_planning(planning(horizon={"start": "2027-01", "periods": "4"}))
    assert ei.value.path == "horizon.periods"


def test_empty_demand_quantiles() -> None:
    """`demand_quantiles: {}` is an input error naming the field (it used to fail an assertion)."""
    d = planning(demand_quantiles={})
    del d["scenarios"]
    e = _err(d)
    assert e.path == "demand_quantiles" and "at least one class" in e.message
