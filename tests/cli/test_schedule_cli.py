"""``capplan schedule``: output file, exit codes, options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from capplan.cli.main import main

SCENARIO = {
    "schedule": {"horizon": "24h", "step": "1m"},
    "cluster": {"levels": ["node"], "nodes": [{"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64,
                                               "memory_gib": 512}]},
    "workloads": [{"name": "old", "gpus": 8}, {"name": "job", "gpus": 8, "duration": "2h"}],
    "running": [{"workload": "old", "replica": 0, "node": "n1", "gpus": list(range(8)), "ends_in": "3h"}],
}


def write(tmp_path: Path, data: dict[str, object]) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(data))
    return f


def test_schedule_writes_json_with_the_contract_fields(tmp_path: Path) -> None:
    out = tmp_path / "schedule.json"
    code = main(["schedule", str(write(tmp_path, SCENARIO)), "-o", str(out), "--strategy", "heuristic", "-q"])
    assert code == 0
    s = json.loads(out.read_text())
    for key in ("status", "strategy", "objective", "bound", "gap", "horizon_s", "assignments", "workloads",
                "unscheduled"):
        assert key in s
    job = next(a for a in s["assignments"] if a["workload"] == "job")
    assert (job["start_s"], job["end_s"]) == (3 * 3600, 5 * 3600)
    row = next(r for r in s["workloads"] if r["name"] == "job")
    assert row == {"name": "job", "start_s": 10800, "end_s": 18000, "wait_s": 10800, "deadline_met": True}


def test_horizon_option_overrides_the_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["schedule", str(write(tmp_path, SCENARIO)), "--horizon", "4h", "--time-limit", "5", "-q"])
    s = json.loads(capsys.readouterr().out)
    assert code == 0 and s["horizon_s"] == 14400
    assert s["unscheduled"][0]["workload"] == "job"
    assert "after the horizon 4h" in s["unscheduled"][0]["reason"]


def test_guaranteed_deadline_missed_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(json.dumps(SCENARIO))
    data["workloads"][1].update(sla="guaranteed", deadline="4h")
    out = tmp_path / "o.json"
    assert main(["schedule", str(write(tmp_path, data)), "-o", str(out)]) == 3
    assert json.loads(out.read_text())["status"] == "infeasible"
    assert "after its deadline 4h" in capsys.readouterr().err


def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(json.dumps(SCENARIO))
    data["workloads"][1]["duration"] = "2 weeks"
    out = tmp_path / "o.json"
    assert main(["schedule", str(write(tmp_path, data)), "-o", str(out)]) == 2
    assert not out.exists()
    assert "workloads[1].duration" in capsys.readouterr().err


def test_bad_options_are_rejected_by_argparse(tmp_path: Path) -> None:
    f = write(tmp_path, SCENARIO)
    for argv in (["--horizon", "soon"], ["--strategy", "greedy"], ["--time-limit", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(["schedule", str(f), *argv])
        assert exc.value.code == 2


def test_python_dash_m_runs_the_command(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "capplan", "schedule", str(write(tmp_path, SCENARIO)), "-q",
                        "--strategy", "cpsat", "--time-limit", "5"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["strategy"] in ("cpsat", "cpsat+heuristic")


def test_shipped_example_schedules_everything_in_time(tmp_path: Path) -> None:
    """models/examples/schedule-week.yaml: pretraining starts now in the free rack, fine-tuning waits for the
    running job to end (30h), the eval suite meets its deadline, the guaranteed chat API starts at once."""
    from tests.conftest import EXAMPLES

    out = tmp_path / "s.json"
    assert main(["schedule", str(EXAMPLES / "schedule-week.yaml"), "-o", str(out), "--strategy", "heuristic",
                 "-q"]) == 0
    s = json.loads(out.read_text())
    rows = {r["name"]: r for r in s["workloads"]}
    assert s["status"] in ("optimal", "feasible") and s["unscheduled"] == []
    assert rows["pretrain"]["start_s"] == 0 and rows["chat-api"]["start_s"] == 0
    assert rows["finetune-b"]["start_s"] == 30 * 3600
    assert all(r["deadline_met"] for r in rows.values())
    pre = {a["node"][:2] for a in s["assignments"] if a["workload"] == "pretrain"}
    assert pre == {"r2"}


def test_report_and_show_read_a_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`capplan report` and `capplan show` take the schedule file `capplan schedule` writes."""
    scenario = write(tmp_path, SCENARIO)
    out = tmp_path / "s.json"
    assert main(["schedule", str(scenario), "-o", str(out), "--strategy", "heuristic", "-q"]) == 0
    html = tmp_path / "r.html"
    assert main(["report", str(scenario), str(out), "-o", str(html)]) == 0
    assert "job" in html.read_text()
    assert main(["show", str(scenario), str(out)]) == 0
    assert "schedule" in capsys.readouterr().out


def test_summary_shows_both_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """'job' waits 3 h for the running 'old': 8 GPUs x 3 h = 24 GPU-hours demand-weighted, 3 replica-hours."""
    out = tmp_path / "schedule.json"
    code = main(["schedule", str(write(tmp_path, SCENARIO)), "-o", str(out), "--strategy", "heuristic"])
    text = capsys.readouterr().err  # the summary goes to stderr, the JSON to the file
    assert code == 0
    assert "demand-weighted wait: 24 GPU-hours" in text
    assert "unweighted wait: 3 replica-hours" in text
    assert json.loads(out.read_text())["wait_replica_s"] == 3 * 3600
