"""``capplan import kueue`` and ``capplan export kueue-eta``: Kueue's queues in, start-time estimates out.

Import writes the scenario (with ``quotas:`` and ``now:``) and ``<scenario>.k8s.json`` (the import
metadata, with the Kueue Workload behind every workload); ``export kueue-eta`` reads both.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from capplan.cli.common import add_catalog_option
from capplan.cli.k8s import add_sla_options
from capplan.model.errors import InputError


def _duration(spec: str) -> tuple[str, int]:
    """``--default-duration [QUEUE=]DURATION`` as (queue or ``*``, seconds)."""
    from capplan.model.timing import parse_seconds

    queue, sep, text = spec.rpartition("=")
    try:
        secs = parse_seconds(text)
    except ValueError as exc:
        raise InputError("--default-duration", f"{spec!r}: {exc}") from None
    if secs <= 0:
        raise InputError("--default-duration", f"{spec!r}: must be positive")
    return (queue if sep else "*"), secs


def duration_spread(spec: str) -> tuple[str, float]:
    """``--duration-spread [QUEUE=]SIGMA`` as (queue or ``*``, sigma)."""
    from capplan.model.spread import check_spread

    queue, sep, text = spec.rpartition("=")
    try:
        sigma = check_spread(float(text))
    except ValueError as exc:
        raise InputError("--duration-spread", f"{spec!r}: {exc} (e.g. 0.5, or team-b=0.5)") from None
    return (queue if sep else "*"), sigma


def add_import_parser(sub: Any) -> None:
    """Register ``capplan import kueue``."""
    p = sub.add_parser("kueue", help="nodes, pods and Kueue's Workloads and ClusterQueues -> scenario with quotas",
                       description="Turn `kubectl get ... -o json` of nodes, pods and Kueue's objects into a scenario "
                       "whose workloads carry their ClusterQueue, with the queues' quotas (docs/kubernetes.md).")
    p.add_argument("--nodes", required=True, metavar="NODES.json", help="kubectl get nodes -o json")
    p.add_argument("--pods", metavar="PODS.json", help="kubectl get pods -A -o json")
    p.add_argument("--workloads", required=True, metavar="WORKLOADS.json", help="kubectl get workloads -A -o json")
    p.add_argument("--cluster-queues", required=True, metavar="CQ.json",
                   help="kubectl get clusterqueues,resourceflavors,topologies -o json (flavors in the same List)")
    p.add_argument("--local-queues", metavar="LQ.json", help="kubectl get localqueues -A -o json")
    p.add_argument("--priority-classes", metavar="WPC.json", help="kubectl get workloadpriorityclasses -o json")
    p.add_argument("--now", metavar="TIMESTAMP", help="RFC 3339 time the objects were read (default: the clock)")
    p.add_argument("--default-duration", action="append", default=[], metavar="[QUEUE=]DURATION",
                   help="run time of workloads that give none, per ClusterQueue or for all; repeat")
    p.add_argument("--duration-spread", action="append", default=[], metavar="[QUEUE=]SIGMA",
                   help="run times are believed up to a lognormal error of this sigma (e.g. 0.5), per ClusterQueue or "
                   "for all; the scenario gets expected durations and remaining times (default 0: exact); repeat")
    p.add_argument("--level-label", action="append", default=[], metavar="LEVEL=LABEL",
                   help="topology level from a node label, outermost first (default: the TAS Topology's levels)")
    add_sla_options(p)
    p.add_argument("--name", default="kueue", help="cluster name (default kueue)")
    p.add_argument("-o", "--output", required=True, metavar="SCENARIO.yaml", help="scenario file to write")
    add_catalog_option(p)
    p.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    """Run ``capplan import kueue``; exit code."""
    from datetime import UTC, datetime

    from capplan.cli.k8s import meta_path, sla_policy
    from capplan.io.files import load_yaml_or_json, write_text_atomic
    from capplan.io.k8s.kueue import import_kueue, parse_time
    from capplan.io.k8s.labels import parse_level_labels
    from capplan.io.scenario import dump_scenario
    from capplan.model.catalog import load_catalog

    now = parse_time(args.now, "--now") if args.now else datetime.now(UTC).replace(microsecond=0)
    defaults = dict(_duration(s) for s in args.default_duration)
    spreads = dict(duration_spread(s) for s in args.duration_spread)

    def load(path: str | None, what: str) -> Any:
        return load_yaml_or_json(path, what) if path else None

    res = import_kueue(load(args.nodes, "nodes file"), load(args.pods, "pods file"),
                       load(args.workloads, "workloads file"), load(args.cluster_queues, "ClusterQueues file"),
                       load(args.local_queues, "LocalQueues file"), load(args.priority_classes, "priority classes"),
                       parse_level_labels(args.level_label), load_catalog(args.catalog), now, defaults, args.name,
                       sla_policy(args), spreads)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    head = f"# Imported from Kueue by `capplan import kueue` at {res.problem.now}; metadata in " \
           f"{meta_path(args.output).name}\n"
    write_text_atomic(meta_path(args.output), json.dumps(res.meta, indent=1) + "\n")
    write_text_atomic(args.output, head + dump_scenario(res.problem))
    p = res.problem
    pending = sum(1 for k in res.meta["kueue"].values() if not k["admitted"])
    print(f"imported {len(p.cluster.nodes)} nodes, {len(p.queues)} ClusterQueues, {len(res.meta['kueue'])} Kueue "
          f"workloads ({pending} pending), {len(p.running)} running replicas -> {args.output}", file=sys.stderr)
    return 0


def run_eta(args: argparse.Namespace) -> int:
    """Run ``capplan export kueue-eta SCENARIO SCHEDULE -o FILE``; exit code."""
    from capplan.cli.k8s import meta_path
    from capplan.io.files import load_yaml_or_json, write_text_atomic
    from capplan.io.k8s.eta import estimates, prometheus_text, workload_patches
    from capplan.io.scenario import load_scenario
    from capplan.model.schedule import Schedule
    from capplan.model.validate_schedule import check_schedule

    if not args.plan:
        raise InputError("SCHEDULE", "export kueue-eta needs the schedule: capplan export kueue-eta SCENARIO "
                                     "SCHEDULE -o FILE (from capplan schedule --policy kueue)")
    problem = load_scenario(args.scenario, args.catalog)
    sched = Schedule.from_data(load_yaml_or_json(args.plan, "schedule"))
    bad = check_schedule(problem, sched)
    if bad:
        raise InputError("SCHEDULE", f"the schedule does not fit the scenario ({len(bad)} violations, first: "
                                     f"{bad[0]}); schedule the scenario again")
    path = args.meta or str(meta_path(args.scenario))
    meta = load_yaml_or_json(path, "import metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("kueue"), dict):
        raise InputError("--meta", f"{path} has no Kueue workloads; import the cluster with capplan import kueue")
    rows = estimates(problem, sched, meta["kueue"])
    if args.eta_format == "prometheus":
        text = prometheus_text(rows)
    else:
        text = json.dumps(workload_patches(rows, args.kueue_api_version), indent=1) + "\n"
    write_text_atomic(args.output, text)
    print(f"{len(rows)} pending workload estimate(s) ({args.eta_format}) -> {args.output}", file=sys.stderr)
    return 0
