"""Explanations come from relaxed CP-SAT re-solves and name the blocking family with numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capplan.cli.main import main
from capplan.io.scenario import dump_scenario
from capplan.placement import PlanOptions, solve
from capplan.placement.cpsat.explain import explain_workload

from .conftest import node, scenario

OPTS = PlanOptions(time_limit=8, workers=1)


def test_required_rack_too_small() -> None:
    """A gang needing three 8-GPU nodes in one rack of two nodes: topology blocks, best rack fits 2."""
    p = scenario(
        [node(f"n{i}") for i in range(4)],
        [{"name": "big", "kind": "training", "replicas": 3, "gpus": 8, "topology": {"required": "rack"}}],
        racks=2,
    )
    ex = explain_workload(p, "big", solve(p, "cpsat", OPTS), OPTS)
    assert ex.placed == 0 and "topology" in ex.blocking
    assert "one rack" in ex.message and "at most 2" in ex.message


def test_power_budget_blocks() -> None:
    """Eight H100s at 700 W cannot run under a 3 kW rack budget: power is named."""
    p = scenario([node("n1")], [{"name": "job", "replicas": 1, "gpus": 8}], power_kw=3.0)
    ex = explain_workload(p, "job", solve(p, "cpsat", OPTS), OPTS)
    assert ex.blocking == ("power",)
    assert "power budget" in ex.message


def test_running_preemptible_notebooks_named() -> None:
    """A job blocked by running preemptible notebooks: they are named with the preemption hint."""
    p = scenario(
        [node("n1", gpus=1)],
        [
            {
                "name": "notebooks",
                "kind": "shared",
                "replicas": 3,
                "gpu_fraction": 0.3,
                "priority": 1,
                "preemptible": True,
            },
            {"name": "api", "replicas": 1, "gpu_fraction": 0.5, "priority": 10},
        ],
        running=[
            {"workload": "notebooks", "replica": r, "node": "n1", "gpus": [0], "fraction": 0.3}
            for r in range(3)
        ],
    )
    ex = explain_workload(p, "api", solve(p, "cpsat", OPTS), OPTS)
    assert ex.placed == 0
    assert dict(ex.competitors) == {"notebooks": 2}
    assert "preempted" in ex.message and "--allow-preemption" in ex.message


def test_tenant_isolation_competition() -> None:
    """An isolated tenant's slice is blocked by another tenant's running slice on the only GPU."""
    p = scenario(
        [node("n1", gpu="A100-SXM4-80GB", gpus=1)],
        [
            {"name": "other", "replicas": 1, "mig": "3g.40gb", "tenant": "b", "priority": 5},
            {
                "name": "secure",
                "replicas": 1,
                "mig": "3g.40gb",
                "tenant": "a",
                "isolation": "tenant",
                "priority": 5,
            },
        ],
        running=[
            {
                "workload": "other",
                "replica": 0,
                "node": "n1",
                "gpus": [0],
                "mig": {"profile": "3g.40gb", "start": 4},
            }
        ],
    )
    ex = explain_workload(p, "secure", solve(p, "cpsat", OPTS), OPTS)
    assert dict(ex.competitors) == {"other": 1}


def test_placed_workload() -> None:
    """A placed workload is reported as placed."""
    p = scenario([node("n1")], [{"name": "job", "replicas": 2, "gpus": 1}])
    ex = explain_workload(p, "job", solve(p, "cpsat", OPTS), OPTS)
    assert ex.placed == 2 and ex.message.startswith("placed")


def test_cli_explain_json_and_unknown_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capplan explain` prints JSON for a known workload and exits 2 for an unknown one."""
    p = scenario(
        [node(f"n{i}") for i in range(2)], [{"name": "big", "kind": "training", "replicas": 3, "gpus": 8}]
    )
    path = tmp_path / "s.yaml"
    path.write_text(dump_scenario(p), encoding="utf-8")
    assert main(["explain", str(path), "big", "--time-limit", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workload"] == "big" and out["placed"] == 0 and out["message"]
    assert main(["explain", str(path), "bgi"]) == 2
    assert "unknown workload" in capsys.readouterr().err
