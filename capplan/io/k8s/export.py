"""Exports the cluster's tools apply: nvidia-mig-parted configs with node labels, pod bindings and actions.

MIG: each node with an NVIDIA MIG-capable GPU gets one mig-parted config (identical nodes share
it) holding, per GPU, the instance counts the plan uses plus the instances of a preset layout;
GPUs without MIG use are ``mig-enabled: false``. mig-parted creates instances by count and picks
the placements itself; every count set capplan emits fits on one GPU. A ``single``-strategy node
gets a layout GPU Feature Discovery accepts (every GPU MIG-enabled with one profile, or none).
With a base config the new configs are added to it, keeping its standard and site configs.

Node labels: a ``v1`` ``List`` of ``Node`` objects carrying only the ``nvidia.com/mig.config`` label.

Bindings, gated-pod patches and the actions document live in :mod:`capplan.io.k8s.bindings`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from capplan.io.k8s.labels import MIG_CONFIG
from capplan.io.k8s.mig import parse_mig_parted
from capplan.model.errors import InputError
from capplan.model.plan import Plan
from capplan.model.problem import Node, Problem
from capplan.placement.core.reconfig import reconfigured


def _mig_nodes(problem: Problem) -> list[Node]:
    """The nodes whose GPU model is an NVIDIA MIG-capable one (the nodes mig-parted configures)."""
    out = []
    for n in problem.cluster.nodes:
        model = problem.gpu_model(n)
        if model is not None and model.vendor == "nvidia" and model.partitioning == "mig":
            out.append(n)
    return out


def _counts(profiles: Iterable[str]) -> dict[str, int]:
    """Profile -> instance count."""
    return dict(Counter(profiles))


def gpu_configs(problem: Problem, plan: Plan) -> dict[str, list[dict[str, int] | None]]:
    """Per NVIDIA MIG-capable node, per GPU: None (MIG off) or profile -> instance count."""
    used: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    for a in plan.assignments:
        if a.mig is not None:
            c = used[(a.node, a.gpus[0])]
            c[a.mig.profile] = c.get(a.mig.profile, 0) + 1
    changed = set(reconfigured(problem, plan.assignments))  # presets the plan changes (reconfigure: allowed)
    out: dict[str, list[dict[str, int] | None]] = {}
    for n in _mig_nodes(problem):
        per: list[dict[str, int] | None] = []
        for g in range(n.gpus):
            fixed = n.mode_of(g)
            if (n.name, g) in changed:
                per.append(dict(used[(n.name, g)]) if (n.name, g) in used else None)
            elif fixed is not None and fixed.mode == "mig" and fixed.layout is not None:
                per.append(_counts(s.profile for s in fixed.layout))
            elif (n.name, g) in used or (fixed is not None and fixed.mode == "mig"):
                per.append(dict(used.get((n.name, g), {})))
            else:
                per.append(None)
        out[n.name] = per
    return out


def current_configs(problem: Problem) -> dict[str, list[dict[str, int] | None]]:
    """Per NVIDIA MIG-capable node, per GPU, its MIG config today as the scenario knows it.

    A preset MIG layout is its instances, a preset ``mig`` without a layout an empty MIG config, and a GPU
    preset ``whole`` or ``shared``, or without a preset, MIG off (None).
    """
    out: dict[str, list[dict[str, int] | None]] = {}
    for n in _mig_nodes(problem):
        modes = [n.mode_of(g) for g in range(n.gpus)]
        out[n.name] = [_counts(s.profile for s in m.layout or ()) if m is not None and m.mode == "mig" else None
                       for m in modes]
    return out


def drain_warnings(problem: Problem, plan: Plan) -> list[str]:
    """One warning per node whose MIG config the export changes while GPU pods run on it (they must go first)."""
    now = current_configs(problem)
    gpu_pods: dict[str, list[str]] = defaultdict(list)
    for a in problem.running:
        if a.gpus:
            gpu_pods[a.node].append(f"{a.workload}[{a.replica}]")
    out = []
    for node, per in gpu_configs(problem, plan).items():
        gpus = [g for g, (new, old) in enumerate(zip(per, now[node], strict=True))
                if new != old and not (new == {} and old is None) and not (new is None and old == {})]
        pods = gpu_pods.get(node, [])
        if gpus and pods:
            shown = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
            out.append(f"node {node} runs GPU pods ({shown}) and its MIG config changes on GPU"
                       f"{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))}: drain the node's GPU pods "
                       "before it gets the new nvidia.com/mig.config label (mig-parted cannot re-partition a busy GPU)")
    return out


def _entries(per: list[dict[str, int] | None]) -> list[dict[str, Any]]:
    groups: dict[str, tuple[list[int], dict[str, int] | None]] = {}
    for g, cfg in enumerate(per):
        key = json.dumps(cfg, sort_keys=True)
        groups.setdefault(key, ([], cfg))[0].append(g)
    entries = []
    for devices, cfg in groups.values():
        e: dict[str, Any] = {
            "devices": "all" if len(devices) == len(per) else devices,
            "mig-enabled": cfg is not None,
        }
        if cfg is not None:
            e["mig-devices"] = {p: c for p, c in sorted(cfg.items())}
        entries.append(e)
    return entries


def _single_ok(per: list[dict[str, int] | None]) -> bool:
    """GFD's rule for ``mig.strategy=single``: no MIG, or all GPUs MIG-enabled, none empty, one profile."""
    enabled = [c for c in per if c is not None]
    if not enabled:
        return True
    profiles = {p for c in enabled for p, k in c.items() if k}
    return len(enabled) == len(per) and all(any(c.values()) for c in enabled) and len(profiles) == 1


def mig_parted(problem: Problem, plan: Plan) -> tuple[dict[str, Any], dict[str, str]]:
    """The mig-parted config (``version: v1``) and the ``nvidia.com/mig.config`` value per node.

    Raises
    ------
    InputError
        A ``single``-strategy node whose layout GPU Feature Discovery would label ``MIG-INVALID``
        (a plan that passed the validator never has one).
    """
    configs: dict[str, list[dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    for node, per in gpu_configs(problem, plan).items():
        n = problem.cluster.nodes[problem.cluster.node_index[node]]
        if n.mig_strategy == "single" and not _single_ok(per):
            raise InputError(
                "PLAN", f"node {node} uses the single MIG strategy but the plan gives it {per}; "
                "single needs every GPU MIG-enabled with instances of one profile, or MIG off"
            )
        if all(c is None for c in per):
            name = "all-disabled"
            entries: list[dict[str, Any]] = [{"devices": "all", "mig-enabled": False}]
        else:
            entries = _entries(per)
            model = problem.gpu_model(n)
            assert model is not None
            digest = hashlib.sha256(json.dumps([model.name, entries], sort_keys=True).encode()).hexdigest()
            name = f"capplan-{digest[:10]}"
        configs.setdefault(name, entries)
        labels[node] = name
    return {"version": "v1", "mig-configs": dict(sorted(configs.items()))}, labels


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def merge_mig_parted(
    base: dict[str, Any], ours: dict[str, Any], labels: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Add capplan's configs to a base mig-parted file (every base config kept, in its order).

    A capplan config whose entries equal a base config reuses that name (the node labels follow).

    Raises
    ------
    InputError
        The base file is no mig-parted config, or it holds a config of one of capplan's names
        with other entries.
    """
    merged = dict(parse_mig_parted(base))
    rename: dict[str, str] = {}
    for name, entries in ours["mig-configs"].items():
        same = next((b for b, e in merged.items() if _same(e, entries)), None)
        if same is not None:
            rename[name] = same
        elif name in merged:
            raise InputError(
                f"mig-configs.{name}",
                f"the base config already has {name!r} with other entries; remove it from the base file",
            )
        else:
            merged[name] = entries
    return {"version": "v1", "mig-configs": merged}, {n: rename.get(c, c) for n, c in labels.items()}


def base_document(base: Any) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """(mig-parted data, the ConfigMap holding it or None, its data key) of a ``--base`` file.

    Parameters
    ----------
    base
        A parsed mig-parted file, or a ConfigMap with the file under ``data["config.yaml"]`` (or its only key).

    Raises
    ------
    InputError
        A ConfigMap without data, with several keys but no ``config.yaml``, or whose value is no YAML.
    """
    if isinstance(base, dict) and base.get("kind") == "ConfigMap":
        data = base.get("data")
        if not isinstance(data, dict) or not data:
            raise InputError("data", "the base ConfigMap has no data; expected a key such as config.yaml")
        key = "config.yaml" if "config.yaml" in data else next(iter(data))
        if len(data) > 1 and key != "config.yaml":
            raise InputError("data", f"the base ConfigMap has keys {sorted(data)}; expected config.yaml")
        try:
            inner = yaml.safe_load(str(data[key]))
        except yaml.YAMLError as exc:
            raise InputError(f"data.{key}", f"not valid YAML: {exc}") from None
        return inner, base, key
    return base, None, None


def node_labels_document(labels: Mapping[str, str]) -> dict[str, Any]:
    """``kubectl apply --server-side``-able List of Nodes carrying only the ``nvidia.com/mig.config`` label."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {MIG_CONFIG: v}}}
            for n, v in sorted(labels.items())
        ],
    }


def mig_parted_yaml(problem: Problem, plan: Plan, base: Any = None) -> tuple[str, dict[str, Any]]:
    """The mig-parted file text (a ConfigMap when ``base`` is one) and the node-label List.

    Parameters
    ----------
    problem, plan
        The scenario and a plan that passed the validator.
    base
        None, a parsed mig-parted file, or a ConfigMap holding one under ``config.yaml``: its
        configs are kept and capplan's are added (:func:`merge_mig_parted`).

    Raises
    ------
    InputError
        A base that is no mig-parted config or clashes with capplan's config names.
    """
    cfg, labels = mig_parted(problem, plan)
    head = (
        "# nvidia-mig-parted config written by `capplan export mig-parted`; select per node with\n"
        f"# the label {MIG_CONFIG}=<name> (see the node-labels file).\n"
    )
    if base is None:
        text = yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=120)
        return head + text, node_labels_document(labels)
    data, cm, key = base_document(base)
    cfg, labels = merge_mig_parted(data, cfg, labels)
    text = yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=120)
    if cm is None:
        return head + text, node_labels_document(labels)
    assert key is not None
    meta = {k: v for k, v in (cm.get("metadata") or {}).items() if k in ("name", "namespace", "labels", "annotations")}
    out = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {**cm["data"], key: text}}
    return yaml.safe_dump(out, sort_keys=False, width=120), node_labels_document(labels)
