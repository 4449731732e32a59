"""Scheduler topology objects from capplan's cluster: Kueue Topology + ResourceFlavor, Volcano HyperNodes.

Both exports target a release of the scheduler: the release decides the apiVersion and the
fields written (checked in the tests against the upstream CRDs in ``shared/data/k8s-schemas``).
Level label keys come from the import metadata (``--level-label``) or the export options; a
level without one gets ``topology.capplan.io/<level>``, which the nodes must then carry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from capplan.io.k8s.labels import AMD_PRODUCT, GPU_PRODUCT, HOSTNAME
from capplan.io.k8s.names import NAME_LIMIT, is_qualified_name, object_names
from capplan.model.errors import InputError
from capplan.model.problem import Problem

DEFAULT_LABEL = "topology.capplan.io/{level}"
KUEUE_GROUP = "kueue.x-k8s.io"
VOLCANO_API = "topology.volcano.sh/v1alpha1"
LEVEL_LABEL = "capplan.io/level"
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+(?:-[0-9A-Za-z.]+)?)?$")


@dataclass(frozen=True)
class KueueTarget:
    """apiVersions and limits of the Kueue objects for one release (or one group/version)."""

    topology_api: str
    flavor_api: str
    max_levels: int
    what: str


@dataclass(frozen=True)
class VolcanoTarget:
    """What a Volcano release accepts in a HyperNode."""

    tier_name: bool
    what: str


def _v(version: str) -> str:
    return f"{KUEUE_GROUP}/{version}"


#: Kueue minor release -> (Topology version, ResourceFlavor version, most topology levels). The
#: ResourceFlavor was never v1alpha1; 0.11-0.13 serve Topology only as v1alpha1 (0.11.0-0.11.2 also
#: had an unusable v1beta1); 0.14 serves v1beta1; 0.15 and later serve v1beta2 (v1beta1 deprecated).
KUEUE_RELEASES: dict[str, tuple[str, str, int]] = {
    **{f"0.{m}": ("v1alpha1", "v1beta1", 8) for m in (10, 11, 12, 13)},
    "0.14": ("v1beta1", "v1beta1", 16),
    **{f"0.{m}": ("v1beta2", "v1beta2", 16) for m in range(15, 20)},
}
#: Explicit group/versions: the Topology version and the ResourceFlavor version served with it.
KUEUE_API_VERSIONS: dict[str, tuple[str, str, int]] = {
    _v("v1alpha1"): ("v1alpha1", "v1beta1", 8),
    _v("v1beta1"): ("v1beta1", "v1beta1", 16),
    _v("v1beta2"): ("v1beta2", "v1beta2", 16),
}
KUEUE_DEFAULT = "0.19"
#: Volcano minor release -> whether ``spec.tierName`` exists (from v1.14).
VOLCANO_RELEASES: dict[str, bool] = {"1.12": False, "1.13": False, "1.14": True, "1.15": True, "1.16": True}
VOLCANO_DEFAULT = "1.15"


def _minor(value: str) -> str | None:
    m = _RELEASE.match(value.strip())
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def kueue_target(value: str | None) -> KueueTarget:
    """The Kueue objects to write for ``--kueue-api-version`` (a release such as ``0.13`` or a group/version).

    Raises
    ------
    InputError
        Anything else, listing the supported values.
    """
    value = (value or KUEUE_DEFAULT).strip()
    if value in KUEUE_API_VERSIONS:
        topo, flavor, levels = KUEUE_API_VERSIONS[value]
        return KueueTarget(_v(topo), _v(flavor), levels, value)
    minor = _minor(value)
    if minor is not None and minor in KUEUE_RELEASES:
        topo, flavor, levels = KUEUE_RELEASES[minor]
        return KueueTarget(_v(topo), _v(flavor), levels, f"Kueue {minor}")
    raise InputError(
        "--kueue-api-version",
        f"unsupported value {value!r}; give a Kueue release ({', '.join(KUEUE_RELEASES)}; default "
        f"{KUEUE_DEFAULT}) or a group/version ({', '.join(KUEUE_API_VERSIONS)})",
    )


def volcano_target(value: str | None) -> VolcanoTarget:
    """The HyperNode fields for ``--volcano-version`` (a release such as ``1.12`` or the group/version).

    The group/version alone (``topology.volcano.sh/v1alpha1``) writes only fields every release knows.

    Raises
    ------
    InputError
        Anything else, listing the supported values.
    """
    value = (value or VOLCANO_DEFAULT).strip()
    if value == VOLCANO_API:
        return VolcanoTarget(tier_name=False, what=value)
    minor = _minor(value)
    if minor is not None and minor in VOLCANO_RELEASES:
        return VolcanoTarget(tier_name=VOLCANO_RELEASES[minor], what=f"Volcano {minor}")
    raise InputError(
        "--volcano-version",
        f"unsupported value {value!r}; give a Volcano release ({', '.join(VOLCANO_RELEASES)}; default "
        f"{VOLCANO_DEFAULT}) or the group/version {VOLCANO_API}",
    )


def level_keys(problem: Problem, labels: Mapping[str, str]) -> list[str]:
    """Node-label key of every level, outermost first, ending with ``kubernetes.io/hostname``."""
    return [labels.get(lv, DEFAULT_LABEL.format(level=_label_value(lv))) for lv in problem.cluster.levels[:-1]] + [
        HOSTNAME
    ]


def _label_value(raw: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)[:NAME_LIMIT].strip("-_.")
    return out or "x"


def gpu_selectors(
    problem: Problem, node_meta: Mapping[str, Mapping[str, Any]], warnings: list[str]
) -> list[tuple[str, dict[str, str]]]:
    """One node selector per GPU product label of the cluster: ``(label value, {label: value})``.

    The label value is the one the node carries (from the import metadata); for nodes without
    metadata it is built from the catalog (``NVIDIA-<alias>``) with a warning. A cluster without
    GPU nodes gets one selector on ``kubernetes.io/os: linux``.
    """
    found: set[tuple[str, str]] = set()
    guessed: set[str] = set()
    for n in problem.cluster.nodes:
        if not n.gpu_model:
            continue
        meta = node_meta.get(n.name) or {}
        sel = meta.get("selector")
        if isinstance(sel, dict) and len(sel) == 1:
            ((key, val),) = sel.items()
            found.add((str(key), str(val)))
            continue
        model = problem.catalog.get(n.gpu_model)
        if model.vendor == "amd":
            key = AMD_PRODUCT[0]
            alias = next((a for a in model.aliases if a.startswith("AMD-")), model.name)
            val = alias.replace("-", "_")
        else:
            key = GPU_PRODUCT
            alias = next((a for a in model.aliases if a.startswith("NVIDIA-")), "NVIDIA-" + model.name)
            val = alias
        found.add((key, _label_value(val)))
        guessed.add(n.gpu_model)
    if guessed:
        warnings.append(
            f"no import metadata for the nodes of {', '.join(sorted(guessed))}; ResourceFlavor nodeLabels "
            "guessed from the catalog (check them, or give --flavor-label KEY=VALUE)"
        )
    if not found:
        return [("cpu", {"kubernetes.io/os": "linux"})]
    return [(val, {key: val}) for key, val in sorted(found)]


def kueue_objects(
    problem: Problem,
    labels: Mapping[str, str],
    target: KueueTarget,
    selectors: Sequence[tuple[str, Mapping[str, str]]],
    name: str = "",
) -> list[dict[str, Any]]:
    """A Kueue ``Topology`` with one level per capplan level and one ``ResourceFlavor`` per selector.

    Each ResourceFlavor names the Topology and carries its selector as ``nodeLabels`` (Kueue
    requires at least one node label on a flavor with a topology).

    Parameters
    ----------
    problem
        The cluster whose levels become the Topology's levels.
    labels
        Node-label key per capplan level (others get ``topology.capplan.io/<level>``).
    target
        apiVersions and limits of the Kueue release (:func:`kueue_target`).
    selectors
        ``(tag, nodeLabels)`` per ResourceFlavor (:func:`gpu_selectors` or ``--flavor-label``).
    name
        Topology name (default: the cluster name).

    Raises
    ------
    InputError
        More levels than the target release allows.
    """
    keys = level_keys(problem, labels)
    if len(keys) > target.max_levels:
        raise InputError(
            "--kueue-api-version",
            f"{target.what} allows at most {target.max_levels} topology levels (hostname included), "
            f"the cluster has {len(keys)}; target Kueue 0.14 or later",
        )
    topo_raw = name or problem.cluster.name
    flavor_raw = [f"{topo_raw}-{tag}" if len(selectors) > 1 else f"{topo_raw}-tas" for tag, _ in selectors]
    if len(set(flavor_raw)) != len(flavor_raw):
        flavor_raw = [f"{raw}-{k}" for k, raw in enumerate(flavor_raw)]
    names = object_names([topo_raw, *flavor_raw])
    topo = names[topo_raw]
    out: list[dict[str, Any]] = [
        {
            "apiVersion": target.topology_api,
            "kind": "Topology",
            "metadata": {"name": topo},
            "spec": {"levels": [{"nodeLabel": k} for k in keys]},
        }
    ]
    for raw, (_, sel) in zip(flavor_raw, selectors, strict=True):
        out.append(
            {
                "apiVersion": target.flavor_api,
                "kind": "ResourceFlavor",
                "metadata": {"name": names[raw]},
                "spec": {"nodeLabels": dict(sel), "topologyName": topo},
            }
        )
    return out


def _member(kind: str, name: str) -> dict[str, Any]:
    if is_qualified_name(name):
        return {"type": kind, "selector": {"exactMatch": {"name": name}}}
    return {"type": kind, "selector": {"regexMatch": {"pattern": "^" + re.escape(name) + "$"}}}


def volcano_hypernodes(problem: Problem, target: VolcanoTarget | None = None) -> list[dict[str, Any]]:
    """One HyperNode per non-empty domain: tier 1 for the level above ``node``, rising outwards.

    Names are the domain names made DNS-safe (level-prefixed when two levels share a name),
    hash-shortened to 63 characters when needed. Nodes whose names are no qualified name
    (over 63 characters) are matched by an anchored ``regexMatch``. ``spec.tierName`` (the
    capplan level) is written for Volcano 1.14 and later.

    Parameters
    ----------
    problem
        The cluster whose domains become HyperNodes.
    target
        What the Volcano release accepts (:func:`volcano_target`; default: the newest release).
    """
    target = target or volcano_target(None)
    cl = problem.cluster
    levels = cl.levels[:-1]
    nodes_in: dict[str, list[str]] = {}
    for n in cl.nodes:
        if n.path:
            nodes_in.setdefault(n.path[-1], []).append(n.name)
    children: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for d in cl.domains:
        i = levels.index(d.level)
        if i > 0 and d.parent is not None:
            children.setdefault((levels[i - 1], d.parent), []).append((d.level, d.name))
    nonempty: set[tuple[str, str]] = set()
    for i in range(len(levels) - 1, -1, -1):
        for d in cl.domains:
            if d.level != levels[i]:
                continue
            key = (d.level, d.name)
            if (i == len(levels) - 1 and nodes_in.get(d.name)) or any(
                c in nonempty for c in children.get(key, [])
            ):
                nonempty.add(key)
    plain = [d.name for d in cl.domains]
    raw = {(d.level, d.name): d.name if plain.count(d.name) == 1 else f"{d.level}-{d.name}" for d in cl.domains}
    names = object_names(raw[k] for k in nonempty)
    out = []
    for d in cl.domains:
        key = (d.level, d.name)
        if key not in nonempty:
            continue
        tier = len(levels) - levels.index(d.level)
        if d.level == levels[-1]:
            members = [_member("Node", n) for n in nodes_in[d.name]]
        else:
            members = [_member("HyperNode", names[raw[c]]) for c in children.get(key, []) if c in nonempty]
        spec: dict[str, Any] = {"tier": tier}
        if target.tier_name:
            spec["tierName"] = d.level
        spec["members"] = members
        out.append(
            {
                "apiVersion": VOLCANO_API,
                "kind": "HyperNode",
                "metadata": {"name": names[raw[key]], "labels": {LEVEL_LABEL: _label_value(d.level)}},
                "spec": spec,
            }
        )
    return sorted(out, key=lambda h: (-h["spec"]["tier"], h["metadata"]["name"]))


def yaml_documents(objs: list[dict[str, Any]]) -> str:
    """Objects as one multi-document YAML stream."""
    return yaml.safe_dump_all(objs, sort_keys=False, default_flow_style=False, width=120)
