"""``capplan import alibaba NODES.csv PODS.csv -o SCENARIO.yaml``: a trace file pair as a scenario."""

from __future__ import annotations

import argparse
import sys
from typing import Any

EXIT_OK = 0


def add_import_parser(sub: Any) -> None:
    """Register ``capplan import alibaba``."""
    p = sub.add_parser(
        "alibaba",
        help="Alibaba GPU trace v2023 node + pod CSVs -> scenario",
        description="Turn a node CSV and a pod CSV of the Alibaba GPU cluster trace v2023 family "
        "(default, cpu*, gpushare*, gpuspec*, multigpu*) into a scenario file: GPU-sharing pods become "
        "shared workloads with their gpu_fraction, multi-GPU pods whole-GPU replicas on one node, "
        "gpu_spec the allowed GPU models.",
    )
    p.add_argument("nodes", metavar="NODES.csv", help="node CSV (sn, cpu_milli, memory_mib, gpu, model)")
    p.add_argument("pods", metavar="PODS.csv",
                   help="pod CSV of the trace (columns name, cpu_milli, memory_mib, num_gpu, gpu_milli and the others "
                        "of docs/traces.md)")
    p.add_argument("-o", "--output", metavar="SCENARIO.yaml", help="write here (atomically); default stdout")
    p.add_argument("--name", help="cluster name (default: the pod file's stem)")
    p.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    """Read, convert, validate as a Problem, then write the scenario YAML."""
    from pathlib import Path

    import yaml

    from capplan.io.alibaba import read_nodes, read_pods, trace_data
    from capplan.io.files import write_text_atomic
    from capplan.io.scenario import problem_from_data
    from capplan.model.catalog import load_catalog

    nodes, pods = read_nodes(args.nodes), read_pods(args.pods)
    data = trace_data(nodes, pods, args.name or Path(args.pods).stem)
    problem_from_data(data, load_catalog())  # validate before anything is written
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=200)
    if args.output:
        write_text_atomic(args.output, text)
        print(f"wrote {args.output}: {len(nodes)} nodes, {len(pods)} workloads", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK
