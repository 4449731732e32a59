"""Every export, for every supported release, checked against the stored upstream schemas and admission rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from capplan.io.k8s.export import mig_parted_yaml
from capplan.io.k8s.names import object_names
from capplan.io.k8s.topology import (
    KUEUE_API_VERSIONS,
    KUEUE_RELEASES,
    VOLCANO_API,
    VOLCANO_DEFAULT,
    VOLCANO_RELEASES,
    gpu_selectors,
    kueue_objects,
    kueue_target,
    volcano_hypernodes,
    volcano_target,
)
from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.errors import InputError
from capplan.model.problem import Problem
from capplan.placement import solve

from . import upstream as U
from .conftest import LEVELS, import_sample_argv, k8s_main

pytestmark = pytest.mark.skipif(not U.SCHEMAS.is_dir(), reason=f"upstream schemas not found at {U.SCHEMAS}")

#: Stored directory standing for each Kueue minor release (the README: 0.11-0.13 serve what 0.12.10
#: serves, 0.16-0.19 what 0.19.2 serves).
KUEUE_STORED = {"0.10": "v0.10.6", "0.11": "v0.12.10", "0.12": "v0.12.10", "0.13": "v0.12.10",
                "0.14": "v0.14.8", "0.15": "v0.15.8", **{f"0.{m}": "v0.19.2" for m in (16, 17, 18, 19)}}
VOLCANO_STORED = {"1.12": "v1.12.4", "1.13": "v1.13.3", "1.14": "v1.14.4", "1.15": "v1.15.1",
                  "1.16": "v1.16.0-alpha.1"}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Problem, dict[str, Any]]:
    """The sample cluster imported with block/rack levels, and its import metadata."""
    out = tmp_path_factory.mktemp("k8s") / "cluster.yaml"
    assert k8s_main(import_sample_argv(out, *(f"--level-label={lv}={lb}" for lv, lb in LEVELS))) == 0
    return load_scenario(out), json.loads(out.with_name("cluster.k8s.json").read_text())


def _long_names() -> Problem:
    """Nested domains with long, clashing and un-DNS-like names, and a node name over 63 characters."""
    block = "Block_" + "x" * 70
    racks = [{"name": f"{block}/rack-{i}", "nodes": [{"name": f"n{i}", "gpu": "H100-SXM5-80GB", "gpus": 8,
                                                       "cpu": 64, "memory_gib": 512}]} for i in range(2)]
    racks.append({"name": "RACK-0", "nodes": [{"name": "node-" + "a" * 70 + ".example.com", "cpu": 8,
                                               "memory_gib": 32}]})
    racks.append({"name": "rack-0", "nodes": [{"name": "cpu-b", "cpu": 8, "memory_gib": 32}]})
    return problem_from_data({"cluster": {"name": "Prod_Cluster", "levels": ["block", "rack", "node"],
                                          "blocks": [{"name": block, "racks": racks[:2]},
                                                     {"name": "b2", "racks": racks[2:]},
                                                     {"name": "empty", "racks": []}]}})


def _ok(objs: list[dict[str, Any]], product: str, release: str) -> None:
    crds = U.crds(product, release)
    for o in objs:
        errs = U.api_server_errors(o, crds[o["kind"]])
        if product == "volcano":
            errs += U.volcano_admission_errors(o, release)
        assert errs == [], (release, o["kind"], o["metadata"]["name"], errs)


def _serving(product: str, kind: str, api_version: str) -> list[str]:
    out = []
    for rel in U.releases(product):
        crd = U.crds(product, rel)[kind]
        group, _, version = api_version.partition("/")
        if any(v["name"] == version and v.get("served") for v in crd["spec"]["versions"]) and group == crd[
                "spec"]["group"]:
            out.append(rel)
    return out


@pytest.mark.parametrize("target", [*KUEUE_RELEASES, *KUEUE_API_VERSIONS, None])
def test_kueue_objects_pass_every_serving_release(target: str | None, sample: tuple[Problem, dict[str, Any]]) -> None:
    """Topology + ResourceFlavor pass the CRDs (schema, strict fields, CEL) of every stored release serving them."""
    problem, meta = sample
    t = kueue_target(target)
    objs = kueue_objects(problem, dict(meta["levels"]), t, gpu_selectors(problem, meta["nodes"], []))
    for o in objs:
        releases = _serving("kueue", o["kind"], o["apiVersion"])
        assert releases, o["apiVersion"]
        if target in KUEUE_STORED:
            assert KUEUE_STORED[target] in releases
        for rel in releases:
            _ok([o], "kueue", rel)


def test_kueue_default_is_newest_and_selects_planned_nodes(sample: tuple[Problem, dict[str, Any]]) -> None:
    """No flag: the newest stored release's versions; each flavor names the Topology and selects GPU nodes by label."""
    problem, meta = sample
    objs = kueue_objects(problem, dict(meta["levels"]), kueue_target(None), gpu_selectors(problem, meta["nodes"], []))
    newest = U.releases("kueue")[-1]
    _ok(objs, "kueue", newest)
    topo, *flavors = objs
    assert topo["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    nodes = json.loads((Path(__file__).parent.parent.parent / "data" / "k8s" / "nodes.json").read_text())["items"]
    selected: set[str] = set()
    for f in flavors:
        assert f["spec"]["topologyName"] == topo["metadata"]["name"] and f["spec"]["nodeLabels"]
        selected |= {n["metadata"]["name"] for n in nodes
                     if f["spec"]["nodeLabels"].items() <= n["metadata"].get("labels", {}).items()}
    assert selected == {n.name for n in problem.cluster.nodes if n.gpus}


@pytest.mark.parametrize("target", [*VOLCANO_RELEASES, VOLCANO_API, None])
def test_volcano_hypernodes_pass(target: str | None, sample: tuple[Problem, dict[str, Any]]) -> None:
    """HyperNodes pass the CRD and the admission (webhook or policy) of the release targeted, or of all."""
    for problem in (sample[0], _long_names()):
        objs = volcano_hypernodes(problem, volcano_target(target))
        if target is None or target in VOLCANO_STORED:  # no flag: the newest release
            rels = [VOLCANO_STORED[target or VOLCANO_DEFAULT]]
        else:  # the group/version alone: fields every release accepts
            rels = U.releases("volcano")
        for rel in rels:
            _ok(objs, "volcano", rel)


def test_volcano_default_targets_newest_release_with_tier_names() -> None:
    """Without a flag HyperNodes carry tierName (Volcano 1.15); 1.12/1.13 get none; names stay under 63."""
    p = _long_names()
    new, old = volcano_hypernodes(p), volcano_hypernodes(p, volcano_target("1.13"))
    assert all(h["spec"]["tierName"] in ("block", "rack") for h in new)
    assert all("tierName" not in h["spec"] for h in old)
    names = [h["metadata"]["name"] for h in new]
    assert len(set(names)) == len(names) and all(len(n) <= 63 for n in names)
    assert "empty" not in names  # a domain without nodes would be an invalid HyperNode
    assert volcano_hypernodes(_long_names()) == new  # stable from run to run


@pytest.mark.parametrize("value", ["v1alpha1", "0.9", "0.20", "kueue.x-k8s.io/v1", "latest"])
def test_kueue_version_rejects_unknown(value: str) -> None:
    """Anything but a supported release or group/version is an error listing the supported values."""
    with pytest.raises(InputError, match=r"0\.10.*0\.19.*kueue\.x-k8s\.io/v1beta2") as exc:
        kueue_target(value)
    assert exc.value.path == "--kueue-api-version"


def test_kueue_release_spellings() -> None:
    """`v0.13`, `0.13` and `0.13.4` mean the same release; 0.13 serves Topology only as v1alpha1."""
    assert kueue_target("v0.13") == kueue_target("0.13.4") == kueue_target("0.13")
    assert kueue_target("0.13").topology_api == "kueue.x-k8s.io/v1alpha1"
    assert kueue_target("0.13").flavor_api == "kueue.x-k8s.io/v1beta1"
    with pytest.raises(InputError, match=r"1\.12"):
        volcano_target("1.11")


def test_object_names() -> None:
    """Names are DNS-safe, at most 63 characters, unique after cleaning, and independent of order."""
    raws = ["rack-1", "Rack_1", "a" * 80, "ok.name", "UPPER"]
    got = object_names(raws)
    assert got == object_names(list(reversed(raws)))
    assert got["ok.name"] == "ok.name" and got["UPPER"] == "upper"
    assert len(set(got.values())) == len(raws) and all(len(v) <= 63 for v in got.values())
    assert got["rack-1"] != "rack-1"  # clashes with Rack_1 once cleaned: both hashed


def test_mig_parted_export_parses_and_single_nodes_stay_valid(sample: tuple[Problem, dict[str, Any]]) -> None:
    """The mig-parted file parses under spec.go rules; single-strategy nodes get a layout GFD accepts."""
    problem, _ = sample
    plan = solve(problem, "greedy")
    text, labels = mig_parted_yaml(problem, plan)
    data = yaml.safe_load(text)
    assert U.mig_parted_errors(data) == []
    chosen = {it["metadata"]["name"]: it["metadata"]["labels"]["nvidia.com/mig.config"] for it in labels["items"]}
    singles = [n for n in problem.cluster.nodes if n.mig_strategy == "single"]
    assert singles
    for n in singles:
        assert U.gfd_single_errors(U.per_gpu(data["mig-configs"][chosen[n.name]], n.gpus)) == []


def test_mig_parted_base_keeps_standard_configs(sample: tuple[Problem, dict[str, Any]]) -> None:
    """`--base` (mig-parted's own default config) keeps every standard config and adds capplan's."""
    problem, _ = sample
    base = yaml.safe_load((U.SCHEMAS / "mig-parted" / "bd7160f43f16" / "config-default.yaml").read_text())
    plan = solve(problem, "greedy")
    text, labels = mig_parted_yaml(problem, plan, base)
    data = yaml.safe_load(text)
    assert U.mig_parted_errors(data) == []
    for name, entries in base["mig-configs"].items():
        assert data["mig-configs"][name] == entries
    for it in labels["items"]:
        assert it["metadata"]["labels"]["nvidia.com/mig.config"] in data["mig-configs"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "custom-mig-config", "namespace": "gpu-operator", "resourceVersion": "7"},
          "data": {"config.yaml": yaml.safe_dump(base)}}
    out = yaml.safe_load(mig_parted_yaml(problem, plan, cm)[0])
    assert out["kind"] == "ConfigMap" and "resourceVersion" not in out["metadata"]
    assert U.mig_parted_errors(yaml.safe_load(out["data"]["config.yaml"])) == []


def test_checker_catches_the_reported_defects() -> None:
    """The checker itself rejects what issue 14 reports (so a passing export means something)."""
    crds = U.crds("kueue", "v0.19.2")
    rf = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "x-tas"},
          "spec": {"topologyName": "x"}}
    assert "at least one nodeLabel" in " ".join(U.api_server_errors(rf, crds["ResourceFlavor"]))
    assert "not served" in " ".join(U.api_server_errors({**rf, "apiVersion": "v1alpha1"}, crds["ResourceFlavor"]))
    hn = {"apiVersion": VOLCANO_API, "kind": "HyperNode", "metadata": {"name": "r"},
          "spec": {"tier": 1, "tierName": "rack", "members": [{"type": "Node", "selector": {"exactMatch": {
              "name": "n" * 64}}}]}}
    assert "tierName" in " ".join(U.api_server_errors(hn, U.crds("volcano", "v1.12.4")["HyperNode"]))
    assert U.volcano_admission_errors(hn, "v1.12.4") and U.volcano_admission_errors(hn, "v1.15.1")
    assert U.gfd_single_errors([{"1g.5gb": 3, "3g.20gb": 1}, None]) != []
    assert U.mig_parted_errors({"version": "v1", "mig-configs": {"x": [{"devices": "all"}]}}) != []


def test_pod_and_node_lists_are_valid_objects(sample: tuple[Problem, dict[str, Any]]) -> None:
    """The Binding and node-label Lists hold v1 objects with valid metadata; each Binding passes the pods/binding
    rules of the API server (core/v1 ``Binding``: ``target`` an ObjectReference to a Node by name)."""
    from capplan.io.k8s.bindings import bindings

    problem, meta = sample
    plan = solve(problem, "greedy")
    doc = bindings(problem, plan, meta)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List" and doc["items"]
    for it in doc["items"]:
        assert U.binding_errors(it) == [], it
    assert U.binding_errors({**doc["items"][0], "target": {"kind": "Pod", "name": ""}}) == [
        "target.kind: Unsupported value 'Pod': supported values: Node, <empty>", "target.name: Required value"]
    labels = mig_parted_yaml(problem, plan)[1]
    for it in labels["items"]:
        assert it["kind"] == "Node" and U.metadata_errors(it["metadata"], namespaced=False) == []


def test_defaults_are_the_newest_stored_releases() -> None:
    """The defaults (in the CLI help too) are the newest stored Kueue release and the newest Volcano release."""
    from capplan.cli import k8s as cli
    from capplan.io.k8s import topology

    assert cli.KUEUE_DEFAULT == topology.KUEUE_DEFAULT and cli.VOLCANO_DEFAULT == topology.VOLCANO_DEFAULT
    assert KUEUE_STORED[topology.KUEUE_DEFAULT] == U.releases("kueue")[-1]
    assert VOLCANO_STORED[VOLCANO_DEFAULT] == [r for r in U.releases("volcano") if "-" not in r][-1]
