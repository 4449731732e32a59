"""capplan sweep and the executors: plans, summary, idempotent re-run, exit codes, Ray."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from capplan.cli.sweep import run_sweep, sweep_exit_code
from capplan.io.scenario import load_scenario
from capplan.model.errors import InputError
from capplan.model.plan import Plan
from capplan.model.validate import check_plan
from capplan.placement.core.executor import LocalExecutor, SerialExecutor, make_executor

EXAMPLES = Path(__file__).parents[2] / "models" / "examples"


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


def test_missing_scenario_file(tmp_path: Path) -> None:
    """A scenario path that does not exist is an InputError before anything runs."""
    with pytest.raises(InputError):
        run_sweep([str(tmp_path / "nope.yaml")], tmp_path / "o")


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
