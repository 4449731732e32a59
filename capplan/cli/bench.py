"""``capplan bench alibaba|synthetic``: run the benchmark suite and write runs.csv, summary.md, plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from capplan.cli import common
from capplan.model.errors import InputError

DEFAULT_POLICIES = "random,firstfit,leastallocated,mostallocated,bestfit,dotprod,gpupacking,gpuclustering,fgd"
EXPECTED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "alibaba-gpu-v2023" / \
    "fgd-expected-results" / "analysis_allo_discrete.csv"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--protocol", choices=("online", "batch"), default="online",
                   help="online: FGD arrival protocol; batch: all pods known up front (capplan strategies)")
    p.add_argument("--policies", default=None,
                   help=f"comma list; online default: {DEFAULT_POLICIES} (add capplan for capplan's own policy); "
                        "batch: capplan strategies (default greedy)")
    p.add_argument("--seeds", default="42-51", help="seeds, e.g. 42-51 or 1,2,3 (default 42-51)")
    p.add_argument("--jobs", type=common.workers, default=1, help="worker processes (default 1)")
    p.add_argument("--time-limit", type=common.seconds, default=60.0, metavar="S", help="batch: seconds per solve")
    p.add_argument("--expected", type=Path, default=EXPECTED,
                   help="the FGD authors' analysis_allo_discrete.csv, for published curves in the plot")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (resumable)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def add_parser(sub: Any) -> None:
    """Register ``capplan bench``."""
    bench = sub.add_parser("bench", help="benchmark placement policies on traces or synthetic suites")
    bsub = bench.add_subparsers(dest="source", required=True, metavar="SOURCE")
    p = bsub.add_parser("alibaba", help="Alibaba GPU trace v2023 node + pod CSVs")
    p.add_argument("--nodes", required=True, metavar="NODES.csv")
    p.add_argument("--pods", required=True, metavar="PODS.csv")
    _common(p)
    p.set_defaults(func=run, output_dir=True)
    p = bsub.add_parser("synthetic", help="a synthetic fleet and workload from a YAML config")
    p.add_argument("--config", required=True, metavar="FILE", help="generator config (see benchmarks/configs/)")
    _common(p)
    p.set_defaults(func=run, output_dir=True)


def run(args: argparse.Namespace) -> int:
    """Build the jobs, run them (skipping finished ones), write tables, summary and plots."""
    from capplan.bench.policies import canonical
    from capplan.bench.protocols import seeds_from
    from capplan.bench.report import write_report
    from capplan.bench.runner import Job, Source, run_all

    if args.jobs < 1:
        raise InputError("--jobs", "must be at least 1")
    if args.source == "alibaba":
        for flag, path in (("--nodes", args.nodes), ("--pods", args.pods)):
            if not Path(path).is_file():
                raise InputError(flag, f"file not found: {path}")
        source = Source("alibaba", nodes=str(Path(args.nodes).resolve()), pods=str(Path(args.pods).resolve()))
        from capplan.io.alibaba import read_nodes, read_pods

        read_nodes(args.nodes), read_pods(args.pods)  # bad rows fail here (exit 2), before any run
    else:
        from capplan.bench.synthetic import load_config

        load_config(args.config)
        source = Source("synthetic", config=str(Path(args.config).resolve()))
    seeds = seeds_from(args.seeds)
    if args.protocol == "online":
        names = [canonical(x) for x in (args.policies or DEFAULT_POLICIES).split(",") if x.strip()]
    else:
        from capplan.placement import STRATEGIES

        names = [x.strip() for x in (args.policies or "greedy").split(",") if x.strip()]
        bad = [x for x in names if x not in STRATEGIES]
        if bad:
            raise InputError("--policies", f"unknown batch strategies {bad}; choose from {sorted(STRATEGIES)}")
    jobs = [Job(source, args.protocol, n, s, args.time_limit) for n in names for s in seeds]
    out = Path(args.output)
    results = run_all(jobs, out, workers=args.jobs, quiet=args.quiet)
    summary = write_report(results, out, args.expected, source.label)
    if not args.quiet:
        print(summary.read_text())
    return 0
