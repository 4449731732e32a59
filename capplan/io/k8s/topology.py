"""Scheduler topology objects from capplan's cluster: Kueue Topology + ResourceFlavor, Volcano HyperNodes.

Level label keys come from the import metadata (``--level-label``) or the export options; a
level without one gets ``topology.capplan.io/<level>``, which the nodes must then carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from capplan.io.k8s.labels import HOSTNAME
from capplan.model.problem import Problem

DEFAULT_LABEL = "topology.capplan.io/{level}"


def level_keys(problem: Problem, labels: Mapping[str, str]) -> list[str]:
    """Node-label key of every level, outermost first, ending with ``kubernetes.io/hostname``."""
    return [labels.get(lv, DEFAULT_LABEL.format(level=lv)) for lv in problem.cluster.levels[:-1]] + [HOSTNAME]


def kueue_objects(
    problem: Problem,
    labels: Mapping[str, str],
    name: str = "",
    api_version: str = "kueue.x-k8s.io/v1beta1",
    node_labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """A Kueue ``Topology`` with one level per capplan level and a ``ResourceFlavor`` using it."""
    topo = name or problem.cluster.name
    flavor: dict[str, Any] = {"topologyName": topo}
    if node_labels:
        flavor = {"nodeLabels": dict(node_labels), **flavor}
    return [
        {
            "apiVersion": api_version,
            "kind": "Topology",
            "metadata": {"name": topo},
            "spec": {"levels": [{"nodeLabel": k} for k in level_keys(problem, labels)]},
        },
        {
            "apiVersion": api_version,
            "kind": "ResourceFlavor",
            "metadata": {"name": f"{topo}-tas"},
            "spec": flavor,
        },
    ]


def _dns(name: str) -> str:
    out = "".join(c if c.isalnum() or c in "-." else "-" for c in name.lower()).strip("-.")
    return out[:253] or "x"


def volcano_hypernodes(problem: Problem) -> list[dict[str, Any]]:
    """One HyperNode per domain: tier 1 for the level above ``node``, rising outwards."""
    cl = problem.cluster
    levels = cl.levels[:-1]
    plain = [_dns(d.name) for d in cl.domains]
    names = {
        (d.level, d.name): p if plain.count(p) == 1 else _dns(f"{d.level}-{d.name}")
        for d, p in zip(cl.domains, plain, strict=True)
    }
    out = []
    for d in cl.domains:
        tier = len(levels) - levels.index(d.level)
        if d.level == levels[-1]:
            members = [
                {"type": "Node", "selector": {"exactMatch": {"name": n.name}}}
                for n in cl.nodes
                if n.path and n.path[-1] == d.name
            ]
        else:
            members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": names[(c.level, c.name)]}}}
                for c in cl.domains
                if c.parent == d.name and levels.index(c.level) == levels.index(d.level) + 1
            ]
        out.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": names[(d.level, d.name)], "labels": {"capplan.io/level": d.level}},
                "spec": {"tier": tier, "tierName": d.level, "members": members},
            }
        )
    return sorted(out, key=lambda h: (-h["spec"]["tier"], h["metadata"]["name"]))


def yaml_documents(objs: list[dict[str, Any]]) -> str:
    """Objects as one multi-document YAML stream."""
    return yaml.safe_dump_all(objs, sort_keys=False, default_flow_style=False, width=120)
