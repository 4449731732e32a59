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


def _generic_json(plan: Plan) -> str:
    """The plan format written the slow, generic way (pydantic dump, one json.dumps per item); an empty
    ``goodput`` is left out (plans without gangs under interruptions keep their old form)."""
    import json

    parts = []
    for key, val in plan.model_dump(mode="json", exclude_none=True).items():
        if key == "goodput" and not val:
            continue
        if isinstance(val, list) and val and isinstance(val[0], dict):
            items = ",\n".join(f"  {json.dumps(x)}" for x in val)
            parts.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(val)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def test_to_json_fast_path_matches_generic_encoding() -> None:
    from capplan.model.plan import Assignment, MigSlot, Unplaced

    plan = Plan(status="feasible", strategy="x", objective=(1.5,), bound=(2.0,), priorities=(0,),
                assignments=(Assignment(workload="wé\"1", replica=0, node="n\\1", gpus=(0, 3)),
                             Assignment(workload="cpu", replica=2, node="n2"),
                             Assignment(workload="mig", replica=1, node="n3", gpus=(1,),
                                        mig=MigSlot(profile="3g.40gb", start=4)),
                             Assignment(workload="share", replica=0, node="n3", gpus=(2,), fraction=0.333)),
                unplaced=(Unplaced(workload="u", replicas=(1, 2), reason="no room"),),
                metrics={"a": None, "b": [1, 2]})
    assert plan.to_json() == _generic_json(plan)
    assert Plan.from_json(plan.to_json()) == plan
    empty = Plan(status="unknown", strategy="y")
    assert empty.to_json() == _generic_json(empty)
