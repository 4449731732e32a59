"""``capplan import kubernetes`` and ``capplan export mig-parted|bindings|kueue-topology|volcano-hypernodes``.

Import writes the scenario and, next to it, ``<scenario>.k8s.json``: the level-label mapping and
the pod behind every replica, which the exports read to name pods and label keys.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from capplan.cli.common import add_catalog_option
from capplan.model.errors import InputError

EXPORTS = ("mig-parted", "bindings", "kueue-topology", "volcano-hypernodes", "kueue-eta")
KUEUE_DEFAULT = "0.19"  # = capplan.io.k8s.topology.KUEUE_DEFAULT (kept here so --help needs no import)
VOLCANO_DEFAULT = "1.15"  # = capplan.io.k8s.topology.VOLCANO_DEFAULT


def meta_path(scenario: str) -> Path:
    """Where the import metadata of ``scenario`` lives: ``cluster.yaml`` -> ``cluster.k8s.json``."""
    p = Path(scenario)
    return p.with_name(p.stem + ".k8s.json")


def _catalog_arg(p: argparse.ArgumentParser) -> None:
    add_catalog_option(p)


def add_sla_options(p: argparse.ArgumentParser) -> None:
    """``--guaranteed-priority N`` and ``--guaranteed-classes NAME,...`` (import kubernetes and kueue)."""
    p.add_argument(
        "--guaranteed-priority",
        type=int,
        metavar="N",
        help="pods (workloads) of priority N or higher are sla: guaranteed (the capplan.io/sla annotation overrides)",
    )
    p.add_argument(
        "--guaranteed-classes",
        action="append",
        default=[],
        metavar="NAME,...",
        help="PriorityClass / Kueue WorkloadPriorityClass names whose pods are sla: guaranteed; repeatable",
    )


def sla_policy(args: argparse.Namespace) -> Any:
    """The :class:`~capplan.io.k8s.pods.SlaPolicy` of ``--guaranteed-priority`` and ``--guaranteed-classes``."""
    from capplan.io.k8s.pods import SlaPolicy

    names = [c.strip() for spec in args.guaranteed_classes for c in spec.split(",")]
    if any(not c for c in names):
        raise InputError("--guaranteed-classes", "expected class names separated by commas, e.g. prod-high,critical")
    return SlaPolicy(priority=args.guaranteed_priority, classes=frozenset(names))


def add_import_parser(sub: Any) -> None:
    """Register ``capplan import kubernetes``."""
    p = sub.add_parser(
        "kubernetes",
        help="nodes (and pods) from kubectl JSON -> scenario",
        description="Turn `kubectl get nodes -o json` (and `kubectl get pods -A -o json`, "
        "optionally with PriorityClass, PyTorchJob, TrainJob, PodGroup and Kueue "
        "Workload objects in the same List) into a scenario file.",
    )
    p.add_argument("--nodes", required=True, metavar="NODES.json", help="kubectl nodes JSON, or - for stdin")
    p.add_argument(
        "--pods",
        action="append",
        default=[],
        metavar="PODS.json",
        help="kubectl JSON List of pods and the objects grouping them; repeat for one file per resource type "
        "(items are numbered across the files in order)",
    )
    p.add_argument(
        "--level-label",
        action="append",
        default=[],
        metavar="LEVEL=LABEL",
        help="topology level from a node label, outermost first; repeat, e.g. "
        "--level-label block=example.com/block --level-label rack=example.com/rack",
    )
    p.add_argument(
        "--mig-parted",
        metavar="CONFIG.yaml",
        help="mig-parted config the nodes' nvidia.com/mig.config labels refer to (exact per-GPU layouts)",
    )
    p.add_argument(
        "--reconfigure-mig",
        action="store_true",
        help="let plans change today's MIG/partition layouts (the scenario gets reconfigure: allowed; each GPU "
        "changed counts as reconfigured and its node is drained); without it today's layouts are kept",
    )
    add_sla_options(p)
    p.add_argument("--name", default="kubernetes", help="cluster name (default kubernetes)")
    p.add_argument("-o", "--output", required=True, metavar="SCENARIO.yaml", help="scenario file to write")
    _catalog_arg(p)
    p.set_defaults(func=run_import)


def add_parser(sub: Any) -> None:
    """Register ``capplan export``."""
    p = sub.add_parser(
        "export", help="write what Kubernetes tools apply: mig-parted, bindings, Kueue, Volcano"
    )
    p.add_argument("format", choices=EXPORTS, help="what to write: " + ", ".join(EXPORTS))
    p.add_argument("scenario", help="scenario file (from `capplan import kubernetes` or hand-written)")
    p.add_argument("plan", nargs="?", help="plan JSON (required for mig-parted and bindings); kueue-eta: the schedule")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="file to write (atomically)")
    p.add_argument("--meta", metavar="FILE", help="import metadata (default: <scenario>.k8s.json if present)")
    p.add_argument(
        "--level-label",
        action="append",
        default=[],
        metavar="LEVEL=LABEL",
        help="label key of a level (overrides the import metadata)",
    )
    p.add_argument(
        "--node-labels",
        metavar="FILE",
        help="mig-parted: where to write the node-label List (default FILE.node-labels.json)",
    )
    p.add_argument(
        "--base",
        metavar="CONFIG",
        help="mig-parted: existing mig-parted config (or the ConfigMap holding it) to add capplan's configs to",
    )
    p.add_argument(
        "--patch",
        choices=("nodeSelector", "affinity"),
        default="nodeSelector",
        help="bindings: pin gated pods with a nodeSelector (default) or a required node affinity added to theirs",
    )
    p.add_argument(
        "--gated",
        metavar="FILE",
        help="bindings: where to write the gated pods' patches (pin + capplan's gate removed; default FILE.gated.json)",
    )
    p.add_argument(
        "--actions",
        metavar="FILE",
        help="bindings: where to write every binding, eviction and migration (default FILE.actions.json)",
    )
    p.add_argument(
        "--kueue-api-version",
        metavar="RELEASE|GROUP/VERSION",
        help=f"Kueue release (0.10 to 0.19; default {KUEUE_DEFAULT}) or group/version such as kueue.x-k8s.io/v1beta1",
    )
    p.add_argument(
        "--flavor-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="kueue-topology: nodeLabels of the one ResourceFlavor (default: one flavor per GPU product label)",
    )
    p.add_argument(
        "--volcano-version",
        metavar="RELEASE|GROUP/VERSION",
        help=f"Volcano release (1.12 to 1.16; default {VOLCANO_DEFAULT}) or topology.volcano.sh/v1alpha1",
    )
    p.add_argument("--format", dest="eta_format", choices=("patches", "prometheus"), default="patches",
                   help="kueue-eta: patches, a v1 List of Workload patches (default), or prometheus, a text exposition")
    _catalog_arg(p)
    p.set_defaults(func=run_export)


def run_import(args: argparse.Namespace) -> int:
    """Run ``capplan import kubernetes``; exit code."""
    from capplan.io.files import load_yaml_or_json, write_text_atomic
    from capplan.io.k8s.importer import import_kubernetes
    from capplan.io.k8s.labels import parse_level_labels
    from capplan.io.k8s.mig import parse_mig_parted
    from capplan.io.scenario import dump_scenario
    from capplan.model.catalog import load_catalog

    levels = parse_level_labels(args.level_label)
    catalog = load_catalog(args.catalog)
    nodes = load_yaml_or_json(args.nodes, "nodes file")
    pods = _pod_lists(args.pods) if args.pods else None
    configs = (
        parse_mig_parted(load_yaml_or_json(args.mig_parted, "mig-parted config")) if args.mig_parted else None
    )
    res = import_kubernetes(
        nodes, pods, levels, catalog, configs, keep_mig=not args.reconfigure_mig, name=args.name,
        sla_policy=sla_policy(args),
    )
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    cmd = " ".join(["capplan import kubernetes", *(f"--level-label {x}" for x in args.level_label)])
    head = (
        f"# Imported from Kubernetes by `{cmd}`; pod names and label keys in {meta_path(args.output).name}\n"
    )
    write_text_atomic(meta_path(args.output), json.dumps(res.meta, indent=1) + "\n")
    write_text_atomic(args.output, head + dump_scenario(res.problem))
    p = res.problem
    print(
        f"imported {len(p.cluster.nodes)} nodes ({p.cluster.gpus_total} GPUs), {len(p.workloads)} workloads, "
        f"{len(p.running)} running replicas, {sum(w.sla == 'guaranteed' for w in p.workloads)} guaranteed "
        f"-> {args.output}",
        file=sys.stderr,
    )
    return 0


def _pod_lists(paths: list[str]) -> dict[str, Any]:
    """The ``--pods`` files joined into one List (each must be a List itself)."""
    from capplan.io.files import load_yaml_or_json
    from capplan.io.k8s.labels import k8s_list

    items: list[dict[str, Any]] = []
    for path in paths:
        try:
            items += k8s_list(load_yaml_or_json(path, "pods file"), "pods")
        except InputError as exc:
            raise InputError(exc.path, f"{path}: {exc.message}") from None
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _meta(args: argparse.Namespace) -> dict[str, Any] | None:
    from capplan.io.files import load_yaml_or_json

    path = args.meta or (str(meta_path(args.scenario)) if meta_path(args.scenario).exists() else None)
    if path is None:
        return None
    data = load_yaml_or_json(path, "import metadata")
    if not isinstance(data, dict) or data.get("format") != "capplan-k8s/v1":
        raise InputError("format", f"{path} is not capplan import metadata (format capplan-k8s/v1)")
    return data


def _base(path: str) -> Any:
    """The ``--base`` file, checked to be a mig-parted config (or a ConfigMap holding one)."""
    from capplan.io.files import load_yaml_or_json
    from capplan.io.k8s.export import base_document
    from capplan.io.k8s.mig import parse_mig_parted

    data = load_yaml_or_json(path, "mig-parted base config")
    try:
        parse_mig_parted(base_document(data)[0])
    except InputError as exc:
        raise InputError(exc.path or "--base", f"--base {path}: {exc.message}") from None
    return data


def _flavor_labels(specs: list[str]) -> dict[str, str]:
    """``--flavor-label KEY=VALUE`` options as a label map."""
    from capplan.io.k8s.labels import valid_label

    out: dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not valid_label(key.strip(), value.strip()):
            raise InputError(
                "--flavor-label", f"expected KEY=VALUE with a Kubernetes label key and value, got {spec!r}"
            )
        out[key.strip()] = value.strip()
    if len(out) > 8:
        raise InputError("--flavor-label", "a ResourceFlavor takes at most 8 nodeLabels")
    return out


#: Options that only one ``export`` format reads: given with another format they are refused, not ignored.
_FORMAT_OPTIONS = {"node_labels": ("mig-parted",), "base": ("mig-parted",), "actions": ("bindings",),
                   "volcano_version": ("volcano-hypernodes",), "kueue_api_version": ("kueue-topology", "kueue-eta")}


def _check_format_options(args: argparse.Namespace) -> None:
    """Refuse an option the format does not read; check the side outputs can be written before any work."""
    from capplan.io.files import check_output

    for dest, formats in _FORMAT_OPTIONS.items():
        if getattr(args, dest, None) and args.format not in formats:
            flag = "--" + dest.replace("_", "-")
            raise InputError(flag, f"is read by `export {' or '.join(formats)}` only, not by "
                                   f"`export {args.format}`; drop it")
    for dest in ("node_labels", "actions"):
        if getattr(args, dest, None):
            check_output(getattr(args, dest), "--" + dest.replace("_", "-"))


def run_export(args: argparse.Namespace) -> int:
    """Run ``capplan export``; exit code."""
    _check_format_options(args)
    if args.format == "kueue-eta":
        from capplan.cli.kueue import run_eta

        return run_eta(args)
    from capplan.io.files import load_yaml_or_json, write_text_atomic
    from capplan.io.k8s.bindings import actions, apply_warnings, bindings, gated_patches
    from capplan.io.k8s.export import drain_warnings, mig_parted_yaml
    from capplan.io.k8s.labels import parse_level_labels
    from capplan.io.k8s.topology import (
        gpu_selectors,
        kueue_objects,
        kueue_target,
        volcano_hypernodes,
        volcano_target,
        yaml_documents,
    )
    from capplan.io.scenario import load_scenario
    from capplan.model.plan import Plan
    from capplan.model.validate import check_plan

    kueue = kueue_target(args.kueue_api_version) if args.format == "kueue-topology" else None
    volcano = volcano_target(args.volcano_version) if args.format == "volcano-hypernodes" else None
    flavor = _flavor_labels(args.flavor_label)
    base = _base(args.base) if args.base else None
    problem = load_scenario(args.scenario, args.catalog)
    meta = _meta(args)
    labels = {lv: lb for lv, lb in (meta or {}).get("levels", [])}
    labels.update(dict(parse_level_labels(args.level_label)))
    plan = None
    if args.format in ("mig-parted", "bindings"):
        if not args.plan:
            raise InputError(
                "PLAN",
                f"export {args.format} needs the plan file: capplan export {args.format} "
                "SCENARIO PLAN -o FILE",
            )
        plan = Plan.from_data(load_yaml_or_json(args.plan, "plan"))
        bad = check_plan(problem, plan)
        if bad:
            raise InputError(
                "PLAN",
                f"the plan does not fit the scenario ({len(bad)} violations, first: {bad[0]}); "
                "run `capplan validate SCENARIO PLAN`",
            )
    if args.format == "mig-parted":
        assert plan is not None
        text, doc = mig_parted_yaml(problem, plan, base)
        for w in drain_warnings(problem, plan):
            print(f"warning: {w}", file=sys.stderr)
        labels_out = args.node_labels or f"{args.output}.node-labels.json"
        write_text_atomic(labels_out, json.dumps(doc, indent=1) + "\n")
        write_text_atomic(args.output, text)
        print(f"{len(doc['items'])} node label(s) -> {labels_out}", file=sys.stderr)
        if base is None:
            print(
                f"note: {args.output} holds only capplan's configs; to keep the standard and site configs other "
                "nodes use, give the current config with --base",
                file=sys.stderr,
            )
    elif args.format == "bindings":
        assert plan is not None
        acts = actions(problem, plan, meta, args.patch)
        binds = bindings(problem, plan, meta, args.patch)
        patches = gated_patches(problem, plan, meta, args.patch)
        actions_out = args.actions or f"{args.output}.actions.json"
        patches_out = args.gated or f"{args.output}.gated.json"
        write_text_atomic(actions_out, json.dumps(acts, indent=1) + "\n")
        write_text_atomic(patches_out, json.dumps(patches, indent=1) + "\n")
        write_text_atomic(args.output, json.dumps(binds, indent=1) + "\n")
        for w in apply_warnings(problem, plan, meta):
            print(f"warning: {w}", file=sys.stderr)
        print(
            f"{len(binds['items'])} Binding(s) (kubectl create -f {args.output}); {len(patches['items'])} gated-pod "
            f"patch(es) -> {patches_out}; {len(acts['bindings'])} replica(s) to start, {len(acts['evictions'])} "
            f"eviction(s), {len(acts['migrations'])} migration(s), {len(acts['owner_changes'])} owner change(s) "
            f"-> {actions_out}",
            file=sys.stderr,
        )
    elif args.format == "kueue-topology":
        assert kueue is not None
        warnings: list[str] = []
        sels = [("flavor", flavor)] if flavor else gpu_selectors(problem, (meta or {}).get("nodes") or {}, warnings)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        write_text_atomic(args.output, yaml_documents(kueue_objects(problem, labels, kueue, sels)))
    else:
        write_text_atomic(args.output, yaml_documents(volcano_hypernodes(problem, volcano)))
    print(f"wrote {args.format} -> {args.output}", file=sys.stderr)
    return 0
