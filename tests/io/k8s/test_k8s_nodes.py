"""Node import: GFD/AMD labels, MIG strategies, quantities, topology labels and bad input."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from capplan.io.k8s.labels import parse_level_labels
from capplan.io.k8s.mig import pack_gpu, pack_node, profile_from_resource, standard_config
from capplan.io.k8s.nodes import import_nodes
from capplan.io.k8s.quantity import cpu_milli, memory_mib, parse_quantity
from capplan.model.catalog import load_catalog
from capplan.model.errors import InputError

from .conftest import LEVELS


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", Fraction(1, 4)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1000000Ki", Fraction(1024 * 10**6)),
        ("2e3", Fraction(2000)),
        ("1.5", Fraction(3, 2)),
        (4, Fraction(4)),
        ("100M", Fraction(10**8)),
    ],
)
def test_quantities_parse_exactly(text: object, value: Fraction) -> None:
    """Kubernetes quantities with decimal, binary and exponent forms parse to exact values."""
    assert parse_quantity(text, "q") == value


def test_quantity_units() -> None:
    """CPU rounds up to milli-cores, memory capacity rounds down to MiB."""
    assert cpu_milli("250m", "c") == 250 and cpu_milli("0.0001", "c") == 1
    assert memory_mib("1000000Ki", "m") == 976 and memory_mib("1Mi", "m", round_up=True) == 1


@pytest.mark.parametrize("bad", ["2e3m", "12x", "-1", "", True, None])
def test_bad_quantity_names_field(bad: object) -> None:
    """A malformed quantity is an InputError at the given field path."""
    with pytest.raises(InputError) as e:
        parse_quantity(bad, "items[0].status.allocatable.cpu")
    assert e.value.path == "items[0].status.allocatable.cpu"


def test_mig_resource_names() -> None:
    """Device-plugin resource suffixes map back to profiles (`.me` -> `+me`)."""
    assert profile_from_resource("1g.10gb.me") == "1g.10gb+me"
    assert profile_from_resource("3g.40gb") == "3g.40gb"
    assert profile_from_resource("gpu") is None


def test_packing_and_standard_configs() -> None:
    """Counts pack into valid layouts; all-balanced and all-<profile> follow the MIG manager."""
    cat = load_catalog()
    a100 = cat.get("A100-SXM4-80GB")
    assert standard_config(a100, "all-balanced") == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert standard_config(a100, "all-1g.10gb") == {"1g.10gb": 7}
    assert standard_config(a100, "all-disabled") is None
    assert standard_config(a100, "custom") == "unknown"
    assert pack_gpu(a100, ["3g.40gb", "3g.40gb", "1g.10gb"]) is None
    layouts = pack_node(a100, {"3g.40gb": 3, "1g.10gb": 4}, 2)
    assert layouts is not None and sorted(s.profile for lay in layouts for s in lay).count("3g.40gb") == 3
    assert pack_node(a100, {"7g.80gb": 3}, 2) is None


def test_sample_nodes(nodes_doc: dict[str, Any]) -> None:
    """The sample cluster imports with models, GPU counts, layouts, CPU/memory and topology."""
    res = import_nodes(nodes_doc, LEVELS, load_catalog())
    nodes = {n.name: n for n in res.cluster.nodes}
    assert res.cluster.levels == ("block", "rack", "node")
    assert nodes["h100-0"].gpu_model == "H100-SXM5-80GB" and nodes["h100-0"].gpus == 8
    # today's layout is recorded for every GPU: MIG off is `whole`, so nothing looks free to carve
    assert [(m.gpu, m.mode) for m in nodes["h100-0"].gpu_modes] == [(g, "whole") for g in range(8)]
    assert nodes["h100-0"].cpu_milli == 191500
    assert nodes["h100-0"].memory_mib == 2113459452 // 1024
    mixed = nodes["a100-mixed-0"]
    assert [(m.gpu, m.mode) for m in mixed.gpu_modes] == [(g, "whole") for g in range(4)] + [
        (g, "mig") for g in range(4, 8)]  # 4 GPUs with MIG off stay whole
    assert sorted(s.profile for s in mixed.gpu_modes[4].layout or ()) == [
        "1g.10gb",
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
    ]
    assert len(nodes["a100-mixed-1"].gpu_modes) == 8  # all-balanced on all 8
    single = nodes["a100-single-0"]
    assert single.gpu_model == "A100-SXM4-40GB" and single.gpus == 8
    assert all(len(m.layout or ()) == 7 for m in single.gpu_modes)
    assert res.facts["a100-single-0"].single_profile == "1g.5gb"
    cpx = nodes["mi300x-cpx-0"]
    assert (
        cpx.gpu_model == "MI300X-192GB"
        and cpx.gpus == 8
        and {s.profile for s in cpx.gpu_modes[0].layout or ()} == {"CPX"}
    )
    spx = nodes["mi300x-spx-0"]
    assert spx.gpus == 8 and [m.mode for m in spx.gpu_modes] == ["whole"] * 8
    assert nodes["cpu-0"].gpu_model is None and nodes["cpu-0"].path == ("block-2", "rack-4")
    # a node without a rack label is its own rack, never part of a made-up shared one
    assert nodes["cpu-2"].path == ("block-2", "node:cpu-2")
    racks = {n.path[1] for n in res.cluster.nodes}
    assert not any(r.startswith("unlabelled") for r in racks)
    unlabelled = [w for w in res.warnings if "no label cloud.provider.com/topology-rack" in w]
    assert len(unlabelled) == 1 and unlabelled[0].startswith("1 node(s)") and "its own rack" in unlabelled[0]


def test_mig_off_gpus_are_recorded_whole(nodes_doc: dict[str, Any]) -> None:
    """Every GPU of every imported node has a mode: a MIG request cannot carve a GPU whose MIG is off."""
    res = import_nodes(nodes_doc, LEVELS, load_catalog())
    for n in res.cluster.nodes:
        assert sorted(m.gpu for m in n.gpu_modes) == list(range(n.gpus)), n.name
    assert res.cluster.nodes == res.today.nodes


def test_clashing_rack_names_are_qualified(nodes_doc: dict[str, Any]) -> None:
    """The same rack name under two blocks becomes `block/rack` so domains stay unique."""
    doc = copy.deepcopy(nodes_doc)
    for it in doc["items"]:
        it["metadata"]["labels"]["cloud.provider.com/topology-rack"] = "r1"
    res = import_nodes(doc, LEVELS, load_catalog())
    assert {d.name for d in res.cluster.domains if d.level == "rack"} == {"block-1/r1", "block-2/r1"}


def test_not_a_list_is_rejected() -> None:
    """A nodes file that is not a Kubernetes List names `items` and the kubectl command."""
    with pytest.raises(InputError) as e:
        import_nodes({"kind": "Node", "metadata": {"name": "x"}}, [], load_catalog())
    assert e.value.path == "items" and "kubectl get nodes -o json" in e.value.message


def test_unknown_product_suggests_names(nodes_doc: dict[str, Any]) -> None:
    """An unknown GPU product names the label path, close catalog names and the --catalog fix."""
    doc = copy.deepcopy(nodes_doc)
    doc["items"][3]["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB-X"
    doc["items"][3]["metadata"]["labels"]["nvidia.com/mig.strategy"] = "mixed"
    with pytest.raises(InputError) as e:
        import_nodes(doc, LEVELS, load_catalog())
    assert e.value.path == 'items[3].metadata.labels["nvidia.com/gpu.product"]'
    assert "did you mean" in e.value.message and "--catalog" in e.value.message


def test_missing_allocatable_cpu(nodes_doc: dict[str, Any]) -> None:
    """A node without allocatable CPU is an InputError at that field."""
    doc = copy.deepcopy(nodes_doc)
    del doc["items"][0]["status"]["allocatable"]["cpu"]
    with pytest.raises(InputError, match=r"items\[0\]\.status\.allocatable\.cpu"):
        import_nodes(doc, LEVELS, load_catalog())


@pytest.mark.parametrize(
    "spec", ["rack", "rack=", "node=x.io/n", "Rack=x.io/r", "rack=not a label", "rack=kubernetes.io/hostname"]
)
def test_bad_level_label(spec: str) -> None:
    """A malformed --level-label is an InputError naming the option."""
    with pytest.raises(InputError) as e:
        parse_level_labels([spec])
    assert e.value.path == "--level-label"


def test_repeated_level_label() -> None:
    """The same level twice is rejected."""
    with pytest.raises(InputError):
        parse_level_labels(["rack=a.io/r", "rack=b.io/r"])
