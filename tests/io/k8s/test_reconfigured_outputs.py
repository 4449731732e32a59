"""Reconfigured GPUs in every output: the plan summary, ``capplan show``, the report data, ``export mig-parted``.

One hand-worked case (issue 26): node n1 runs a 1-GPU pod on GPU 0 (MIG off, preset ``whole``), GPUs 1-6 are MIG
off and GPU 7 holds seven empty 1g.10gb instances; with ``reconfigure: allowed`` two 3g.40gb replicas need one
more GPU re-partitioned. So one GPU changes, n1 must be drained, and n1 runs a GPU pod: the export warns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from capplan.io.k8s.export import drain_warnings, gpu_configs
from capplan.io.report.data import build_report
from capplan.io.report.text import render_text
from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.placement import PlanOptions, solve
from capplan.placement.core.summary import summary_text

from .conftest import k8s_main

LAYOUT = [{"profile": "1g.10gb", "start": s} for s in range(7)]


def _data(reconfigure: str) -> dict[str, object]:
    return {"reconfigure": reconfigure, "cluster": {"levels": ["node"], "nodes": [
        {"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512,
         "gpu_modes": [{"gpus": list(range(7)), "mode": "whole"}, {"gpus": [7], "mode": "mig", "layout": LAYOUT}]}]},
        "workloads": [{"name": "small", "replicas": 3, "mig": "1g.10gb"},
                      {"name": "big", "replicas": 2, "mig": "3g.40gb"},
                      {"name": "vip", "replicas": 1, "gpus": 1, "priority": 1000}],
        "running": [{"workload": "vip", "replica": 0, "node": "n1", "gpus": [0]}]}


def _problem(reconfigure: str) -> Problem:
    return problem_from_data(_data(reconfigure))


def test_summary_show_and_report_name_the_reconfigured_gpu() -> None:
    p = _problem("allowed")
    plan = solve(p, "greedy", PlanOptions(time_limit=5))
    assert plan.metrics["gpus_reconfigured"] == 1 and plan.metrics["nodes_to_drain"] == ["n1"]
    (changed,) = {a.gpus[0] for a in plan.assignments if a.workload == "big"}
    assert "reconfigured: 1 GPU changes mode or MIG layout; drain 1 node before applying: n1" in summary_text(p, plan)
    data = build_report(p, plan)
    assert data["reconfigured"] == {"gpus": 1, "nodes": ["n1"]}
    assert [g for g, c in enumerate(data["cells"][0]) if c[6]] == [changed]
    text = render_text(data)
    assert f"reconfigures GPU {changed} (drain first)" in text
    assert "reconfigured: 1 GPU changes mode or MIG layout; drain n1 before applying" in text


def test_forbidden_says_nothing_and_changes_nothing() -> None:
    p = _problem("forbidden")
    plan = solve(p, "greedy", PlanOptions(time_limit=5))
    assert plan.metrics["gpus_reconfigured"] == 0 and "reconfigured" not in summary_text(p, plan)
    assert drain_warnings(p, plan) == []


def test_mig_parted_writes_the_new_layout_and_warns_for_the_busy_node(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    p = _problem("allowed")
    plan = solve(p, "greedy", PlanOptions(time_limit=5))
    (changed,) = {a.gpus[0] for a in plan.assignments if a.workload == "big"}
    per = gpu_configs(p, plan)["n1"]
    assert per[changed] == {"3g.40gb": 2} and per[7] == {"1g.10gb": 7} and per[0] is None
    (w,) = drain_warnings(p, plan)
    assert w.startswith(f"node n1 runs GPU pods (vip[0]) and its MIG config changes on GPU {changed}:")
    scen, planfile, out = tmp_path / "s.yaml", tmp_path / "plan.json", tmp_path / "mig.yaml"
    scen.write_text(yaml.safe_dump(_data("allowed")))
    planfile.write_text(json.dumps(plan.model_dump(mode="json")))
    assert k8s_main(["export", "mig-parted", str(scen), str(planfile), "-o", str(out)]) == 0
    assert capsys.readouterr().err.count("warning: node n1 runs GPU pods") == 1
