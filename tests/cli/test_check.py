"""`capplan validate` (plans and schedules, capped, says when a file belongs elsewhere) and `capplan schema`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from capplan.cli.main import main
from tests.conftest import EXAMPLES

MIXED = str(EXAMPLES / "mixed-fleet.yaml")
WEEK = str(EXAMPLES / "schedule-week.yaml")
TRAINING = str(EXAMPLES / "training-cluster.yaml")


def _schema(capsys: pytest.CaptureFixture[str], kind: str) -> dict[str, Any]:
    assert main(["schema", kind]) == 0
    schema: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_validate_against_the_wrong_scenario_is_capped_and_says_so(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A plan of one scenario checked against another: first line says so, at most 20 violations, then a count."""
    plan = tmp_path / "plan.json"
    assert main(["plan", TRAINING, "-o", str(plan), "--strategy", "greedy", "-q"]) in (0, 3)
    capsys.readouterr()
    assert main(["validate", MIXED, str(plan)]) == 4
    lines = capsys.readouterr().err.splitlines()
    assert "does not belong to the scenario" in lines[0]
    assert len([x for x in lines if x.startswith("violation:")]) <= 21
    assert lines[-2].startswith("... and ") and lines[-1].startswith("plan is INVALID")
    assert main(["validate", TRAINING, str(plan)]) == 0
    assert "does not belong" not in capsys.readouterr().err


def test_validate_recognises_a_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """capplan's own schedule output is valid; moving a replica before its release is a violation (exit 4)."""
    out = tmp_path / "week.json"
    assert main(["schedule", WEEK, "-o", str(out), "--time-limit", "5", "-q", "--strategy", "heuristic"]) in (0, 3)
    assert main(["validate", WEEK, str(out)]) == 0
    assert "schedule is valid" in capsys.readouterr().err
    data = json.loads(out.read_text())
    released = {w["name"]: w["release"] for w in yaml.safe_load(Path(WEEK).read_text())["workloads"]
                if w.get("release")}
    moved = next(a for a in data["assignments"] if a["workload"] in released)
    moved["start_s"], moved["end_s"] = 0, moved["end_s"] - moved["start_s"]
    out.write_text(json.dumps(data))
    assert main(["validate", WEEK, str(out)]) == 4
    assert "schedule is INVALID" in capsys.readouterr().err


def test_schemas_accept_shipped_examples_and_real_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each schema is valid JSON Schema 2020-12 and accepts what capplan ships and writes."""
    scenario = jsonschema.Draft202012Validator(_schema(capsys, "scenario"))
    for f in [*EXAMPLES.glob("*.yaml"), *(EXAMPLES.parents[1] / "benchmarks" / "instances").glob("*.yaml")]:
        data = yaml.safe_load(f.read_text())
        if "cluster" in data:  # reserve-*.yaml are planning files, not scenarios
            assert list(scenario.iter_errors(data)) == [], f
    plan, week = tmp_path / "plan.json", tmp_path / "week.json"
    assert main(["plan", MIXED, "-o", str(plan), "--strategy", "greedy", "-q"]) == 0
    assert main(["schedule", WEEK, "-o", str(week), "--time-limit", "5", "-q", "--strategy", "heuristic"]) in (0, 3)
    jsonschema.validate(json.loads(plan.read_text()), _schema(capsys, "plan"))
    jsonschema.validate(json.loads(week.read_text()), _schema(capsys, "schedule"))
    assert main(["schema"]) == 0 and json.loads(capsys.readouterr().out)["title"] == "capplan plan"


def test_scenario_schema_catches_misspellings() -> None:
    """What an editor flags while typing: a misspelt workload field, a node without name, a bad time."""
    from capplan.io.scenario_schema import scenario_json_schema

    v = jsonschema.Draft202012Validator(scenario_json_schema())
    good = yaml.safe_load(Path(MIXED).read_text())
    assert not list(v.iter_errors(good))
    for edit in ({"workloads": [{"name": "a", "replicass": 2}]},
                 {"cluster": {"levels": ["node"], "nodes": [{"gpus": 8}]}},
                 {"workloads": [{"name": "a", "duration": "two hours"}]}):
        assert list(v.iter_errors({**good, **edit})), edit
