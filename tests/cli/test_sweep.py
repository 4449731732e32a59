"""capplan sweep and the executors: plans, summary, idempotent re-run, exit codes, Ray."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capplan.cli.main import main
from capplan.cli.sweep import run_sweep, sweep_exit_code
from capplan.io.scenario import load_scenario
from capplan.model.errors import InputError
from capplan.model.plan import Plan
from capplan.model.validate import check_plan
from capplan.placement.core.executor import LocalExecutor, SerialExecutor, make_executor

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "models" / "examples"


def _square(x: int) -> int:
    return x * x


@pytest.fixture
def scenarios(tmp_path: Path) -> list[str]:
    """Two example scenarios copied into a scratch folder."""
    out = []
    for name in ("training-cluster.yaml", "mig-inference.yaml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
        out.append(str(tmp_path / name))
    return out


def test_executors_keep_order() -> None:
    """Serial and local-process executors return results in input order."""
    assert list(SerialExecutor().map(_square, [3, 1, 2])) == [9, 1, 4]
    assert list(LocalExecutor(2).map(_square, [3, 1, 2])) == [9, 1, 4]
    assert list(LocalExecutor(2).map(_square, [])) == []
    with pytest.raises(InputError):
        make_executor("slurm")


def test_sweep_writes_valid_plans_and_summary(scenarios: list[str], tmp_path: Path) -> None:
    """Every scenario gets a valid plan; summary.csv has one row each; re-run skips unchanged ones."""
    out = tmp_path / "out"
    rows = run_sweep(scenarios, out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert [r["scenario"] for r in rows] == ["training-cluster", "mig-inference"]
    for s, r in zip(scenarios, rows, strict=True):
        plan = Plan.from_json((out / f"{r['scenario']}.plan.json").read_text())
        assert check_plan(load_scenario(s), plan) == []
    with (out / "summary.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 2
    again = run_sweep(scenarios, out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert all(r["skipped"] for r in again)
    Path(scenarios[1]).write_text(Path(scenarios[1]).read_text() + "\n# changed\n")
    third = run_sweep(scenarios, out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert [r["skipped"] for r in third] == [True, False]
    assert sweep_exit_code(third) == 0


def test_bad_scenario_is_reported_not_fatal(scenarios: list[str], tmp_path: Path) -> None:
    """A broken scenario gets exit code 2 in its row and no plan; the others are planned."""
    bad = tmp_path / "broken.yaml"
    bad.write_text(
        "cluster: {levels: [node], nodes: [{name: a, gpu: NOPE, gpus: 1, cpu: 1, memory_gib: 1}]}\n"
    )
    rows = run_sweep(
        [*scenarios, str(bad)], tmp_path / "o", strategy="greedy", time_limit=10, executor=LocalExecutor(2)
    )
    assert [r["exit_code"] for r in rows] == [0, 0, 2] and "NOPE" in rows[2]["error"]
    assert not (tmp_path / "o" / "broken.plan.json").exists()
    assert sweep_exit_code(rows) == 2
    assert "broken" not in json.loads((tmp_path / "o" / "manifest.json").read_text())


def test_missing_or_unreadable_scenario_is_a_failed_row(scenarios: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A missing or unreadable scenario fails its own row (exit 2) like a bad one; the others are planned,
    and the closing line counts it as failed, not planned."""
    unreadable = tmp_path / "locked.yaml"
    unreadable.write_bytes(b"\xff\xfe not UTF-8")
    argv = ["sweep", *scenarios, str(tmp_path / "nope.yaml"), str(unreadable), "-o", str(tmp_path / "o"),
            "--strategy", "greedy", "--executor", "serial"]
    assert main(argv) == 2
    rows = list(csv.DictReader((tmp_path / "o" / "summary.csv").open()))
    assert [(r["scenario"], r["exit_code"]) for r in rows] == [("training-cluster", "0"), ("mig-inference", "0"),
                                                               ("nope", "2"), ("locked", "2")]
    assert "does not exist" in rows[2]["error"] and "UTF-8" in rows[3]["error"]
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("4 scenario(s): 2 planned, 0 unchanged, 2 failed -> "), err
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("4 scenario(s): 0 planned, 2 unchanged, 2 failed")


def test_scenario_that_now_fails_keeps_no_current_plan(scenarios: list[str], tmp_path: Path) -> None:
    """A scenario planned last night that is bad input tonight: its old plan is marked stale, not left as current."""
    out = tmp_path / "o"
    run_sweep(scenarios, out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    Path(scenarios[1]).write_text("cluster: [\n")
    rows = run_sweep(scenarios, out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert [r["exit_code"] for r in rows] == [0, 2]
    assert not (out / "mig-inference.plan.json").exists() and (out / "mig-inference.plan.json.stale").exists()
    assert (out / "training-cluster.plan.json").exists()


def test_temporary_files_of_an_interrupted_run_are_removed(scenarios: list[str], tmp_path: Path) -> None:
    """A hidden temporary file left by a killed run is removed by the next one; other files are kept."""
    out = tmp_path / "o"
    out.mkdir()
    left = [out / ".mig-inference.plan.json.k2j4h1.tmp", out / ".summary.csv.a1b2.tmp", out / ".manifest.json.x.tmp"]
    for f in left:
        f.write_text("half")
    (out / "notes.txt").write_text("mine")
    run_sweep(scenarios, out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert not any(f.exists() for f in left) and (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_what_if_overlay_follows_its_base(tmp_path: Path) -> None:
    """An overlay (`base:` plus edits) is planned on the base as it is tonight: a changed base re-plans it."""
    live = tmp_path / "live.yaml"
    shutil.copy(EXAMPLES / "mixed-fleet.yaml", live)
    whatif = tmp_path / "more-pretrain.yaml"
    whatif.write_text("base: live.yaml\nworkloads:\n  - {name: pretrain, replicas: 3}\n"
                      "  - {name: etl, remove: true}\n")
    out = tmp_path / "o"
    first = run_sweep([str(live), str(whatif)], out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert [r["exit_code"] for r in first] == [0, 0]
    plan = Plan.from_json((out / "more-pretrain.plan.json").read_text())
    problem = load_scenario(whatif)
    assert [w.name for w in problem.workloads] == ["pretrain", "chat-api", "notebooks"]
    assert problem.workload("pretrain").replicas == 3 and check_plan(problem, plan) == []
    again = run_sweep([str(live), str(whatif)], out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert [r["skipped"] for r in again] == [True, True]
    live.write_text(live.read_text() + "\n# tonight's import\n")
    third = run_sweep([str(live), str(whatif)], out, strategy="greedy", time_limit=10, executor=SerialExecutor())
    assert [r["skipped"] for r in third] == [False, False]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_ray_executor_on_local_instance(scenarios: list[str], tmp_path: Path) -> None:
    """On a local Ray instance started here, the sweep gives the same plans as the serial executor."""
    import ray

    from capplan.placement.core.executor import RayExecutor

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows = run_sweep(
            scenarios, tmp_path / "ray", strategy="greedy", time_limit=10, executor=RayExecutor()
        )
        assert ray.is_initialized()  # the executor reused the running instance and left it alone
    finally:
        ray.shutdown()
    serial = run_sweep(
        scenarios, tmp_path / "serial", strategy="greedy", time_limit=10, executor=SerialExecutor()
    )
    assert [r["exit_code"] for r in rows] == [0, 0]
    for r in serial:
        a = Plan.from_json((tmp_path / "ray" / f"{r['scenario']}.plan.json").read_text())
        b = Plan.from_json((tmp_path / "serial" / f"{r['scenario']}.plan.json").read_text())
        assert a.assignments == b.assignments and a.objective == b.objective


@pytest.mark.parametrize(("sig", "code", "last"), [(signal.SIGTERM, 143, "terminated"),
                                                   (signal.SIGINT, 1, "interrupted")])
def test_signal_during_a_sweep(tmp_path: Path, sig: int, code: int, last: str) -> None:
    """SIGTERM: exit 143 "terminated"; SIGINT: exit 1 "interrupted"; both quickly, with no temporary file left
    and the previous night's outputs untouched."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "summary.csv").write_text("previous\n")
    medium = ROOT / "benchmarks" / "instances" / "medium-1.yaml"
    proc = subprocess.Popen([sys.executable, "-m", "capplan", "sweep", str(medium), str(EXAMPLES / "mixed-fleet.yaml"),
                             "-o", str(out), "--strategy", "cpsat", "--time-limit", "60", "--jobs", "2"],
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(5)
    started = time.perf_counter()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == last, err
    assert time.perf_counter() - started < 15
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["summary.csv"]
    assert (out / "summary.csv").read_text() == "previous\n"


def test_time_limit_covers_loading_the_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scenario's limit starts before its loading: a slow load leaves the planner only what is left
    (the planner's clock started after the load before, so a task took its load plus the whole limit)."""
    import capplan.io.scenario as scenario_io
    import capplan.placement as placement
    from capplan.cli.sweep import Task, plan_task

    real_load, seen = scenario_io.load_scenario, {}

    def slow_load(*a: object, **k: object) -> object:
        time.sleep(1.0)
        return real_load(*a, **k)  # type: ignore[arg-type]

    def spy(problem: object, strategy: str, opts: object) -> object:
        seen["opts"] = opts
        raise InputError("spy", "stop here")

    monkeypatch.setattr(scenario_io, "load_scenario", slow_load)
    monkeypatch.setattr(placement, "solve", spy)
    out = plan_task(Task("t", str(EXAMPLES / "training-cluster.yaml"), (), "greedy", 5.0, 0))
    assert out.exit_code == 2 and "stop here" in out.error
    deadline = seen["opts"].deadline  # type: ignore[attr-defined]
    assert deadline is not None and deadline.remaining() < 4.0
