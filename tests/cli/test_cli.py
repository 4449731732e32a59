"""The capplan command: exit codes, atomic output, nothing written on bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from capplan.cli.main import main
from capplan.model.plan import Plan
from tests.conftest import EXAMPLES

MIXED = str(EXAMPLES / "mixed-fleet.yaml")


def test_plan_writes_valid_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capplan plan -o` writes a plan that `capplan validate` accepts; exit 0; summary on stderr."""
    out = tmp_path / "plan.json"
    assert main(["plan", MIXED, "-o", str(out), "--strategy", "greedy"]) == 0
    err = capsys.readouterr().err
    assert "priority   1000: 6/6 replicas placed" in err
    plan = Plan.from_json(out.read_text())
    assert plan.status == "optimal" and plan.strategy == "greedy"
    assert main(["validate", MIXED, str(out)]) == 0


def test_plan_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    """Without -o the JSON plan goes to stdout."""
    assert main(["plan", MIXED, "--strategy", "greedy", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "optimal" and data["priorities"] == [1000, 100, 1]


def test_exit_3_when_guaranteed_unplaced(tmp_path: Path) -> None:
    """A guaranteed workload that cannot fit: plan written, exit 3."""
    data = yaml.safe_load(Path(MIXED).read_text())
    data["workloads"][1]["replicas"] = 100
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(data))
    out = tmp_path / "plan.json"
    assert main(["plan", str(f), "-o", str(out), "--strategy", "greedy", "-q"]) == 3
    assert Plan.from_json(out.read_text()).status == "infeasible"


def test_bad_input_exit_2_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad scenario: exit 2, one error naming the field, and the output file is not created."""
    data = yaml.safe_load(Path(MIXED).read_text())
    data["workloads"][1]["mig"] = "3g.41gb"
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(data))
    out = tmp_path / "plan.json"
    assert main(["plan", str(f), "-o", str(out)]) == 2
    assert "workloads[1].mig" in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == [f]


def test_existing_output_kept_on_error(tmp_path: Path) -> None:
    """On bad input an existing output file is left untouched."""
    out = tmp_path / "plan.json"
    out.write_text("old")
    assert main(["plan", str(tmp_path / "missing.yaml"), "-o", str(out)]) == 2
    assert out.read_text() == "old"


def test_validate_reports_violations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capplan validate` on a tampered plan lists violations and exits 4."""
    out = tmp_path / "plan.json"
    assert main(["plan", MIXED, "-o", str(out), "--strategy", "greedy", "-q"]) == 0
    data = json.loads(out.read_text())
    data["assignments"][1]["node"] = data["assignments"][0]["node"]
    data["assignments"][1]["gpus"] = data["assignments"][0]["gpus"]
    out.write_text(json.dumps(data))
    assert main(["validate", MIXED, str(out)]) == 4
    assert "whole GPU used by 2 replicas" in capsys.readouterr().err


def test_unknown_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown strategy name is bad input with suggestions."""
    assert main(["plan", MIXED, "--strategy", "gredy"]) == 2
    assert "did you mean 'greedy'" in capsys.readouterr().err


def test_catalog_and_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """`capplan catalog MODEL` shows placements; `capplan schema` prints a JSON Schema."""
    assert main(["catalog", "H100-SXM5-80GB"]) == 0
    assert "3g.40gb" in capsys.readouterr().out
    assert main(["catalog", "H100"]) == 2
    capsys.readouterr()
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "assignments" in schema["properties"]


def test_console_script_runs() -> None:
    """`python -m capplan plan` runs end to end in a subprocess."""
    r = subprocess.run([sys.executable, "-m", "capplan", "plan", MIXED, "--strategy", "greedy", "-q"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["strategy"] == "greedy"
