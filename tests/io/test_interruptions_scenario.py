"""Scenario fields of the goodput model: ``interruptions:``, ``checkpoint``, ``checkpoint_interval``, ``spares``."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from capplan.io.scenario import dump_scenario, problem_from_data
from capplan.model.errors import InputError


def scenario(inter: dict[str, Any] | None = None, **work: Any) -> dict[str, Any]:
    w = {"name": "t", "kind": "training", "gpus": 8, "replicas": 2, **work}
    data: dict[str, Any] = {"cluster": {"levels": ["node"], "nodes": [
        {"name_prefix": "n", "count": 3, "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}]},
        "workloads": [w]}
    if inter is not None:
        data["interruptions"] = inter
    return data


def test_fields_parse_and_round_trip() -> None:
    """Times take units; models override the rate; the scenario round-trips; defaults apply."""
    p = problem_from_data(scenario({"gpu_failure_rate": 2e-5, "models": {"H100-SXM5-80GB": 3e-5},
                                    "node_repair": "72h", "restart": "15m"},
                                   checkpoint="6m", checkpoint_interval="2h", spares="auto"))
    it = p.interruptions
    assert it is not None
    assert (it.node_repair, it.restart, it.restart_without_spare) == (72 * 3600, 900, 4 * 3600)
    assert it.rate("H100-SXM5-80GB") == 3e-5 and it.rate("A100-SXM4-80GB") == 2e-5
    w = p.workloads[0]
    assert (w.checkpoint, w.checkpoint_interval, w.spares) == (360, 7200, "auto")
    again = problem_from_data(yaml.safe_load(dump_scenario(p)))
    assert again.interruptions == p.interruptions and again.workloads == p.workloads


def test_old_files_stay_valid() -> None:
    """Without the new fields nothing changes: no interruptions, no checkpoint, no spares."""
    p = problem_from_data(scenario())
    assert p.interruptions is None and p.workloads[0].spares == 0 and p.workloads[0].checkpoint is None


@pytest.mark.parametrize(("inter", "work", "path", "words"), [
    (None, {"checkpoint": "6m"}, "workloads[0].checkpoint", "interruptions"),
    ({"gpu_failure_rate": 1e-5}, {"spares": 2}, "workloads[0].spares", "needs checkpoint"),
    ({"gpu_failure_rate": 1e-5}, {"checkpoint_interval": "1h"}, "workloads[0].checkpoint_interval",
     "needs checkpoint"),
    ({"gpu_failure_rate": 1e-5}, {"checkpoint": "6m", "spares": -1}, "workloads[0].spares", "0..64 or auto"),
    ({"gpu_failure_rate": 1e-5}, {"checkpoint": "6m", "spares": "many"}, "workloads[0].spares", "0..64 or auto"),
    ({"gpu_failure_rate": 1e-5}, {"checkpoint": "six"}, "workloads[0].checkpoint", "15m"),
    ({"gpu_failure_rate": 1e-5}, {"checkpoint": 0}, "workloads[0].checkpoint", "greater than 0"),
    ({"gpu_failure_rate": 1e-5}, {"checkpoint": "6m", "kind": "inference"}, "workloads[0].checkpoint",
     "training"),
    ({"gpu_failure_rate": 0}, {"checkpoint": "6m"}, "interruptions.gpu_failure_rate", "greater than 0"),
    ({"gpu_failure_rate": "often"}, {}, "interruptions.gpu_failure_rate", "number"),
    ({"gpu_failure_rate": 1e-5, "models": {"H100": 1e-5}}, {}, "interruptions.models.H100", "unknown GPU model"),
    ({"gpu_failure_rate": 1e-5, "models": {"H100-SXM5-80GB": 2}}, {}, "interruptions.models", "(0, 1]"),
    ({"gpu_failure_rate": 1e-5, "node_repair": "3 days"}, {}, "interruptions.node_repair", "3d"),
    ({"gpu_failure_rate": 1e-5, "restart_with_spare": "1m"}, {}, "interruptions.restart_with_spare", "unknown"),
    ([1, 2], {}, "interruptions", "mapping"),
])
def test_bad_values_name_the_field(inter: Any, work: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        problem_from_data(scenario(inter, **work))
    assert err.value.path == path, str(err.value)
    assert words in err.value.message, str(err.value)
