"""``capplan bench alibaba|synthetic``: run the benchmark suite and write runs.csv, summary.md, plots."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from capplan.cli import common
from capplan.model.errors import InputError

DEFAULT_POLICIES = "random,firstfit,leastallocated,mostallocated,bestfit,dotprod,gpupacking,gpuclustering,fgd"
EXPECTED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "alibaba-gpu-v2023" / \
    "fgd-expected-results" / "analysis_allo_discrete.csv"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--protocol", choices=("online", "batch", "replay"), default="online",
                   help="online: FGD arrival protocol; batch: all pods known up front (capplan strategies); "
                        "replay: the trace in time with a queue (alibaba only; docs/benchmarks.md)")
    p.add_argument("--policies", default=None,
                   help=f"comma list; online default: {DEFAULT_POLICIES} (add capplan for capplan's own policy); "
                        "batch: capplan strategies (default greedy)")
    p.add_argument("--seeds", default=None, help="seeds, e.g. 42-51 or 1,2,3 (default 42-51; replay: 42)")
    p.add_argument("--jobs", type=common.workers, default=1, help="worker processes (default 1)")
    p.add_argument("--time-limit", type=common.seconds, default=60.0, metavar="S", help="batch: seconds per solve")
    p.add_argument("--expected", type=Path, default=EXPECTED,
                   help="the FGD authors' analysis_allo_discrete.csv, for published curves in the plot")
    p.add_argument("--replan-every", default="10m", metavar="T",
                   help="replay: capplan re-plans the queue every T (seconds or 90s/10m/1h; default 10m)")
    p.add_argument("--replan-limit", type=common.seconds, default=2.0, metavar="S",
                   help="replay: time limit of one capplan re-plan in seconds (default 2)")
    p.add_argument("--noise-sigma", default="0.5", metavar="SIGMA",
                   help="replay: capplan-noisy's run-time estimate is run time x exp(SIGMA z), z ~ N(0, 1) "
                        "(default 0.5)")
    p.add_argument("--fleet-fraction", default="1", metavar="F",
                   help="replay: keep a seeded random share F in (0, 1] of the nodes (default 1: all)")
    p.add_argument("--fleet-seed", type=common.seed, default=None, metavar="S",
                   help="replay: draw the --fleet-fraction nodes with seed S for every run (default: each run's "
                        "seed), so --seeds varies only tie-breaks and noisy estimates on one fleet")
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
    from capplan.bench.online.table import canonical
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
    if args.protocol == "replay":
        return _replay(args, source)
    seeds = seeds_from(args.seeds or "42-51")
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


def _number(flag: str, text: str, lo: float, hi: float, example: str, zero_ok: bool = False) -> float:
    """A finite number in ``(lo, hi]`` (``[lo, hi]`` with ``zero_ok``) or InputError naming ``flag``."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(flag, f"expected a number, got {text!r}; e.g. {example}") from None
    if not math.isfinite(value) or not (lo <= value if zero_ok else lo < value) or value > hi:
        low = f"at least {lo:g}" if zero_ok else f"greater than {lo:g}"
        raise InputError(flag, f"must be {low} and at most {hi:g}, got {text}; e.g. {example}")
    return value


def _replay(args: argparse.Namespace, source: Any) -> int:
    """``--protocol replay``: check the options, run the policies, write the tables, summary and plots."""
    from capplan.bench.protocols import seeds_from
    from capplan.bench.replay.protocol import REPLAY_POLICIES, load_replay
    from capplan.bench.report import write_report
    from capplan.bench.runner import Job, run_all
    from capplan.io.alibaba import read_nodes, read_pods
    from capplan.model.timing import parse_seconds

    if source.kind != "alibaba":
        raise InputError("--protocol", "replay needs trace timestamps: use `capplan bench alibaba`")
    try:
        every = parse_seconds(args.replan_every.strip())
    except ValueError as exc:
        raise InputError("--replan-every", f"{exc}; e.g. 10m") from None
    if every <= 0:
        raise InputError("--replan-every", f"must be positive, got {args.replan_every!r}; e.g. 10m or 600")
    sigma = _number("--noise-sigma", args.noise_sigma, 0.0, 10.0, "0.5", zero_ok=True)
    fraction = _number("--fleet-fraction", args.fleet_fraction, 0.0, 1.0, "0.006")
    names = [x.strip() for x in (args.policies or ",".join(REPLAY_POLICIES)).split(",") if x.strip()]
    bad = [x for x in names if x not in REPLAY_POLICIES]
    if bad or not names:
        raise InputError("--policies", f"unknown replay policies {bad}; choose from {', '.join(REPLAY_POLICIES)}")
    seeds = seeds_from(args.seeds or "42")
    nodes, pods = read_nodes(source.nodes), read_pods(source.pods)
    fleet_seeds = sorted({s if args.fleet_seed is None else args.fleet_seed for s in seeds})
    for s in fleet_seeds:  # every fleet and its pods are checked (exit 2) before any run
        load_replay(nodes, pods, fraction, s)
    jobs = [Job(source, "replay", n, s, replan_every=float(every), replan_limit=args.replan_limit,
                noise_sigma=sigma, fleet_fraction=fraction, fleet_seed=args.fleet_seed) for n in names for s in seeds]
    out = Path(args.output)
    _same_options(jobs, out)
    results = run_all(jobs, out, workers=args.jobs, quiet=args.quiet)
    summary = write_report(results, out, None, source.label)
    if not args.quiet:
        print(summary.read_text())
    return 0


def _same_options(jobs: list[Any], out: Path) -> None:
    """Finished runs are reused by name: refuse (exit 2) when one was made with other options or inputs."""
    import json
    from dataclasses import asdict

    for job in jobs:
        path = out / "runs" / f"{job.key}.json"
        if not path.is_file():
            continue
        try:
            old = json.loads(path.read_text()).get("job")
        except (OSError, ValueError):
            old = None
        if old != json.loads(json.dumps(asdict(job))):
            raise InputError("-o", f"{path} holds a run made with other options or inputs; use a fresh output "
                                   "folder (or delete that run to redo it)")
