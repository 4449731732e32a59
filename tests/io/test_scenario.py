"""Scenario files: nesting by topology levels, compact node form, round trip, and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from capplan.io.scenario import dump_scenario, load_scenario, plural, problem_from_data
from capplan.model.errors import InputError
from tests.conftest import EXAMPLES


def base() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "mixed-fleet.yaml").read_text())


@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES.glob("*.yaml") if not p.name.startswith("reserve")))
def test_examples_load(path: Path) -> None:
    """Every shipped placement example (reserve-*.yaml are planning files) loads and round-trips unchanged."""
    p = load_scenario(path)
    again = problem_from_data(yaml.safe_load(dump_scenario(p)))
    assert again.cluster == p.cluster
    assert again.workloads == p.workloads
    assert again.running == p.running


def test_compact_nodes_and_paths() -> None:
    """name_prefix + count expands to prefix1..N, each node knows its block and rack."""
    p = problem_from_data(base())
    names = [n.name for n in p.cluster.nodes]
    assert names == ["r1n1", "r1n2", "r2n1", "r2n2", "r2n3", "r2n4"]
    assert p.cluster.nodes[3].path == ("b1", "r2")
    assert p.cluster.domain_of(p.cluster.nodes[3], "rack") == "r2"
    r1 = next(d for d in p.cluster.domains if d.name == "r1")
    assert r1.power_w == 80_000


def test_units_scaled_once() -> None:
    """Cores and GiB become milli-CPU and MiB."""
    p = problem_from_data(base())
    assert p.cluster.nodes[0].cpu_milli == 224_000
    assert p.cluster.nodes[0].memory_mib == 2048 * 1024
    assert p.workload("notebooks").gpu_fraction == 0.25


def test_plural() -> None:
    """Level plurals: rack -> racks, switch -> switches."""
    assert plural("rack") == "racks" and plural("switch") == "switches" and plural("block") == "blocks"


def mutate(path: str, value: Any) -> dict[str, Any]:
    d = base()
    target: Any = d
    parts = path.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    if value is DELETE:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return d


DELETE = object()
BAD = [
    ("workloads.1.mig", "3g.41gb", r"workloads\[1\]\.mig: unknown MIG profile '3g.41gb' \(did you mean .*'3g.40gb'"),
    ("cluster.blocks.0.racks.0.nodes.0.gpu", "H100-SXM5-80G", r"nodes\[0\]\.gpu: unknown GPU model.*H100-SXM5-80GB"),
    ("workloads.0.replicas", 0, r"workloads\[0\]\.replicas: Input should be greater than 0"),
    ("workloads.0.gpus", -8, r"workloads\[0\]\.gpus"),
    ("workloads.2.name", "pretrain", r"workloads\[2\]\.name: duplicate workload name 'pretrain'"),
    ("workloads.0.topology", {"required": "rak"}, r"topology\.required: unknown topology level 'rak'.*'rack'"),
    ("workloads.0.gpu_models", ["H100-SXM5-80GB", "Z9"], r"gpu_models\[1\]: unknown GPU model 'Z9'"),
    ("workloads.1.gpu_models", ["T4-16GB"], r"workloads\[1\]\.gpu_models\[0\]: T4-16GB does not support profile"),
    ("workloads.0.priorty", 5, r"workloads\[0\]\.priorty: unknown field"),
    ("cluster.blocks.0.racks.0.nodes.0.cpu", -1, r"nodes\[0\]\.cpu: must be zero or more"),
    ("cluster.blocks.0.racks.1.nodes.0.count", 0, r"nodes\[0\]\.count: must be positive"),
    ("cluster.levels", ["block", "rack"], r"cluster\.levels: the innermost level must be `node`"),
    ("cluster.blocks.0.racks.0.nodes.1.name", "r1n1", r"duplicate node name 'r1n1'"),
    ("workloads.2.gpu_fraction", 1.5, r"workloads\[2\]\.gpu_fraction"),
    ("workloads.0.mig", "1g.10gb", r"workloads\[0\]: .*at most one GPU demand"),
    ("cluster.blocks.0.racks.0.nodes.0.gpu_modes", [{"gpus": [0], "mode": "mig",
                                                     "layout": [{"profile": "3g.40gb", "start": 2}]}],
     r"layout\[0\]\.start: 3g.40gb on H100-SXM5-80GB may start only at \[0, 4\]"),
    ("cluster.blocks.0.racks.0.nodes.0.gpu_modes", [{"gpus": [9], "mode": "whole"}], r"GPU index 9 is out of range"),
    ("cluster.blocks.0.racks.0.nodes", DELETE, r"cluster\.blocks\[0\]\.racks\[0\]\.nodes: is required"),
    ("running", [{"workload": "pretrain", "replica": 0, "node": "r9n9", "gpus": [0]}],
     r"running\[0\]\.node: unknown node 'r9n9'"),
    ("running", [{"workload": "pretrain", "replica": 5, "node": "r1n1", "gpus": [0]}],
     r"running\[0\]\.replica: pretrain has replicas 0..1"),
    ("running", [{"workload": "pretrain", "replica": 0, "node": "r1n1", "gpus": [0, 1]}],
     r"running: the running state contradicts the cluster: .*needs exactly 8 whole GPUs"),
    ("workloads.3", {"name": "idle", "replicas": 1}, r"workloads\[3\]: .*CPU-only pod and must ask for cpu"),
    ("workloads.1", {"name": "x", "mig": "auto"}, r"mig: auto needs gpu_memory_gib"),
    ("clusters", {}, r"clusters: unknown top-level field"),
]


@pytest.mark.parametrize(("path", "value", "pattern"), BAD, ids=[b[0] + "=" + repr(b[1])[:20] for b in BAD])
def test_bad_input_names_field(path: str, value: Any, pattern: str) -> None:
    """Each kind of bad input raises one InputError naming the field path and the fix."""
    with pytest.raises(InputError, match=pattern):
        problem_from_data(mutate(path, value))


def test_yaml_loaded_safely(tmp_path: Path) -> None:
    """A YAML file with a Python object tag is rejected, not executed."""
    f = tmp_path / "evil.yaml"
    f.write_text("cluster: !!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(InputError, match="unsupported YAML tag"):
        load_scenario(f)


def test_missing_file() -> None:
    """A missing scenario file is an InputError, not a traceback."""
    with pytest.raises(InputError, match="does not exist"):
        load_scenario("/nonexistent/scenario.yaml")


def test_replace_revalidates() -> None:
    """Problem.replace validates again: an invalid change raises."""
    p = problem_from_data(base())
    with pytest.raises(InputError, match="duplicate workload name"):
        p.replace(workloads=p.workloads + p.workloads[:1])
    smaller = p.replace(workloads=p.workloads[:1])
    assert [w.name for w in smaller.workloads] == ["pretrain"]


def test_every_error_at_once() -> None:
    """All the problems of a file are reported together, each with its field path."""
    d = base()
    d["workloadz"] = []
    d["workloads"][0]["replicas"] = "3"
    d["workloads"][1]["preemptible"] = "yes"
    d["workloads"][2]["nmae"] = "x"
    with pytest.raises(InputError) as ei:
        problem_from_data(d)
    paths = [p for p, _ in ei.value.problems]
    assert paths[0] == "workloadz" and "did you mean 'workloads'" in ei.value.problems[0][1]
    assert {"workloads[0].replicas", "workloads[1].preemptible", "workloads[2].nmae"} <= set(paths)
    assert "did you mean 'name'" in dict(ei.value.problems)["workloads[2].nmae"]
    assert "workloads[2].name" not in paths  # the misspelling is the error, not a missing name


def test_errors_are_capped() -> None:
    """At most 20 problems are listed, and the rest are counted."""
    d = base()
    d["workloads"] = [{"name": f"w{i}", "gpus": "1"} for i in range(30)]
    with pytest.raises(InputError) as ei:
        problem_from_data(d)
    assert len(ei.value.problems) == 20 and ei.value.lines()[-1] == "... and 10 more error(s)"


@pytest.mark.parametrize(("model", "first"), [("H101", "H100-"), ("h100", "H100-"), ("H100-SXM5-80G", "H100-SXM5"),
                                             ("A101", "A10")])
def test_unknown_gpu_model_suggests_its_family(model: str, first: str) -> None:
    """An unknown model suggests the near misses and its family first: H101 -> H100-..."""
    d = base()
    d["cluster"]["blocks"][0]["racks"][0]["nodes"][0]["gpu"] = model
    with pytest.raises(InputError, match=r"did you mean '(?P<m>[^']+)'") as ei:
        problem_from_data(d)
    assert ei.value.message.split("did you mean '")[1].startswith(first), ei.value.message


@pytest.mark.parametrize(("data", "needle"), [(None, "got an empty file"), ([1, 2], "got a list"),
                                              ("text", "got the text 'text'")])
def test_not_a_mapping_said_plainly(data: Any, needle: str) -> None:
    """An empty or non-mapping scenario is described in words, not as a Python type name."""
    with pytest.raises(InputError, match=needle):
        problem_from_data(data)


def test_cross_reference_errors_at_once() -> None:
    """Duplicate names, unknown models and profiles are all reported together, each with its path."""
    nodes = [{"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 1, "memory_gib": 1},
             {"name": "n1", "cpu": 1, "memory_gib": 1}]
    works = [{"name": "a", "gpus": 1, "gpu_models": ["H101"]}, {"name": "b", "mig": "3g.41gb"},
             {"name": "a", "gpus": 1}]
    with pytest.raises(InputError) as ei:
        problem_from_data({"cluster": {"nodes": nodes}, "workloads": works})
    assert [p for p, _ in ei.value.problems] == ["cluster node 'n1'", "workloads[0].gpu_models[0]",
                                                 "workloads[1].mig", "workloads[2].name"]
