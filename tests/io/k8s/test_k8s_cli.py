"""CLI: import/export commands, topology objects, and bad input (exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .conftest import DATA, LEVEL_ARGS, import_sample_argv, k8s_main


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    """The sample cluster imported to a scenario (with its .k8s.json metadata)."""
    out = tmp_path / "cluster.yaml"
    assert k8s_main(import_sample_argv(out, *LEVEL_ARGS)) == 0
    return out


def test_kueue_and_volcano_objects(imported: Path, tmp_path: Path) -> None:
    """Kueue Topology levels follow the level labels; Volcano HyperNodes nest racks under blocks."""
    kq, vc = tmp_path / "kueue.yaml", tmp_path / "volcano.yaml"
    assert k8s_main(["export", "kueue-topology", str(imported), "-o", str(kq)]) == 0
    topo, *flavors = list(yaml.safe_load_all(kq.read_text()))
    assert [x["nodeLabel"] for x in topo["spec"]["levels"]] == [
        "cloud.provider.com/topology-block",
        "cloud.provider.com/topology-rack",
        "kubernetes.io/hostname",
    ]
    assert {f["spec"]["nodeLabels"].get("nvidia.com/gpu.product") for f in flavors} >= {
        "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}
    for f in flavors:
        assert f["kind"] == "ResourceFlavor" and f["spec"]["topologyName"] == topo["metadata"]["name"]
    assert k8s_main(["export", "volcano-hypernodes", str(imported), "-o", str(vc)]) == 0
    hns = {h["metadata"]["name"]: h for h in yaml.safe_load_all(vc.read_text())}
    assert hns["block-1"]["spec"]["tier"] == 2 and hns["rack-1"]["spec"]["tier"] == 1
    assert {m["selector"]["exactMatch"]["name"] for m in hns["rack-1"]["spec"]["members"]} == {
        "h100-0",
        "h100-1",
    }
    assert all(m["type"] == "HyperNode" for m in hns["block-1"]["spec"]["members"])


def test_import_from_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--nodes -` reads the nodes List from standard input."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO((DATA / "nodes.json").read_text()))
    out = tmp_path / "c.yaml"
    assert k8s_main(["import", "kubernetes", "--nodes", "-", "-o", str(out)]) == 0
    assert "h100-0" in out.read_text()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--level-label", "rack"], "--level-label"),
        (["--level-label", "rack=cloud.provider.com/topology-rack"], "podset-required-topology"),
    ],
)
def test_bad_import_writes_nothing(
    tmp_path: Path, args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad options or inputs exit 2, name the field and write no file."""
    out = tmp_path / "c.yaml"
    code = k8s_main(import_sample_argv(out, *args))
    assert code == 2 and needle in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_nodes_file_not_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A nodes file that is not a List exits 2 and writes nothing."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "Node", "metadata": {"name": "n"}}))
    assert k8s_main(["import", "kubernetes", "--nodes", str(bad), "-o", str(tmp_path / "c.yaml")]) == 2
    assert "not a Kubernetes List" in capsys.readouterr().out and not (tmp_path / "c.yaml").exists()


def test_export_needs_valid_plan(imported: Path, tmp_path: Path) -> None:
    """mig-parted without a plan, or with a plan that violates the scenario, exits 2."""
    assert k8s_main(["export", "mig-parted", str(imported), "-o", str(tmp_path / "m.yaml")]) == 2
    bad = tmp_path / "plan.json"
    bad.write_text(
        json.dumps(
            {
                "status": "optimal",
                "strategy": "x",
                "assignments": [
                    {"workload": "inference/vllm-70b", "replica": 0, "node": "cpu-0", "gpus": [0]}
                ],
            }
        )
    )
    assert k8s_main(["export", "bindings", str(imported), str(bad), "-o", str(tmp_path / "b.json")]) == 2
    assert not (tmp_path / "m.yaml").exists() and not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("value", ["v1alpha1", "0.9", "kueue.x-k8s.io/v9"])
def test_bad_kueue_version_exits_2(
    imported: Path, tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unsupported --kueue-api-version exits 2, lists the supported values and writes nothing."""
    out = tmp_path / "k.yaml"
    assert k8s_main(["export", "kueue-topology", str(imported), "-o", str(out), "--kueue-api-version", value]) == 2
    msg = capsys.readouterr().out
    assert "--kueue-api-version" in msg and "0.13" in msg and "kueue.x-k8s.io/v1beta2" in msg and not out.exists()


def test_release_flags_choose_versions_and_fields(imported: Path, tmp_path: Path) -> None:
    """Kueue 0.12 gets Topology v1alpha1 with ResourceFlavor v1beta1; Volcano 1.12 gets no tierName."""
    kq, vc = tmp_path / "k.yaml", tmp_path / "v.yaml"
    assert k8s_main(["export", "kueue-topology", str(imported), "-o", str(kq), "--kueue-api-version", "0.12",
                     "--flavor-label", "pool=gpu"]) == 0
    topo, flavor = yaml.safe_load_all(kq.read_text())
    assert topo["apiVersion"] == "kueue.x-k8s.io/v1alpha1" and flavor["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert flavor["spec"]["nodeLabels"] == {"pool": "gpu"}
    assert k8s_main(["export", "volcano-hypernodes", str(imported), "-o", str(vc), "--volcano-version", "1.12"]) == 0
    assert all("tierName" not in h["spec"] for h in yaml.safe_load_all(vc.read_text()))
    assert k8s_main(["export", "volcano-hypernodes", str(imported), "-o", str(vc), "--volcano-version", "2.0"]) == 2


def test_bindings_and_base_outputs(imported: Path, tmp_path: Path) -> None:
    """bindings writes a v1 List of Bindings, the gated pods' patches and the actions file; mig-parted --base keeps
    the base configs."""
    from capplan.io.scenario import load_scenario
    from capplan.placement import solve

    plan = tmp_path / "plan.json"
    plan.write_text(solve(load_scenario(imported), "greedy").to_json())
    bind = tmp_path / "b.json"
    assert k8s_main(["export", "bindings", str(imported), str(plan), "-o", str(bind)]) == 0
    doc, acts = json.loads(bind.read_text()), json.loads((tmp_path / "b.json.actions.json").read_text())
    gated = json.loads((tmp_path / "b.json.gated.json").read_text())
    assert doc["kind"] == "List" and doc["items"] and all(i["kind"] == "Binding" for i in doc["items"])
    assert gated["kind"] == "List" and all(i["kind"] == "Pod" for i in gated["items"])
    assert acts["format"] == "capplan-actions/v1" and len(acts["bindings"]) >= len(doc["items"])
    assert sum(b["apply"] == "binding" for b in acts["bindings"]) == len(doc["items"])
    base = tmp_path / "base.yaml"
    base.write_text("version: v1\nmig-configs:\n  site-special:\n    - devices: all\n      mig-enabled: false\n")
    mig = tmp_path / "m.yaml"
    assert k8s_main(["export", "mig-parted", str(imported), str(plan), "-o", str(mig), "--base", str(base)]) == 0
    cfg = yaml.safe_load(mig.read_text())
    assert "site-special" in cfg["mig-configs"]
    labels = json.loads((tmp_path / "m.yaml.node-labels.json").read_text())
    # an all-disabled node reuses the base's identical config instead of adding a copy
    assert "all-disabled" not in cfg["mig-configs"]
    assert all(i["metadata"]["labels"]["nvidia.com/mig.config"] in cfg["mig-configs"] for i in labels["items"])


def test_pods_from_one_file_per_resource(tmp_path: Path) -> None:
    """`--pods` repeated (one `kubectl get` per resource type) gives the same scenario as one List."""
    doc = json.loads((DATA / "pods.json").read_text())
    files = []
    for kind in sorted({it["kind"] for it in doc["items"]}):
        f = tmp_path / f"{kind}.json"
        f.write_text(json.dumps({"kind": "List", "items": [it for it in doc["items"] if it["kind"] == kind]}))
        files += ["--pods", str(f)]
    one, many = tmp_path / "one.yaml", tmp_path / "many.yaml"
    assert k8s_main(import_sample_argv(one, *LEVEL_ARGS)) == 0
    assert k8s_main(["import", "kubernetes", "--nodes", str(DATA / "nodes.json"), *files, *LEVEL_ARGS,
                     "-o", str(many)]) == 0
    from capplan.io.scenario import load_scenario

    a, b = load_scenario(one), load_scenario(many)
    assert {w.name: w for w in a.workloads} == {w.name: w for w in b.workloads}
    assert set(a.running) == set(b.running)


def test_bad_base_exits_2(imported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --base file that is no mig-parted config exits 2 naming the option, before anything is written."""
    from capplan.io.scenario import load_scenario
    from capplan.placement import solve

    plan = tmp_path / "plan.json"
    plan.write_text(solve(load_scenario(imported), "greedy").to_json())
    base = tmp_path / "base.yaml"
    base.write_text("version: v2\n")
    out = tmp_path / "m.yaml"
    assert k8s_main(["export", "mig-parted", str(imported), str(plan), "-o", str(out), "--base", str(base)]) == 2
    assert "--base" in capsys.readouterr().out and not out.exists()
