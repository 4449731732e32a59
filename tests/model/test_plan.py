"""The plan format: JSON round trip, schema, and rejection of malformed plans."""

from __future__ import annotations

import pytest

from capplan.io.scenario import load_scenario
from capplan.model.errors import InputError
from capplan.model.plan import Plan, json_schema
from capplan.placement import solve
from tests.conftest import EXAMPLES


def test_json_round_trip() -> None:
    """A plan serialised to JSON and parsed back is equal to the original."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    plan = solve(p, "greedy")
    assert Plan.from_json(plan.to_json()) == plan


def test_schema_validates_plan() -> None:
    """The JSON Schema accepts a real plan (checked with jsonschema)."""
    jsonschema = pytest.importorskip("jsonschema")
    import json

    plan = solve(load_scenario(EXAMPLES / "mixed-fleet.yaml"), "greedy")
    jsonschema.validate(json.loads(plan.to_json()), json_schema())


def test_malformed_plan_names_field() -> None:
    """A plan with a bad field is an InputError naming the field path."""
    with pytest.raises(InputError, match=r"assignments\[0\]\.replica"):
        Plan.from_data({"status": "feasible", "strategy": "x",
                        "assignments": [{"workload": "w", "replica": -1, "node": "n"}]})
    with pytest.raises(InputError, match="status"):
        Plan.from_data({"status": "great", "strategy": "x"})
